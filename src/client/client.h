// Internal: the lock client (include/sqlguard/lock_client.h). One ClientCore
// per LockClient: its connection slots (renewal, listener, work), the renewer
// (client_renewer.cpp) and the waiter and listener threads
// (client_waiters.cpp). A lease handle made from a client keeps a
// ClientLease: its name, options and LeaseState, no connection or thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <map>
#include <set>
#include <span>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/clock_step.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"
#include "strategies/lease/lease_state.h"
#include "strategies/sync/sync_ops.h"

namespace sqlguard::detail {

class WaitPlan;
class WakeListener;
struct WaitedName;  // plans/plans.h
struct WokenName;   // plans/plans.h
class Waiter;
struct RenewItem;   // renewer.cpp
struct Completion;  // waiters.cpp
struct RenewRound;
struct ChunkResult;
struct Pending;     // coalesce.cpp
class BatchPlan;

// What row a ClientLease keeps alive: a lease (sqlguard_lock), a holding of
// a semaphore or read-write lease (sqlguard_sync_holder, key = its slot), or
// a fair lease waiter's queue place (sqlguard_lock_queue, key = its ticket:
// renewed while the waiter waits, never reported lost: the waiter finds a
// lost place at its next turn and takes a new one).
enum class RowKind { kLease, kHolding, kPlace };

// One lease handle's lease, as the client sees it. Shared by the handle, the
// renewer (while held and renewed) and the waiter thread (while waiting).
struct ClientLease {
  RowKind kind = RowKind::kLease;
  std::int64_t key = 0;  // kHolding: slot; kPlace: ticket. Guarded by state->mu
  std::string name;
  bool wakes = false;  // it has a wake-up channel (a lease; not a semaphore or read-write lease)
  std::string queue_key;  // the client's waiter queue it waits in; empty: `name` (a semaphore's: "semaphore:" + name)
  // What the client needs of the handle's LeaseOptions (not a copy of all of
  // them: a held lease should cost rows, not kilobytes).
  struct Options {
    std::chrono::milliseconds ttl{0}, min_hold{0}, backoff_initial{0}, backoff_max{0};
    ReleaseCommit release_commit = ReleaseCommit::kCoveredByNextAcquire;
    std::string owner;  // fixed owner token, or empty
    bool fair = false;  // LeaseOptions::fair
    std::chrono::milliseconds place_ttl{0};  // fair: of a waiter's queue place
    // fair: the kind of the name its queue belongs to (a fair lease, a
    // semaphore) and, for a semaphore, its count when new.
    LockKind queue_kind = LockKind::kFairLease;
    std::int64_t queue_permits = 0;
    TakeOver take_over = TakeOver::kWatched;  // LeaseOptions::take_over
    // LeaseOptions::barging_limit; unset: its waits never ask for the next
    // turn (a fair lease).
    std::optional<std::chrono::milliseconds> barging_limit;
  } options;
  std::chrono::milliseconds margin{0}, period{0};
  bool renew = true;  // the client renews it while held (Watchdog::kOn)
  std::shared_ptr<LeaseState> state = std::make_shared<LeaseState>();
  // Where the dialect's release must run on the session that acquired
  // (WaitPlan::release_on_acquiring_session): that work slot, else -1.
  int slot = -1;  // guarded by state->mu
  // A fair lease acquired from its queue place keeps the place (no longer
  // renewed: it expires by itself) until the release removes it in the same
  // commit. Guarded by state->mu.
  HeldPlace held_place;
  // kPlace: when its join was sent. Whatever is granted to the place comes
  // after (FairGrant, ClientCore::take_up_grant). Guarded by state->mu.
  std::chrono::steady_clock::time_point joined{};
  bool waiting = false;  // an asynchronous acquire is pending; guarded by ClientCore::wait_mu_
  // A fair lease: the last turn of its queue its waits saw (ClientWait::
  // fastest_turn), the first guess of its next wait. Guarded by wait_mu_.
  std::chrono::microseconds fair_turn{0};
  // A fair lease: how many live places its last try (the read before a wait
  // joins the queue) found, and when (-1: none kept). The wait that joins
  // right after starts from it instead of reading the queue again. Guarded
  // by wait_mu_.
  mutable std::int64_t tried_ahead = -1;
  mutable std::chrono::steady_clock::time_point tried_at{};
  // Inside run_guarded: its transaction holds the lease's row (or SQLite's
  // write lock); a renewal statement would wait for it, and with it every
  // lease of the batch. The renewer leaves it out until the transaction ends.
  std::atomic<int> guarded{0};
  // A client over a borrowed connection (ClientCore::over): what a blocking
  // acquire keeps of its wait on that session between calls (a LISTEN, the
  // wake-up lock, its place among the waiters), made by the dialect's wait
  // plan on its first wait. Empty for every other client.
  std::shared_ptr<Waiter> session_waiter;

