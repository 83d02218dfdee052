// Internal: the named protocols of the lease lock. A dialect (and each of its
// variants: PostgreSQL behind a transaction pooler, a Galera node) names in
// its registry entry the plan it uses for each real difference between
// databases (dialect/dialect.h, DialectPlans); the lease code runs the plan
// and never asks which database it talks to. One plan object per dialect,
// stateless and shared by every lease of every connection; what a waiting
// handle keeps between calls lives in the Waiter the wait plan makes for it.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>
#include <string_view>

#include "sqlguard/connection.h"
#include "sqlguard/lease_lock.h"
#include "strategies/lease/takeover.h"

namespace sqlguard::detail {

// One acquire attempt's arguments (validated by the caller).
struct LeaseRequest {
  const std::string& name;
  const std::string& owner;
  std::chrono::milliseconds ttl;
  std::chrono::milliseconds min_hold;
  // The caller's own read found the lease free just now (a fair waiter's
  // turn, fair_gate): a plan may skip its deciding read. Never unsafe: the
  // take-over's compare-and-set still decides.
  bool seen_free = false;
  // The take-over rule (lease_lock.h), and the version of the holder's row
  // this process has watched unchanged for its ttl (takeover.h; none: -1).
  TakeOver rule = TakeOver::kWatched;
  RowVersion watched{};
  // Out: what a busy attempt saw of the holder's row (a sighting for the
  // watch). Empty when it saw no row (a race, a name just created).
  mutable std::optional<Sighting> seen{};
  // A waiting acquire's token for the lease's next turn (bounded barging;
  // empty: none): a lease a release handed to it is taken (with `owner`, this
  // attempt's own token), and a take clears its own turn.
  std::string turn_owner{};
  // A lease a release handed to that turn may be held as the release wrote
  // it (owner = turn_owner, its fence and expiry), without a confirming take,
  // where the plan's deciding read sees the hand-over: the caller found
  // enough of a trust window left (ClientCore::attempt_on). Else the take
  // confirms it with `owner`.
  bool hold_grant = false;
  // Out: the lease's next turn (next_owner, next_since) and holder where a
  // busy attempt's deciding read saw the row (lease_precheck, PostgreSQL's
  // lease_acquire), else unset. A waiter learns from it, at no cost, whether
  // the turn is its own or open (FairPolicy's ask_next_turn).
  mutable std::optional<NextTurnSeen> next_seen{};

