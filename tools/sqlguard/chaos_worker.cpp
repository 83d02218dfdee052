// `sqlguard chaos-worker`: one worker process of `sqlguard chaos` (hidden
// subcommand). It loops until its deadline over three workloads, reporting
// what it is doing in its shared-memory slot so the injector can aim:
//   * lease + fenced write: acquire a short lease (watchdog on), "work" for
//     a while (sometimes longer than the ttl), then write the protected
//     resource and its audit row in ONE transaction that re-checks the lease
//     (run_guarded) and carries the fencing token (fenced_write). With
//     --no-fencing the write is a plain transaction: the negative control.
//   * inventory: a guarded decrement (UPDATE ... WHERE qty >= 1) or a
//     version CAS, each with its sale row in the same transaction.
//   * inbox: redelivered messages processed through sqlguard::Inbox; the
//     effect row is written in the dedup transaction.
// --lock-kind swaps what the first workload holds: a fair lease (the same
// fenced write; each wait is journaled for the FIFO check), a semaphore of
// N permits or a read-write lease (sync_work: a fenced write or a read,
// and the hold interval journaled while owns() confirms it).
// --control NAME (chaos.h) swaps one of these for a broken variant: the
// negative controls the checker must catch.
// Every error is counted and the connection re-established; the worker
// never gives up before its deadline. See chaos_check.cpp for the checker.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <future>
#include <iostream>
#include <random>
#include <thread>
#include <utility>

#include "chaos.h"
#include "common.h"
#include "sqlguard/fenced_write.h"
#include "sqlguard/inbox.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"
#include "sqlguard/lock_set.h"
#include "sqlguard/read_write_lease.h"
#include "sqlguard/semaphore.h"
#include "sqlguard/transition.h"
#include "sqlguard/version_cas.h"
#include "sqlguard/validate.h"

namespace sqlguard::cli::chaos {

const char* phase_name(std::int32_t phase) {
  switch (phase) {
    case kIdle: return "idle";
    case kAcquiring: return "acquiring";
    case kHolding: return "holding";
    case kWriting: return "fenced-write-tx";
    case kInventoryTx: return "inventory-tx";
    case kInboxTx: return "inbox-tx";
    case kExited: return "exited";
  }
  return "?";
}

namespace {
constexpr std::pair<Control, const char*> kControls[] = {
    {Control::kNoFencing, "no-fencing"},
    {Control::kUnguardedDecrement, "unguarded-decrement"},
    {Control::kEffectsOutsideInbox, "effects-outside-inbox"},
    {Control::kLongLease, "long-lease"},
    {Control::kWorkerCrash, "worker-crash"},
    {Control::kSemaphoreIgnoresOwns, "semaphore-ignores-owns"},
    {Control::kRwWriterShares, "rw-writer-shares"},
    {Control::kFairQueueJump, "fair-queue-jump"},
    {Control::kDatabaseClockTakeover, "database-clock-takeover"},
};
}  // namespace

std::string KindSpec::name() const {
  switch (kind) {
    case LockKind::kLease: return set_size > 0 ? "multi:" + std::to_string(set_size) : "lease";
    case LockKind::kFair: return "fair";
    case LockKind::kSemaphore: return "semaphore:" + std::to_string(permits);
    case LockKind::kReadWrite: return "rw";
  }
  return "?";
}

KindSpec parse_lock_kind(const std::string& text) {
  KindSpec k;
  if (text == "lease") return k;
  if (text == "fair") {
    k.kind = LockKind::kFair;
    return k;
  }
  if (text == "rw") {
    k.kind = LockKind::kReadWrite;
    return k;
  }
  const std::string multi = "multi:";
  if (text.rfind(multi, 0) == 0) {
    const std::string n = text.substr(multi.size());
    // 2..8: a set of one is a lease; the run makes K + 1 resources at least.
    if (n.size() == 1 && n[0] >= '2' && n[0] <= '8') {
      k.set_size = n[0] - '0';
      return k;
    }
    throw BadValue("--lock-kind", "'" + text + "': K of multi:K must be a number from 2 to 8");
  }
  const std::string sem = "semaphore:";
  if (text.rfind(sem, 0) == 0) {
    const std::string n = text.substr(sem.size());
    // 1..1000: more permits than workers could ever hold tests nothing.
    if (!n.empty() && n.size() <= 4 && n.find_first_not_of("0123456789") == std::string::npos && std::stoi(n) >= 1 &&
        std::stoi(n) <= 1000) {
      k.kind = LockKind::kSemaphore;
      k.permits = std::stoi(n);
      return k;
    }
    throw BadValue("--lock-kind", "'" + text + "': N of semaphore:N must be a number from 1 to 1000");
  }
  throw BadValue("--lock-kind", "unknown lock kind '" + text + "'; known: lease, fair, semaphore:N, rw, multi:K");
}

LockKind control_kind(Control c) {
  switch (c) {
    case Control::kSemaphoreIgnoresOwns: return LockKind::kSemaphore;
    case Control::kRwWriterShares: return LockKind::kReadWrite;
    case Control::kFairQueueJump: return LockKind::kFair;
    default: return LockKind::kLease;
  }
}

const char* control_name(Control c) {
  for (auto [k, name] : kControls)
    if (k == c) return name;
  return "";
}

Control parse_control(const std::string& name) {
  std::string known;
  for (auto [k, n] : kControls) {
    if (name == n) return k;
    known += std::string(known.empty() ? "" : ", ") + n;
  }
  throw CLI::ValidationError("--control", "unknown negative control '" + name + "'; known: " + known);
}

Names::Names(std::string run_id) : run(std::move(run_id)) {
  prefix = "chaos_" + run + "_";
  res = prefix + "res";
  audit = prefix + "audit";
  stock = prefix + "stock";
  sale = prefix + "sale";
  effect = prefix + "effect";
  hold = prefix + "hold";
  wait = prefix + "wait";
  consumer = "chaos_" + run;
  for (const auto* t : {&res, &audit, &stock, &sale, &effect, &hold, &wait}) validate_identifier(*t, "chaos table");
}

namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

struct StaleFence {};  // thrown inside run_guarded: fenced_write refused the token

class Worker {
 public:
  Worker(const WorkerArgs& a, Slot& s)
      : a_(a), s_(s), n_(a.run), ttl_(a.ttl_ms), rng_(a.seed * 0x9E3779B97F4A7C15ULL + a.slot * 7919ULL + getpid()) {
    deadline_ = steady_clock::time_point(std::chrono::nanoseconds(a.deadline_ns));
    co_.connect_timeout = milliseconds(2000);
    co_.busy_timeout = milliseconds(10000);
    co_.io_timeout = milliseconds(15000);
    place_ttl_ = std::clamp(a.control == Control::kLongLease ? ttl_ * 10 : ttl_, milliseconds(300), milliseconds(10000));
  }