  // lease_wakeup_channel(name), or empty: no wake-up channel. Derived, not
  // kept: a held lease should cost rows, not kilobytes.
  std::string channel() const { return wakes ? lease_wakeup_channel(name) : std::string(); }
};

// What a handle answers of its row (Lock's observers: owns, fence, owner,
// hold_count, remaining, last_loss), written once for every kind: `read`
// runs under the row's state mutex. In a forked child it throws (the row is
// the parent's).
template <class Read>
auto observe(const ClientCore& core, const ClientLease& lease, Read read);

// A handle's row as the client keeps it, from the handle's (validated)
// options: the trust window's safety margin and the renew period derived,
// a fair waiter's place_ttl, on_lost. `renew`: the client renews it while held.
std::shared_ptr<ClientLease> make_client_lease(RowKind kind, std::string name, const LeaseOptions& options,
                                               bool renew);

using AcquireDone = std::function<void(bool acquired, std::exception_ptr error)>;

// A completion callback and the future it completes (with the result, or
// the error): how acquire_async(wait) -> future and a blocking acquire that
// rides the asynchronous path get their answer.
inline std::pair<AcquireDone, std::future<bool>> completion_future() {
  auto p = std::make_shared<std::promise<bool>>();
  auto f = p->get_future();
  return {[p](bool ok, std::exception_ptr e) {
            if (e) p->set_exception(e);
            else p->set_value(ok);
          },
          std::move(f)};
}

// A URI whose every connection is its own database (SQLite in memory): a
// lock client cannot serve it.
bool private_to_connection(const std::string& uri);

class ClientCore;

// One name of a lock set (include/sqlguard/lock_set.h): its row as the
// client sees it and, for a holding (a semaphore's permits), how the set's
// transaction takes it and how its handle records the grant; a lease needs
// neither (the lease's own acquire statements and ClientCore::took).
struct SetPart {
  std::shared_ptr<ClientLease> lease;
  std::function<SyncGrant(Connection& conn, const std::string& owner)> take;
  std::function<void(ClientCore& core, const SyncGrant& g, const std::string& owner,
                     std::chrono::steady_clock::time_point sent)>
      took;
  // A holding's release when the set's wait was cancelled after its attempt
  // took it (a lease's: ClientCore's own quiet release).
  std::function<void(ClientCore& core)> release;
};

// Bounded barging (LeaseOptions::barging_limit, fairness.cpp): what one
// waiting acquire of a default lease keeps of the lease's next turn.
struct NextTurn {
  std::string owner;  // the wait's token for the turn (turn_owner); each attempt takes with its own token
  std::chrono::steady_clock::time_point began = std::chrono::steady_clock::now();
  std::int64_t since = -1;  // the database clock when the wait began (-1: not asked yet)
  bool asked = false;       // it asked: given back when the wait ends unacquired
  bool past_limit = false;  // it has waited barging_limit: it looks for the turn
  bool mine = false;        // the turn was its own when it last looked
  // The last attempt's read (LeaseRequest::next_seen: lease_precheck, or
  // PostgreSQL's lease_acquire) saw the turn held by another wait: the next
  // release is not for this one.
  bool other_turn = false;
  int unchecked = 0;        // busy attempts since it last looked, while it was its own
  // The holder's fence when it last looked, and how many looks in a row found
  // the same one: past the limit it looks every backoff_initial while the
  // lease changes hands (a hot lock), less often the longer one holder keeps
  // it (doubling up to backoff_max: a waiter of a long hold does not poll).
  std::int64_t seen_fence = -1;
  int same_holder = 0;
};

// A fair lease granted by a release to the queue place it named (its
// wake-up says so; lease_release_fair): the lease's fence, expiry on the
// database clock and ttl as the release wrote them. fence 0: none.
struct FairGrant {
  std::int64_t fence = 0;
  std::int64_t expire_at = 0;
  std::int64_t ttl_ms = 0;
};

// One pending asynchronous acquire.
struct ClientWait {
  std::shared_ptr<ClientLease> lease;
  std::chrono::steady_clock::time_point deadline;
  AcquireDone done;
  std::optional<Error> outage;  // the last attempt found the database unreachable (or no connection was free)
  bool cancelled = false;       // while its attempt runs
  // An attempt of this wait found the lease taken: its next attempts wait for
  // a work connection no longer than its deadline (the first one waits up to
  // borrow_timeout, as every call: a wait that ends false has tried once).
  bool tried = false;
  // A fair lease's queue place (kind kPlace, key = ticket), renewed while it
  // waits; left when the wait ends. Guarded by ClientCore::wait_mu_ (the
  // attempt replaces it when it finds it lapsed).
  std::shared_ptr<ClientLease> place;
  // A semaphore's or read-write lease's wait (sync_handle.cpp): its attempt
  // (true: acquired) and the release of what an attempt took after the wait
  // was cancelled. Empty for a lease.
  std::function<bool(ClientCore&, Connection&, std::chrono::milliseconds* holder_remaining, ClientWait*)> attempt;
  std::function<void(ClientCore&)> release;
  bool not_turn = false;  // a fair waiter's last attempt found others ahead (not an idle wake-up)
  // A fair lease's wait woken by a release (or a leaving place) that named its
  // place (ticket and owner token) as the queue's next (FairPolicy::names_head):
  // the ticket named, -1 none. Its next attempt goes straight to the take,
  // without reading the queue first, if its place is still that one and live.
  // Guarded by ClientCore::wait_mu_; the attempt clears it.
  std::int64_t named_ticket = -1;
  // What the release that named it granted it in its own commit (PostgreSQL:
  // the payload's '|fence|expire_at|ttl_ms'; fence 0: nothing granted, the
  // attempt takes). Guarded as named_ticket; the attempt clears it.
  FairGrant grant;
  // A fair waiter's last count of live places ahead of its own (-1: not yet),
  // since when, and the fastest turn of the queue it saw (0: none yet).
  // Guarded by ClientCore::wait_mu_ (see FairPolicy::far_in_line, client/fairness.h).
  std::int64_t ahead = -1;
  std::chrono::steady_clock::time_point ahead_since{};
  std::chrono::microseconds fastest_turn{0};
  bool several = false;  // several may hold at once: after a grant the next head tries at once
  // A default lease's wait: its next turn (bounded barging); unset for other
  // waits. Used by the waiter thread only.
  std::optional<NextTurn> turn;
  // A lock set's wait: the lease name its last attempt found busy ("" none),
  // on whose channel the listener listens for it (channel listeners:
  // PostgreSQL, SQLite); its release wakes the wait. Called by the listener
  // under wait_mu_; set before the wait is queued.
  std::function<std::string()> wake_name;
};

// Runs a wait's completion callback; what it throws is logged, not passed on.
void call_done(ClientWait& w, bool acquired, std::exception_ptr error) noexcept;

// The place a fair lease was acquired from, for its release: forgotten
// (take) or kept for a release that may fail and be called again (peek).
inline HeldPlace take_held_place(ClientLease& l) {
  std::lock_guard<std::mutex> lk(l.state->mu);
  return std::exchange(l.held_place, HeldPlace{});
}
inline HeldPlace peek_held_place(ClientLease& l) {
  std::lock_guard<std::mutex> lk(l.state->mu);
  return l.held_place;
}

// The waiter queue a lease handle's waits go to.
inline const std::string& queue_key(const ClientLease& l) { return l.queue_key.empty() ? l.name : l.queue_key; }

// The waiters of one name, in arrival order; only the head tries.
struct NameQueue {
  std::string channel;
  std::deque<std::shared_ptr<ClientWait>> waits;
  std::chrono::steady_clock::time_point since{};     // the head's turn began (listener priority)
  std::chrono::steady_clock::time_point next_try{};  // the head's next attempt
  std::chrono::milliseconds backoff{0};
  std::chrono::milliseconds holder_remaining{0};
  bool woken = false;    // a release (local or by the listener): try at once
  int idle_wakes = 0;    // wake-ups in a row that found the lease held
  bool busy = false;     // the head's attempt is running
  // The head's last attempt could not be made (unreachable, no connection,
  // new leases refused): until its next try the listener does not block on
  // the name (a free wake-up lock would wake it at once, again and again).
  std::chrono::steady_clock::time_point outage_until{};
};

class ClientCore : public std::enable_shared_from_this<ClientCore> {
 public:
  ClientCore(std::string uri, LockClientOptions options);
  ~ClientCore();
  void open();  // the renewal connection and one work connection
  // A client over a connection the caller owns and uses from its own thread
  // (LeaseLock(Connection&, ...)): its one work connection is `conn`, which
  // it never closes; a blocking acquire waits on the caller's thread, on
  // that session, as the dialect's wait plan says (`wait_cap`: no single
  // wait statement blocks longer); there is no waiter thread
  // (acquire_async: kNotSupported). Leases are renewed only when `renewal`
  // is set: the renewer then runs on a connection from it, opened when the
  // first renewed lease is acquired.
  static std::shared_ptr<ClientCore> over(Connection& conn, ConnectionFactory renewal,
                                          std::optional<std::chrono::milliseconds> wait_cap);
  bool borrows() const noexcept { return borrowed_ != nullptr; }

