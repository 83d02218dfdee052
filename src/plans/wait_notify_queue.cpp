// Wait plan "notify to a queue head" (PostgreSQL): the waiters of a lease
// take turns. The one holding a session advisory lock on the channel (taken
// by lease_acquire's queue_role 'join', left by its take-over as 'head' or by
// lease_queue_leave) is the head: the only one that LISTENs, woken by the
// release's NOTIFY. The others poll with naps sized to the holder's lease and
// try for the head's place in the same statement. PostgreSQL signals EVERY
// listening backend of the database on each NOTIFY, so each extra listener
// would cost every lock cycle; a release thus wakes one waiter.
#include <algorithm>
#include <thread>

#include "core/catalog.h"
#include "core/reconnect.h"
#include "plans/waiter.h"

namespace sqlguard::detail {
namespace {

using std::chrono::milliseconds;

class NotifyQueueWaiter final : public ListeningWaiter {
 public:
  using ListeningWaiter::ListeningWaiter;

  void begin(Connection& conn, bool waiting) override {
    if (waiting) drain(conn);  // may throw: then this waiter is not queued
    queue_ = waiting;
  }
  QueueSeat* seat() override {
    if (!queue_) return nullptr;
    seat_ = QueueSeat{&channel_, head_};
    return &seat_;
  }
  void seated() override {
    if (!queue_) return;
    if (seat_.left) head_ = false;   // the take-over left the waiter queue itself
    if (seat_.joined) head_ = true;  // a busy attempt became the head
  }
  void acquired(Connection& conn) override { leave_queue(conn); }  // the next waiter becomes the head

  PauseResult pause(Connection& conn, const PauseArgs& a, std::optional<Error>& outage) override {
    if (queue_ && (head_ || turn_) && !listening_) {
      // The head, not listening: that busy attempt made this waiter the head,
      // or the head is back from a nap. LISTEN, then try at once (a release
      // before the LISTEN is not missed).
      start_listening(conn, outage);
      return PauseResult::kRetryNow;
    }
    if (queue_ && !head_ && !turn_) {
      // Not the head: the next release goes to the head, so this waiter polls
      // only to take the head's place when it leaves, and naps with full
      // jitter sized to what the holder's lease has left (up to backoff_max)
      // from the first nap on, not the ramp from backoff_initial: every busy
      // attempt on a hot lock is a reader racing the holder's next take-over,
      // and 15 waiters ramping from 5 ms cost a 16-client lock a third of its
      // cycles (measured). A handle that listened as an earlier head stops.
      stop_listening(conn);
      const auto far = std::min(a.backoff_max, std::max(a.holder_remaining, a.backoff_initial));
      std::this_thread::sleep_for(std::min(jitter(far), std::max(a.left, milliseconds(1))));
      return PauseResult::kNapped;
    }
    return wait_or_sleep(conn, a);
  }
  // The lease's next turn is this waiter's: it listens as the head does (the
  // release that hands it the lease wakes it), head or not.
  void next_turn(bool mine, bool) noexcept override { turn_ = mine; }
  void session_lost() noexcept override {
    head_ = false;
    listening_ = false;
  }
  void finish(Connection& conn, bool acquired) noexcept override {
    leave_queue(conn);
    // A handle that gave up stops listening: an idle listener still gets
    // every release's NOTIFY, costs the holders, and one whose socket is
    // never read holds back the server's notification queue.
    if (queue_ && !acquired) stop_listening(conn);
    queue_ = false;
    turn_ = false;
  }
  // A former head listened while it held the lease (its own NOTIFY is
  // cheap); released, it stops: an idle listener costs every later release.
  // Called after the release statement, so the next waiter is already woken.
  void released(Connection& conn) noexcept override {
    if (listening_ && !conn.in_transaction()) stop_listening(conn);
  }

 protected:
  // The head stops listening for its nap (a listener that does not read
  // makes every NOTIFY cost it work; measured: one other listener makes a hot
  // lock's cycles 15-25 % slower).
  void before_nap(Connection& conn) noexcept override {
    if (queue_) stop_listening(conn);
  }

 private:
  // On failure the session's end frees the place; until then the others poll.
  void leave_queue(Connection& conn) noexcept {
    if (!head_) return;
    head_ = false;
    try {
      run(conn, Sql::lease_queue_leave, {channel_});
    } catch (const std::exception& e) {
      log(LogLevel::kDebug, std::string("leaving the waiter queue failed: ") + e.what());
    }
  }
  bool queue_ = false;  // inside a waiting acquire, outside a transaction
  bool head_ = false;   // holds the head's place (a session advisory lock)
  bool turn_ = false;   // the lease's next turn is this waiter's (bounded barging)
  QueueSeat seat_{nullptr, false};
};

class NotifyQueueHead final : public WaitPlan {
 public:
  std::string_view name() const noexcept override { return "notify to the queue head"; }
  std::unique_ptr<Waiter> make_waiter(std::string channel, std::optional<milliseconds>) const override {
    return std::make_unique<NotifyQueueWaiter>(std::move(channel));
  }
  std::unique_ptr<WakeListener> make_listener() const override { return make_channel_listener(); }
  bool wakes_fair_by_ticket() const noexcept override { return true; }

};

}  // namespace

const WaitPlan& notify_queue_head() {
  static const NotifyQueueHead plan;
  return plan;
}

}  // namespace sqlguard::detail