  int run() {
    // false: the deadline passed while the database was away
    if (!connect() || !prepare()) return 0;
    locks_.resize(a_.resources);
    sems_.resize(a_.resources);
    rws_.resize(a_.resources);
    const auto born = steady_clock::now();
    while (!past_deadline()) {
      // Negative control: an unexpected death (the coordinator must count it).
      if (a_.control == Control::kWorkerCrash && steady_clock::now() - born > milliseconds(300))
        std::abort();
      // Negative control database-clock-takeover: only lock ops, so a
      // forward step of the database clock lands while one worker holds
      // and others keep asking (with the usual mix, 45% lock ops, three 6 s
      // runs on a loaded CI machine once caught no take-over at all).
      // Negative control unguarded-decrement: only sales, so two of them
      // overlap (with the usual mix, 30% inventory, a 3 s SQLite run once
      // sold 36 without one overlapping sale: a write lock handed over at
      // its release leaves no sleep between a sale's read and its write).
      int op = a_.control == Control::kDatabaseClockTakeover ? 0
               : a_.control == Control::kUnguardedDecrement  ? 45
                                                             : pick(0, 99);
      try {
        if (op < 45)
          lock_op();
        else if (op < 75)
          inventory();
        else
          inbox();
      } catch (const Error& e) {
        count_error(e);
        recover();
      } catch (const std::exception& e) {
        // Not a classified sqlguard::Error (a driver exception that escaped
        // classification): worth a line, but the run goes on.
        ++s_.errors;
        std::cerr << "chaos-worker " << a_.slot << ": unclassified exception: " << e.what() << "\n";
        recover();
      }
      s_.phase = kIdle;
      s_.resource = -1;
      sleep(milliseconds(pick(1, 6)));
    }
    locks_.clear();  // releases what is still held
    sems_.clear();
    rws_.clear();
    s_.phase = kExited;
    return 0;
  }

 private:
  bool past_deadline() const { return steady_clock::now() >= deadline_; }
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  static void sleep(milliseconds d) { std::this_thread::sleep_for(d); }

  bool connect() {
    for (;;) {
      try {
        conn_ = make_connection(global().db, co_);
        note_session();
        return true;
      } catch (const Error& e) {
        // A restarting server refuses in several ways ("starting up", reset,
        // refused); only a bad URI or a missing driver is final.
        if (e.code() == ErrorCode::kInvalidArgument || e.code() == ErrorCode::kNotSupported) throw;
        if (past_deadline()) return false;
        sleep(milliseconds(100));
      }
    }
  }