  // Every entry point: throws in a forked child.
  void check_process() const;
  bool same_process() const noexcept;
  const std::string& description() const noexcept { return description_; }
  const LockClientOptions& options() const noexcept { return options_; }
  LockClientStats stats() const;

  // ---- work connections -----------------------------------------------------
  class Borrowed {
   public:
    Borrowed(ClientCore* core, int slot) : core_(core), slot_(slot) {}
    Borrowed(Borrowed&& o) noexcept : core_(o.core_), slot_(o.slot_) { o.core_ = nullptr; }
    Borrowed& operator=(Borrowed&&) = delete;
    ~Borrowed();
    Connection& operator*() const;
    Connection* operator->() const { return &**this; }
    int slot() const noexcept { return slot_; }
    void discard() noexcept;  // close the session (its state is unknown)
   private:
    ClientCore* core_;
    int slot_;
  };
  // A work connection within options.borrow_timeout (kResourceExhausted
  // otherwise); `slot` >= 0: that one. Connects a slot that has none.
  Borrowed borrow(int slot = -1);
  // borrow(), or nothing when `until` comes first (before borrow_timeout).
  std::optional<Borrowed> borrow_until(std::chrono::steady_clock::time_point until, int slot = -1);
  // The work connection one call of `lease`'s handle uses: any, or
  // (`pinned`) the one that acquired it where the dialect's release must run
  // on that session.
  Borrowed borrow_for(const ClientLease& lease, bool pinned);
  const WaitPlan& wait_plan() const noexcept { return *wait_plan_; }

