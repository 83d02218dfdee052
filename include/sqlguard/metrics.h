// sqlguard/metrics.h — process-wide metrics: the lease counters
// (lease_metrics()) and the registry of counters and latency histograms of
// every strategy (namespace metrics, below).
//
// Thread safety: counters are atomics; lease_metrics() reads each counter
// once (not all at one instant).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sqlguard {

// Process-wide lease counters (monotonic since start or reset).
struct LeaseMetrics {
  std::uint64_t attempts = 0;         // acquire attempts sent to the database
  std::uint64_t acquired = 0;
  std::uint64_t busy = 0;             // attempts that found the lock held
  std::uint64_t contention_retries = 0;  // deadlock victims / lock timeouts retried inside an attempt
  std::uint64_t wait_ms_total = 0;    // time spent in blocking acquire
  std::uint64_t renewals = 0;
  std::uint64_t renew_errors = 0;     // transient renew failures retried by the watchdog
  std::uint64_t releases = 0;
  std::uint64_t releases_not_held = 0;
  std::uint64_t lost_expired = 0;
  std::uint64_t lost_taken_over = 0;
  std::uint64_t lost_unreachable = 0;
  std::uint64_t lost_outcome_unknown = 0;
};
LeaseMetrics lease_metrics();
void reset_lease_metrics();

}  // namespace sqlguard

// ---- the metrics registry ------------------------------------------------------
//
// Every strategy counts what it does in one process-wide registry of
// counters and latency histograms; an exporter (sqlguard/prometheus.h, when
// built with prometheus-cpp) or your own code reads it with
// metrics::snapshot(). Services may register their own metrics in the same
// registry (the reference service does), so one scrape shows both.
//
// Names follow Prometheus conventions: `sqlguard_<area>_<what>_total` for
// counters, `..._seconds` for histograms; label values are small fixed sets
// (causes, reasons, outcomes), never user data such as lock names or keys.
//
//   sqlguard_lock_attempts_total            acquire attempts sent to the database
//   sqlguard_lock_acquired_total            attempts that took the lock
//   sqlguard_lock_busy_total                attempts that found it held
//   sqlguard_lock_lost_total{cause}         leases lost: expired|taken_over|database_unreachable|outcome_unknown
//   sqlguard_lock_renewals_total            successful renewals
//   sqlguard_lock_releases_total            releases of a held lease
//   sqlguard_lock_wait_seconds              time blocked in acquire(wait) (histogram)
//   sqlguard_idempotency_executions_total   handlers run (first request, or take-over of an abandoned key)
//   sqlguard_idempotency_replays_total      stored responses replayed
//   sqlguard_idempotency_in_progress_total  requests refused: the key is being processed
//   sqlguard_idempotency_mismatch_total     requests refused: same key, different request
//   sqlguard_idempotency_seconds            run() duration (histogram)
//   sqlguard_inbox_processed_total          messages applied
//   sqlguard_inbox_duplicates_total         messages skipped as already processed
//   sqlguard_transition_applied_total       state machine moves applied
//   sqlguard_transition_rejected_total{reason}  illegal_move|guard_failed|already_in_target|not_found
//   sqlguard_cas_applied_total              compare-and-set writes applied
//   sqlguard_cas_conflicts_total            compare-and-set writes that found a newer version
//   sqlguard_cas_retries_total              read-modify-write retries after a conflict
//   sqlguard_rowlock_busy_total             row-lock scopes refused (NOWAIT / lock timeout)
//   sqlguard_election_elected_total         terms won by this process
//   sqlguard_election_revoked_total{cause}  terms ended: resigned|expired|taken_over|database_unreachable|outcome_unknown
//   sqlguard_pool_borrow_seconds            time to borrow a pooled connection (histogram)
//   sqlguard_pool_discarded_total{reason}   pooled connections closed: health_check|in_transaction|by_holder
//
// Thread safety: everything here is thread-safe; increments are lock-free
// atomics on objects that live until the process ends (references stay valid).
namespace sqlguard::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void inc(std::uint64_t n = 1) noexcept { value_.fetch_add(n, std::memory_order_relaxed); }
  std::uint64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }
  void reset() noexcept { value_.store(0, std::memory_order_relaxed); }
  Counter& operator++() noexcept {
    inc();
    return *this;
  }
  Counter& operator+=(std::uint64_t n) noexcept {
    inc(n);
    return *this;
  }
  operator std::uint64_t() const noexcept { return value(); }
  void store(std::uint64_t v) noexcept { value_.store(v, std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

// Latency histogram with fixed buckets (seconds): 0.5 ms .. 10 s, +Inf.
class Histogram {
 public:
  static constexpr std::array<double, 14> kBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                     0.1,    0.25,  0.5,    1.0,   2.5,  5.0,  10.0};
  void observe(double seconds) noexcept;
  struct Data {
    std::vector<std::uint64_t> buckets{};  // NOT cumulative, one per bound + the +Inf bucket
    std::uint64_t count = 0;
    double sum = 0;  // seconds
  };
  Data data() const noexcept;
  void reset() noexcept;

 private:
  std::array<std::atomic<std::uint64_t>, kBounds.size() + 1> buckets_{};
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sum_ns_{0};
};

// Finds or creates a metric. The same name must always be used with the same
// kind; its help is the first non-empty one given. `labels` select one series
// of it. Throws
// Error(kInvalidArgument) for a name or label name outside
// [a-zA-Z_][a-zA-Z0-9_]*, or a name registered as the other kind.
Counter& counter(std::string_view name, std::string_view help, const Labels& labels = {});
Histogram& histogram(std::string_view name, std::string_view help, const Labels& labels = {});

struct CounterSample {
  std::string name{}, help{};
  Labels labels{};
  std::uint64_t value = 0;
};
struct HistogramSample {
  std::string name{}, help{};
  Labels labels{};
  Histogram::Data data{};
};
struct Snapshot {
  std::vector<CounterSample> counters{};    // ordered by name, then labels
  std::vector<HistogramSample> histograms{};  // ordered by name, then labels
};
// Every series in the registry now (each read once, not all at one instant).
Snapshot snapshot();
// Zeroes every series (tests). Series stay registered.
void reset();

// Internal hooks the strategies call (one place for each metric's name and help).
void election_elected() noexcept;
void election_revoked(std::string_view cause) noexcept;

}  // namespace sqlguard::metrics
