// Internal: what a Semaphore and a ReadWriteLease handle share: one holding
// at a time (a leased row of sqlguard_sync_holder), its hold count and trust
// window (LeaseState), renewal through the lock client (a ClientLease of
// kind kHolding), and the blocking acquire loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"
#include "client/client.h"
#include "strategies/sync/sync_ops.h"

namespace sqlguard::detail {

// What a handle's attempts and release need, owning no lock client: the
// client's waiter thread keeps it while an asynchronous attempt runs (were it
// to own the client, the last reference could drop there, and the client
// would stop its own waiter thread from that thread).
struct SyncShared {
  std::shared_ptr<ClientLease> lease;
  LeaseOptions options;
  LockKind kind = LockKind::kSemaphore;
  std::string type, wake_key;
  std::chrono::milliseconds intent{0};
  SyncMode mode = SyncMode::kPermits;  // guarded by lease->state->mu
  std::int64_t n = 0;                  // guarded by lease->state->mu
};

// A holding acquired: the handle's state set and its renewal registered
// (`sent`: when the statement that took it was sent).
void took_grant(ClientCore& core, SyncShared& s, const SyncGrant& g, const std::string& owner, SyncMode mode,
                std::int64_t n, std::chrono::steady_clock::time_point sent);

class SyncHandle {
 public:
  // `kind`: kSemaphore or kReadWrite; `type`: the class name, for errors.
  SyncHandle(std::shared_ptr<LockClient> client, std::string name, LockKind kind, LeaseOptions options,
             bool renew, std::string_view type);
  // Cancels a pending asynchronous acquire and releases a held holding
  // (errors go to the log hook). An attempt still running on the client's
  // waiter thread finishes first and releases what it took.
  ~SyncHandle();

  // One attempt / attempts until `wait` passes. `capacity`: a semaphore's
  // count when the name is new.
  bool try_acquire(SyncMode mode, std::int64_t n, std::int64_t capacity);
  bool acquire(SyncMode mode, std::int64_t n, std::int64_t capacity, std::chrono::milliseconds wait);
  bool release();
  // Waits without a thread: the client's waiter thread tries for this
  // handle (lease_lock.h's acquire_async contract: `done` once, on that
  // thread; at once on the caller's thread when re-entrant or lost).
  void acquire_async(SyncMode mode, std::int64_t n, std::int64_t capacity, std::chrono::milliseconds wait,
                     AcquireCallback done);
  bool cancel_acquire();
  // This handle as a member of a lock set (ClientCore::try_acquire_set_on): a
  // holding of `n` in `mode` taken inside the set's transaction.
  SetPart set_part(SyncMode mode, std::int64_t n, std::int64_t capacity);
  // Lock::run_guarded for this handle's holding (ClientCore::run_guarded).
  bool run_guarded(const std::function<void(Transaction&)>& work) { return client_->core()->run_guarded(s_->lease, work); }

  bool owns() const;
  std::optional<SyncMode> mode() const;
  std::int64_t held() const;  // permits of the current holding; 0 when none
  std::int64_t fence() const;
  std::string owner() const;
  int hold_count() const;
  std::chrono::milliseconds remaining() const;
  std::optional<LeaseLoss> last_loss() const;
  std::optional<std::chrono::milliseconds> takeover_in() const;
  const std::string& name() const noexcept { return s_->lease->name; }
  const LeaseOptions& options() const noexcept { return s_->options; }
  ClientCore& core() const { return *client_->core(); }

 private:
  // 1: acquired (or one more hold), 0: busy, -1: this handle holds a lost holding.
  // `waiting`: a blocking acquire's attempt (a writer publishes its intent).
  int attempt(SyncMode mode, std::int64_t n, std::int64_t capacity, std::chrono::milliseconds* holder_remaining,
              bool waiting);
  // The re-entrancy check: 1 one more hold, 0 none held, -1 holding a lost one.
  int reenter(SyncMode mode, std::int64_t n);

  std::shared_ptr<LockClient> client_;
  std::shared_ptr<SyncShared> s_;
};

// Options of a semaphore or read-write lease handle: LeaseOptions without the
// fields that only a LeaseLock has. Throws kInvalidArgument naming the field.
// `fair_offered`: options.fair / place_ttl are accepted (a semaphore).
void validate_sync_options(const LeaseOptions& options, std::string_view type, bool fair_offered);

// LockClient::shared() for a synchronizer made from a URI (connect options
// bounded as a LeaseLock's from a URI).
std::shared_ptr<LockClient> shared_client_for(const std::string& uri, const LeaseOptions& options,
                                              const ConnectOptions& connect, std::string_view type);

}  // namespace sqlguard::detail
