// Internals shared by `sqlguard chaos` (the coordinator: fault injector and
// invariant checker, see chaos_coordinator.h) and its hidden `chaos-worker`
// processes (chaos_worker.cpp). Not a public API.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace sqlguard::cli::chaos {

// What a worker is doing right now; the injector picks its targets by it.
enum Phase : std::int32_t {
  kIdle = 0,
  kAcquiring = 1,
  kHolding = 2,      // holds a lease, doing its "work" before the fenced write
  kWriting = 3,      // inside the fenced-write transaction
  kInventoryTx = 4,  // inside a stock decrement transaction
  kInboxTx = 5,      // inside an inbox transaction
  kExited = 6,
};
const char* phase_name(std::int32_t phase);

// Negative controls (`sqlguard chaos --control NAME`): worker modes that break
// one guarantee on purpose, so that a test sees the checker catch it. A
// normal run never uses one; each names the invariant it must trip.
enum class Control {
  kNone,
  kNoFencing,            // fenced writes without the lease re-check or the token: fence_order, overlap
  kUnguardedDecrement,   // stock read, then written back minus one with no guard: stock
  kEffectsOutsideInbox,  // the effect row commits before, not inside, the dedup transaction: inbox_effects
  kLongLease,            // leases of 10 x --ttl, outliving a killed holder: stale_lock
  kWorkerCrash,          // every worker aborts 300 ms into each life: worker_exits
  // --lock-kind semaphore:N: a permit holder that never asks owns(): it
  // records its hold as ending after a pause that lost it: permit_limit
  kSemaphoreIgnoresOwns,
  // --lock-kind rw: writers take a SHARED hold and write anyway: rw_exclusion
  kRwWriterShares,
  // --lock-kind fair: workers take the lease with a non-fair handle (it
  // does not look at the queue): fifo_order
  kFairQueueJump,
  // With --faults clock-step: workers take over by the database clock
  // (TakeOver::kDatabaseClock, the rule before the watched one), which a
  // forward step of that clock fools: overlap (lease, fair), permit_limit
  // (semaphore:N), rw_exclusion (rw)
  kDatabaseClockTakeover,
};
// "no-fencing", "unguarded-decrement", ... ; "" for kNone.
const char* control_name(Control c);
// Throws CLI::ValidationError (exit 2) for an unknown name.
Control parse_control(const std::string& name);

// What the workers hold (`sqlguard chaos --lock-kind`): the lease (default,
// the mutex), the fair lease (LeaseOptions::fair), a semaphore of N permits,
// or a read-write lease (1 in 3 lock operations exclusive).
enum class LockKind { kLease, kFair, kSemaphore, kReadWrite };
struct KindSpec {
  LockKind kind = LockKind::kLease;
  std::int64_t permits = 0;  // kSemaphore: N
  // multi:K (kind kLease): each hold is a lock set (LockSet) of K distinct
  // resources' leases, taken all or none; 0: one lease per hold.
  int set_size = 0;
  // "lease", "fair", "semaphore:N", "rw", "multi:K"
  std::string name() const;
  // Whether its holders are rows of sqlguard_lock (lease_info() sees them).
  bool lease_rows() const { return kind == LockKind::kLease || kind == LockKind::kFair; }
};
// Throws BadValue("--lock-kind") (exit 2) for a bad value.
KindSpec parse_lock_kind(const std::string& text);
// The kind a negative control needs (kLease: any kind).
LockKind control_kind(Control c);

// One slot per worker index, in a file both sides mmap (MAP_SHARED). Only
// lock-free 32/64-bit atomics, so it is address-free across processes. A
// respawned worker reuses its slot; counters accumulate across lives.
struct alignas(64) Slot {
  std::atomic<std::int32_t> pid{0};
  std::atomic<std::int32_t> phase{kIdle};
  std::atomic<std::int32_t> resource{-1};  // lease held (index), -1 = none
  std::atomic<std::int64_t> fence{0};      // fence of the held lease
  std::atomic<std::int64_t> session{0};    // server session id of the main connection (0: none/SQLite)
  std::atomic<std::int64_t> acquisitions{0};
  std::atomic<std::int64_t> writes_committed{0};   // fenced writes this worker saw commit
  std::atomic<std::int64_t> rejected_by_lease{0};  // run_guarded refused: lease no longer held
  std::atomic<std::int64_t> rejected_by_fence{0};  // fenced_write refused: a newer token was accepted
  std::atomic<std::int64_t> late_attempts{0};      // writes attempted after a pause > ttl was detected
  std::atomic<std::int64_t> late_rejected{0};
  std::atomic<std::int64_t> slow_holds{0};         // deliberate holds longer than the ttl (watchdog renews)
  std::atomic<std::int64_t> sales_guarded{0};
  std::atomic<std::int64_t> sales_cas{0};
  std::atomic<std::int64_t> cas_conflicts{0};
  std::atomic<std::int64_t> sold_out{0};
  std::atomic<std::int64_t> deliveries{0};
  std::atomic<std::int64_t> inbox_processed{0};
  std::atomic<std::int64_t> inbox_duplicates{0};
  std::atomic<std::int64_t> errors{0};
  std::atomic<std::int64_t> reconnects{0};
  std::atomic<std::int64_t> lease_losses{0};
  // --lock-kind other than lease:
  std::atomic<std::int64_t> wait_seq{0};           // lock operations started (a paused waiter is not paused twice)
  std::atomic<std::int64_t> holds_unconfirmed{0};  // owns() was false at the end of the hold: not journaled
};
static_assert(std::atomic<std::int64_t>::is_always_lock_free, "shared-memory counters need lock-free atomics");

// Names of one run's objects. `run` is 8 lower-case hex digits.
struct Names {
  std::string run;
  std::string prefix;    // chaos_<run>_
  std::string res, audit, stock, sale, effect;
  std::string hold;  // --lock-kind semaphore / rw: confirmed hold intervals
  std::string wait;  // --lock-kind fair: every wait (arrival, place taken, outcome)
  std::string consumer;  // inbox consumer name
  std::string lock(int resource) const { return prefix + "res" + std::to_string(resource); }
  explicit Names(std::string run_id);
};

// Worker parameters, passed on the command line of `chaos-worker`.
struct WorkerArgs {
  std::string run;
  std::string state_file;
  int slot = 0;
  std::int64_t deadline_ns = 0;  // steady_clock (CLOCK_MONOTONIC) time to stop at
  std::int64_t ttl_ms = 1000;
  int resources = 1;
  int items = 2;
  int messages = 100;
  std::uint64_t seed = 1;
  Control control = Control::kNone;
  KindSpec kind;
};

}  // namespace sqlguard::cli::chaos
