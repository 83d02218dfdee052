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
    {SQLITE_AUTH, ErrorCode::kUnauthenticated},
    {SQLITE_READONLY, ErrorCode::kInvalidArgument},
};

}  // namespace

ErrorCode classify(int extended, std::string_view msg) {
  for (const auto& r : kTable)
    if (r.code == extended) return r.mapped;
  int primary = extended & 0xff;
  for (const auto& r : kTable)
    if (r.code == primary) return r.mapped;
  if (msg.find("no such table") != std::string_view::npos) return ErrorCode::kSchemaMismatch;
  return ErrorCode::kInternal;
}

}  // namespace sqlguard::sqlite_errors