  // Expected under faults: counted, one line each with SQLGUARD_CHAOS_VERBOSE.
  void count_error(const Error& e) {
    ++s_.errors;
    if (std::getenv("SQLGUARD_CHAOS_VERBOSE")) std::cerr << "chaos-worker " << a_.slot << ": " << e.what() << "\n";
  }

  // The strategies' objects. Their constructors talk to the database, so a
  // session kill or a server crash can hit them too (before this retried, a
  // worker respawned into a session kill died with commit_in_doubt).
  bool prepare() {
    for (;;) {
      try {
        inbox_ = std::make_unique<Inbox>(*conn_);
        // The guarded update bumps the version too, so the CAS path sees every
        // change (a first draft did not; the stock invariant caught the lost update).
        decrement_ = std::make_unique<GuardedUpdate>(
            *conn_, GuardedUpdateSpec{n_.stock, "id",
                                      {{"qty", AssignOp::kSubtract}, {"version", AssignOp::kAdd}},
                                      {{"qty", Compare::kGe}}});
        cas_ = std::make_unique<VersionCas>(*conn_, VersionCasSpec{n_.stock, "id", "version", {"qty"}});
        return true;
      } catch (const Error& e) {
        count_error(e);
        recover();
        if (past_deadline()) return false;
      }
    }
  }

  // After an error: drop leases this process may still think it holds and
  // make the connection usable again (a killed session, a restarted server).
  void recover() {
    for (auto& l : locks_) {
      // A fair wait cut short by an error (its future abandoned) is still
      // pending on the handle: cancel it, or the next acquire_async throws.
      if (l) l->cancel_acquire();
      if (l && l->hold_count() > 0) l.reset();  // destructor: release (errors to the log hook) + stop watchdog
    }
    for (auto& h : sems_)
      if (h && h->hold_count() > 0) h.reset();
    for (auto& h : rws_)
      if (h && h->hold_count() > 0) h.reset();
    while (!past_deadline()) {
      try {
        if (conn_->in_transaction()) conn_->rollback();
      } catch (const std::exception&) {
      }
      try {
        conn_->reconnect();
        ++s_.reconnects;
        note_session();
        return;
      } catch (const std::exception&) {  // server still away: try again
        sleep(milliseconds(100));
      }
    }
  }

  // The injector spares the sessions of paused workers when it kills
  // connections: the pause itself must be the fault their late write meets.
  void note_session() {
    try {
      s_.session = conn_->session_id();
    } catch (const std::exception&) {
      s_.session = 0;
    }
  }

  LeaseOptions lease_options() {
    LeaseOptions o;
    // Negative control: a lease that outlives its holder by far.
    o.ttl = a_.control == Control::kLongLease ? ttl_ * 10 : ttl_;
    // Negative control database-clock-takeover: the rule a forward step of
    // the database clock fools.
    if (a_.control == Control::kDatabaseClockTakeover) o.take_over = TakeOver::kDatabaseClock;
    Slot* s = &s_;
    o.on_lost = [s](const LeaseLoss&) { ++s->lease_losses; };
    return o;
  }

  // One lock client per worker process, as a service instance has: its
  // leases (and holdings, and queue places) are renewed together on its
  // reserved connection.
  const std::shared_ptr<LockClient>& client() {
    if (!client_) {
      LockClientOptions lo;
      lo.connect = co_;
      client_ = LockClient::create(global().db, lo);
    }
    return client_;
  }

  LeaseLock& lock_for(int r) {
    if (!locks_[r]) {
      LeaseOptions o = lease_options();
      // Negative control fair-queue-jump: a non-fair handle, which does not
      // look at the queue.
      // The place's ttl is the default (the ttl within 300 ms .. 10 s): a
      // paused waiter's place (2 x ttl + 500 ms) lapses.
      if (a_.kind.kind == LockKind::kFair && a_.control != Control::kFairQueueJump) o.fair = true;
      // ... and plain barging (no next turn: bounded barging serves long
      // waits in arrival order, which would hide the jumps from the check).
      if (a_.control == Control::kFairQueueJump) o.barging_limit = std::chrono::hours(1);
      locks_[r] = std::make_unique<LeaseLock>(client(), n_.lock(r), o);
    }
    return *locks_[r];
  }

  // Semaphores and read-write leases wait on this thread between attempts:
  // naps short against the ttl, so a wait of one ttl sees several tries.
  LeaseOptions sync_options() {
    LeaseOptions o = lease_options();
    o.backoff_max = std::clamp(ttl_ / 10, milliseconds(10), milliseconds(100));
    return o;
  }

  Semaphore& semaphore_for(int r) {
    if (!sems_[r]) sems_[r] = std::make_unique<Semaphore>(client(), n_.lock(r), a_.kind.permits, sync_options());
    return *sems_[r];
  }

