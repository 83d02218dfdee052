// sqlguard/lease_lock.h — the lease lock: a named mutual-exclusion lease in
// the sqlguard_lock table, valid across processes and machines.
//
// Invariants (all on SQLite, PostgreSQL and MySQL/MariaDB):
//  * Acquire is one compare-and-set: it inserts the row, takes a released
//    row, or takes over an unreleased one only after this process watched it
//    unchanged for its holder's ttl on its own monotonic clock (TakeOver);
//    it returns a new fencing token. No client timestamps are ever written;
//    expiries are on the database clock and only say what `lock list` shows
//    (and, with TakeOver::kDatabaseClock, when a take-over may happen). (The statements are lease_acquire,
//    lease_insert and lease_read_mine in sql/<dialect>/lease.sql.)
//  * Owner token: unique per acquisition (128 random bits + host + pid).
//  * Fencing token: strictly increasing per lock name across release,
//    expiry, take-over, cleanup deletes and server restarts (it comes from a
//    database-wide sequence, not from the row). 64-bit.
//  * Release and renew are single statements checked against the owner AND
//    the fence of the caller's acquisition; their result says whether the
//    caller still held that lease. A stale holder that reuses an owner
//    string (a host name, a CLI --owner) cannot renew or free a newer lease.
//  * Minimum hold (LeaseOptions::min_hold) is kept by every path: a release
//    or a renew with a short ttl never ends the lease before acquired_at +
//    min_hold. Only force_release() overrides it.
//  * One sequence value per acquisition; the sequence never wraps: when it
//    is exhausted, acquiring throws Error(kResourceExhausted).
//  * Local trust window: valid_until = start of the acquire/renew request
//    (steady_clock) + ttl - safety_margin. owns() is false past it, even if
//    no renewal answered.
//
// One engine: every LeaseLock is a handle of a lock client (lock_client.h).
// A handle made from a client or a URI borrows the client's connections
// call by call and is renewed by the client's one renewal thread. A handle
// on a borrowed Connection is the one handle of a client of its own over
// that connection: its calls, a blocking acquire's waits included, run on
// it from the caller's thread, and its renewals (options.watchdog_connection)
// on the client's renewal thread with a connection from that factory.
//
// Thread safety: a LeaseLock is used from one thread at a time. owns(),
// fence(), remaining() and last_loss() may be called from any thread.
//
// Related headers: fenced_write.h (reject writes carrying an old fencing
// token), metrics.h (process-wide lease counters).
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sqlguard/connection.h"
#include "sqlguard/lock.h"

