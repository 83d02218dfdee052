// sqlguard/lock_set.h — several names held all or none: an order of 5 SKUs
// takes the 5 leases (or a permit of each SKU's semaphore), or none of them,
// in one database transaction.
//
//   auto client = sqlguard::LockClient::shared("postgresql://...");
//   sqlguard::LockSet cart(client, {"sku:17", "sku:4", "sku:99"}, {.ttl = std::chrono::seconds(10)});
//   if (cart.acquire(std::chrono::seconds(2))) {
//     ... cart.fence_of("sku:4") guards writes to SKU 4 ...
//     cart.release();
//   }
//
// Invariants (SQLite, PostgreSQL, MariaDB; PgBouncer and Galera tested):
//  * All or none. One attempt takes every name in ONE transaction on one
//    work connection, in byte order of the names (the set's canonical
//    order, whatever order they were given in): each name is taken by the
//    same statement and the same take-over rule as a LeaseLock of it
//    (TakeOver, watched holders), and one name held by anybody else rolls
//    the whole transaction back. Nobody, in this process or another, ever
//    sees a subset held by the set: the names become held at one commit.
//  * No hold-and-wait, so no deadlock between sets. A set never waits while
//    it holds a name: a busy attempt has rolled back and holds nothing; the
//    set naps and tries the whole set again. Inside an attempt, rows are
//    locked in the canonical order, so two attempts that overlap queue in
//    that order (PostgreSQL skips a row being taken: busy), never in a cycle.
//  * A fence per name: each name gets its own fencing token from the same
//    sequence as every lease (fence_of(name)); fence() is the first name's.
//  * Renewed together, lost together. The lock client renews each lease of
//    the set (in its batched renewal). owns() is true only while every name
//    is held inside its trust window; the first loss of any name is the
//    set's loss: options.on_lost fires once for the set (the loss of the
//    first name lost), last_loss() reports it, and the other names stay
//    held until release() (which releases what is still held).
//  * One name is one lock: each name is a lease, exactly as a LeaseLock of
//    it, or one permit of a semaphore, exactly as a Semaphore's (a set and
//    single handles on the same names count against each other). A name
//    stored as another kind (or a semaphore of another count) is refused
//    (kInvalidArgument naming both) and nothing is taken.
//
// Cost: an attempt is BEGIN, one acquire statement per lease (MariaDB: two
// for a free name), a semaphore's acquire statements per permit (a read,
// then its head row, holdings and the holding written) and COMMIT, on one
// connection; a release is one release statement per name. Waiting: the set tries, then naps with full jitter
// from options.backoff_initial doubling up to options.backoff_max, never
// past what the first busy name's holder has left; a release of another set
// of the same client wakes a blocking acquire() at once, and on PostgreSQL
// and SQLite so does a release of any of its leases by anyone (the client's
// wake-up listener listens on their channels while the set waits; it wakes
// every set of the client that waits: each tries again). On MariaDB and
// through a transaction pooler a set's naps keep their timers. acquire_async
// waits on the client's waiter thread, paced and woken the same way. A
// waiting set is not
// served in any order (a name's own waiters do not queue behind it nor it
// behind them).
//
// Not offered by a set: fair leases, fair semaphores and read-write leases
// as members (kInvalidArgument), release_async (kNotSupported), a borrowed
// Connection (a set needs a lock client's work connections).
//
// Thread safety: as a LeaseLock (one thread at a time; owns(), fence(),
// fence_of(), remaining() and last_loss() from any thread).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sqlguard/lease_lock.h"
#include "sqlguard/lock.h"
#include "sqlguard/lock_client.h"
#include "sqlguard/lock_kinds.h"

namespace sqlguard {

// One name of a lock set and what the set holds of it: a lease (the
// default), or one permit of a semaphore (spec {LockKind::kSemaphore, N}: N
// is its count, stored when the name is new, refused when it differs from
// the stored one, as a Semaphore's).
struct LockSetMember {
  std::string name;
  LockSpec spec{};
};

class LockSet final : public Lock {
 public:
  // The most names one set holds.
  static constexpr std::size_t kMaxNames = 1000;

