// Internal: the acquire protocol of the synchronizers (semaphore.h,
// read_write_lease.h) and the fair lease's queue (LeaseOptions::fair), on the
// statements of sql/<dialect>/sync.sql. One transaction per attempt: the
// name's sqlguard_sync row is written first (serializing acquires of the
// name; conflicting at certification on Galera), then what is live is read on
// the database clock and the strategy decides here.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sqlguard/connection.h"
#include "sqlguard/errors.h"
#include "plans/plans.h"
#include "strategies/names.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_kinds.h"
#include "strategies/lease/takeover.h"

namespace sqlguard::detail {

// What a holding is: permits of a semaphore, or a shared / exclusive hold of
// a read-write lease (the holder row's mode column).
enum class SyncMode : char { kPermits = 'P', kShared = 'S', kExclusive = 'X' };

struct SyncRequest {
  const std::string& name;
  LockKind kind;              // kSemaphore or kReadWrite (names.h: what the name must be)
  SyncMode mode;
  std::int64_t permits;       // permits wanted (kPermits); 1 otherwise
  std::int64_t capacity;      // semaphore: its permit count if the name is new; 0 otherwise
  const std::string& owner;
  std::chrono::milliseconds ttl, min_hold;
  // kExclusive, when busy: the writer's intent is published until now +
  // intent (new shared holders wait); 0 = publish none.
  std::chrono::milliseconds intent{0};
  // Who may take over an unreleased holding (LeaseOptions::take_over).
  TakeOver rule = TakeOver::kWatched;
};

struct SyncGrant {
  bool acquired = false;
  std::int64_t slot = 0, fence = 0;
  std::int64_t expire_at = 0;          // DB clock (at least this late)
  std::int64_t holder_remaining_ms = 0;  // busy: the earliest live holder's expiry from now (a pacing hint)
  // Busy: how long until what stood in the way may be taken over if nobody
  // renews it (Lock::takeover_in); 0 when the attempt learned nothing of it
  // (a take-over that lost to a renewal).
  std::int64_t takeover_in_ms = 0;
  std::int64_t capacity = 0;           // semaphore: its permit count
};

// One attempt (one transaction). Contention (a deadlock victim, a Galera
// certification failure, SQLite busy) is "not acquired". Throws
// kInvalidArgument (kind_clash) when the name is a lock of another kind, and
// when a semaphore is asked with a count (capacity) other than its own.
SyncGrant sync_attempt(Connection& conn, const SyncRequest& req);
// The same attempt inside the caller's open READ COMMITTED transaction (a
// lock set's: ClientCore::try_acquire_set_on), which commits or rolls back what
// it wrote; contention is thrown (the caller's transaction is the unit).
SyncGrant sync_attempt_here(Connection& conn, const SyncRequest& req);
// Owner-, slot- and fence-checked release; true if it was still held.
bool sync_release(Connection& conn, const std::string& name, std::int64_t slot, const std::string& owner,
                  std::int64_t fence);
// Why a holding is no longer held. `sent_in_window`: the renewal that found
// it gone was sent inside its trust window, which ends before its expiry on
// the database clock: a missing row was then deleted by someone (an operator,
// a cleanup with no grace), not expired.
LossCause diagnose_holding(Connection& conn, const std::string& name, std::int64_t slot, const std::string& owner,
                           std::int64_t fence, bool sent_in_window, std::string* detail);

// A synchronizer as it stands now.
struct SyncStatus {
  bool exists = false;
  std::string kind;
  std::int64_t permits = 0;        // semaphore: the count
  std::int64_t in_use = 0;         // semaphore: permits held by live holders
  std::int64_t shared = 0;         // rw: live shared holders
  bool exclusive = false;          // rw: a live exclusive holder
  bool writer_waiting = false;     // rw: a waiting writer's intent is live
  std::int64_t fence = 0;          // the last fence granted (rw: of the last exclusive hold)
};
SyncStatus sync_status(Connection& conn, const std::string& name);
// The live holders of `name` when its sqlguard_sync row is of `kind`
// (lock_holders() for a semaphore, a read-write lease or a kind built on
// holdings); empty otherwise.
std::vector<LockHolder> sync_live_holders(Connection& conn, const std::string& name, LockKind kind);
// Sets a semaphore's permit count (creating it with that count); throws
// kInvalidArgument when the name is another kind. Returns the count before
// (0: the name is new).
std::int64_t sync_set_permits(Connection& conn, const std::string& name, std::int64_t permits);

// Renews holdings (at most kMaxRenewalBatch, distinct (name, slot)) with the
// dialect's renew plan; answers, in order, whether each was still held.
std::vector<bool> renew_holdings(Connection& conn, std::span<const RowRenewal> rows);
// Extends live queue places (at most kMaxRenewalBatch); a place that expired
// stays gone (its waiter finds out at its next turn).
void renew_places(Connection& conn, std::span<const RowRenewal> rows);

// ---- the fair lease's queue ---------------------------------------------------
// Takes a place at the tail: the database assigns the ticket (one at a time
// per name, in commit order). Returns the ticket.
// `kind`/`permits`: what the name is (kFairLease for a fair lease,
// kSemaphore with its count when new for a fair semaphore).
std::int64_t fair_enqueue(Connection& conn, const std::string& name, const std::string& owner,
                          std::chrono::milliseconds place_ttl, LockKind kind = LockKind::kFairLease,
                          std::int64_t permits = 0);
struct FairTurn {
  bool place_live = false;   // the caller's place is still there
  std::int64_t ahead = 0;    // live places with a lower ticket
  std::int64_t holder_left_ms = 0;  // how long the lease is still held (0: free, or never taken)
  // The name's lease row is a semaphore's or read-write lease's reservation
  // (kReservedExpireAt): a fair lease of it is refused (refuse_if_reserved).
  bool reserved = false;
  // A release granted the lease to the caller's place (owner = its token,
  // handed = 1): the fence, expiry and ttl it wrote (lease_release_fair).
  bool granted = false;
  std::int64_t fence = 0, expire_at = 0, ttl_ms = 0;
  // Where waiters block on the holder's wake-up lock (MariaDB): whether the
  // read took it for the grant (1), found it busy for an instant (0); unset
  // where there is none or nothing was granted.
  std::optional<std::int64_t> wake_lock;
};
// A plain read: whether it is the caller's turn. ticket = INT64_MAX asks
// whether anyone waits (try_acquire of a fair lease). A place ahead counts
// until the caller has seen it unchanged for its ttl by `rule` (its waiter
// died); then it is removed, by a compare-and-set on what was seen (the
// first kPlacesWatched places ahead are looked at per call). `place_watch`:
// the watch of a place an older sqlguard wrote (no ttl recorded).
inline constexpr std::int64_t kPlacesWatched = 16;
FairTurn fair_turn(Connection& conn, const std::string& name, std::int64_t ticket, const std::string& owner,
                   TakeOver rule, std::chrono::milliseconds place_watch);
// Leaves the queue. `wake`: the waiter gave up or was cancelled (not: it
// acquired); where fair waiters are woken by ticket, the next one is woken if
// this place was the lowest (fair_leave_wake).
void fair_leave(Connection& conn, const std::string& name, std::int64_t ticket, const std::string& owner, bool wake);

// cleanup(): deletes the heads (sqlguard_sync rows) of names with no
// holding and no queue place that is live or expired for less than `grace`,
// with their leftover rows, one head per transaction: the head is locked
// first (an acquire holding it now: skipped) and found idle again after the
// lock, so a concurrent first acquire either waits for the delete and
// creates a new head or keeps the old one. A new head's fence starts at the
// fence sequence's last value (sync_open), so fences never go back for a
// name. Candidates are read `batch_size` at a time (at most `max_batches`
// reads, 0 = all), with `pause` between reads. Adds the reads to *batches.
// Returns the heads deleted.
std::int64_t purge_idle_heads(Connection& conn, std::chrono::milliseconds grace, int batch_size, int max_batches,
                              std::chrono::milliseconds pause, int* batches);

}  // namespace sqlguard::detail