namespace sqlguard {
namespace detail {
struct LeaseState;
class ClientCore;
struct ClientLease;
struct HeldPlace;
}  // namespace detail
class LockClient;  // lock_client.h

using ConnectionFactory = std::function<std::unique_ptr<Connection>()>;

// How a release commits.
//   kCoveredByNextAcquire: where the dialect can (PostgreSQL), a release on
//     its own commits without waiting for its WAL flush: the next take-over's
//     flush (and its wait for a synchronous standby) covers it, and a release
//     lost in a crash is a holder that died (the lease runs to its expiry).
//     One flush per lock cycle. Inside a caller's transaction the release
//     commits with that transaction, flushed like it.
//   kDurable: the release's commit waits for its flush like every other
//     commit of the session (PostgreSQL: two flushes per lock cycle).
// SQLite and MariaDB commit a release like any statement either way.
enum class ReleaseCommit { kCoveredByNextAcquire, kDurable };

// Who may take over a lease its holder has not released (docs/failure-model.md,
// "Clock steps"). A released lease is taken at once under either rule.
enum class TakeOver {
  // The default. An unreleased lease is taken over only after this process
  // has seen its row unchanged (no renewal) for the holder's whole ttl on its
  // own monotonic clock, and then only by a compare-and-set on the row it saw.
  // No wall clock, the database's included, decides: a step of any clock
  // cannot let a taker in early. Assumes only that clock RATES agree within
  // the safety margin (ttl / 10 by default: far above NTP-disciplined drift).
  // Cost: a taker that arrives after the holder died waits one ttl from its
  // first look; a one-shot try starts the watch (kept for this process's
  // later tries) and is refused with the time left.
  kWatched,
  // Takes over once the database clock passes the holder's expiry: sooner
  // for a taker that arrives late, but a forward step of the database
  // server's wall clock lets it in while the holder still trusts its lease
  // (overlap up to the trust window). Every handle of a name should use one
  // rule: mixed, the name gets this one's guarantee.
  kDatabaseClock,
};
const char* to_string(TakeOver rule) noexcept;

struct LeaseOptions {
  // Lease duration on the database clock. Default: 30 s. Range 10 ms .. 7 d.
  std::chrono::milliseconds ttl{std::chrono::seconds(30)};
  // Watchdog renewal period. Default (unset): ttl / 3 (30 s lease, 10 s
  // period, as Redisson). A period above ttl / 2 is refused.
  std::optional<std::chrono::milliseconds> renew_period{};
  // Subtracted from the local trust window to absorb clock-rate drift and
  // scheduling. Default (unset): ttl / 10, at most 2 s. Must be < ttl / 2.
  std::optional<std::chrono::milliseconds> safety_margin{};
  // ShedLock's lockAtLeastFor: a release (or a renew with a shorter ttl)
  // before acquired_at + min_hold keeps the lease until then; only
  // force_release() ends it earlier. Default: 0. Must be <= ttl.
  std::chrono::milliseconds min_hold{0};
  // acquire() without an argument waits this long. Default: 0 (one try).
  std::chrono::milliseconds wait{0};
  // Blocking acquire: exponential backoff with full jitter between
  // attempts, from backoff_initial doubling up to backoff_max, never past
  // what the holder's lease has left; a release wakes a waiter at once
  // (SQLite, MariaDB: one waiter; PostgreSQL: the head of the waiters, by
  // NOTIFY; the others nap with full jitter sized to the holder's lease, up
  // to backoff_max). Defaults: 5 ms, 500 ms.
  std::chrono::milliseconds backoff_initial{5};
  std::chrono::milliseconds backoff_max{500};
  // Fixed owner token (operators, the CLI). Default: empty = a fresh random
  // token per acquisition. Length 1..255 bytes.
  std::string owner{};
  // A handle on a borrowed Connection: when set, its lock client renews its
  // lease while held, on a connection from this factory (never the borrowed
  // one) and one renewal thread. Refused for a handle of a shared client,
  // which renews on its own reserved connection.
  ConnectionFactory watchdog_connection{};
  // Called once, from the client's renewal thread, when a lease it renews is
  // lost. Must not block for long.
  std::function<void(const LeaseLoss&)> on_lost{};
  // How release() commits (see ReleaseCommit). Default: kCoveredByNextAcquire.
  ReleaseCommit release_commit = ReleaseCommit::kCoveredByNextAcquire;
  // A fair (FIFO) lease: each waiting acquire takes a place in the name's
  // queue (sqlguard_lock_queue) with a ticket the database assigns, one at a
  // time per name in commit order, and the lease goes to the lowest live
  // ticket. A holder that releases cannot take it again while others wait
  // (it queues at the tail); try_acquire() succeeds only when nobody waits.
  // A place expires on the database clock (place_ttl) unless the client
  // renews it, so a waiter that gives up, is cancelled or dies leaves the
  // queue. Every handle of the name must be fair (a non-fair handle does not
  // look at the queue). Needs a lock-client handle (LeaseLock(client, ...) or
  // from a URI); on a borrowed Connection it throws kNotSupported.
  // Default: false.
  bool fair = false;
  // A fair waiter's queue place lasts this long past its last renewal (the
  // client renews it every place_ttl / 3 while the waiter waits). Default
  // (unset): ttl, within 300 ms .. 10 s. Range 300 ms .. 1 h.
  std::optional<std::chrono::milliseconds> place_ttl{};
  // Who may take over an unreleased lease (see TakeOver). Default: kWatched.
  TakeOver take_over = TakeOver::kWatched;
  // Bounded barging (the default, non-fair lease). A waiting acquire first
  // competes with every other contender (barging: a holder that releases and
  // acquires again at once usually wins, which keeps a hot lock fast); once
  // it has waited barging_limit it asks for the lease's NEXT TURN, a mark on
  // the lease's row (next_owner) that the earliest waiter holds: the
  // waiter that began to wait first on the database clock takes the turn from
  // a later one. The holder's release then hands the lease to that waiter in
  // its own commit (a new fence and expiry) instead of freeing it for
  // whoever comes first, and wakes it. Where the acquire reads first
  // (MariaDB, Galera, SQLite) the waiter holds it as handed, with the turn's
  // token, when its wait began less than half a ttl ago; on PostgreSQL (one
  // statement acquires; its releases are not flushed) its next attempt
  // confirms it with a take of its own.
  // So no waiter starves behind bargers: after barging_limit, each release
  // serves the earliest waiter that asked. Like Go's sync.Mutex starvation
  // mode, and unlike a FIFO lease (`fair`), it costs nothing while waits are
  // short. A waiter that gives up (or is cancelled) gives the turn back, and
  // a lease already handed to it is released. A waiter that dies holding the
  // turn costs the lock one ttl (the lease handed to it runs out and is taken
  // over like any dead holder's). Not for a fair lease (it has its queue); a
  // release of a lease taken with a minimum hold (min_hold) hands nothing
  // over (the turn waits for a later release). Before the limit a waiter
  // never pauses beyond it; past it, it looks again every backoff_initial
  // while the lease changes hands, less and less often (up to backoff_max)
  // while one holder keeps it. Default: 200 ms: on a hot lock of 16 clients the
  // longest wait falls from the 2 s timeout to a few hundred ms, and the
  // lock keeps most of its cycles/s; a shorter limit serves more waits by
  // hand-over, each slower than a barge (measured: docs/lease-lock.md,
  // "Bounded barging"). 0: ask from the first busy attempt; at most 1 h (a
  // limit above the wait never asks).
  std::chrono::milliseconds barging_limit{200};
};

// Validates options; throws Error(kInvalidArgument) naming the field.
void validate(const LeaseOptions& options);

// Whether a LeaseLock that opens its own connection also renews in the
// background (on a second connection to the same URI).
enum class Watchdog { kOff, kOn };

// A Lock (lock.h) of kind kLease, or kFairLease with options.fair.
class LeaseLock final : public Lock {
 public:
  // A handle of `client` (lock_client.h): no connection or thread of its own
  // and no round trip to create. The client renews the lease while it is held
  // (Watchdog::kOn, the default; kOff: only renew() extends it) and reports
  // its loss (options.on_lost, on the client's renewal thread). Every call
  // borrows one of the client's work connections for its duration.
  // options.watchdog_connection is refused (the client renews).
  LeaseLock(std::shared_ptr<LockClient> client, std::string name, LeaseOptions options = {},
            Watchdog watchdog = Watchdog::kOn);
  // Borrows `conn` for calls made from the caller's thread; `conn` must
  // outlive this object. Throws kInvalidArgument for a bad name/options. The
  // handle gets a lock client of its own over `conn` (no connection opened,
  // no thread until a renewed lease is held): with
  // options.watchdog_connection its renewals run on one thread and one
  // connection from that factory; without, only renew() extends the lease.
  // acquire_async() and fair leases need a shared client (kNotSupported
  // here): prefer LeaseLock(client, ...) when a process holds many leases.
  LeaseLock(Connection& conn, std::string name, LeaseOptions options = {});
  // A handle of the process-wide lock client for `uri` (LockClient::shared(uri,
  // connect with io_timeout bounded by ttl/3, at least 1 s)): handles of the
  // same URI and options share its connections and threads. The client renews
  // the lease when `watchdog` is kOn or options.on_lost is set.
  // Exceptions, which open a connection of their own and are a handle of a
  // client over it (as LeaseLock(Connection&, ...); renewed, when asked, on
  // a second connection to the URI): options.watchdog_connection set, or a
  // URI whose every connection is its own database (SQLite in memory).
  LeaseLock(const std::string& uri, std::string name, LeaseOptions options = {}, Watchdog watchdog = Watchdog::kOff,
            const ConnectOptions& connect = {});
  // Releases a held lease (errors go to the log hook); its renewals stop.
  ~LeaseLock();
  LeaseLock(const LeaseLock&) = delete;
  LeaseLock& operator=(const LeaseLock&) = delete;