  // A set of leases of `client`. `names`: 1 .. kMaxNames distinct valid lock
  // names (any order; held in byte order). `options` are every name's, as
  // for a LeaseLock (ttl, min_hold, take_over, backoff, wait, on_lost: the
  // set's); options.fair and options.watchdog_connection are refused
  // (kInvalidArgument), as are a duplicate or bad name. Nothing is sent.
  LockSet(std::shared_ptr<LockClient> client, std::vector<std::string> names, LeaseOptions options = {},
          Watchdog watchdog = Watchdog::kOn);
  // Names of several kinds: leases and semaphore permits (another spec:
  // kInvalidArgument naming it). The same rules and options.
  LockSet(std::shared_ptr<LockClient> client, std::vector<LockSetMember> members, LeaseOptions options = {},
          Watchdog watchdog = Watchdog::kOn);
  // A set of the process-wide lock client of `uri` (LockClient::shared).
  LockSet(const std::string& uri, std::vector<std::string> names, LeaseOptions options = {},
          Watchdog watchdog = Watchdog::kOn, const ConnectOptions& connect = {});
  // Releases what is held (errors go to the log hook).
  ~LockSet() override;
  LockSet(const LockSet&) = delete;
  LockSet& operator=(const LockSet&) = delete;

  // The names, in the order they are taken (byte order).
  const std::vector<std::string>& names() const noexcept { return names_; }
  // What the set holds of `name` (its LockSpec); kInvalidArgument when
  // `name` is not in the set.
  const LockSpec& spec_of(const std::string& name) const;
  // The names joined by ',' (for messages; not a lock name).
  const std::string& name() const noexcept override { return label_; }
  // kLease: a set has no kind of its own (spec_of says each name's).
  LockKind kind() const noexcept override { return LockKind::kLease; }

  // One attempt (all or none); never waits. Re-entrant as LeaseLock's. False
  // when any name is held by someone else (nothing was taken), or when the
  // set holds a lost one (release() first).
  bool try_acquire() override;
  // Tries until acquired or `wait` passes (see the file comment).
  bool acquire(std::chrono::milliseconds wait) override;
  bool acquire() { return acquire(options_.wait); }
  // Waits without a thread of the caller's (Lock::acquire_async): the lock
  // client's waiter thread makes the set's attempts, paced and woken as
  // acquire()'s naps are, and `done` runs
  // once there (it must not block) — or at once on the caller's thread when
  // the set already holds (re-entrant) or holds a lost one. One pending
  // acquire per set; destroying the set cancels it.
  void acquire_async(std::chrono::milliseconds wait, AcquireCallback done) override;
  using Lock::acquire_async;
  // Cancels the pending asynchronous acquire (its callback gets false; what
  // an attempt already running takes is released). False when none was.
  bool cancel_acquire() override;
  // Drops one hold; the last one releases every name still held. False when
  // any name was no longer held (the set's loss is in last_loss()).
  bool release() override;

  bool owns() const override;  // every name held and inside its trust window
  std::int64_t fence() const override;  // the first name's (fence_of for each)
  // The fencing token of `name` in the current/last acquisition; 0 before
  // any. kInvalidArgument when `name` is not in the set.
  std::int64_t fence_of(const std::string& name) const;
  std::string owner() const override;  // the first name's owner token
  int hold_count() const override;
  std::chrono::milliseconds remaining() const override;  // the shortest trust window; 0 when not owned
  std::optional<LeaseLoss> last_loss() const override;
  // After a busy attempt: what the first busy name's holder has left before
  // this process may take it over (as LeaseLock::takeover_in).
  std::optional<std::chrono::milliseconds> takeover_in() const override;
  // The name whose holder made the last attempt busy ("" when none).
  std::string blocked_by() const;

  // Runs `work` in one transaction that first re-checks every name (owner,
  // fence, not expired) and locks each row until commit; false, committing
  // nothing, when any name is no longer held (as LeaseLock::run_guarded).
  bool run_guarded(const std::function<void(Transaction&)>& work) override;

  const LeaseOptions& options() const noexcept { return options_; }
  const std::shared_ptr<LockClient>& client() const noexcept { return client_; }

 protected:
  std::chrono::milliseconds lock_wait() const override { return options_.wait; }

 public:
  // (Internal: what the members' on_lost callbacks and the client's waiter
  // thread share with the set; the client's view of each name.)
  struct Shared;
  struct Parts;

 private:
  void init(std::vector<LockSetMember> members, Watchdog watchdog);
  std::size_t index_of(const std::string& name) const;

  std::shared_ptr<LockClient> client_;
  LeaseOptions options_;
  std::vector<std::string> names_;
  std::string label_;
  std::vector<LockSpec> specs_;                 // in names_ order
  std::vector<std::unique_ptr<Lock>> members_;  // in names_ order: a LeaseLock or a Semaphore each
  std::shared_ptr<Parts> parts_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace sqlguard
