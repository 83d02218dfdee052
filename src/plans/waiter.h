// Internal: what one lease handle keeps while it waits for a release, made
// by its dialect's wait plan (plans.h). LeaseLock::acquire() runs the same
// loop on every dialect and calls these hooks; the defaults are "nothing to
// do" (the polling plan overrides none of them but pause()).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sqlguard/connection.h"
#include "sqlguard/errors.h"
#include "plans/plans.h"

namespace sqlguard::detail {

// One pause of a waiting acquire between two busy attempts.
struct PauseArgs {
  std::chrono::milliseconds nap;                // full-jitter nap: backoff, capped by the holder's lease and the wait
  std::chrono::milliseconds left;               // of the wait
  std::chrono::milliseconds holder_remaining;   // of the holder's lease, as the last attempt saw it
  std::chrono::milliseconds backoff_initial, backoff_max;
  int idle_wakes;                               // wake-ups in a row that found the lease still held
};

enum class PauseResult {
  kRetryNow,  // set something up (a LISTEN): try again at once, backoff unchanged
  kNapped,    // slept without a wake-up source: backoff doubles, idle wake-ups unchanged
  kSlept,     // slept its nap: backoff doubles, idle wake-ups reset
  kWoken,     // woken by a release (or the wake-up source said so): idle wake-ups + 1
};

class Waiter {
 public:
  explicit Waiter(std::string channel) : channel_(std::move(channel)) {}
  virtual ~Waiter() = default;
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;

  // A waiting acquire starts (`waiting`: it may wait, outside a transaction).
  virtual void begin(Connection&, bool /*waiting*/) {}
  // The queue place the next attempt rides (queues_in_acquire plans), or nullptr.
  virtual QueueSeat* seat() { return nullptr; }
  // After each attempt that returned (acquired or busy): apply what the seat says.
  virtual void seated() {}
  // The attempt acquired: what this waiter held now belongs to the holder.
  virtual void acquired(Connection&) {}
  // The attempt found the lease held (woken, but another contender took it).
  virtual void busy(Connection&) noexcept {}
  // After a busy attempt: whether the lease's next turn is this waiter's
  // (bounded barging): the next release hands the lease to it, so it must
  // hear of that release. `another`: the turn is not its own and either the
  // wait is past barging_limit (it looks again by its timer, for the turn)
  // or its attempt saw the turn held by another wait (the next release
  // hands the lease to that one).
  virtual void next_turn(bool /*mine*/, bool /*another*/) noexcept {}
  // Before the deadline check: true = it set up a wake-up source, try again
  // at once (a release in between is not missed). `outage`: set when the
  // database went away doing so.
  virtual bool listen_first(Connection&, std::optional<Error>& /*outage*/) { return false; }
  // Waits for a release or sleeps, by the plan.
  virtual PauseResult pause(Connection& conn, const PauseArgs& args, std::optional<Error>& outage) = 0;
  // The session was replaced or went away: it holds no queue place, wake-up
  // lock or LISTEN any more.
  virtual void session_lost() noexcept {}
  // The waiting acquire ends (`acquired` or given up).
  virtual void finish(Connection&, bool /*acquired*/) noexcept {}
  // The holder released the lease.
  virtual void released(Connection&) noexcept {}
  // What the wake-up that ended the last pause said (PostgreSQL: the
  // NOTIFY payloads; a hand-over's carries its grant), handed over once.
  virtual std::vector<std::string> take_wake_payloads() noexcept { return {}; }
  // The handle goes away.
  virtual void close(Connection&) noexcept {}

 protected:
  const std::string channel_;
};

}  // namespace sqlguard::detail

namespace sqlguard::detail {

// A waiter with a wake-up source: it blocks in wait_for_release() for up to
// the nap, unless its wake-ups keep finding the lease held (a holder that
// releases and re-acquires faster than a waiter can try): after two of them
// it sleeps its backoff instead of racing it on every release.
class WakingWaiter : public Waiter {
 public:
  using Waiter::Waiter;

 protected:
  // Blocks up to `d` for a release; true if woken. May throw an outage.
  virtual bool wait_for_release(Connection& conn, std::chrono::milliseconds d) = 0;
  // Before sleeping instead of waiting (a listener that does not read costs
  // every release: PostgreSQL stops listening for its nap).
  virtual void before_nap(Connection&) noexcept {}
  PauseResult wait_or_sleep(Connection& conn, const PauseArgs& a);
};

// Wake-ups through the connection (Connection::wait_for_notify): LISTEN on
// PostgreSQL, the futex word on SQLite. `listening_` = set up on this session.
class ListeningWaiter : public WakingWaiter {
 public:
  using WakingWaiter::WakingWaiter;
  void session_lost() noexcept override { listening_ = false; }
  void close(Connection& conn) noexcept override { stop_listening(conn); }

 protected:
  bool wait_for_release(Connection& conn, std::chrono::milliseconds d) override {
    payloads_ = conn.wait_for_notify_payloads(channel_, d);
    return !payloads_.empty();
  }
  std::vector<std::string> take_wake_payloads() noexcept override { return std::exchange(payloads_, {}); }
  // Wake-ups that arrived since the last call are stale: drain them.
  void drain(Connection& conn) {
    payloads_.clear();
    if (listening_) conn.wait_for_notify(channel_, std::chrono::milliseconds(0));
  }
  // LISTEN; a database that went away makes it an outage like a failed attempt.
  void start_listening(Connection& conn, std::optional<Error>& outage);
  void stop_listening(Connection& conn) noexcept;
  bool listening_ = false;
  std::vector<std::string> payloads_;  // of the last wake-up (wait_for_release)
};

}  // namespace sqlguard::detail