  // ---- leases (the rest of a client handle's calls run in LeaseLock on a
  // borrowed work connection) ------------------------------------------------
  bool try_acquire(const std::shared_ptr<ClientLease>& lease);
  bool acquire(const std::shared_ptr<ClientLease>& lease, std::chrono::milliseconds wait);
  void acquire_async(const std::shared_ptr<ClientLease>& lease, std::chrono::milliseconds wait, AcquireDone done);
  // A semaphore's or read-write lease's asynchronous acquire: `w` carries
  // its attempt and release (its lease, deadline and done are set here).
  void acquire_async(std::shared_ptr<ClientWait> w, std::chrono::milliseconds wait, AcquireDone done);
  // Cancels the lease's pending asynchronous acquire (its callback gets
  // false); false when none was pending.
  bool cancel_acquire(const std::shared_ptr<ClientLease>& lease);
  // Lock::run_guarded for any handle's row (guarded.cpp).
  bool run_guarded(const std::shared_ptr<ClientLease>& lease, const std::function<void(Transaction&)>& work);
  // ---- lock sets (set_attempt.cpp; include/sqlguard/lock_set.h) -------------
  // What stood in the way of a set's attempt: the first busy name (empty: a
  // conflict with another writer, e.g. a Galera certification failure) and
  // what its holder has left before this process may take it over.
  struct SetRefusal {
    std::string name;
    std::int64_t holder_remaining_ms = 0;
  };
  // One all-or-none attempt on `conn`, the work connection of `slot`
  // (borrowed by the caller: the set's, or the waiter thread's for an
  // asynchronous acquire): every part (distinct names, in the order given)
  // taken in one READ COMMITTED transaction, or none; on success each part's
  // state is set and its renewal registered as a single handle's.
  // `first`: the lease the last attempt found busy ("" none); where the
  // dialect's acquire never waits on an existing row
  // (AcquirePlan::never_waits_on_an_existing_row) it is tried first, so an
  // attempt it still stands in the way of takes nothing before it (no row a
  // concurrent attempt would find locked and skip as busy); the rest go in
  // the order given.
  bool try_acquire_set_on(Connection& conn, int slot, std::span<const SetPart> parts, SetRefusal* refused,
                          const std::string& first = {});
  // What an attempt took for a wait that was cancelled meanwhile, released
  // (errors go to the log hook; a name not released runs out by itself).
  void release_set_quietly(std::span<const SetPart> parts) noexcept;
  // The work slot whose connection `conn` is (-1: none of this client's).
  int slot_of(const Connection& conn) const;
  // Lock::run_guarded over several held rows (leases, holdings): every row
  // re-checked and locked in one transaction; false when any is no longer
  // held (marked lost).
  bool run_guarded_set(std::span<const SetPart> parts, const std::function<void(Transaction&)>& work);
  // Whether the lease's handle has an asynchronous acquire pending.
  bool waiting(const ClientLease& lease) const;
  // Whether the caller runs on this client's waiter thread (a blocking
  // acquire there would wait for itself).
  bool on_waiter_thread() const noexcept { return std::this_thread::get_id() == waiter_thread_id_.load(); }
  // A fair waiter's turn (fair leases and semaphores; `lease.options.fair`):
  // one read of its queue place (fair_gate). False when it is not its turn
  // (`holder_remaining` set; a lapsed place was replaced at the tail). `w`
  // null: a try without a place, which may go only when nobody waits.
  // `lease_left_ms` (may be null): how long the lease of the name is still
  // held, as the same read saw it. `grant` (may be null): a lease a release
  // granted to the wait's place, as the same read saw it (fence 0: none);
  // `wake_lock`: whether that read also took the wake-up lock for it (MariaDB).
  bool fair_turn_on(Connection& conn, const ClientLease& lease, ClientWait* w, std::chrono::milliseconds budget,
                    std::chrono::milliseconds* holder_remaining, std::int64_t* lease_left_ms,
                    FairGrant* grant = nullptr, std::optional<std::int64_t>* wake_lock = nullptr);
  // A fair semaphore's waiter acquired: it leaves its place (on `conn`).
  void fair_acquired(Connection& conn, ClientWait* w) noexcept;
  // ---- coalescing (coalesce.cpp; LockClientOptions::batch_max) --------------
  // Whether this client may send `lease`'s try-acquires (release: and that
  // release, with `commit`) in batches: a lease (not fair) of a client that
  // owns its connections, on a dialect with a batch plan.
  bool coalesces(const ClientLease& lease) const noexcept;
  bool coalesces_release(const ClientLease& lease, ReleaseCommit commit) const noexcept;
  // A release of `lease` (owner, fence) sent with others while every work
  // connection is busy: true when a batch released it. False: release it
  // alone, on `alone` when set (the connection this call got: the client
  // was idle, or the batch could not release it).
  bool coalesced_release(const ClientLease& lease, const std::string& owner, std::int64_t fence,
                         std::optional<Borrowed>& alone);
  // Asynchronous calls (no caller thread waits): queued as coalesced calls
  // are, and sent by the client's sender threads (one per work connection,
  // started with the first such call). `finish` runs once on a sender
  // thread, with no connection held: batched = whether a batch answered the
  // call (`released` for a release; for a try-acquire, `won` / `busy` with
  // the holder's remaining ms); false: the batch could not decide or send it
  // (or the client is stopping: `stopping`), the call is for `finish` to
  // make alone. `batchable` false: never batched (finish(false) at once on a
  // sender thread; any handle's release_async).
  struct AsyncAnswer {
    bool batched = false, stopping = false;
    bool won = false, busy = false, released = false;
    std::int64_t holder_remaining_ms = 0;
    // Never sent: no work connection came free for borrow_timeout
    // (kResourceExhausted).
    std::optional<Error> error;
  };
  using AsyncFinish = std::function<void(const AsyncAnswer&)>;
  void release_async(const ClientLease& lease, const std::string& owner, std::int64_t fence, bool batchable,
                     AsyncFinish finish);
  // Whether the handle of `lease` has an asynchronous release pending, and
  // waiting until it has none (a handle's destructor).
  void async_release_begin(const ClientLease& lease);
  void async_release_end(const ClientLease& lease) noexcept;
  void wait_async_releases(const ClientLease& lease) noexcept;
  // A fair lease a release granted to the wait's place (attempt.cpp): held
  // as the release wrote it, or false (the attempt then takes it). `named`:
  // the wake-up carried the grant (else the attempt's queue read saw it).
  bool take_up_grant(Borrowed& conn, const std::shared_ptr<ClientLease>& lease, ClientWait* w, const ClientLease& place,
                     const FairGrant& grant, bool named);
  // A try-acquire taken by a batch: the lease's state set as attempt_on
  // does (`sent`: when the statement that took it was sent).
  void took(const std::shared_ptr<ClientLease>& lease, int slot, const std::string& owner, std::int64_t fence,
            std::int64_t expire_at, std::chrono::steady_clock::time_point sent);
  // A guarded transaction of the lease ended: renew it now if its renewal
  // fell due while the transaction ran (Renewal::deferred); else nothing.
  void renew_soon(const ClientLease* lease);
  // Whether the lease's renewal is due or was deferred (its guarded
  // transaction held the row): a guarded transaction then renews it inside
  // itself, on the row it has locked already (back-to-back guarded
  // transactions would otherwise keep the renewer out until the trust
  // window ends). renewed_in_guard() records that renewal once it commits.
  bool renewal_wanted(const ClientLease* lease) const;
  void renewed_in_guard(const ClientLease* lease);
  // Admission of new holdings: held work comes before new work. While the
  // renewer is behind (an answered renewal came back with less than half of
  // a lease's slack left of its trust window; slack = ttl - safety margin -
  // renew period, the time a renewal has from when it falls due), a new
  // acquisition or queue place that the renewer would renew too is refused
  // with kResourceExhausted before anything is sent: a bulk acquire on a
  // busy server slows down instead of costing leases already held. Cleared
  // by a round, started a renew period after the late answer or later, that
  // renewed every lease within half its slack.
  void admit(const ClientLease& lease) const;
  bool admitted(const ClientLease& lease) const noexcept { return !lease.renew || !renewal_behind_.load(); }
  // The renewer renews the lease while it is held (from now, every period).
  void renew_register(const std::shared_ptr<ClientLease>& lease);
  void renew_unregister(const ClientLease* lease);
  // A handle of this client released `name`: its local waiters try at once.
  void local_release(const std::string& name);
  // A lease handle released its lease on `conn`: what its session wait kept
  // is let go, then local_release(name).
  void released(const ClientLease& lease, Connection& conn);
  // A lease handle goes away: its session wait stops listening.
  void forget(const ClientLease& lease) noexcept;

