#include "sqlguard/errors.h"

#include <cstdio>
#include <mutex>

#include "core/text.h"

namespace sqlguard {

std::string_view to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kLockBusy: return "lock_busy";
    case ErrorCode::kConflict: return "conflict";
    case ErrorCode::kAlreadyExists: return "already_exists";
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kInvalidTransition: return "invalid_transition";
    case ErrorCode::kNotSupported: return "not_supported";
    case ErrorCode::kConnectionLost: return "connection_lost";
    case ErrorCode::kCommitInDoubt: return "commit_in_doubt";
    case ErrorCode::kLeaseLost: return "lease_lost";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kUnauthenticated: return "unauthenticated";
    case ErrorCode::kPermissionDenied: return "permission_denied";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kSchemaMismatch: return "schema_mismatch";
    case ErrorCode::kResourceExhausted: return "resource_exhausted";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

bool is_retryable(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kLockBusy:
    case ErrorCode::kConflict:
    case ErrorCode::kConnectionLost:
    case ErrorCode::kTimeout:
      return true;
    default:
      return false;
  }
}

namespace {
std::string compose(ErrorCode code, const std::string& message, const std::string& dialect,
                    const std::string& native) {
  std::string s = "[";
  s += to_string(code);
  if (!dialect.empty()) {
    s += ' ';
    s += dialect;
    if (!native.empty()) {
      s += ' ';
      s += native;
    }
  }
  s += "] ";
  s += message;
  return s;
}
}  // namespace

Error::Error(ErrorCode code, std::string message, std::string dialect, std::string native_code,
             std::string statement)
    // The base is initialized first: `message` is made one line there, once.
    : std::runtime_error(compose(code, message = detail::one_line(message), dialect, native_code)),
      code_(code),
      message_(std::move(message)),
      dialect_(std::move(dialect)),
      native_code_(std::move(native_code)),
      statement_(std::move(statement)) {}

Error Error::with_context(std::string_view context) const {
  std::string m(context);
  m += ": ";
  m += message_;
  return Error(code_, std::move(m), dialect_, native_code_, statement_);
}

namespace {
std::mutex g_hook_mu;
LogHook g_hook;
}  // namespace

void set_log_hook(LogHook hook) {
  std::lock_guard<std::mutex> lk(g_hook_mu);
  g_hook = std::move(hook);
}

void log(LogLevel level, std::string_view message) noexcept {
  try {
    LogHook hook;
    {
      std::lock_guard<std::mutex> lk(g_hook_mu);
      hook = g_hook;
    }
    if (!hook && level < LogLevel::kWarning) return;
    const std::string line = detail::one_line(message);
    if (hook) {
      hook(level, line);
      return;
    }
    std::fprintf(stderr, "sqlguard %s: %.*s\n", level == LogLevel::kError ? "error" : "warning",
                 static_cast<int>(line.size()), line.data());
  } catch (...) {
    // A throwing hook must not take down a destructor; there is nowhere
    // left to report this, so write it raw.
    std::fputs("sqlguard: log hook threw\n", stderr);
  }
}

}  // namespace sqlguard
