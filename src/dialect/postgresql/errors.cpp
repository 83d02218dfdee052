// PostgreSQL error classification: one row per SQLSTATE, each with a test in
// tests/test_errors.cpp that triggers it against a real server.
#include "dialect/postgresql/errors.h"

namespace sqlguard::pg {
namespace {
// Classification table: SQLSTATE -> portable code. Class prefixes ("08")
// match every state of the class.
struct Row {
  const char* state;
  ErrorCode mapped;
};
constexpr Row kTable[] = {
    {"23505", ErrorCode::kAlreadyExists},    // unique_violation
    {"40001", ErrorCode::kConflict},         // serialization_failure
    {"40P01", ErrorCode::kConflict},         // deadlock_detected
    {"55P03", ErrorCode::kLockBusy},         // lock_not_available (NOWAIT, lock_timeout)
    {"57014", ErrorCode::kTimeout},          // query_canceled (statement_timeout)
    {"40003", ErrorCode::kCommitInDoubt},    // statement_completion_unknown
    {"53300", ErrorCode::kResourceExhausted},// too_many_connections (max_connections, a role's or database's CONNECTION LIMIT)
    {"57P01", ErrorCode::kConnectionLost},   // admin_shutdown (pg_terminate_backend)
    {"57P02", ErrorCode::kConnectionLost},   // crash_shutdown
    {"57P03", ErrorCode::kConnectionLost},   // cannot_connect_now
    {"08", ErrorCode::kConnectionLost},      // connection_exception class
    // On a standby after a failover: retryable with a reconnect (a multi-host
    // URI with target_session_attrs=read-write finds the new primary).
    {"25006", ErrorCode::kConnectionLost},   // read_only_sql_transaction
    {"28P01", ErrorCode::kUnauthenticated},  // invalid_password
    {"28000", ErrorCode::kUnauthenticated},  // invalid_authorization_specification
    {"3D000", ErrorCode::kNotFound},         // invalid_catalog_name (no such database)
    {"42501", ErrorCode::kPermissionDenied}, // insufficient_privilege (table, function, CONNECT on a database)
    {"42P01", ErrorCode::kSchemaMismatch},   // undefined_table
    {"22001", ErrorCode::kInvalidArgument},  // string_data_right_truncation
    {"2200H", ErrorCode::kResourceExhausted},// sequence_generator_limit_exceeded (fence sequence at its maximum)
    {"22", ErrorCode::kInvalidArgument},     // data_exception class: a value the column's type refuses (22P02 ...)
};

}  // namespace

ErrorCode classify_state(std::string_view state) {
  for (const auto& r : kTable)
    if (state == r.state) return r.mapped;
  for (const auto& r : kTable)
    if (std::string_view(r.state).size() == 2 && state.substr(0, 2) == r.state) return r.mapped;
  return ErrorCode::kInternal;
}

}  // namespace sqlguard::pg