  // ---- waits of semaphores and read-write leases (sync_handle.cpp): the
  // caller's thread naps between attempts; a release by a handle of this
  // client wakes the naps of the same key at once.
  std::uint64_t sync_wait_begin(const std::string& key);
  std::uint64_t sync_generation(const std::string& key);  // between begin and end
  // Naps until `until` or a sync_notify(key) after generation `gen`.
  void sync_wait(const std::string& key, std::uint64_t gen, std::chrono::steady_clock::time_point until);
  void sync_wait_end(const std::string& key, const std::string& name);
  void sync_notify(const std::string& key);
  // The nap of the lock set whose nap key is `key` (it starts with
  // kSetNapPrefix) now waits for lease `to` instead of `from` ("": none):
  // while registered, the listener listens on the name's channel (channel
  // listeners: PostgreSQL, SQLite; MariaDB's wake-up locks and a transaction
  // pooler: the naps keep their timers) and its release ends the nap at once.
  void set_nap_name(const std::string& key, const std::string& from, const std::string& to);
  // Ends the naps of every lock set of this client (a set released names).
  void sync_notify_sets();
  static constexpr const char* kSetNapPrefix = "lock-set:";
  // Whether the listener wakes lock-set waits (a channel listener).
  bool set_wakeups() const noexcept;
  // The caller-thread wait of a semaphore, a read-write lease or a lock set:
  // `attempt` until it answers held (> 0) or refused (< 0), or `wait` ends
  // (false; the last outage, if the last attempt met one, is thrown). Busy
  // (0): naps of full jitter from options.backoff_initial doubling to
  // backoff_max, never past what the holder has left (`*holder`, set by a
  // busy attempt that knows it; never less than backoff_initial); a
  // sync_notify(key) ends a nap at once. An outage or a full pool is tried
  // again while the wait lasts; any other error is thrown.
  bool nap_wait(const std::string& key, const std::string& name, std::chrono::milliseconds wait,
                const LeaseOptions& options,
                const std::function<int(std::optional<std::chrono::milliseconds>* holder)>& attempt);

