// sqlguard/lock.h — the lock family's one interface. A lease (fair or not,
// lease_lock.h), a semaphore's permit (semaphore.h) and either side of a
// read-write lease (read_write_lease.h: shared() / exclusive()) are each a
// Lock: code that takes a Lock& (a guard, a co_await, `sqlguard run`) works
// with every kind alike.
//
//   void charge(sqlguard::Lock& lock) {
//     sqlguard::LockGuard held(lock, std::chrono::seconds(5));  // kLockBusy if not acquired in 5 s
//     lock.run_guarded([&](sqlguard::Transaction& tx) { ... held.fence() ... });
//   }
//
// Every Lock is a handle of a lock client (lock_client.h): the client
// attempts, waits, renews and reports losses for every kind with one engine.
// What a Lock holds is a row with an owner token and a fencing token on the
// database clock; while the client renews it (Watchdog::kOn) it stays held
// until release(), or until it is lost (on_lost, last_loss()).
//
// The contract of each member is the same for every kind (lease_lock.h
// spells it out for a lease; a semaphore's Lock face asks for one permit, a
// read-write side for its mode). Thread safety: as each handle's (one thread
// at a time; owns(), fence(), remaining() and last_loss() from any thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <string_view>

#include "sqlguard/connection.h"

namespace sqlguard {

// Why a lock was lost.
enum class LossCause {
  kExpired,         // the lease ran out before it was renewed
  kTakenOver,       // ended by someone else: another owner holds it now (after our expiry), or it was
                    // force-released or its row deleted before its expiry
  kUnreachable,     // the database could not be reached within the trust window
  kOutcomeUnknown,  // a renewal was sent but its answer never came; the trust window ended
};
std::string_view to_string(LossCause cause) noexcept;

struct LeaseLoss {
  LossCause cause = LossCause::kExpired;
  std::string detail{};     // human-readable, one line
  std::int64_t fence = 0;   // the token of the lost lease
  // What was left of the local trust window when the loss was detected
  // (0 if it had already ended): work can still be stopped in this time.
  std::chrono::milliseconds window_left{0};
};

// Completion of an asynchronous acquire: (true, nullptr) acquired; (false,
// nullptr) not within the wait, or cancelled; (false, error) the database
// stayed unreachable (or no connection was free) until the wait ended, or
// the attempt failed otherwise.
using AcquireCallback = std::function<void(bool acquired, std::exception_ptr error)>;
// Completion of an asynchronous release: what release() would have returned
// (true: released, or not the last hold and still held; false: it was no
// longer held), or (false, error) with what release() would have thrown
// (the release could not be sent: the handle still holds it, release again).
using ReleaseCallback = std::function<void(bool released, std::exception_ptr error)>;

// What a lock name is. One name is one kind: the database refuses a handle
// of another kind (or, for a semaphore, another permit count) on a name in
// use (Error(kInvalidArgument) naming both), so two kinds never run together.
// The kinds are listed in sqlguard/lock_kinds.def: kLease (LeaseLock),
// kFairLease (LeaseLock with LeaseOptions::fair: FIFO waiters), kSemaphore (n
// permits: Semaphore, fair or not), kReadWrite (shared and exclusive holders:
// ReadWriteLease), and any kind added there. sqlguard/lock_kinds.h makes a
// Lock of any kind by its name (make_lock) and reads a name's holders.
enum class LockKind {
#define SQLGUARD_LOCK_KIND(enumerator, name, noun, ops) enumerator,
#include "sqlguard/lock_kinds.def"
#undef SQLGUARD_LOCK_KIND
};
// "lease", "fair", "semaphore", "rw", ...: as `sqlguard lock list` prints them.
std::string_view to_string(LockKind kind) noexcept;

class Lock {
 public:
  virtual ~Lock() = default;

  virtual LockKind kind() const noexcept = 0;
  virtual const std::string& name() const noexcept = 0;

