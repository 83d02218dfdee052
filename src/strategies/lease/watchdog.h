// Internal: the watchdog of one held lease: renews it every period on its own
// connection and reports its loss (LeaseState::mark_lost) before the local
// trust window ends, even when a renewal hangs (BoundedCaller).
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <string>
#include <thread>

#include "sqlguard/lease_lock.h"
#include "strategies/lease/bounded_call.h"
#include "strategies/lease/lease_state.h"

namespace sqlguard::detail {

class LeaseWatchdog {
 public:
  LeaseWatchdog(std::shared_ptr<LeaseState> state, ConnectionFactory factory, std::string name,
                std::chrono::milliseconds ttl, std::chrono::milliseconds margin, std::chrono::milliseconds period)
      : state_(std::move(state)), factory_(std::move(factory)), name_(std::move(name)), ttl_(ttl), margin_(margin),
        period_(period) {}
  ~LeaseWatchdog() { stop(); }
  LeaseWatchdog(const LeaseWatchdog&) = delete;
  LeaseWatchdog& operator=(const LeaseWatchdog&) = delete;

  // Starts renewing the lease the state holds now (stops a running watchdog first).
  void start();
  // Never waits for a renewal that hangs. From on_lost (the watchdog's own
  // thread) it lets the thread finish by itself.
  void stop() noexcept;

 private:
  // One held lease: its renewals share one connection and one worker thread
  // (BoundedCaller), both gone when the loop ends (release, loss, stop).
  void loop(std::shared_ptr<LeaseState> state, std::shared_ptr<std::condition_variable> wake);
  std::shared_ptr<LeaseState> state_;
  // Wakes the loop to stop (waited on with state_->mu); the thread keeps its own reference.
  std::shared_ptr<std::condition_variable> wake_ = std::make_shared<std::condition_variable>();
  ConnectionFactory factory_;
  std::string name_;
  std::chrono::milliseconds ttl_, margin_, period_;
  std::thread thread_;
};

}  // namespace sqlguard::detail