  // The take statements' last arguments: the take-over rule's
  // (watched_fence, watched_beat, watched_expire_at, db_clock_rule), then
  // turn_owner.
  void add_rule_args(Params& p) const {
    p.emplace_back(watched.fence);
    p.emplace_back(watched.beat);
    p.emplace_back(watched.expire_at);
    p.emplace_back(std::int64_t(rule == TakeOver::kDatabaseClock ? 1 : 0));
    p.emplace_back(turn_owner);
  }
  bool may_take_over(const Sighting& s) const {
    return detail::may_take_over(s, watched.fence >= 0 ? std::optional<RowVersion>(watched) : std::nullopt, rule);
  }
};

// A waiter's place in a queue that rides the acquire statement (the
// notify-queue-head wait plan), for one attempt.
struct QueueSeat {
  const std::string* channel;
  bool head;            // the caller is the head (the one listener)
  bool left = false;    // out: the take-over left the head's place
  bool joined = false;  // out: the busy attempt made the caller the head
};

// How an acquire attempt is decided. Every plan keeps the same contract: a
// busy attempt is a read (no row lock, no write lock, no WAL) that reports
// what it saw of the holder's row (LeaseRequest::seen); one statement decides
// a take-over by the take-over rule (a compare-and-set) and draws one fence.
class AcquirePlan {
 public:
  virtual ~AcquirePlan() = default;
  virtual std::string_view name() const noexcept = 0;
  // One attempt, no retries. `seat`: only when the wait plan queues waiters in
  // the acquire statement (WaitPlan::queues_in_acquire()).
  virtual AcquireResult attempt(Connection& conn, const LeaseRequest& req, QueueSeat* seat) const = 0;
  // A fair lease's waiter takes its queue place in one statement (fair_join:
  // the dialect writes inside a WITH), not in sync_open's transaction.
  virtual bool joins_fair_queue_in_one_statement() const noexcept { return false; }
  // An attempt on a name that exists never waits on another transaction's
  // lock of its row (PostgreSQL: SKIP LOCKED; SQLite: one writer, a read
  // decides first), so a transaction taking several names may take such a
  // name out of their canonical order without ever waiting in a cycle (a
  // lock set tries first the name that stood in the way last time).
  virtual bool never_waits_on_an_existing_row() const noexcept { return false; }
};

// One statement takes over an expired row or reports the holder's expiry
// (lease_acquire), then lease_insert for a name never seen. PostgreSQL.
const AcquirePlan& one_statement_takeover();
// A plain read decides first (lease_precheck); only an expired or missing
// lease is then written: lease_take_expired / lease_insert, which return the
// fence (`returning`, SQLite), or lease_update_expired / lease_create and
// lease_read_mine (Galera: no INSERT ... RETURNING under certification).
const AcquirePlan& read_then_update(bool returning);
// A plain read decides first (lease_precheck); then one upsert creates or
// takes over and returns the row as it left it (lease_take). MariaDB.
const AcquirePlan& read_then_upsert_returning();

// One row the lock client's renewer keeps alive besides leases: a holding
// (key = slot) or a fair waiter's queue place (key = ticket, fence unused).
struct RowRenewal {
  std::string name;
  std::int64_t key = 0;
  std::string owner;
  std::int64_t fence = 0;
  std::chrono::milliseconds ttl{};
};

// How many leases are renewed at once (renew_leases()).
class RenewPlan {
 public:
  virtual ~RenewPlan() = default;
  virtual std::string_view name() const noexcept = 0;
  // Renews `batch` (validated: at most kMaxRenewalBatch entries, distinct
  // names) and answers the (name, fence) of every lease it extended.
  virtual std::set<std::pair<std::string, std::int64_t>> renew(Connection& conn,
                                                               std::span<const LeaseRenewal> batch) const = 0;
  // The same for holdings of semaphores and read-write leases (sync_renew_batch*,
  // sync_ref: name, slot, owner, fence, ttl): answers the (name, slot) extended.
  virtual std::set<std::pair<std::string, std::int64_t>> renew_holdings(Connection& conn,
                                                                        std::span<const RowRenewal> batch) const = 0;
};

// One UPDATE ... RETURNING (lease_renew_batch). PostgreSQL, SQLite.
const RenewPlan& renew_returning();
// lease_renew_batch_lock locks what is still held, lease_renew_batch_update
// extends it, in one transaction (no UPDATE ... RETURNING). MariaDB, Galera.
const RenewPlan& renew_lock_then_update();

// ---- coalesced batches (the lock client, LockClientOptions::batch_max) ----

// A try-acquire of one name in a batch (names distinct within a batch).
struct BatchTry {
  std::string name, owner;
  std::chrono::milliseconds ttl{0}, min_hold{0};
};
// What a batch answered for one name: taken (fence, expire_at on the
// database clock), or the holder's row it saw (a sighting, and the holder's
// expire_at), or neither: undecided, the client tries the name alone.
struct BatchTook {
  bool taken = false;
  std::int64_t fence = 0, expire_at = 0;
  std::optional<Sighting> seen;
  std::int64_t holder_expire_at = 0;
};
// A release of one held lease in a batch.
struct BatchRelease {
  std::string name, owner;
  std::int64_t fence = 0;
};
// The most names one batch statement carries.
inline constexpr std::size_t kMaxBatch = 64;

// How a dialect takes and releases many distinct names at once. A batch only
// does what needs no decision of the take-over rule: it creates names never
// seen and takes released rows; every other name comes back seen or
// undecided, and the client decides it alone (acquire_lease_seated). A
// release it could not make at once (its row locked at that instant) is
// answered false and released alone. Neither waits on a row lock another
// batch or the renewer holds.
class BatchPlan {
 public:
  virtual ~BatchPlan() = default;
  virtual std::string_view name() const noexcept = 0;
  // One entry per `batch` entry, in order. Throws on a failed round trip
  // (nothing taken that the answer does not show).
  virtual std::vector<BatchTook> acquire(Connection& conn, std::span<const BatchTry> batch) const = 0;
  // Whether each entry was released (in order).
  virtual std::vector<bool> release(Connection& conn, std::span<const BatchRelease> batch) const = 0;
};
// lease_acquire_batch / lease_release_batch: one statement each. PostgreSQL.
const BatchPlan& batch_one_statement();
// lease_poll reads, lease_take_batch takes the free names (then their
// wake-up locks); lease_release_batch_lock + _update in one transaction, then
// the wake-up locks freed. MariaDB (not Galera: no INSERT ... RETURNING there).
const BatchPlan& batch_read_then_upsert();

class Waiter;

// A name the lock client's waiters wait on, for its wake-up listener.
struct WaitedName {
  std::string name;
  std::string channel;  // lease_wakeup_channel(name)
  bool idle;            // its last wake-ups found the lease still held: do not block on it
};

// Where the wait plan wakes fair waiters by ticket (PostgreSQL): the channel
// of one queue place, on which a release (lease_release_fair) or a waiter
// leaving (fair_leave_wake) NOTIFYs the next ticket besides the name's own
// channel: '<lease_wakeup_channel(name)>_<ticket>'.
inline std::string fair_ticket_channel(const std::string& channel, std::int64_t ticket) {
  return channel + "_" + std::to_string(ticket);
}

// A name woken, with what its wake-ups said (a NOTIFY's payload; "" when a
// wake-up says nothing).
struct WokenName {
  std::string name;
  std::vector<std::string> payloads;
};

// The lock client's one wake-up source for every name its waiters wait on
// (lock_client.h), on the client's listener session, from one thread.
class WakeListener {
 public:
  virtual ~WakeListener() = default;
  // Waits up to `d` for a release of one of `names` (longest-waiting first)
  // and answers the names woken. A name it was not yet listening to is
  // answered at once (it listens from now on, so the head's next attempt
  // cannot miss a release in between). May throw an outage.
  virtual std::vector<WokenName> wait(Connection& conn, const std::vector<WaitedName>& names,
                                      std::chrono::milliseconds d) = 0;
  // The listener session was replaced: it listens to nothing.
  virtual void session_lost() noexcept = 0;
  // It waits only on names that are not idle (WaitedName::idle): with none,
  // the client waits for a head's attempt to end instead of calling wait().
  virtual bool waits_on_active_only() const noexcept { return false; }
};

// Connection::wait_for_any_notify (PostgreSQL LISTEN, SQLite futex words).
std::unique_ptr<WakeListener> make_channel_listener();
// The wake-up lock of the longest-waiting name (MariaDB, Galera).
std::unique_ptr<WakeListener> make_wakeup_lock_listener();

// How a waiting acquire learns of a release.
class WaitPlan {
 public:
  virtual ~WaitPlan() = default;
  virtual std::string_view name() const noexcept = 0;
  // The state one lease handle keeps while it waits (and between calls).
  // `wait_cap`: no single wait statement blocks longer than this (a bound
  // inside the connection's I/O deadline); unset = no cap.
  virtual std::unique_ptr<Waiter> make_waiter(std::string channel,
                                              std::optional<std::chrono::milliseconds> wait_cap) const = 0;
  // After a release statement freed lease `name`: wake its waiters where the
  // release statement does not do it itself. Never throws (waiters then poll).
  virtual void wake_waiters(Connection&, const std::string& /*name*/) const noexcept {}
  // The lock client's listener (nullptr: its waiters poll).
  virtual std::unique_ptr<WakeListener> make_listener() const { return nullptr; }
  // A release must run on the session that acquired (it frees a session
  // lock the acquire took): the lock client pins it to that connection.
  virtual bool release_on_acquiring_session() const noexcept { return false; }
  // A release wakes every waiter of the lock (not one), and a wake-up always
  // is a release: a woken waiter that then finds the lock taken lost a race
  // (normal contention), which is no reason to stop listening.
  virtual bool wakes_every_waiter() const noexcept { return false; }
  // A fair lease's release names the queue's next ticket in its wake-up
  // (lease_release_fair, fair_leave_wake: the NOTIFY payload), and the lock
  // client's listener wakes only the waiter with that ticket. Otherwise,
  // unless every release wakes every waiter anyway, a fair waiter that is
  // not nearly next is left out of the wake-ups and checks its turn at a
  // time paced by how fast the queue moves.
  virtual bool wakes_fair_by_ticket() const noexcept { return false; }
};

// The head of the waiters (a session advisory lock taken by the acquire
// statement) LISTENs and a release's NOTIFY wakes it; the others poll. PostgreSQL.
const WaitPlan& notify_queue_head();
// Waiters block on the holder's wake-up lock (GET_LOCK), freed at release;
// the woken one keeps it while it tries. MariaDB and Galera.
const WaitPlan& wakeup_lock();
// The connection's own wake-ups (Connection::wait_for_notify): SQLite's futex
// word, woken by the release statement after commit.
const WaitPlan& connection_wakeups();
// Backoff with full jitter only (PostgreSQL behind a transaction pooler:
// nothing may stay in a server session).
const WaitPlan& polling();

}  // namespace sqlguard::detail
