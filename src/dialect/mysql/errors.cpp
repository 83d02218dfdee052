// MySQL / MariaDB error classification: one row per error number, each with
// a test in tests/test_errors.cpp that triggers it against a real server.
#include "dialect/mysql/errors.h"

namespace sqlguard::mysql {
namespace {
// Classification table: server/client error number -> portable code.
struct Row {
  int code;
  ErrorCode mapped;
};
constexpr Row kTable[] = {
    {1062, ErrorCode::kAlreadyExists},    // ER_DUP_ENTRY
    {1213, ErrorCode::kConflict},         // ER_LOCK_DEADLOCK (whole transaction rolled back)
    {1205, ErrorCode::kLockBusy},         // ER_LOCK_WAIT_TIMEOUT (MariaDB: also NOWAIT)
    {3572, ErrorCode::kLockBusy},         // ER_LOCK_NOWAIT (MySQL 8)
    {1969, ErrorCode::kTimeout},          // ER_STATEMENT_TIMEOUT (MariaDB max_statement_time)
    {3024, ErrorCode::kTimeout},          // ER_QUERY_TIMEOUT (MySQL max_execution_time)
    {1317, ErrorCode::kTimeout},          // ER_QUERY_INTERRUPTED
    {1045, ErrorCode::kUnauthenticated},  // ER_ACCESS_DENIED_ERROR (wrong user or password: authentication)
    {1698, ErrorCode::kUnauthenticated},  // ER_ACCESS_DENIED_NO_PASSWORD_ERROR
    {1044, ErrorCode::kPermissionDenied}, // ER_DBACCESS_DENIED_ERROR (no right on the database)
    {1142, ErrorCode::kPermissionDenied}, // ER_TABLEACCESS_DENIED_ERROR ("INSERT command denied ... for table")
    {1143, ErrorCode::kPermissionDenied}, // ER_COLUMNACCESS_DENIED_ERROR
    {1227, ErrorCode::kPermissionDenied}, // ER_SPECIFIC_ACCESS_DENIED_ERROR ("you need the SUPER privilege")
    {1049, ErrorCode::kNotFound},         // ER_BAD_DB_ERROR
    {1146, ErrorCode::kSchemaMismatch},   // ER_NO_SUCH_TABLE
    {1406, ErrorCode::kInvalidArgument},  // ER_DATA_TOO_LONG
    {1264, ErrorCode::kInvalidArgument},  // ER_WARN_DATA_OUT_OF_RANGE (strict mode)
    {1366, ErrorCode::kInvalidArgument},  // ER_TRUNCATED_WRONG_VALUE_FOR_FIELD ("Incorrect string value")
    {4084, ErrorCode::kResourceExhausted},// ER_SEQUENCE_RUN_OUT (fence sequence at its maximum)
    {1461, ErrorCode::kResourceExhausted},// ER_MAX_PREPARED_STMT_COUNT_REACHED (server-wide; not triggered in tests)
    {1040, ErrorCode::kResourceExhausted},// ER_CON_COUNT_ERROR ("Too many connections": max_connections)
    {1203, ErrorCode::kResourceExhausted},// ER_TOO_MANY_USER_CONNECTIONS (the user's max_user_connections)
    {1226, ErrorCode::kResourceExhausted},// ER_USER_LIMIT_REACHED (an account's MAX_USER_CONNECTIONS / MAX_QUERIES_PER_HOUR)
    {1053, ErrorCode::kConnectionLost},   // ER_SERVER_SHUTDOWN
    {1927, ErrorCode::kConnectionLost},   // ER_CONNECTION_KILLED (MariaDB)
    // Read-only / not-ready servers (a demoted primary, a Galera node outside
    // the primary component): retryable with a reconnect.
    {1290, ErrorCode::kConnectionLost},   // ER_OPTION_PREVENTS_STATEMENT (--read-only)
    {1836, ErrorCode::kConnectionLost},   // ER_READ_ONLY_MODE
    {1047, ErrorCode::kConnectionLost},   // ER_UNKNOWN_COM_ERROR (WSREP has not yet prepared node for application use)
    {2002, ErrorCode::kConnectionLost},   // CR_CONNECTION_ERROR
    {2003, ErrorCode::kConnectionLost},   // CR_CONN_HOST_ERROR
    {2005, ErrorCode::kConnectionLost},   // CR_UNKNOWN_HOST
    {2006, ErrorCode::kConnectionLost},   // CR_SERVER_GONE_ERROR
    {2013, ErrorCode::kConnectionLost},   // CR_SERVER_LOST
    {2055, ErrorCode::kConnectionLost},   // CR_SERVER_LOST_EXTENDED
    {4031, ErrorCode::kConnectionLost},   // ER_CLIENT_INTERACTION_TIMEOUT (MySQL 8)
};

}  // namespace

bool unparsed_trigger_copy(int code, std::string_view message, bool galera) {
  return galera && code == 1064 && message.find("has an error in its body") != std::string_view::npos;
}

ErrorCode classify(int code) {
  for (const auto& r : kTable)
    if (r.code == code) return r.mapped;
  return ErrorCode::kInternal;
}

}  // namespace sqlguard::mysql