  ReadWriteLease& rw_for(int r) {
    if (!rws_[r]) rws_[r] = std::make_unique<ReadWriteLease>(client(), n_.lock(r), sync_options());
    return *rws_[r];
  }

  void lock_op() {
    if (a_.kind.kind == LockKind::kSemaphore || a_.kind.kind == LockKind::kReadWrite)
      sync_work();
    else if (a_.kind.set_size > 0)
      set_write();
    else
      lease_write();  // the lease, or the fair lease
  }

  // --lock-kind multi:K: K distinct resources, in a random choice per hold,
  // taken as ONE lock set (all or none), "worked", then written in the set's
  // guarded transaction, each resource with its own name's fence, and each
  // journaled as a lease hold: the lease invariants (fence_order, overlap,
  // stale_lock) must hold for every resource across sets that overlap
  // each other in any order.
  void set_write() {
    std::vector<int> rs;
    while (static_cast<int>(rs.size()) < a_.kind.set_size) {
      const int r = pick(0, a_.resources - 1);
      if (std::find(rs.begin(), rs.end(), r) == rs.end()) rs.push_back(r);
    }
    std::vector<std::string> names;
    for (int r : rs) names.push_back(n_.lock(r));
    s_.phase = kAcquiring;
    auto left = std::chrono::duration_cast<milliseconds>(deadline_ - steady_clock::now());
    if (left.count() <= 0) return;
    LockSet set(client(), names, lease_options());
    if (!set.acquire(std::min(ttl_, left))) return;
    ++s_.acquisitions;
    s_.fence = set.fence();
    s_.resource = rs.front();
    s_.phase = kHolding;
    const auto held_at = steady_clock::now();
    const std::int64_t start_ms = stamp_ms();
    const bool paused = work(held_at);
    const std::int64_t believed_end_ms = stamp_ms();  // as lease_write: the hold as the holder believed it
    const bool believed = set.owns();
    s_.phase = kWriting;
    if (paused) ++s_.late_attempts;
    bool accepted = false;
    if (a_.control != Control::kNoFencing) {
      bool stale_fence = false, ran = false;
      try {
        ran = set.run_guarded([&](Transaction& tx) {
          for (int r : rs) {
            const std::int64_t fence = set.fence_of(n_.lock(r));
            if (!fenced_write(tx.connection(), n_.lock(r), fence)) throw StaleFence{};
            write(tx, r, fence, start_ms, paused);
          }
        });
      } catch (const StaleFence&) {
        stale_fence = true;
      }
      if (stale_fence) ++s_.rejected_by_fence;
      else if (!ran) ++s_.rejected_by_lease;
      else accepted = true;
    } else {
      // Negative control: trusts the set it took earlier (no re-check, no fences).
      Transaction tx(*conn_);
      for (int r : rs) write(tx, r, set.fence_of(n_.lock(r)), start_ms, paused);
      tx.commit();
      accepted = true;
    }
    if (accepted) ++s_.writes_committed;
    else if (paused) ++s_.late_rejected;
    s_.phase = kIdle;
    s_.resource = -1;
    for (int r : rs) {
      if (believed) journal_hold(r, "x", 1, set.fence_of(n_.lock(r)), start_ms, believed_end_ms, -1, paused);
      else ++s_.holds_unconfirmed;
    }
    try {
      set.release();
    } catch (const Error&) {
    }
  }

  // A fair wait, journaled for the FIFO check (chaos_check.cpp): the
  // time (stamp_ms) before the call (arrival) and after acquire_async
  // returned (its place is taken by then, so its ticket was drawn between
  // the two), the wait, the time after it ended and the grant's fence (0:
  // not granted). `stalled`: its place may have lapsed while it waited —
  // the client's renewals (LockClientStats::leases_renewed: while it waits
  // the client holds nothing else) stopped for 2/3 of the place's ttl (it
  // lapses after a whole one unrenewed; they come every third), or this
  // thread stood still for a third of it (a SIGSTOP stops the renewals too).
  // A non-fair handle (fair-queue-jump) has no place: only the latter.
  bool fair_acquire(LeaseLock& lock, int r, milliseconds left) {
    ++s_.wait_seq;
    const milliseconds wait = std::min(ttl_ * 3, left);
    const std::int64_t arrive_ms = stamp_ms();
    auto got = lock.acquire_async(wait);
    const std::int64_t queued_ms = stamp_ms();
    const bool place = lock.options().fair;
    bool stalled = false;
    auto last = steady_clock::now(), renewed_at = last;
    std::uint64_t renewed = client()->stats().leases_renewed;
    for (;;) {
      const bool ready = got.wait_for(milliseconds(10)) == std::future_status::ready;
      const auto now = steady_clock::now();
      if (now - last > place_ttl_ / 3) stalled = true;
      last = now;
      const std::uint64_t r = client_->stats().leases_renewed;
      if (r != renewed) {
        renewed = r;
        renewed_at = now;
      } else if (place && now - renewed_at > place_ttl_ * 2 / 3) {
        stalled = true;
      }
      if (ready) break;
    }
    const bool ok = got.get();  // throws what ended the wait (the database stayed away)
    const std::int64_t end_ms = stamp_ms();
    conn_->execute("INSERT INTO " + n_.wait +
                       " (resource, worker, pid, fence, arrive_ms, queued_ms, wait_ms, end_ms, stalled) VALUES (?, ?, "
                       "?, ?, ?, ?, ?, ?, ?)",
                   {r, a_.slot, static_cast<std::int64_t>(getpid()), ok ? lock.fence() : 0, arrive_ms, queued_ms,
                    static_cast<std::int64_t>(wait.count()), end_ms, stalled ? 1 : 0});
    return ok;
  }

