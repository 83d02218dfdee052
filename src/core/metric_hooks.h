// Internal: the strategies' metrics, one place for each name and help text
// (the list is in include/sqlguard/metrics.h). Each series is looked up once
// and cached; recording is one relaxed atomic add.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "sqlguard/lease_lock.h"
#include "sqlguard/metrics.h"

namespace sqlguard::detail::metric {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

#define SQLGUARD_METRIC_COUNTER(fn, name, help) \
  inline metrics::Counter& fn() {               \
    static metrics::Counter& c = metrics::counter(name, help); \
    return c;                                   \
  }
SQLGUARD_METRIC_COUNTER(idem_executions, "sqlguard_idempotency_executions_total",
                        "Idempotent handlers run (first request, or take-over of an abandoned key)")
SQLGUARD_METRIC_COUNTER(idem_replays, "sqlguard_idempotency_replays_total", "Stored idempotent responses replayed")
SQLGUARD_METRIC_COUNTER(idem_in_progress, "sqlguard_idempotency_in_progress_total",
                        "Idempotent requests refused because the key is being processed")
SQLGUARD_METRIC_COUNTER(idem_mismatch, "sqlguard_idempotency_mismatch_total",
                        "Idempotent requests refused: same key, different request")
SQLGUARD_METRIC_COUNTER(idem_lease_lost, "sqlguard_idempotency_lease_lost_total",
                        "Idempotent executions whose key was taken over before they stored a response")
SQLGUARD_METRIC_COUNTER(inbox_processed, "sqlguard_inbox_processed_total", "Inbox messages applied")
SQLGUARD_METRIC_COUNTER(inbox_duplicates, "sqlguard_inbox_duplicates_total",
                        "Inbox messages skipped as already processed")
SQLGUARD_METRIC_COUNTER(transition_applied, "sqlguard_transition_applied_total", "State machine moves applied")
SQLGUARD_METRIC_COUNTER(guarded_applied, "sqlguard_guarded_update_applied_total", "Guarded updates applied")
SQLGUARD_METRIC_COUNTER(guarded_rejected, "sqlguard_guarded_update_rejected_total",
                        "Guarded updates refused by their guard (row not found excluded)")
SQLGUARD_METRIC_COUNTER(cas_applied, "sqlguard_cas_applied_total", "Compare-and-set writes applied")
SQLGUARD_METRIC_COUNTER(cas_conflicts, "sqlguard_cas_conflicts_total",
                        "Compare-and-set writes that found a newer version")
SQLGUARD_METRIC_COUNTER(cas_retries, "sqlguard_cas_retries_total",
                        "Read-modify-write retries after a compare-and-set conflict")
SQLGUARD_METRIC_COUNTER(rowlock_busy, "sqlguard_rowlock_busy_total",
                        "Row-lock scopes refused (NOWAIT / SKIP LOCKED / lock wait timeout)")
// Lease lock (lease_metrics() reads the same series).
SQLGUARD_METRIC_COUNTER(lock_attempts, "sqlguard_lock_attempts_total", "Lease acquire attempts sent to the database")
SQLGUARD_METRIC_COUNTER(lock_acquired, "sqlguard_lock_acquired_total", "Lease acquire attempts that took the lock")
SQLGUARD_METRIC_COUNTER(lock_busy, "sqlguard_lock_busy_total", "Lease acquire attempts that found the lock held")
SQLGUARD_METRIC_COUNTER(clock_steps, "sqlguard_clock_steps_total",
                        "Steps of the database server's clock a lock client saw between renewal rounds (over 1 s)")
SQLGUARD_METRIC_COUNTER(lock_contention_retries, "sqlguard_lock_contention_retries_total",
                        "Deadlock victims / lock wait timeouts retried inside an acquire attempt")
SQLGUARD_METRIC_COUNTER(lock_renewals, "sqlguard_lock_renewals_total", "Successful lease renewals")
SQLGUARD_METRIC_COUNTER(lock_renew_errors, "sqlguard_lock_renew_errors_total",
                        "Transient renewal failures retried by the watchdog")
SQLGUARD_METRIC_COUNTER(lock_releases, "sqlguard_lock_releases_total", "Releases of a held lease")
SQLGUARD_METRIC_COUNTER(lock_releases_not_held, "sqlguard_lock_releases_not_held_total",
                        "Releases of a lease that was no longer held")
SQLGUARD_METRIC_COUNTER(galera_unseen_rollbacks, "sqlguard_galera_unseen_rollbacks_total",
                        "Galera transactions found rolled back at their commit though no statement reported it "
                        "(brute-force aborts; each ended as a conflict, nothing committed)")
#undef SQLGUARD_METRIC_COUNTER

// Labelled to_string(cause): expired | taken_over | database_unreachable | outcome_unknown,
// the spelling on_lost, logs and LeaderElector use.
inline metrics::Counter& lock_lost(LossCause cause) {
  return metrics::counter("sqlguard_lock_lost_total", "Leases lost, by cause", {{"cause", std::string(to_string(cause))}});
}
inline metrics::Histogram& lock_wait_seconds() {
  static metrics::Histogram& h = metrics::histogram("sqlguard_lock_wait_seconds", "Time blocked in a waiting lease acquire");
  return h;
}
// Not exported (the histogram above is, in seconds: promtool refuses "ms" in a
// name); kept for lease_metrics().
inline std::atomic<std::uint64_t>& lock_wait_ms_total() {
  static std::atomic<std::uint64_t> ms{0};
  return ms;
}

inline metrics::Histogram& idem_seconds() {
  static metrics::Histogram& h =
      metrics::histogram("sqlguard_idempotency_seconds", "Duration of IdempotencyKeys execute(), any outcome");
  return h;
}

// reason: illegal_move | guard_failed | not_found | already_in_target
inline void transition_rejected(const char* reason) noexcept {
  try {
    metrics::counter("sqlguard_transition_rejected_total", "State machine moves refused, by reason",
                     {{"reason", reason}})
        .inc();
  } catch (...) {  // a registry failure must not fail the caller's transition; nothing to report it to
  }
}

}  // namespace sqlguard::detail::metric
