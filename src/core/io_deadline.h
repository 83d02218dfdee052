// Internal: a client-side deadline on a blocking driver call.
//
// Drivers that block in recv() on a socket (libpq) have no per-call
// deadline of their own; keepalives and tcp_user_timeout do not fire while a
// frozen server's (or proxy's) kernel still acknowledges packets. An
// IoDeadline armed around a call shuts the socket down (shutdown(2),
// both directions) if the call is still running when the deadline passes:
// the blocked recv() returns, the driver reports a broken connection, and
// the caller classifies it (fired() says why). One timer thread serves the
// whole process; arming and disarming cost a mutex and a map node.
#pragma once

#include <chrono>
#include <cstdint>

namespace sqlguard::detail {

class IoDeadline {
 public:
  IoDeadline() = default;
  IoDeadline(const IoDeadline&) = delete;
  IoDeadline& operator=(const IoDeadline&) = delete;
  ~IoDeadline() { disarm(); }

  // Arms a deadline `timeout` from now for `fd` (a previous one is
  // disarmed first; fd < 0 arms nothing).
  void arm(int fd, std::chrono::milliseconds timeout);
  // Idempotent; true if the deadline armed last fired (the socket was shut
  // down), until the next arm().
  bool disarm() noexcept;
  // disarm(), then forgets the verdict (for the error path that reports it).
  bool take_fired() noexcept {
    const bool f = disarm();
    fired_ = false;
    return f;
  }

  // Disarms when the call's scope ends; the verdict stays readable.
  struct Guard {
    IoDeadline& deadline;
    ~Guard() { deadline.disarm(); }
  };

 private:
  std::uint64_t id_ = 0;
  bool fired_ = false;
};

}  // namespace sqlguard::detail
