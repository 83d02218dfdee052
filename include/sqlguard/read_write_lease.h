// sqlguard/read_write_lease.h — a shared/exclusive lease: many shared holders
// or one exclusive holder (flock -s / -x for a cluster; Redisson's
// RReadWriteLock), with writer preference.
//
//   auto client = sqlguard::LockClient::shared("mysql://...");
//   sqlguard::ReadWriteLease catalog(client, "catalog");
//   { sqlguard::ReadWriteGuard read(catalog, sqlguard::LeaseMode::kShared, 5s);   ... read ... }
//   { sqlguard::ReadWriteGuard write(catalog, sqlguard::LeaseMode::kExclusive, 5s); ... write, fenced by write.fence() ... }
//
// Invariants (SQLite, PostgreSQL, MariaDB, Galera, behind PgBouncer):
//  * Never an exclusive holder together with shared holders or another
//    exclusive holder, by the trust window: acquires of one name are decided
//    one at a time (each writes the name's sqlguard_sync row first) against
//    the live holdings on the database clock.
//  * Each holder is one leased row (owner token, expiry on the database
//    clock), renewed by the lock client and lost independently (on_lost).
//  * Writer preference: a writer that finds the lease busy publishes its
//    intent (sqlguard_sync.writer_until, on the database clock, refreshed at
//    each of its attempts); new shared holders wait while it is live, so a
//    stream of readers cannot starve writers. An exclusive acquisition
//    withdraws it (another writer still waiting publishes again). A writer
//    that gives up or dies stops refreshing it: it lapses after
//    intent = max(1 s, 4 x backoff_max).
//  * Fencing: each exclusive acquisition draws a new fence (strictly
//    increasing per name); a shared holder's fence() is the fence of the
//    last exclusive acquisition before it (what its reads saw).
//  * Re-entrant per handle in the same mode; a handle never changes mode
//    while holding (no upgrade: release, then acquire the other mode).
//  * Writer preference has one trap: a thread that holds a name shared and
//    asks for it shared again through a SECOND handle while a writer waits
//    waits behind that writer, and the writer waits for the first holding:
//    the second acquire gets nothing until the writer gives up (its wait,
//    or its intent's lapse), and the writer gets nothing at all. Not
//    detected (another thread's holding is a legitimate wait); the way out
//    is to re-enter through the same handle (one more hold, nothing sent)
//    or to release the first holding before asking again.
//
// Waiting: as Semaphore (semaphore.h): acquire() naps on the caller's thread
// between attempts; acquire_async waits without a thread; a release by a
// handle of the same client wakes its waiters.
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

#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"
#include "sqlguard/semaphore.h"

namespace sqlguard {

enum class LeaseMode { kShared, kExclusive };
std::string_view to_string(LeaseMode mode) noexcept;

class ReadWriteLease {
 public:
  // One side of the lease as a Lock (lock.h) of kind kReadWrite: its
  // acquires ask for that mode. Both sides share the handle's one holding:
  // a side owns() it (and answers hold_count(), remaining(), run_guarded())
  // only while the handle holds it in the side's mode.
  class Side final : public Lock {
   public:
    Side(ReadWriteLease& rw, LeaseMode mode) : rw_(rw), mode_(mode) {}
    LockKind kind() const noexcept override { return LockKind::kReadWrite; }
    const std::string& name() const noexcept override { return rw_.name(); }
    LeaseMode mode() const noexcept { return mode_; }
    bool try_acquire() override { return rw_.try_acquire(mode_); }
    bool acquire(std::chrono::milliseconds wait) override { return rw_.acquire(mode_, wait); }
    void acquire_async(std::chrono::milliseconds wait, AcquireCallback done) override {
      rw_.acquire_async(mode_, wait, std::move(done));
    }
    using Lock::acquire_async;
    bool cancel_acquire() override { return rw_.cancel_acquire(); }
    // False, sending nothing, while the handle holds the other mode.
    bool release() override;
    bool owns() const override;
    std::int64_t fence() const override { return rw_.fence(); }
    std::string owner() const override { return rw_.owner(); }
    int hold_count() const override;
    std::chrono::milliseconds remaining() const override;
    std::optional<LeaseLoss> last_loss() const override { return rw_.last_loss(); }
    std::optional<std::chrono::milliseconds> takeover_in() const override { return rw_.takeover_in(); }
    bool run_guarded(const std::function<void(Transaction&)>& work) override;

   protected:
    std::chrono::milliseconds lock_wait() const override;

   private:
    ReadWriteLease& rw_;
    LeaseMode mode_;
  };

  // A handle of `client`. options: as for LeaseLock; watchdog_connection,
  // fair and place_ttl are refused.
  ReadWriteLease(std::shared_ptr<LockClient> client, std::string name, LeaseOptions options = {},
                 Watchdog watchdog = Watchdog::kOn);
  // A handle of LockClient::shared(uri, connect).
  ReadWriteLease(const std::string& uri, std::string name, LeaseOptions options = {},
                 Watchdog watchdog = Watchdog::kOn, const ConnectOptions& connect = {});
  ~ReadWriteLease();
  ReadWriteLease(const ReadWriteLease&) = delete;
  ReadWriteLease& operator=(const ReadWriteLease&) = delete;

  // The sides as Locks: LockGuard(rw.exclusive(), 5s), co_await, `sqlguard run --exclusive`.
  Side& shared() noexcept { return shared_; }
  Side& exclusive() noexcept { return exclusive_; }
  Side& side(LeaseMode mode) noexcept { return mode == LeaseMode::kShared ? shared_ : exclusive_; }

  bool try_acquire(LeaseMode mode);
  bool acquire(LeaseMode mode, std::chrono::milliseconds wait);
  // Waits without a thread, as Semaphore::acquire_async (semaphore.h).
  void acquire_async(LeaseMode mode, std::chrono::milliseconds wait, AcquireCallback done);
  std::future<bool> acquire_async(LeaseMode mode, std::chrono::milliseconds wait);
  bool cancel_acquire();
  bool release();

  bool owns() const;
  std::optional<LeaseMode> mode() const;  // of the current holding
  std::int64_t fence() const;
  std::string owner() const;
  int hold_count() const;
  std::chrono::milliseconds remaining() const;
  std::optional<LeaseLoss> last_loss() const;
  std::optional<std::chrono::milliseconds> takeover_in() const;  // see Lock::takeover_in
  const std::string& name() const noexcept;
  SynchronizerInfo info();
  // Lock::run_guarded for the current holding, whatever its mode.
  bool run_guarded(const std::function<void(Transaction&)>& work);

 private:
  std::unique_ptr<detail::SyncHandle> h_;
  Side shared_{*this, LeaseMode::kShared};
  Side exclusive_{*this, LeaseMode::kExclusive};
};

// RAII for one side: LockGuard(lease.side(mode), wait) (lock.h).
class ReadWriteGuard : public LockGuard {
 public:
  ReadWriteGuard(ReadWriteLease& lease, LeaseMode mode, std::chrono::milliseconds wait = std::chrono::milliseconds(0))
      : LockGuard(lease.side(mode), wait) {}
};

}  // namespace sqlguard
