// sqlguard/semaphore.h — a counting semaphore with leased permits: at most
// `permits` held at any instant, across processes and machines (Redisson's
// RPermitExpirableSemaphore; a per-key cap such as "at most 2 jobs per
// tenant" is a semaphore named after the key: it costs rows, not a table).
//
//   auto client = sqlguard::LockClient::shared("postgresql://...");
//   sqlguard::Semaphore exports(client, "exports:tenant-42", 2);
//   if (exports.acquire(1, std::chrono::seconds(10))) {
//     ... at most 2 of these run at once for tenant 42 ...
//     exports.release();
//   }
//
// Invariants (SQLite, PostgreSQL, MariaDB, Galera, behind PgBouncer):
//  * A holding (acquire(n)) is one leased row in sqlguard_sync_holder: its
//    own owner token (unique per acquisition), fence (strictly increasing
//    per semaphore name, from the lease lock's sequence) and expiry on the
//    DATABASE clock, renewed by the lock client's batched renewal while held.
//    acquire(n) takes n permits atomically or none.
//  * Acquires of one name are decided one at a time (each writes the name's
//    sqlguard_sync row first; on Galera a concurrent acquire on another node
//    fails certification and is retried), counting the live holdings on the
//    database clock: sum of permits held + n <= permits, or not acquired.
//    So at most `permits` are held at any instant by the trust window
//    (owns(): request start + ttl - safety margin, as for LeaseLock).
//  * A dead holder's permits come back when its holding expires (ttl after
//    its last renewal).
//  * The permit count is the name's, stored by its first use: a handle
//    asks with its own count, and one that differs from the stored count is
//    refused at its acquire (kInvalidArgument naming both counts), never
//    silently ignored. The count changes explicitly, for every user of the
//    name: set_permits, resize_semaphore() or `sqlguard lock resize NAME
//    --permits N`. A smaller count lets holders above it keep their permits;
//    nobody new gets one until the permits held fall below it.
//  * A name is one lock (synchronizers.md): a name used as a semaphore is
//    refused as a lease, a fair lease or a read-write lease, and a name used
//    as one of those is refused as a semaphore (kInvalidArgument naming both
//    kinds, at once, held or not), as long as the name's rows exist.
//  * A lost holding (expired, force-deleted, unreachable past its trust
//    window) fires options.on_lost once, on the client's renewal thread.
//
// Waiting: acquire(n, wait) tries, then naps with full-jitter backoff capped
// by the earliest live holding's expiry and options.backoff_max; a release
// by a handle of the same client wakes its waiters at once. The caller's
// thread waits; no connection is held between attempts. acquire_async waits
// without a thread (a callback or a future).
//
// Without options.fair, waiters are served in no particular order, and
// acquire(n) with n > 1 STARVES against askers of fewer permits: each permit
// that frees goes to an acquire(1) before n are free at once (measured: 0.7-5.3
// holdings per process in 20 s for acquire(2) against 88-103 for acquire(1) on
// one name). Mixing counts on one name: use options.fair.
//
// Fair order (options.fair, as LeaseOptions::fair): waiters are served in
// arrival order, by a ticket the database assigns from the semaphore's row;
// only the first live waiter may take permits, so a waiter asking for many is
// not overtaken by later ones asking for few, and try_acquire() succeeds only
// when nobody waits. A waiter's queue place expires on the database clock
// (place_ttl) unless its client renews it. Waiters of other processes learn
// their turn by reading the queue, paced by how fast it moves (no wake-up).
//
// Thread safety: a handle is used from one thread at a time; owns(),
// fence(), remaining() and last_loss() from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"

namespace sqlguard {
namespace detail {
class SyncHandle;
}

// Where a semaphore or read-write lease stands now.
struct SynchronizerInfo {
  bool exists = false;        // false: no acquire of this name yet
  std::string kind{};         // "semaphore" or "rw"
  std::int64_t permits = 0;   // semaphore: its permit count
  std::int64_t in_use = 0;    // semaphore: permits held by live holdings
  std::int64_t shared = 0;    // read-write lease: live shared holders
  bool exclusive = false;     // read-write lease: a live exclusive holder
  bool writer_waiting = false;  // read-write lease: a waiting writer blocks new shared holders
  std::int64_t fence = 0;     // the last fence granted (read-write lease: of the last exclusive hold)
};
SynchronizerInfo synchronizer_info(Connection& conn, const std::string& name);

// Changes the permit count of semaphore `name` (1 .. 1,000,000) for every
// user of the name, creating it with that count when it is new (operators:
// `sqlguard lock resize NAME --permits N`). Returns the count before (0: the
// name was new). Throws kInvalidArgument when the name is a lock of another
// kind (a lease, a fair lease, a read-write lease). Holders above a smaller
// count keep their permits; nobody new gets one until the permits held fall
// below it.
std::int64_t resize_semaphore(Connection& conn, const std::string& name, std::int64_t permits);

// One live holding of a semaphore or read-write lease (operators, `sqlguard
// lock list`).
struct HoldingInfo {
  std::string name{};
  std::string kind{}; // "semaphore" or "rw"
  std::string mode{}; // "permits", "shared" or "exclusive"
  std::int64_t permits = 0;
  std::string owner{};
  std::int64_t fence = 0;
  std::int64_t expire_at_ms = 0;  // DB clock
  std::int64_t db_now_ms = 0;
  std::int64_t remaining_ms() const { return expire_at_ms > db_now_ms ? expire_at_ms - db_now_ms : 0; }
};
// Every live holding, ordered by name.
std::vector<HoldingInfo> list_holdings(Connection& conn);

// A Lock (lock.h) of kind kSemaphore: its Lock face asks for one permit.
class Semaphore final : public Lock {
 public:
  // A handle of `client`: no connection or thread of its own. `permits`
  // (1 .. 1,000,000) is the count when the name is new. options: as for
  // LeaseLock (ttl, renew_period, safety_margin, min_hold, wait, backoff,
  // owner, on_lost, fair, place_ttl); watchdog_connection is refused. Fair
  // and non-fair handles of one name share its permits (never more than the
  // count is held); a non-fair handle is not queued, so it may take permits
  // ahead of fair waiters (as a fair java.util.concurrent lock's tryLock()).
  // Watchdog::kOn: the client renews the holding while it is held; kOff: it
  // runs out ttl after its acquire.
  Semaphore(std::shared_ptr<LockClient> client, std::string name, std::int64_t permits, LeaseOptions options = {},
            Watchdog watchdog = Watchdog::kOn);
  // A handle of LockClient::shared(uri, connect).
  Semaphore(const std::string& uri, std::string name, std::int64_t permits, LeaseOptions options = {},
            Watchdog watchdog = Watchdog::kOn, const ConnectOptions& connect = {});
  // Releases a held holding (errors go to the log hook).
  ~Semaphore();
  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;

