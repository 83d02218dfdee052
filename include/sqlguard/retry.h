// sqlguard/retry.h — bounded retries of whole transactions, modelled on
// pqxx::perform.
//
//   sqlguard::RetryPolicy policy;            // 10 attempts, 5ms..1s full jitter
//   auto r = sqlguard::with_retry(conn, policy, [&](sqlguard::Transaction& tx) {
//     ... read, decide, write through tx ...
//     return 42;                             // committed after the lambda returns
//   });
//   if (r) use(*r.value); else report(r.last_error->what(), r.stats.attempts);
//
// Each attempt opens its OWN transaction (the lambda must not open one), runs
// the lambda and commits. An attempt that throws sqlguard::Error with a
// retryable code is rolled back and, after a full-jitter backoff, run again:
//   kConflict   CAS lost, serialization failure (40001), deadlock (40P01/1213)
//   kLockBusy   NOWAIT refused, lock wait timeout, SQLite busy
//   kConnectionLost  only when RetryPolicy::retry_connection_lost (the
//               connection is re-established first; nothing was committed)
// kCommitInDoubt is NEVER retried: the commit may have happened, so the
// exception propagates. Every other error propagates at once as well.
// Running out of attempts is an expected outcome, not an exception: the
// result has no value and carries the last error.
//
// Thread safety: a RetryPolicy is an immutable value; with_retry() uses the
// one Connection it is given (one connection per thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>

#include "sqlguard/connection.h"
#include "sqlguard/errors.h"

namespace sqlguard {

struct RetryPolicy {
  // Total attempts including the first; 1 = no retry. Range 1..10000. Default: 10.
  int max_attempts = 10;
  // Backoff cap before retry n (n = 1, 2, ...) is
  // min(max_backoff, initial_backoff * multiplier^(n-1)); the actual sleep is
  // uniform in [0, cap] ("full jitter", AWS architecture blog), which spreads
  // colliding writers apart. Default: 5 ms.
  std::chrono::milliseconds initial_backoff{5};
  // Upper bound of one backoff, 0..1h, >= initial_backoff. Default: 1 s.
  std::chrono::milliseconds max_backoff{1000};
  // Growth factor, 1.0..100.0. Default: 2.0.
  double multiplier = 2.0;
  // Also retry kConnectionLost (after Connection::reconnect()). Safe because
  // ConnectionLost means the attempt did not commit. Default: false.
  bool retry_connection_lost = false;

  // Throws Error(kInvalidArgument) naming the offending field.
  void validate() const;
};

struct RetryStats {
  int attempts = 0;        // attempts started
  int conflicts = 0;       // attempts that ended in kConflict (incl. CAS lost)
  int busy = 0;            // attempts that ended in kLockBusy
  int reconnects = 0;      // attempts that ended in kConnectionLost
  std::chrono::milliseconds backoff{0};  // total time slept between attempts
};

template <typename T>
struct RetryResult {
  std::optional<T> value{};          // set when an attempt committed
  RetryStats stats{};
  std::optional<Error> last_error{}; // set when attempts ran out
  bool ok() const noexcept { return value.has_value(); }
  explicit operator bool() const noexcept { return ok(); }
};

// Returned by with_retry() for lambdas that return void.
struct Done {};

namespace detail {
// Full-jitter delay before retry number `retry` (1-based). Thread-safe.
std::chrono::milliseconds backoff_delay(const RetryPolicy& policy, int retry);
void sleep_for(std::chrono::milliseconds d);
// Classifies an attempt failure: true if it may be retried (and counts it).
bool note_failure(const RetryPolicy& policy, const Error& e, RetryStats& stats);
}  // namespace detail

// Runs `fn(Transaction&)` in its own transaction per attempt and commits.
// Throws Error(kInvalidArgument) if the policy is invalid or `conn` is
// already in a transaction; non-retryable errors (and kCommitInDoubt)
// propagate as thrown.
template <typename F>
auto with_retry(Connection& conn, const RetryPolicy& policy, F&& fn) {
  using R = std::invoke_result_t<F&, Transaction&>;
  using V = std::conditional_t<std::is_void_v<R>, Done, R>;
  policy.validate();
  require_no_transaction(conn, "with_retry()", "it opens one transaction per attempt");
  RetryResult<V> out;
  for (int attempt = 1;; ++attempt) {
    out.stats.attempts = attempt;
    try {
      Transaction tx(conn);
      if constexpr (std::is_void_v<R>) {
        fn(tx);
        tx.commit();
        out.value.emplace();
      } else {
        V v = fn(tx);
        tx.commit();
        out.value.emplace(std::move(v));
      }
      return out;
    } catch (const Error& e) {
      // Retryable codes are counted and retried; everything else (notably
      // kCommitInDoubt) is rethrown to the caller.
      if (!detail::note_failure(policy, e, out.stats)) throw;
      if (e.code() == ErrorCode::kConnectionLost) conn.reconnect();
      if (attempt >= policy.max_attempts) {
        out.last_error = e;
        return out;
      }
    }
    auto d = detail::backoff_delay(policy, attempt);
    out.stats.backoff += d;
    detail::sleep_for(d);
  }
}

}  // namespace sqlguard
