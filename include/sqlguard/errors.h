// sqlguard/errors.h — the one exception type and its portable codes.
//
// Every failure sqlguard raises is a sqlguard::Error. Callers branch on
// code(), never on message text. Codes follow abseil's retry semantics:
//
//   LockBusy        retry the same call later (lock held, NOWAIT, lock timeout)
//   Conflict        redo the whole read-modify-write (CAS lost, serialization
//                   failure, deadlock)
//   CommitInDoubt   the commit may or may not have happened: NEVER retry blindly.
//                   Also a statement outside a transaction (it commits itself)
//                   whose answer was lost after it was sent — a read included.
//   ConnectionLost  the connection broke before the statement left, or inside
//                   a transaction (rolled back): nothing was committed
//
// Expected outcomes (lock not acquired, duplicate message, CAS conflict after
// the last attempt) are return values, not exceptions.
//
// Thread safety: Error is an immutable value; the log hook is process-wide and
// may be called from any thread (watchdogs, destructors).
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace sqlguard {

enum class ErrorCode {
  kLockBusy,           // lock held elsewhere / NOWAIT / lock wait timeout
  kConflict,           // CAS lost, serialization failure, deadlock
  kAlreadyExists,      // unique / primary key violation
  kInvalidArgument,    // bad identifier, name, duration, URI, option
  kInvalidTransition,  // state machine refused an undeclared transition
  kNotSupported,       // feature not available on this dialect
  kConnectionLost,     // connection broke; nothing was committed by this call
  kCommitInDoubt,      // connection broke during COMMIT, or after an autocommit statement was sent: outcome unknown
  kLeaseLost,          // a lease was lost (expired, taken over, unreachable)
  kTimeout,            // statement timeout / query cancelled / wait timed out
  kUnauthenticated,    // wrong user or password
  kPermissionDenied,   // authenticated, but not allowed: the message names the object (and the
                       // missing right when the database says it); read-only SQLite file
  kNotFound,           // database / file / row missing
  kSchemaMismatch,     // tables missing (run `sqlguard migrate`), checksum mismatch
  kResourceExhausted,  // a hard limit was reached: the fencing-token sequence ran out, too many
                       // connections or prepared statements, disk full. Not retryable as is.
  kInternal,           // anything the dialect table does not classify
};

// Stable lower-case name, e.g. "lock_busy". Used in CLI JSON output.
std::string_view to_string(ErrorCode code) noexcept;

// True for codes where retrying the same operation may succeed
// (LockBusy, Conflict, ConnectionLost, Timeout). Never true for CommitInDoubt.
bool is_retryable(ErrorCode code) noexcept;

class Error : public std::runtime_error {
 public:
  // The message is stored as one line of valid UTF-8: control characters
  // and bytes that are not UTF-8 are escaped (\n, \x1b, \xff), so what()
  // is safe to print on a terminal or to put in JSON whatever a value or a
  // driver put in it. It never contains a password (URIs are masked and
  // driver messages scrubbed before they get here).
  // `dialect` is "sqlite", "postgresql", "mysql" or "" (not database-related).
  // `native_code` is the SQLSTATE (PostgreSQL) or the numeric error code as
  // text (MySQL, SQLite). `statement` is SQL text WITHOUT values.
  Error(ErrorCode code, std::string message, std::string dialect = {},
        std::string native_code = {}, std::string statement = {});

  ErrorCode code() const noexcept { return code_; }
  const std::string& dialect() const noexcept { return dialect_; }
  const std::string& native_code() const noexcept { return native_code_; }
  const std::string& statement() const noexcept { return statement_; }
  // The message without the "[code]" prefix that what() carries.
  const std::string& message() const noexcept { return message_; }

  // Returns a copy with "context: " prepended to the message.
  Error with_context(std::string_view context) const;

 private:
  ErrorCode code_;
  std::string message_;
  std::string dialect_;
  std::string native_code_;
  std::string statement_;
};

// Process-wide log hook. sqlguard reports what it cannot throw (failures in
// destructors, watchdog retries, releases of locks no longer held) here.
// Default: warnings and errors to stderr. Pass nullptr to restore the default.
// Messages reach the hook as one line of valid UTF-8, escaped like
// Error::what().
enum class LogLevel { kDebug, kInfo, kWarning, kError };
using LogHook = std::function<void(LogLevel, std::string_view message)>;
void set_log_hook(LogHook hook);
void log(LogLevel level, std::string_view message) noexcept;

}  // namespace sqlguard
