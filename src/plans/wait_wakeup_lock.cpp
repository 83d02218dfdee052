// Wait plan "wake-up lock" (MariaDB, Galera): the holder holds a named
// server lock for its lease (GET_LOCK, taken by lease_take / lease_read_mine);
// waiters block on it (lease_wakeup_wait) and a release frees it
// (lease_wakeup_signal). The woken waiter KEEPS it while it tries: the others
// stay blocked behind it (one wake-up per release, not a chain of them), and
// it is already the holder's wake-up lock when its take-over succeeds. If
// another contender took the lease first, it frees the lock at once, for that
// holder (lease_take waits briefly for it) or the next waiter.
#include <algorithm>
#include <thread>

#include "core/catalog.h"
#include "plans/waiter.h"

namespace sqlguard::detail {
namespace {

using std::chrono::milliseconds;

class WakeupLockWaiter final : public WakingWaiter {
 public:
  WakeupLockWaiter(std::string channel, std::optional<milliseconds> cap)
      : WakingWaiter(std::move(channel)), cap_(cap) {}

  void acquired(Connection&) override { head_ = false; }  // the wake-up lock it holds is now the holder's
  void busy(Connection& conn) noexcept override { leave(conn); }  // woken, but another took it: pass it on
  // Bounded barging: with the turn another's (or, past barging_limit, not
  // its own), the next release is not this waiter's (it hands the lease to
  // the turn's owner): it sleeps its pause and looks again (for the turn,
  // past the limit), off the wake-up lock's queue.
  // Woken waiters are granted the lock one after another, each trying
  // before it passes it on, so a crowd of them there delays the turn's
  // owner, whom a hand-over must wake, and the new holder's GET_LOCK.
  void next_turn(bool, bool another) noexcept override { another_turn_ = another; }
  PauseResult pause(Connection& conn, const PauseArgs& a, std::optional<Error>&) override {
    if (another_turn_) {
      std::this_thread::sleep_for(a.nap);
      return PauseResult::kSlept;
    }
    return wait_or_sleep(conn, a);
  }
  void session_lost() noexcept override { head_ = false; }
  void finish(Connection& conn, bool) noexcept override { leave(conn); }

 protected:
  // GET_LOCK with a timeout in seconds; no wait longer than the cap (inside
  // the connection's I/O deadline).
  bool wait_for_release(Connection& conn, milliseconds d) override {
    if (cap_) d = std::min(d, *cap_);
    auto r = run(conn, Sql::lease_wakeup_wait, {channel_, static_cast<double>(d.count()) / 1000.0});
    static constexpr auto kGranted = column(Sql::lease_wakeup_wait, "granted");
    head_ = !r.rows.empty() && !cell(r.rows[0], kGranted).is_null() && cell(r.rows[0], kGranted).as_int() == 1;
    return head_;
  }

 private:
  // On failure the session's end frees it; until then the other waiters poll.
  void leave(Connection& conn) noexcept {
    if (!head_) return;
    head_ = false;
    try {
      run(conn, Sql::lease_wakeup_signal, {channel_});
    } catch (const std::exception& e) {
      log(LogLevel::kDebug, std::string("freeing the wake-up lock failed: ") + e.what());
    }
  }
  std::optional<milliseconds> cap_;
  bool another_turn_ = false;  // the turn is another wait's, or it is past barging_limit without it
  bool head_ = false;  // holds the wake-up lock while not the holder
};

class WakeupLock final : public WaitPlan {
 public:
  std::string_view name() const noexcept override { return "wake-up lock"; }
  std::unique_ptr<Waiter> make_waiter(std::string channel, std::optional<milliseconds> cap) const override {
    return std::make_unique<WakeupLockWaiter>(std::move(channel), cap);
  }
  std::unique_ptr<WakeListener> make_listener() const override { return make_wakeup_lock_listener(); }
  bool release_on_acquiring_session() const noexcept override { return true; }

  // Frees the holder's wake-up lock: every waiter blocked on it returns at once.
  void wake_waiters(Connection& conn, const std::string& name) const noexcept override {
    try {
      run(conn, Sql::lease_wakeup_signal, {lease_wakeup_channel(name)});
    } catch (const std::exception& e) {
      // Waiters fall back to polling; the release itself already happened.
      log(LogLevel::kWarning, "waking the waiters of '" + name + "' failed: " + e.what());
    }
  }
};

}  // namespace

const WaitPlan& wakeup_lock() {
  static const WakeupLock plan;
  return plan;
}

}  // namespace sqlguard::detail