  // The journals' clock: this host's CLOCK_MONOTONIC in ms, one clock for
  // every worker (they all run here, under one coordinator) that no step of
  // any wall clock moves — the database's included, which --faults
  // clock-step steps (and with it the database's NOW()).
  static std::int64_t stamp_ms() {
    return std::chrono::duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
  }

  // The "work" of a holder: 20-150 ms, or (1 in 8) 1.3 x ttl, which the
  // renewal must cover. A SIGSTOP from the injector shows up as one sleep
  // step that took far longer than asked (CLOCK_MONOTONIC runs on while
  // stopped): returns whether that happened.
  bool work(steady_clock::time_point held_at) {
    bool slow = pick(0, 7) == 0;
    milliseconds hold = slow ? ttl_ * 13 / 10 : milliseconds(pick(20, 150));
    if (slow) ++s_.slow_holds;
    bool paused = false;
    auto t0 = held_at, last = held_at;
    while (steady_clock::now() - t0 < hold) {
      sleep(milliseconds(10));
      auto now = steady_clock::now();
      if (now - last > std::max(ttl_ / 2, milliseconds(200))) paused = true;
      last = now;
    }
    return paused;
  }

  // --lock-kind semaphore:N / rw. Takes the kind's hold (a semaphore: 1
  // permit, or 2 in 1 of 4 when N >= 2; a read-write lease: exclusive in 1
  // of 3, else shared), "works", then writes (permit holders and
  // exclusive holders) or reads the resource's last fence (shared
  // holders), then journals the hold [start_ms, end_ms] (stamp_ms) if
  // owns() is still true after end_ms was read: by the trust
  // window the interval lies inside the hold, so the checker can count the
  // holders of every instant.
  void sync_work() {
    const int r = pick(0, a_.resources - 1);
    const bool sem = a_.kind.kind == LockKind::kSemaphore;
    std::int64_t permits = 1;
    bool writer = true;
    if (sem)
      permits = a_.kind.permits >= 2 && pick(0, 3) == 0 ? 2 : 1;
    else
      writer = pick(0, 2) == 0;
    Semaphore* sp = sem ? &semaphore_for(r) : nullptr;
    ReadWriteLease* rp = sem ? nullptr : &rw_for(r);
    auto owns = [&] { return sp ? sp->owns() : rp->owns(); };
    s_.phase = kAcquiring;
    ++s_.wait_seq;
    auto left = std::chrono::duration_cast<milliseconds>(deadline_ - steady_clock::now());
    if (left.count() <= 0) return;
    const milliseconds wait = std::min(ttl_, left);
    // Negative control rw-writer-shares: a writer that takes a shared hold.
    const LeaseMode mode =
        writer && a_.control != Control::kRwWriterShares ? LeaseMode::kExclusive : LeaseMode::kShared;
    if (!(sp ? sp->acquire(permits, wait) : rp->acquire(mode, wait))) return;
    ++s_.acquisitions;
    const std::int64_t fence = sp ? sp->fence() : rp->fence();
    s_.fence = fence;
    s_.resource = r;
    s_.phase = kHolding;
    const auto held_at = steady_clock::now();
    const std::int64_t start_ms = stamp_ms();
    const bool paused = work(held_at);
    std::int64_t seen = -1;
    if (writer) {
      s_.phase = kWriting;
      if (paused) ++s_.late_attempts;
      if (sync_write(r, fence, start_ms, paused, owns))
        ++s_.writes_committed;
      else if (paused)
        ++s_.late_rejected;
    } else {
      seen = conn_->execute("SELECT last_fence FROM " + n_.res + " WHERE id = ?", {r}).rows.at(0)[0].as_int();
    }
    const std::int64_t end_ms = stamp_ms();
    // Negative control semaphore-ignores-owns: never asks.
    const bool confirmed = a_.control == Control::kSemaphoreIgnoresOwns || owns();
    s_.phase = kIdle;
    s_.resource = -1;
    if (confirmed)
      journal_hold(r, writer ? "x" : "s", sem ? permits : 1, fence, start_ms, end_ms, seen, paused);
    else
      ++s_.holds_unconfirmed;
    bool released = false;
    try {
      released = sp ? sp->release() : rp->release();
    } catch (const Error&) {
    }
    if (!released || (sp ? sp->hold_count() : rp->hold_count()) > 0) {
      if (sp) sems_[r].reset();
      else rws_[r].reset();
    }
  }

