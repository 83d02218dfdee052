// SQLite error classification: one row per result code, each with a test in
// tests/test_errors.cpp.
#include "dialect/sqlite/errors.h"

#include <sqlite3.h>

namespace sqlguard::sqlite_errors {
namespace {
// Classification table: SQLite (extended) result code -> portable code.
struct Row {
  int code;
  ErrorCode mapped;
};
constexpr Row kTable[] = {
    {SQLITE_BUSY, ErrorCode::kLockBusy},
    {SQLITE_LOCKED, ErrorCode::kLockBusy},
    {SQLITE_CONSTRAINT_PRIMARYKEY, ErrorCode::kAlreadyExists},
    {SQLITE_CONSTRAINT_UNIQUE, ErrorCode::kAlreadyExists},
    {SQLITE_CANTOPEN, ErrorCode::kNotFound},
    {SQLITE_INTERRUPT, ErrorCode::kTimeout},
    {SQLITE_READONLY, ErrorCode::kPermissionDenied},  // read-only file or directory, PRAGMA query_only
    {SQLITE_PERM, ErrorCode::kPermissionDenied},      // access mode refused by the OS / VFS
    {SQLITE_AUTH, ErrorCode::kPermissionDenied},      // an authorizer (sqlite3_set_authorizer) denied it
    {SQLITE_FULL, ErrorCode::kResourceExhausted},     // disk (or max_page_count) full
};

// RAISE() messages of sqlguard's own triggers (migrations/sqlite/), which SQLite
// reports as SQLITE_CONSTRAINT_TRIGGER: matched on the whole prefix we wrote.
struct TriggerRow {
  const char* prefix;
  ErrorCode mapped;
};
constexpr TriggerRow kOwnTriggers[] = {
    {"sqlguard_fence_seq exhausted", ErrorCode::kResourceExhausted},  // 0004_fence_exhaustion.sql
};

}  // namespace

ErrorCode classify(int extended, std::string_view msg) {
  if (extended == SQLITE_CONSTRAINT_TRIGGER)
    for (const auto& t : kOwnTriggers)
      if (msg.substr(0, std::string_view(t.prefix).size()) == t.prefix) return t.mapped;
  for (const auto& r : kTable)
    if (r.code == extended) return r.mapped;
  int primary = extended & 0xff;
  for (const auto& r : kTable)
    if (r.code == primary) return r.mapped;
  if (msg.find("no such table") != std::string_view::npos) return ErrorCode::kSchemaMismatch;
  return ErrorCode::kInternal;
}

}  // namespace sqlguard::sqlite_errors
