// Wait plan "connection wake-ups" (SQLite): the release statement wakes the
// waiters of the lease on this host after its commit (a futex word, see
// src/dialect/sqlite/connection.cpp); a waiter watches it between attempts.
#include "plans/waiter.h"

namespace sqlguard::detail {
namespace {

class ConnectionWaiter final : public ListeningWaiter {
 public:
  using ListeningWaiter::ListeningWaiter;
  void begin(Connection& conn, bool waiting) override {
    if (waiting) drain(conn);
    waiting_ = waiting;
  }
  // Watch (once per handle; it stays for later calls), then try again at
  // once: a release between the failed attempt and the watch is not missed.
  bool listen_first(Connection& conn, std::optional<Error>& outage) override {
    if (!waiting_ || listening_) return false;
    start_listening(conn, outage);
    return true;
  }
  PauseResult pause(Connection& conn, const PauseArgs& a, std::optional<Error>&) override {
    return wait_or_sleep(conn, a);
  }
  void finish(Connection&, bool) noexcept override { waiting_ = false; }

 private:
  bool waiting_ = false;
};

class ConnectionWakeups final : public WaitPlan {
 public:
  std::string_view name() const noexcept override { return "connection wake-ups"; }
  std::unique_ptr<Waiter> make_waiter(std::string channel, std::optional<std::chrono::milliseconds>) const override {
    return std::make_unique<ConnectionWaiter>(std::move(channel));
  }
  std::unique_ptr<WakeListener> make_listener() const override { return make_channel_listener(); }
  bool wakes_every_waiter() const noexcept override { return true; }

};

}  // namespace

const WaitPlan& connection_wakeups() {
  static const ConnectionWakeups plan;
  return plan;
}

}  // namespace sqlguard::detail