  // One attempt for n permits (1 .. permits). An n above the permit count
  // (this handle's, or the count stored for the name now: set_permits) could
  // never be granted: try_acquire, acquire and acquire_async throw
  // Error(kInvalidArgument) naming n and the count, rather than answer false
  // or wait out the whole wait. A handle holds one holding at
  // a time: asking again while holding the same n is re-entrant (one more
  // hold, nothing sent); another n throws kInvalidArgument.
  bool try_acquire(std::int64_t n);
  bool try_acquire() override { return try_acquire(1); }
  // Tries until acquired or `wait` passes.
  bool acquire(std::int64_t n, std::chrono::milliseconds wait);
  bool acquire(std::chrono::milliseconds wait) override { return acquire(1, wait); }
  bool acquire(std::int64_t n = 1) { return acquire(n, options_wait()); }
  // Waits without a thread (lease_lock.h's acquire_async contract): the
  // lock client's waiter thread tries for this handle, first come first
  // served among the client's waiters of this semaphore, woken by releases
  // of the same client (others are seen at its next try, paced by the
  // earliest holding's expiry and backoff_max). `done` runs once on that
  // thread (it must not block); at once on the caller's thread when the
  // handle already holds (re-entrant: done(true)) or holds a lost holding
  // (done(false)). One pending acquire per handle; destroying the handle
  // cancels it.
  void acquire_async(std::int64_t n, std::chrono::milliseconds wait, AcquireCallback done);
  std::future<bool> acquire_async(std::int64_t n, std::chrono::milliseconds wait);
  void acquire_async(std::chrono::milliseconds wait, AcquireCallback done) override {
    acquire_async(1, wait, std::move(done));
  }
  using Lock::acquire_async;  // acquire_async(wait): a future, one permit
  // Cancels a pending asynchronous acquire (its callback gets false); false
  // when none was pending.
  bool cancel_acquire() override;
  // Drops one hold; the last gives the permits back (not before the minimum
  // hold ends). False if the holding was no longer held.
  bool release() override;

  bool owns() const override;         // held and inside the trust window
  std::int64_t held_permits() const;  // of the current holding; 0 when none
  std::int64_t fence() const override;
  std::string owner() const override;
  int hold_count() const override;
  std::chrono::milliseconds remaining() const override;
  std::optional<LeaseLoss> last_loss() const override;
  std::optional<std::chrono::milliseconds> takeover_in() const override;
  const std::string& name() const noexcept override;
  LockKind kind() const noexcept override { return LockKind::kSemaphore; }
  // A transaction that first re-checks this handle's holding and locks its
  // row until commit (Lock::run_guarded): an acquire that would count the
  // holding expired waits for it, so its permits are never taken while the
  // work commits. False, committing nothing, when the holding is not held.
  bool run_guarded(const std::function<void(Transaction&)>& work) override;

  // The permit count and how many are held now (one round trip).
  SynchronizerInfo info();
  // Changes the permit count (1 .. 1,000,000) at runtime, for every handle of
  // the name (resize_semaphore); this handle asks with the new count from now
  // on, other handles that still ask with the old one are refused.
  void set_permits(std::int64_t permits);

 protected:
  std::chrono::milliseconds lock_wait() const override { return options_wait(); }

 private:
  friend class LockSet;  // takes a permit of it with other names (lock_set.h)
  std::chrono::milliseconds options_wait() const;
  std::unique_ptr<detail::SyncHandle> h_;
  std::int64_t permits_;
};

// RAII for n permits: acquires them in the constructor (waiting up to
// `wait`), releases in the destructor. Throws Error(kLockBusy) when not
// acquired. For one permit, LockGuard (lock.h) does the same.
class SemaphoreGuard {
 public:
  explicit SemaphoreGuard(Semaphore& sem, std::int64_t n = 1,
                          std::chrono::milliseconds wait = std::chrono::milliseconds(0));
  ~SemaphoreGuard();
  SemaphoreGuard(const SemaphoreGuard&) = delete;
  SemaphoreGuard& operator=(const SemaphoreGuard&) = delete;
  std::int64_t fence() const { return sem_.fence(); }
  bool owns() const { return sem_.owns(); }

 private:
  Semaphore& sem_;
};

}  // namespace sqlguard