  // One attempt; never waits for the lock. Re-entrant: when this handle
  // already holds a valid lease, the hold count goes up and no SQL is sent.
  // Returns false when someone else holds it (or this handle's earlier lease
  // was lost: release it first). Contention errors (deadlock victims on
  // MariaDB hot keys, lock wait timeouts) count as "not acquired".
  // Throws ConnectionLost / other errors when the database misbehaves.
  bool try_acquire() override;
  // Retries until acquired or `wait` passes (backoff with full jitter,
  // NOTIFY wake-ups on PostgreSQL). acquire() uses options.wait.
  bool acquire(std::chrono::milliseconds wait) override;
  bool acquire() { return acquire(options_.wait); }
  // Waits without a thread (handles of a LockClient; others throw
  // kNotSupported): the client's waiter thread tries for this handle, first
  // come first served among the client's waiters of the same name, woken by
  // releases; the first try of a lease (not fair) on a dialect with a batch
  // plan is sent by the client's sender thread, batched with other calls
  // (LockClientOptions::batch_max). `done` runs once, on that thread (it must not block; never
  // call a blocking acquire() from it) — except when the handle already
  // holds the lease (re-entrant: one more hold, done(true)) or holds a lost
  // one (done(false)): then at once, on the caller's thread, before
  // acquire_async returns. One pending acquire per handle. Destroying the
  // handle cancels it.
  void acquire_async(std::chrono::milliseconds wait, AcquireCallback done) override;
  using Lock::acquire_async;  // the std::future form
  // Cancels a pending asynchronous acquire: its callback gets (false,
  // nullptr), at once or, while its attempt runs, right after it (a lease
  // that attempt took is released). False when none was pending.
  bool cancel_acquire() override;
  // Extends the lease by ttl from now (DB clock; never before the minimum
  // hold ends), checked against this handle's owner and fence. False if it
  // was lost (the cause is in last_loss()).
  bool renew();
  // Drops one hold; the last one releases the row (owner- and
  // fence-checked; kept until the minimum hold ends). False if the lease was
  // no longer held (reported to the log hook with its cause).
  bool release() override;
  // Lock::release_async: while every work connection is busy, sent in a
  // batch with the client's other releases (a lease, not fair, on a dialect
  // with a batch plan); else alone, by a sender thread.
  void release_async(ReleaseCallback done) override;
  using Lock::release_async;  // the std::future form

