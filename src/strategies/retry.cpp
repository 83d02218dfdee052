#include "sqlguard/retry.h"

#include "sqlguard/backoff.h"

#include <algorithm>
#include <thread>

namespace sqlguard {

void RetryPolicy::validate() const {
  auto bad = [](const std::string& m) { throw Error(ErrorCode::kInvalidArgument, "RetryPolicy: " + m); };
  if (max_attempts < 1 || max_attempts > 10000)
    bad("max_attempts is " + std::to_string(max_attempts) + "; it must be between 1 and 10000");
  if (initial_backoff.count() < 0) bad("initial_backoff must not be negative");
  if (max_backoff.count() < 0 || max_backoff > std::chrono::hours(1))
    bad("max_backoff is " + std::to_string(max_backoff.count()) + "ms; it must be between 0 and 1h");
  if (initial_backoff > max_backoff)
    bad("initial_backoff (" + std::to_string(initial_backoff.count()) + "ms) exceeds max_backoff (" +
        std::to_string(max_backoff.count()) + "ms)");
  if (!(multiplier >= 1.0 && multiplier <= 100.0))
    bad("multiplier is " + std::to_string(multiplier) + "; it must be between 1.0 and 100.0");
}

namespace detail {

std::chrono::milliseconds backoff_delay(const RetryPolicy& policy, int retry) {
  return Backoff{policy.initial_backoff, policy.max_backoff, policy.multiplier}.delay(retry);
}

void sleep_for(std::chrono::milliseconds d) {
  if (d.count() > 0) std::this_thread::sleep_for(d);
}

bool note_failure(const RetryPolicy& policy, const Error& e, RetryStats& stats) {
  switch (e.code()) {
    case ErrorCode::kConflict: ++stats.conflicts; return true;
    case ErrorCode::kLockBusy: ++stats.busy; return true;
    case ErrorCode::kConnectionLost:
      if (!policy.retry_connection_lost) return false;
      ++stats.reconnects;
      return true;
    default: return false;  // kCommitInDoubt included: never retried blindly
  }
}

}  // namespace detail
}  // namespace sqlguard