  void journal_hold(int r, const char* mode, std::int64_t permits, std::int64_t fence, std::int64_t start_ms,
                    std::int64_t end_ms, std::int64_t seen, bool paused) {
    conn_->execute("INSERT INTO " + n_.hold +
                       " (resource, worker, pid, mode, permits, fence, start_ms, end_ms, seen_fence, paused) VALUES "
                       "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   {r, a_.slot, static_cast<std::int64_t>(getpid()), std::string(mode), permits, fence, start_ms,
                    end_ms, seen, paused ? 1 : 0});
  }

  // The write of a semaphore holder or an exclusive holder of a read-write
  // lease. There is no run_guarded for these (no lock row to lock while
  // the write commits), so the write presents the holding's fence
  // (fenced_write: refused once a holding of the name with a larger fence
  // wrote; with N permits that includes a concurrent newer holder) and
  // commits only if owns() is still true after it. With --no-fencing: a
  // plain transaction. With rw-writer-shares: no fence (a shared hold's
  // fence is the last exclusive one's, 0 before any), owns() still asked.
  bool sync_write(int r, std::int64_t fence, std::int64_t start_ms, bool paused, const std::function<bool()>& owns) {
    Transaction tx(*conn_);
    if (a_.control != Control::kNoFencing && a_.control != Control::kRwWriterShares) {
      if (!fenced_write(*conn_, n_.lock(r), fence)) {
        ++s_.rejected_by_fence;
        return false;  // rolls back
      }
    }
    write(tx, r, fence, start_ms, paused);
    if (a_.control != Control::kNoFencing && !owns()) {
      ++s_.rejected_by_lease;
      return false;
    }
    tx.commit();
    return true;
  }

  void lease_write() {
    int r = pick(0, a_.resources - 1);
    LeaseLock& lock = lock_for(r);
    s_.phase = kAcquiring;
    auto left = std::chrono::duration_cast<milliseconds>(deadline_ - steady_clock::now());
    if (left.count() <= 0) return;
    if (a_.kind.kind == LockKind::kFair) {
      // Long enough to queue behind a few holders (and a dead one's ttl).
      if (!fair_acquire(lock, r, left)) return;
    } else if (!lock.acquire(std::min(milliseconds(50), left))) {
      return;
    }
    ++s_.acquisitions;
    std::int64_t fence = lock.fence();
    s_.fence = fence;
    s_.resource = r;
    s_.phase = kHolding;
    // From here the injector may stop this process "while holding": the
    // pause is measured from now, so a stop that lands in the round trip
    // below (slower behind a pooler) is seen by the first sleep step too.
    const auto held_at = steady_clock::now();
    std::int64_t start_ms = stamp_ms();

    // The "work". Sometimes longer than the ttl: the watchdog must keep the
    // lease.
    const bool paused = work(held_at);
    // The hold as the holder believed it, before its write asks the
    // database: [start_ms, now] if owns() is still true after now was read
    // (journaled below, as for the other kinds: the overlap check counts two
    // holders that both believed they held at one instant, which the
    // guarded write alone would not show — it refuses the older one's write,
    // while what that holder does outside the database ran on).
    const std::int64_t believed_end_ms = stamp_ms();
    const bool believed = lock.owns();

    s_.phase = kWriting;
    if (paused) ++s_.late_attempts;
    bool accepted = false;
    if (a_.control != Control::kNoFencing) {
      bool stale_fence = false;
      bool ran = false;
      try {
        ran = lock.run_guarded([&](Transaction& tx) {
          // Through the guarded transaction's own connection (a lock client's):
          // the fence check commits with the write or not at all.
          if (!fenced_write(tx.connection(), n_.lock(r), fence)) throw StaleFence{};
          write(tx, r, fence, start_ms, paused);
        });
      } catch (const StaleFence&) {
        stale_fence = true;
      }
      if (stale_fence) {
        ++s_.rejected_by_fence;
      } else if (!ran) {
        ++s_.rejected_by_lease;
      } else {
        accepted = true;
      }
    } else {
      // Negative control: trusts the lease it took earlier and writes
      // without re-checking it or presenting the fencing token.
      Transaction tx(*conn_);
      write(tx, r, fence, start_ms, paused);
      tx.commit();
      accepted = true;
    }
    if (accepted)
      ++s_.writes_committed;
    else if (paused)
      ++s_.late_rejected;
    s_.phase = kIdle;
    s_.resource = -1;
    if (believed)
      journal_hold(r, "x", 1, fence, start_ms, believed_end_ms, -1, paused);
    else
      ++s_.holds_unconfirmed;
    bool released = false;
    try {
      released = lock.release();
    } catch (const Error&) {
    }
    if (!released || lock.hold_count() > 0) locks_[r].reset();
  }