 private:
  // One attempt on `conn` (no re-entrancy check); on success the lease's
  // state is set and its renewal registered. `holder_remaining` out.
  // `session`: the caller's session wait (a client over a borrowed
  // connection), whose queue seat the attempt rides.
  // `turn`: a waiting acquire's next turn (bounded barging), or nullptr.
  bool attempt_on(Borrowed& conn, const std::shared_ptr<ClientLease>& lease, std::chrono::milliseconds budget,
                  std::chrono::milliseconds* holder_remaining, ClientWait* wait = nullptr, Waiter* session = nullptr,
                  NextTurn* turn = nullptr);
  // After a busy attempt of a waiting acquire (fairness.cpp): past the
  // lease's barging_limit, where it stands for the next turn, asking for it
  // when open. True: a release already handed the lease to it, or it is
  // free now (try again at once).
  // `seen`: the turn and holder as the attempt's own read saw them
  // (LeaseRequest::next_seen; nullptr: it did not read the row): decided
  // from it, with no read of its own (lease_next_read).
  bool ask_next_turn(Connection& conn, const ClientLease& lease, NextTurn& turn, const NextTurnSeen* seen = nullptr);
  // A try-acquire sent with others while every work connection is busy;
  // undecided by the batch (or the client idle): attempt_on alone.
  bool try_coalesced(const std::shared_ptr<ClientLease>& lease, std::chrono::milliseconds budget,
                     std::chrono::milliseconds* holder_remaining);
  // Queues `p` until a connection comes free: the caller that gets it sends
  // the batch (its own call and up to batch_max - 1 queued ones of the same
  // kind); the others get their answer. The connection the caller holds
  // afterwards (its call is to be sent alone on it), if any.
  std::optional<Borrowed> join(Pending& p);
  void send_batch(Borrowed& conn, std::vector<Pending*>& batch);
  // Up to batch_max calls led by `lead`: queued calls of its kind, distinct
  // names, pinned to `slot` or none (taken out of pending_; slot_mu_ held).
  // `with_async`: asynchronous ones too (a sender thread's batch).
  std::vector<Pending*> gather_locked(Pending& lead, int slot, bool with_async);
  // Sends a gathered batch on `conn` and hands every call its answer (a
  // failed batch: every call is made alone); the asynchronous ones are
  // returned, for their finish once `conn` is given back.
  std::vector<Pending*> send_gathered(Borrowed& conn, std::vector<Pending*>& batch) noexcept;
  std::vector<Pending*> send_failed(std::vector<Pending*>& batch) noexcept;
  void submit_async(std::unique_ptr<Pending> p);
  void sender_loop();
  Pending* next_async_locked(int& got, std::chrono::steady_clock::time_point& next);
  void finish_async(Pending* p, bool stopping) noexcept;
  // The first asynchronous try of a lease's acquire_async: a batch decides
  // it when it can; else (or busy with time left) the wait goes to the
  // waiter thread's queue.
  void acquire_async_batched(std::shared_ptr<ClientWait> w);
  // `first_try`: its batched first try was answered (or given up) after
  // later acquires of the name queued: it goes before them.
  void enqueue_wait_locked(std::shared_ptr<ClientWait> w, std::int64_t busy_for_ms, bool first_try = false);
  // A guarded transaction's check of one row (inside its transaction):
  // still held — a locking read found it (owner, fence, not expired), or
  // (MySQL) the row was written, so that Galera certifies the transaction
  // against a take-over elsewhere.
  bool guard_check(Connection& conn, const ClientLease& lease, const std::string& owner, std::int64_t fence,
                   std::int64_t key);
  // A row guard_check did not find held (its transaction rolled back): why,
  // said as the handle's loss.
  void guard_lost(Connection& conn, ClientLease& lease, const std::string& owner, std::int64_t fence,
                  std::int64_t key, std::int64_t known_expire_at);
  bool guarded_once(Connection& conn, ClientLease& lease, const std::string& owner, std::int64_t fence,
                    std::int64_t key, const std::function<void(Transaction&)>& work);
  // A blocking acquire of a client over a borrowed connection, on the
  // caller's thread (client_session_wait.cpp).
  bool acquire_here(const std::shared_ptr<ClientLease>& lease, std::chrono::milliseconds wait);
  // One re-entrant attempt (try_acquire's, and each of acquire_here's); `session` as above.
  bool try_here(const std::shared_ptr<ClientLease>& lease, std::chrono::milliseconds budget,
                std::chrono::milliseconds* holder_remaining, Waiter* session, NextTurn* turn = nullptr);
  // A fair lease acquired by waiter `w` keeps its queue place until the
  // release (fairness.cpp).
  void keep_place_for_release(Connection& conn, ClientLease& lease, ClientWait* w);
  // A fair lease's waiter takes a place at the tail of the name's queue
  // (registered for renewal); leave_place gives it up (errors: it expires).
  std::shared_ptr<ClientLease> take_place(Connection& conn, const ClientLease& lease);
 public:
  // A wait that ends unacquired gives its turn (or a lease handed to it)
  // back (fairness.cpp); `held`: the caller's connection, else one borrowed.
  void drop_next_turn(Connection* held, const ClientLease& lease, NextTurn& turn) noexcept;
  // `held`: a connection the caller already holds (an attempt's), used
  // instead of borrowing another.
  // `wake`: it gave up or was cancelled (not: it acquired), so the next
  // waiter may be due (fair_leave).
  void leave_place(const std::shared_ptr<ClientLease>& place, Connection* held = nullptr, bool wake = true) noexcept;
 private:
  void release_quietly(const std::shared_ptr<ClientLease>& lease) noexcept;
  std::unique_ptr<Connection> connect(bool renewal) const;
 public:
  // A connection of a client to `uri`: io_timeout = connect.io_timeout, at
  // most 10 s (10 s when unset); the renewal connection's statements are
  // bounded on the server too. The renewer's worker calls it without the
  // client (it may outlive it).
  static std::unique_ptr<Connection> open_connection(const std::string& uri, ConnectOptions connect, bool renewal);
  // The I/O deadline of a renewal connection's statements: io_timeout, at
  // most (and by default) 10 s.
  static std::chrono::milliseconds renewal_io_timeout(const ConnectOptions& connect);
 private:

