// Internal: small helpers the lease code shares (acquire loop, plans,
// watchdog): outage test, jitter, and the reconnect-and-retry wrapper.
#pragma once

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "sqlguard/backoff.h"
#include "sqlguard/connection.h"
#include "sqlguard/errors.h"

namespace sqlguard::detail {

// The database could not be reached or did not answer: worth retrying on a
// fresh connection (a lost answer too, where the statement is idempotent).
inline bool is_outage(const Error& e) {
  return e.code() == ErrorCode::kConnectionLost || e.code() == ErrorCode::kTimeout ||
         e.code() == ErrorCode::kCommitInDoubt;
}

// Deadlock victims, lock wait timeouts: "not acquired", not an error.
inline bool is_contention(const Error& e) {
  return e.code() == ErrorCode::kConflict || e.code() == ErrorCode::kLockBusy || e.code() == ErrorCode::kTimeout;
}

// An acquire transaction that inserts a row keyed by the name's version (a
// holding's slot, a queue place's ticket) and finds it taken: a concurrent
// acquire of the name got there first. Measured on Galera: the loser of two
// first acquires on two nodes can fail with ER_DUP_ENTRY instead of a
// certification failure. "Not acquired" (or: try again), as contention.
inline bool is_insert_race(const Error& e) { return is_contention(e) || e.code() == ErrorCode::kAlreadyExists; }

// Full jitter, at least 1 ms.
inline std::chrono::milliseconds jitter(std::chrono::milliseconds upto) {
  return jittered(std::max(upto, std::chrono::milliseconds(1)), std::chrono::milliseconds(1));
}

// Runs f() again when it was picked as a deadlock victim, hit a lock wait
// timeout or (Galera) failed certification: for statements that are safe to
// repeat (owner- and fence-checked, or a transaction that commits all or
// nothing), up to 20 more times with full-jitter backoff from 2 ms. Inside
// the caller's transaction the caller decides: the error propagates.
// `retryable` says which errors are contention (is_insert_race for a
// transaction that inserts a version-keyed row).
template <typename F>
auto retry_contention(Connection& conn, F&& f, bool (*retryable)(const Error&) = is_contention) {
  for (int attempt = 0;; ++attempt) {
    try {
      return f();
    } catch (const Error& e) {
      if (!retryable(e) || conn.in_transaction() || attempt >= 20) throw;
      std::this_thread::sleep_for(jitter(std::chrono::milliseconds(2 << std::min(attempt, 6))));
    }
  }
}

// Lease statements are idempotent by owner token, so a connection lost, a
// timeout or an unknown outcome is retried on a fresh connection, with
// full-jitter backoff, until `budget` has passed (a first attempt that found
// its session dead is retried once even past it); other errors propagate.
// InDoubt::kThrow: an unknown COMMIT outcome is not retried (a guarded
// transaction's work may have committed).
enum class InDoubt { kRetry, kThrow };
template <typename F>
auto with_reconnect(Connection& conn, std::chrono::milliseconds budget, const std::string& what, F&& f,
                    InDoubt in_doubt = InDoubt::kRetry) {
  using std::chrono::milliseconds;
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (int attempt = 1;; ++attempt) {
    try {
      return f(attempt);
    } catch (const Error& e) {
      const bool transient = is_outage(e) && (e.code() != ErrorCode::kCommitInDoubt || in_doubt == InDoubt::kRetry);
      auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      // A session found dead before the first statement left (killed while
      // idle, a restart between calls: connection_lost, nothing sent) is
      // replaced once however little budget is left: a call at its deadline
      // on a stale connection otherwise fails with no round trip tried.
      const bool stale_first = attempt == 1 && e.code() == ErrorCode::kConnectionLost;
      if (!transient || conn.in_transaction() || (left.count() <= 0 && !stale_first)) throw;
      log(LogLevel::kInfo, what + " failed, reconnecting and retrying: " + e.what());
      if (left.count() > 0)
        std::this_thread::sleep_for(std::min(Backoff{milliseconds(10), milliseconds(500)}.delay(attempt), left));
      try {
        conn.reconnect();
      } catch (const Error& re) {
        log(LogLevel::kInfo, what + ": reconnect failed (the next attempt reports it): " + re.what());
      }
    }
  }
}

}  // namespace sqlguard::detail