  // One attempt; never waits. Re-entrant: a handle that holds it already
  // gets one more hold and nothing is sent. False when others hold it (or
  // this handle holds a lost one: release() it first).
  virtual bool try_acquire() = 0;
  // Tries until acquired or `wait` passes (woken by releases).
  virtual bool acquire(std::chrono::milliseconds wait) = 0;
  // Waits without a thread of the caller's: the lock client's waiter thread
  // tries (a lease's first try: its sender thread, batched with other calls),
  // and `done` runs once on that thread (it must not block), or at once on the
  // caller's thread when the handle already holds (done(true)) or holds a
  // lost one (done(false)). One pending acquire per handle; destroying the
  // handle cancels it. A handle on a borrowed connection: kNotSupported.
  virtual void acquire_async(std::chrono::milliseconds wait, AcquireCallback done) = 0;
  std::future<bool> acquire_async(std::chrono::milliseconds wait);
  // Cancels the pending asynchronous acquire (its callback gets false);
  // false when none was pending.
  virtual bool cancel_acquire() = 0;
  // Drops one hold; the last one releases the row (owner- and fence-checked).
  // False when it was no longer held (its loss is in last_loss()).
  virtual bool release() = 0;
  // release() without blocking the caller's thread: sent by one of the lock
  // client's sender threads (and, where the dialect has a batch plan, in one
  // statement with other releases of the client: LockClientOptions::batch_max);
  // `done` runs once there (it must not block), or at once on the caller's
  // thread when nothing is sent (not the last hold; not held; lost). One
  // pending release per acquisition; the handle's destructor waits for it.
  // Lease and fair-lease handles of a LockClient; a handle on a borrowed
  // connection and the other kinds: kNotSupported (naming the kind).
  virtual void release_async(ReleaseCallback done);
  std::future<bool> release_async();

  virtual bool owns() const = 0;              // held and inside the trust window
  virtual std::int64_t fence() const = 0;     // of the current/last acquisition; 0 before any
  virtual std::string owner() const = 0;      // owner token of the current/last acquisition
  virtual int hold_count() const = 0;
  virtual std::chrono::milliseconds remaining() const = 0;  // of the trust window; 0 when not owned
  virtual std::optional<LeaseLoss> last_loss() const = 0;
  // After an attempt (try_acquire, a wait that ended) that did not acquire:
  // how long from now until this process may take over what stood in its way
  // if nobody renews or releases it — under TakeOver::kWatched the rest of
  // this process's watch of it (a later try, of this or another handle of
  // the process, counts on the same watch), under kDatabaseClock what its
  // expiry has left on the database clock; of several holders, the first.
  // nullopt before such an attempt, while held, and when the attempt learned
  // nothing of a take-over (a fair queue's turn, a race, a released holder).
  virtual std::optional<std::chrono::milliseconds> takeover_in() const { return std::nullopt; }

  // Runs `work` in one database transaction that first re-checks that this
  // handle still holds it and locks its row until commit, so nobody can take
  // it over in between; false, committing nothing, when it is not held (see
  // LeaseLock::run_guarded for retries and what `work` may do).
  virtual bool run_guarded(const std::function<void(Transaction&)>& work) = 0;

  // Lockable (std::unique_lock, std::scoped_lock): lock() waits up to the
  // handle's options.wait, or without end when it is 0, and throws
  // Error(kLockBusy) on time-out; unlock() sends errors to the log hook.
  void lock();
  bool try_lock() { return try_acquire(); }
  void unlock() noexcept;

 protected:
  // How long lock() waits (LeaseOptions::wait).
  virtual std::chrono::milliseconds lock_wait() const = 0;
};

// RAII for any Lock: acquires in the constructor (waiting up to `wait`),
// releases in the destructor. Throws Error(kLockBusy) when not acquired.
class LockGuard {
 public:
  explicit LockGuard(Lock& lock, std::chrono::milliseconds wait = std::chrono::milliseconds(0));
  ~LockGuard();
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;
  std::int64_t fence() const { return lock_.fence(); }
  bool owns() const { return lock_.owns(); }
  Lock& lock() const noexcept { return lock_; }

 private:
  Lock& lock_;
};

}  // namespace sqlguard
