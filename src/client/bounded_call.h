// Internal: runs calls on a worker thread and waits for each one only until
// a deadline. A call blocked past it (a frozen server, a silent partition) is
// abandoned with its worker, which finishes on its own; the next call gets a
// fresh worker. One long-lived worker per caller otherwise, not a thread per
// call (the lock client's renewer keeps one caller). Its owner drains it
// before it goes (the lock client's shutdown): a worker still in a call when
// the process exits would run on into the exit's teardown (OpenSSL's
// atexit cleanup under a connect in progress: SIGSEGV at exit).
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

namespace sqlguard::detail {

// How long a renewal may wait for its answer: until `early` before its trust
// window ends (`valid_until`), so that a loss is reported inside the window.
// A window that had already ended when the request started (the process was
// paused — SIGSTOP, a VM freeze — or the renewing thread starved) cannot be
// kept any more, but the database's answer still tells how the lease was
// lost (taken over, expired) rather than "unreachable": such a request waits
// up to `diagnose` from its `start`, and never past `cap` (the end of a
// window still open that waits on the same request).
inline std::chrono::steady_clock::time_point renewal_deadline(
    std::chrono::steady_clock::time_point valid_until, std::chrono::milliseconds early,
    std::chrono::steady_clock::time_point start, std::chrono::milliseconds diagnose,
    std::chrono::steady_clock::time_point cap = std::chrono::steady_clock::time_point::max()) {
  const auto in_window = valid_until - early;
  return in_window > start ? in_window : std::max(in_window, std::min(start + diagnose, cap));
}

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

  // Waits until every call this caller gave up on has returned, or until
  // `deadline`: true if none is still running. (Each call is bounded by
  // its own connection's deadlines: connect_timeout, io_timeout.)
  bool drain(std::chrono::steady_clock::time_point deadline);

 private:
  struct Worker;
  std::shared_ptr<Worker> worker_;
  std::vector<std::shared_ptr<Worker>> abandoned_;  // still in their call when given up
  void forget_returned();                            // drops those whose call has returned
};

}  // namespace sqlguard::detail