  bool owns() const override;                // held and inside the trust window
  std::int64_t fence() const override;       // token of the current/last lease; 0 before any
  std::string owner() const override;        // owner token of the current/last lease
  int hold_count() const override;
  std::chrono::milliseconds remaining() const override;  // of the trust window; 0 when not owned
  std::optional<LeaseLoss> last_loss() const override;
  std::optional<std::chrono::milliseconds> takeover_in() const override;
  std::int64_t expires_at_ms() const;        // DB-clock expiry of the current lease
  const std::string& name() const noexcept override;
  LockKind kind() const noexcept override { return options_.fair ? LockKind::kFairLease : LockKind::kLease; }
  const LeaseOptions& options() const noexcept { return options_; }
  // The lock client this handle belongs to (on a borrowed connection: the
  // client of its own over it), e.g. for its stats().
  const std::shared_ptr<LockClient>& client() const noexcept { return client_; }

  // Runs `work` in ONE database transaction on the borrowed connection that
  // first re-checks the lease (owner, fence, not expired) and write-locks
  // the lock row (FOR UPDATE; SQLite: the database write lock), so nobody can
  // take over until it commits. Returns false, committing nothing, when the
  // lease is no longer held. Exceptions from `work` roll back and propagate,
  // except a lost connection or an I/O deadline before COMMIT (a killed
  // session, a failover): nothing committed, so the transaction runs again
  // on a fresh connection while the trust window lasts — `work` may run more
  // than once and must only touch the database through `tx`. An unknown
  // COMMIT outcome (kCommitInDoubt) is never retried.
  bool run_guarded(const std::function<void(Transaction&)>& work) override;

  // Lockable (Lock::lock/try_lock/unlock): std::unique_lock / std::lock_guard
  // hold the lease; lock() waits up to options.wait, or forever if it is 0.

 protected:
  std::chrono::milliseconds lock_wait() const override { return options_.wait; }

 private:
  friend class LockSet;  // takes its members together (lock_set.h)
  void init_client(bool renew);
  LossCause diagnose(Connection& conn, const std::string& owner, std::int64_t fence, std::string* detail);
  void stop_renewing();
  bool release_on(Connection& conn, const std::string& owner, std::int64_t fence, const detail::HeldPlace& place);
  template <class Read>
  auto observe(Read read) const;  // detail::observe over this handle's lease (lease_lock.cpp)