  // The protected write: bump the resource's version (its row lock orders
  // writers, so version = commit order), then the audit row with the
  // holder's critical-section interval (stamp_ms).
  void write(Transaction& tx, int r, std::int64_t fence, std::int64_t start_ms, bool paused) {
    tx.execute("UPDATE " + n_.res + " SET version = version + 1, last_fence = ?, last_worker = ? WHERE id = ?",
               {fence, a_.slot, r});
    auto seq = tx.execute("SELECT version FROM " + n_.res + " WHERE id = ?", {r}).rows.at(0)[0].as_int();
    std::int64_t end_ms = stamp_ms();
    tx.execute("INSERT INTO " + n_.audit +
                   " (resource, seq, fence, worker, pid, start_ms, end_ms, paused) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
               {r, seq, fence, a_.slot, static_cast<std::int64_t>(getpid()), start_ms, end_ms, paused ? 1 : 0});
  }

  void inventory() {
    // The control sells one hot item, so that workers interleave on it in a
    // short run (spread over every item, a 3 s MariaDB run once saw no
    // overlapping sale and the control did not fire).
    if (a_.control == Control::kUnguardedDecrement) return unguarded_sale(0);
    int item = pick(0, a_.items - 1);
    if (pick(0, 1) == 0) {
      // Guarded update (transition.h): UPDATE ... SET qty = qty - 1 WHERE
      // id = ? AND qty >= 1, and the sale row, in one transaction.
      s_.phase = kInventoryTx;
      Transaction tx(*conn_);
      if (!decrement_->apply(item, {1, 1, 1})) {
        ++s_.sold_out;
        return;  // rolls back
      }
      tx.execute("INSERT INTO " + n_.sale + " (item, worker, method) VALUES (?, ?, 'guarded')", {item, a_.slot});
      sleep(milliseconds(pick(0, 8)));  // widen the mid-transaction window for kill -9
      tx.commit();
      ++s_.sales_guarded;
      return;
    }
    // Version CAS (version_cas.h): read without locks, write only if nobody
    // changed the row since; the sale row commits with the CAS.
    for (int attempt = 0; attempt < 5; ++attempt) {
      auto cur = cas_->read(item);
      if (!cur) throw Error(ErrorCode::kNotFound, "chaos stock item vanished");
      std::int64_t qty = cur->values.at(0).as_int();
      if (qty < 1) {
        ++s_.sold_out;
        return;
      }
      s_.phase = kInventoryTx;
      Transaction tx(*conn_);
      if (cas_->compare_and_set(item, cur->version, {qty - 1})) {
        tx.execute("INSERT INTO " + n_.sale + " (item, worker, method) VALUES (?, ?, 'cas')", {item, a_.slot});
        sleep(milliseconds(pick(0, 8)));
        tx.commit();
        ++s_.sales_cas;
        return;
      }
      tx.rollback();
      s_.phase = kIdle;
      ++s_.cas_conflicts;
      sleep(milliseconds(pick(1, 4 << attempt)));
    }
  }

  // Negative control for the stock invariant: read the quantity, then write
  // back that value minus one, with no guard and no version check (a lost
  // update whenever two workers interleave).
  void unguarded_sale(int item) {
    const auto qty =
        conn_->execute("SELECT qty FROM " + n_.stock + " WHERE id = ?", {item}).rows.at(0)[0].as_int();
    if (qty < 1) {
      ++s_.sold_out;
      return;
    }
    sleep(milliseconds(pick(2, 10)));  // another worker's sale lands in between
    s_.phase = kInventoryTx;
    Transaction tx(*conn_);
    tx.execute("UPDATE " + n_.stock + " SET qty = ? WHERE id = ?", {qty - 1, item});
    tx.execute("INSERT INTO " + n_.sale + " (item, worker, method) VALUES (?, ?, 'unguarded')", {item, a_.slot});
    tx.commit();
  }