  // ---- renewer (renewer.cpp) ------------------------------------------------------
  struct Renewal;
  void renewer_loop();
  bool wait_until_due_locked(std::unique_lock<std::mutex>& lk);  // false: stopping
  void take_due_locked(std::vector<RenewItem>& items, std::vector<std::shared_ptr<ClientLease>>& blocked);
  static std::vector<std::size_t> statements_of(std::vector<RenewItem>& items);
  bool renew_statement(RenewRound& round, std::vector<RenewItem>& items, std::size_t begin, std::size_t end);
  using LostRows = std::vector<std::pair<std::size_t, std::pair<LossCause, std::string>>>;
  void answered_locked(RenewRound& round, std::vector<RenewItem>& items, std::size_t begin, std::size_t end,
                       std::chrono::steady_clock::time_point start, ChunkResult& res, LostRows& lost);
  void unanswered_locked(RenewRound& round, std::vector<RenewItem>& items, std::size_t begin, std::size_t end,
                         bool timed_out, ChunkResult& res, LostRows& lost);
  void report_lost(std::vector<RenewItem>& items, LostRows& lost);
  void end_round(RenewRound& round);
  Renewal* registration_locked(const RenewItem& it);
  std::size_t places_registered_locked() const;  // queue places among renewals_ (renew_mu_ held)

  // ---- waiters (waiters.cpp) ------------------------------------------------------
  void start_waiter_threads();
  void waiter_loop();
  void expire_waits_locked(std::vector<Completion>& done);
  std::chrono::steady_clock::time_point due_heads_locked(std::vector<std::string>& woken,
                                                         std::vector<std::string>& timed) const;
  std::vector<std::string> without_poll(std::vector<std::string>& timed);
  void poll_heads(std::vector<std::string>& timed);
  void run_head(const std::string& name, bool was_woken, std::vector<Completion>& done);
  // Erases a name's queue whose last wait ended (and this process's watch of it).
  std::map<std::string, NameQueue>::iterator erase_queue_locked(std::map<std::string, NameQueue>::iterator qi);
  void head_done_locked(std::map<std::string, NameQueue>::iterator qi, bool acquired);
  void head_busy_locked(NameQueue& q, const std::shared_ptr<ClientWait>& w, bool was_woken,
                        std::chrono::milliseconds holder, const std::optional<Error>& outage);
  void listener_loop();
  // The listener's part for lock sets (set_wakeups()): the lease names their
  // naps and asynchronous waits listen on, added to `found` (`set_queues`:
  // name -> the queues of the asynchronous set waits on it); and a woken
  // name's set waits woken (`naps`: the nap keys to notify). True: a set
  // waits on it.
  void add_set_names_locked(std::vector<std::pair<std::chrono::steady_clock::time_point, WaitedName>>& found,
                            std::map<std::string, std::vector<std::string>>& set_queues) const;
  bool wake_sets_locked(const std::string& name, const std::map<std::string, std::vector<std::string>>& set_queues,
                        std::vector<std::string>& naps);
  // What the listener's wait answered, delivered (wait_mu_ held): each woken
  // name's queue head tries at once (and, with `set_queues`, the lock sets
  // waiting on it); a name nobody waits on counts as a stray wake-up.
  void deliver_wakeups_locked(const std::vector<WokenName>& woken,
                              const std::map<std::string, std::vector<std::string>>* set_queues);

  const std::string uri_;
  const LockClientOptions options_;
  // A client over a borrowed connection (over()): that connection and the
  // cap of its wait statements; else null.
  Connection* borrowed_ = nullptr;
  std::optional<std::chrono::milliseconds> wait_cap_;
  // Opens the renewal connection (from the URI; over(): the caller's
  // factory, or none: nothing is renewed). The renewer's worker keeps a copy.
  ConnectionFactory renewal_factory_;
  std::string description_;
  const pid_t pid_;
  const WaitPlan* wait_plan_ = nullptr;
  bool session_bound_release_ = false;

  // Work slots (over(): one, the borrowed connection, never busy: the
  // caller uses it from its own thread, nested calls included).
  struct Slot {
    std::unique_ptr<Connection> conn;
    bool busy = false;
  };
  Connection& slot_connection(int slot) const;
  void start_renewer_locked();  // renew_mu_ held; once
  mutable std::mutex slot_mu_;
  std::condition_variable slot_cv_;
  std::vector<Slot> slots_;
  // Calls waiting to be coalesced (slot_mu_), oldest first; the batch plan
  // (nullptr: none) and what the batches carried.
  std::deque<Pending*> pending_;
  const BatchPlan* batch_plan_ = nullptr;
  bool release_skips_flush_ = false;
  std::uint64_t batches_ = 0, batched_calls_ = 0;
  // Sender threads (asynchronous calls; slot_mu_): started with the first.
  std::vector<std::thread> senders_;
  std::condition_variable sender_cv_;
  std::size_t async_pending_ = 0;  // asynchronous calls in pending_
  std::size_t senders_idle_ = 0;   // sender threads waiting for a call
  // Handles with an asynchronous release pending (their destructor waits).
  std::map<const ClientLease*, int> async_releases_;
  std::condition_variable async_release_cv_;
  // A free work slot for `pinned` (-1: any; an open connection first), or -1 (slot_mu_ held).
  int free_slot_locked(int pinned) const;
  // Marks slot `s` busy and connects it if it has no connection; unlocks `lk`.
  Borrowed claim(std::unique_lock<std::mutex>& lk, int s);
  [[noreturn]] void throw_exhausted_locked(int slot);
  // The error of a call that found no work connection free for
  // borrow_timeout (counted in stats().exhausted).
  Error exhausted_error_locked(int slot);
  // Wakes the oldest call queued for coalescing for which a connection is free (slot_mu_ held).
  void wake_pending_locked();  // kResourceExhausted: no slot within borrow_timeout