  std::unique_ptr<Connection> own_conn_;            // a URI handle's own connection (outlives client_)
  std::shared_ptr<LockClient> client_;              // every handle's: a shared one, or one over a borrowed connection
  std::shared_ptr<detail::ClientLease> lease_;      // its lease, as the client sees it
  std::string name_;                                // until init_client() moves it into lease_
  LeaseOptions options_;
  std::shared_ptr<detail::LeaseState> state_;       // shared with the client's renewer
};

// RAII for a lease (lock.h's LockGuard): acquires in the constructor (waiting
// up to `wait`), releases in the destructor; Error(kLockBusy) when not acquired.
using LeaseGuard = LockGuard;

// ---- operator functions (CLI, dashboards) ---------------------------------

struct LeaseInfo {
  std::string name{};
  std::string owner{};
  std::int64_t fence = 0;
  std::int64_t expire_at_ms = 0;
  std::int64_t acquired_at_ms = 0;
  std::int64_t renewed_at_ms = 0;
  std::int64_t db_now_ms = 0;
  bool held() const { return expire_at_ms > db_now_ms; }
  std::int64_t remaining_ms() const { return held() ? expire_at_ms - db_now_ms : 0; }
};

struct AcquireResult {
  bool acquired = false;
  std::int64_t fence = 0;
  std::int64_t expire_at_ms = 0;  // DB clock
  std::string owner{};
  // Not acquired: how long until this process may take the holder's lease
  // over if it is renewed no more (0 when unknown or just taken): under
  // TakeOver::kWatched the rest of this process's watch of it, under
  // kDatabaseClock what its expiry has left on the database clock. Waiters
  // size their backoff by it.
  std::int64_t holder_remaining_ms = 0;
  // Not acquired, TakeOver::kWatched: how long this process has seen the
  // holder's row unchanged, of the watch_ms (the holder's ttl) a take-over
  // needs. Both 0 when the row was not seen (a race, a name just created).
  std::int64_t holder_unchanged_ms = 0;
  std::int64_t watch_ms = 0;
};

// One acquire attempt with an explicit owner (the lease outlives the call).
// Throws Error(kResourceExhausted) when the fencing-token sequence has run
// out (2^63 - 1 tokens; it never wraps).
// An unreleased lease is taken over by `rule` (see TakeOver): the default
// watches it with this process's watch book, which later calls (of any handle
// or client of this process) share.
AcquireResult acquire_lease(Connection& conn, const std::string& name, const std::string& owner,
                            std::chrono::milliseconds ttl, std::chrono::milliseconds min_hold = {},
                            TakeOver rule = TakeOver::kWatched);
// Renew / release of the lease acquired as (`owner`, `fence`) (AcquireResult,
// or `sqlguard lock acquire`'s output). True if exactly that lease was still
// held. Renew sets expire_at = max(db_now + ttl, acquired_at + min_hold);
// release sets it to max(db_now, acquired_at + min_hold). Throws
// kInvalidArgument for a bad name/owner, a fence <= 0 or a ttl outside
// 10 ms .. 7 d.
bool renew_lease(Connection& conn, const std::string& name, const std::string& owner, std::int64_t fence,
                 std::chrono::milliseconds ttl);
bool release_lease(Connection& conn, const std::string& name, const std::string& owner, std::int64_t fence,
                   ReleaseCommit commit = ReleaseCommit::kCoveredByNextAcquire);

// One lease for renew_leases(): the lease acquired as (`owner`, `fence`) and
// the ttl to extend it by.
struct LeaseRenewal {
  std::string name{};
  std::string owner{};
  std::int64_t fence = 0;
  std::chrono::milliseconds ttl{};
};
// The most leases one renewal statement carries.
inline constexpr std::size_t kMaxRenewalBatch = 1000;
// Renews many leases with one statement per kMaxRenewalBatch leases (MariaDB:
// one transaction of two statements), each checked and extended exactly as
// renew_lease() does, on the database clock. Returns, in order, whether each
// lease was still held and is now extended (false: expired, taken over,
// force-released). Validates every entry before sending anything
// (kInvalidArgument naming the entry's index); a name listed twice is
// kInvalidArgument too. An error of the database ends the call: leases of
// earlier batches were renewed, the rest were not.
std::vector<bool> renew_leases(Connection& conn, const std::vector<LeaseRenewal>& leases);

// Owner-only forms, for operators who know the owner but not the fence:
// they act on the lease `owner` holds NOW (its current fence, read first).
// With owner tokens from make_owner_token() (unique per acquisition) that
// is the caller's lease; with a reused owner string it may be a newer
// acquisition by the same string, so prefer the fenced forms.
bool renew_lease(Connection& conn, const std::string& name, const std::string& owner, std::chrono::milliseconds ttl);
bool release_lease(Connection& conn, const std::string& name, const std::string& owner);
// Operator override: ends whoever's lease now. It IGNORES the minimum hold
// (that is what makes it an override) and needs no owner or fence. True if
// a live lease was ended.
bool force_release(Connection& conn, const std::string& name);
// Held leases (or all rows, with include_free), ordered by name.
std::vector<LeaseInfo> list_leases(Connection& conn, bool include_free = false);
std::optional<LeaseInfo> lease_info(Connection& conn, const std::string& name);

// The channel a release of lease `name` wakes waiters on where the dialect
// has LISTEN/NOTIFY (statement lease_notify): "sqlguard_" + the first 24 hex
// digits of SHA-256(name), within PostgreSQL's 63-byte identifier limit.
std::string lease_wakeup_channel(const std::string& name);

// A fresh owner token, unique per call: 32 hex chars of randomness drawn once
// per process + "@host:pid#counter".
std::string make_owner_token();

}  // namespace sqlguard