  void inbox() {
    // Messages are drawn with replacement from a small id space: most
    // deliveries of a busy run are redeliveries.
    std::int64_t m = pick(1, a_.messages);
    ++s_.deliveries;
    s_.phase = kInboxTx;
    const std::string effect = "INSERT INTO " + n_.effect + " (message, worker) VALUES (?, ?)";
    // Negative control: the effect commits on its own, before the dedup
    // transaction, so every redelivery repeats it.
    const bool outside = a_.control == Control::kEffectsOutsideInbox;
    if (outside) conn_->execute(effect, {m, a_.slot});
    auto r = inbox_->process(n_.consumer, "m" + std::to_string(m), [&](Transaction& tx) {
      if (!outside) tx.execute(effect, {m, a_.slot});
      sleep(milliseconds(pick(0, 8)));
    });
    ++(r.outcome == InboxOutcome::kProcessed ? s_.inbox_processed : s_.inbox_duplicates);
  }

  const WorkerArgs& a_;
  Slot& s_;
  Names n_;
  milliseconds ttl_;
  std::mt19937_64 rng_;
  steady_clock::time_point deadline_;
  ConnectOptions co_;
  std::unique_ptr<Connection> conn_;
  std::shared_ptr<LockClient> client_;  // declared before locks_: handles go first
  std::unique_ptr<Inbox> inbox_;
  std::unique_ptr<GuardedUpdate> decrement_;
  std::unique_ptr<VersionCas> cas_;
  std::vector<std::unique_ptr<LeaseLock>> locks_;
  std::vector<std::unique_ptr<Semaphore>> sems_;
  std::vector<std::unique_ptr<ReadWriteLease>> rws_;
  milliseconds place_ttl_;  // of a fair waiter's queue place (LeaseOptions::place_ttl's default)
};

int run_worker(const WorkerArgs& a) {
  int fd = ::open(a.state_file.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) throw Error(ErrorCode::kInvalidArgument, "chaos-worker: cannot open state file " + a.state_file);
  struct stat st {};
  fstat(fd, &st);
  if (a.slot < 0 || static_cast<std::size_t>(st.st_size) < (a.slot + 1) * sizeof(Slot))
    throw Error(ErrorCode::kInvalidArgument, "chaos-worker: slot out of range");
  void* mem = mmap(nullptr, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (mem == MAP_FAILED) throw Error(ErrorCode::kInternal, "chaos-worker: mmap failed");
  Slot& s = static_cast<Slot*>(mem)[a.slot];
  s.pid = static_cast<std::int32_t>(getpid());
  s.phase = kIdle;
  s.resource = -1;
  // Releases of leases that a fault took away are expected here by the
  // hundred; only errors are worth a line (SQLGUARD_CHAOS_VERBOSE: all).
  bool verbose = std::getenv("SQLGUARD_CHAOS_VERBOSE") != nullptr;
  int slot = a.slot;
  set_log_hook([verbose, slot](LogLevel level, std::string_view msg) {
    if (verbose || level == LogLevel::kError) std::cerr << "chaos-worker " << slot << ": " << msg << "\n";
  });
  int rc;
  {
    // The worker, and with it its lock client, ends before the slot is
    // unmapped: the client's threads may still call on_lost (which counts
    // into the slot) until the client is destroyed. (Unmapped first, a loss
    // reported during that teardown was a SIGSEGV at exit: one in CI.)
    Worker w(a, s);
    rc = w.run();
  }
  s.phase = kExited;
  munmap(mem, st.st_size);
  return rc;
}

}  // namespace

void add_chaos_worker(CLI::App& app) {
  auto a = std::make_shared<WorkerArgs>();
  auto* cmd = app.add_subcommand("chaos-worker", "internal: one worker process of `sqlguard chaos`");
  cmd->group("");  // hidden
  cmd->add_option("--run", a->run)->required();
  cmd->add_option("--state", a->state_file)->required();
  cmd->add_option("--slot", a->slot)->required();
  cmd->add_option("--deadline-ns", a->deadline_ns)->required();
  cmd->add_option("--ttl-ms", a->ttl_ms)->required();
  cmd->add_option("--resources", a->resources)->required();
  cmd->add_option("--items", a->items)->required();
  cmd->add_option("--messages", a->messages)->required();
  cmd->add_option("--seed", a->seed);
  auto control = std::make_shared<std::string>();
  cmd->add_option("--control", *control);
  auto kind = std::make_shared<std::string>("lease");
  cmd->add_option("--lock-kind", *kind);
  cmd->callback([a, control, kind] {
    if (!control->empty()) a->control = parse_control(*control);
    a->kind = parse_lock_kind(*kind);
    if (a->run.size() != 8 || a->resources < 1 || a->items < 1 || a->messages < 1 || a->ttl_ms < 10)
      throw CLI::ValidationError("chaos-worker", "bad internal arguments");
    exit_code() = run_worker(*a);
  });
}

}  // namespace sqlguard::cli::chaos
