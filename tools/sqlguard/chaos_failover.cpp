// `sqlguard chaos`: the failover fault and the write probe that measures it.
// A failover runs `$SQLGUARD_DBSERVERS failover <topology>` (pg-ha: Patroni
// with a synchronous standby; pg-async: the negative control) on a thread:
// the script kill -9s the primary's postgres and Patroni, waits until the
// standby is promoted, and restarts the old primary as a standby. Workers
// and the coordinator find the new primary through the multi-host URI
// (target_session_attrs=read-write) and retry per the error classes
// (connection_lost covers 08xxx, 57P01-57P03 and 25006). See
// chaos_coordinator.h.
#include <iostream>

#include "chaos_coordinator.h"
#include "common.h"
#include "sqlguard/lease_lock.h"

namespace sqlguard::cli::chaos {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

void Faults::start_failover() {
  failing_over_ = true;
  failover_result_ = -1;
  run_.fault("failover", -1, 0, "$SQLGUARD_DBSERVERS failover " + failover_target_);
  failover_thread_ = std::thread([this] {
    auto t = steady_clock::now();
    proc::SpawnOptions so;
    so.out = proc::SpawnOptions::Out::kStderr;  // the script prints the new primary's port; keep stdout JSON
    bool ok = false;
    try {
      proc::Child c = proc::spawn({"/bin/bash", dbservers_, "failover", failover_target_}, so);
      c.wait();
      ok = c.status().code() == 0;
    } catch (const Error&) {  // could not fork
    }
    failover_took_ms_ = std::chrono::duration_cast<milliseconds>(steady_clock::now() - t).count();
    failover_result_ = ok ? 0 : 1;
    failing_over_ = false;
  });
}

void Faults::join_failover() {
  failover_thread_.join();
  const std::int64_t took = failover_took_ms_;
  if (failover_result_ == 0) {
    ++failovers;
    failover_cycle_ms.push_back(took);
    run_.fault("failover", -1, 0, "standby promoted, old primary rejoined; the cycle took " + std::to_string(took) + " ms");
  } else {
    ++failover_failures;
    run_.fault("failover", -1, 0, "the failover script failed after " + std::to_string(took) + " ms");
  }
}

std::string WriteProbe::lease_name(int generation) const {
  return "chaosprobe_" + run_.names.run + "_" + std::to_string(generation);
}

void WriteProbe::start() {
  started_ = true;
  thread_ = std::thread([this] { loop(); });
}

void WriteProbe::stop() {
  if (!started_ || !thread_.joinable()) return;
  stop_ = true;
  thread_.join();
}

void WriteProbe::loop() {
  LeaseOptions lo;
  lo.ttl = std::chrono::seconds(2);
  ConnectOptions co;
  co.connect_timeout = std::chrono::seconds(2);
  std::unique_ptr<Connection> conn;
  std::unique_ptr<LeaseLock> lock;
  auto last_ok = steady_clock::now();
  bool down = false;
  while (!stop_) {
    try {
      if (!conn) {
        conn = open_db(co);
        // A new name per connection: a lease a failed release left behind
        // does not block the next write (the fences come from one sequence).
        // Outside the run's prefix: the stale-lock check is about the workers'
        // leases (a probe lease whose release failed expires after its ttl).
        lock = std::make_unique<LeaseLock>(*conn, lease_name(++generation_), lo);
      }
      if (!lock->try_acquire()) throw Error(ErrorCode::kLockBusy, "probe lease busy");
      const std::int64_t fence = lock->fence();
      lock->release();
      auto now = steady_clock::now();
      std::int64_t gap = std::chrono::duration_cast<milliseconds>(now - last_ok).count();
      if (gap > max_gap_ms_) max_gap_ms_ = gap;
      if (down && gap >= 1000)
        std::cerr << "chaos: write probe: writes were unavailable for " << gap << " ms" << std::endl;
      down = false;
      last_ok = now;
      ++writes_;
      if (fence <= last_fence_) {
        ++regressions_;
        if (regression_examples.size() < 10)
          regression_examples.push_back("probe fence " + std::to_string(fence) + " after " +
                                        std::to_string(last_fence_) + " (a fence issued again after a failover)");
      }
      last_fence_ = std::max(last_fence_, fence);
      std::this_thread::sleep_for(milliseconds(100));
    } catch (const Error&) {  // unavailable: measured by the gap between successes
      down = true;
      lock.reset();
      conn.reset();
      // Not faster: every attempt takes an ephemeral port, and a topology
      // whose ports lie in the ephemeral range (Patroni's REST port) cannot
      // restart a node while a client socket holds one.
      std::this_thread::sleep_for(milliseconds(200));
    }
  }
}

}  // namespace sqlguard::cli::chaos
