// sqlguard/metrics.h — process-wide counters of the lease lock.
//
// Thread safety: counters are atomics; lease_metrics() reads each counter
// once (not all at one instant).
#pragma once

#include <cstdint>

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
