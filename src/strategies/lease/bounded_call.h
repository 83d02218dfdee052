// Internal: runs calls on a worker thread and waits for each one only until
// a deadline. A call blocked past it (a frozen server, a silent partition) is
// abandoned with its worker, which finishes on its own; the next call gets a
// fresh worker. One long-lived worker per caller otherwise, not a thread per
// call (the watchdog keeps one caller per held lease).
#pragma once

#include <chrono>
#include <functional>
#include <memory>

namespace sqlguard::detail {

class BoundedCaller {
 public:
  enum class Outcome { kDone, kTimedOut, kStopped };
  BoundedCaller() = default;
  ~BoundedCaller();  // never waits for a running call
  BoundedCaller(const BoundedCaller&) = delete;
  BoundedCaller& operator=(const BoundedCaller&) = delete;

  // Runs `fn` (which must not throw) on the worker and waits until it
  // returns, until `deadline`, or until `stopped()` is true (asked every 20 ms).
  Outcome call(std::function<void()> fn, std::chrono::steady_clock::time_point deadline,
               const std::function<bool()>& stopped);

 private:
  struct Worker;
  std::shared_ptr<Worker> worker_;
};

}  // namespace sqlguard::detail