  // Renewer. A held lease it keeps: the acquisition it was registered for
  // (LeaseState::acquisition, and its fence), this registration's `id` (the
  // lease's next acquisition registers again) and when its next renewal is
  // due. In the map's node: a held lease costs one allocation here.
  struct Renewal {
    std::shared_ptr<ClientLease> lease;
    std::uint64_t acquisition = 0;
    std::int64_t fence = 0;
    std::int64_t key = 0;
    std::chrono::steady_clock::time_point due;
    std::uint64_t id = 0;
    // Its renewal fell due while its own guarded transaction held its row:
    // the end of that transaction renews it (renew_soon), alone with what is
    // due anyway. Only such a lease: a guarded transaction that ends before
    // its lease is due changes nothing (one busy lease must not make every
    // lease of the client due).
    bool deferred = false;
  };
  mutable std::mutex renew_mu_;
  std::condition_variable renew_cv_;
  std::map<const ClientLease*, Renewal> renewals_;
  std::uint64_t renewal_ids_ = 0;
  std::shared_ptr<Connection> renew_conn_;  // reserved; replaced after a connection problem
  std::atomic<bool> renew_conn_open_{false};
  std::thread renewer_;
  bool stop_ = false;
  std::uint64_t renewal_rounds_ = 0, renewal_statements_ = 0, leases_renewed_ = 0, leases_lost_ = 0;
  std::vector<double> lag_ms_;  // ring of the last 4096 renewal lags
  std::size_t lag_next_ = 0;
  bool renewer_worker_ = false;  // the BoundedCaller worker exists
  std::atomic<bool> renewal_behind_{false};  // admit() refuses new holdings
  std::string behind_why_;                   // what the renewer saw (renew_mu_)
  // The database clock against the monotonic one, once per renewal round
  // (core/clock_step.h; renew_mu_).
  std::optional<ClockSample> last_clock_;
  std::uint64_t clock_steps_ = 0;
  std::int64_t last_clock_step_ms_ = 0;
  std::chrono::steady_clock::time_point last_clock_step_at_{};
  void clock_reading_locked(const ClockSample& s);
  // What a loss's cause adds when a step was seen shortly before it.
  std::string clock_note(std::chrono::milliseconds ttl) const;

  // Naps of semaphore / read-write lease waiters, per key: generation, nappers.
  mutable std::mutex sync_mu_;
  std::condition_variable sync_cv_;
  std::map<std::string, std::pair<std::uint64_t, int>> sync_naps_;

  // Waiters.
  mutable std::mutex wait_mu_;
  std::condition_variable wait_cv_;
  std::map<std::string, NameQueue> queues_;
  // Asynchronous acquires whose first try is in a batch (wait_mu_): not in
  // a queue yet; cancel_acquire() marks them cancelled.
  std::map<const ClientLease*, std::shared_ptr<ClientWait>> first_tries_;
  std::map<std::string, int> first_try_names_;  // their queue keys
  void first_try_done_locked(const ClientLease& lease);
  std::thread waiter_, listener_;
  bool waiter_threads_ = false;
  bool listener_open_ = false;
  std::size_t listening_ = 0;  // names the listener covered in its last wait
  // The listener's session while it is open, and the channels of its wait in
  // progress: a queue whose channel is not among them interrupts that wait
  // (Connection::interrupt_wait) so that it listens at once.
  Connection* listener_conn_ = nullptr;
  std::set<std::string> listener_channels_;
  void listen_now_locked(const NameQueue& q);
  // Lease names lock sets nap on (set_nap_name): the naps' keys (counted)
  // and since when the name is waited on.
  struct SetNapName {
    std::map<std::string, int> keys;
    std::chrono::steady_clock::time_point since;
  };
  std::map<std::string, SetNapName> set_nap_names_;
  std::atomic<std::thread::id> waiter_thread_id_{};
  std::uint64_t wakeups_ = 0, stray_wakeups_ = 0, polls_ = 0, attempts_ = 0, turns_asked_ = 0, named_handoffs_ = 0,
                granted_handoffs_ = 0, turn_grants_ = 0;
  mutable std::atomic<std::uint64_t> exhausted_{0};
};

template <class Read>
auto observe(const ClientCore& core, const ClientLease& lease, Read read) {
  core.check_process();
  std::lock_guard<std::mutex> lk(lease.state->mu);
  return read(static_cast<const LeaseState&>(*lease.state));
}

}  // namespace sqlguard::detail
