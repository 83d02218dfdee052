// The lock client's coalescing (LockClientOptions::batch_max): while every
// work connection is busy, try-acquires and releases of distinct lease names
// wait together, and the caller that gets the next free connection sends them
// as one batch (plans.h, BatchPlan). With a connection free a call goes at
// once, alone: an idle client adds no latency. A batch decides only what needs
// no take-over decision (a name never seen, a released row); a held name is
// answered busy from what the batch read, unless this process's watch may
// take it over; everything undecided is sent alone by its own caller.
#include <algorithm>
#include <condition_variable>
#include <set>

#include "client/client.h"
#include "core/metric_hooks.h"
#include "core/reconnect.h"
#include "dialect/dialect.h"
#include "plans/acquire_common.h"
#include "plans/plans.h"
#include "strategies/names.h"

namespace sqlguard::detail {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// One coalesced call. Fields after `taken` are written by the caller that
// sends its batch, read by its own caller once `done` (slot_mu_).
struct Pending {
  bool release = false;
  int slot = -1;  // a release pinned to the session that acquired (-1: any)
  std::shared_ptr<ClientLease> lease;  // a try-acquire's
  BatchTry attempt;
  BatchRelease ref;
  bool taken = false;  // in a batch being sent
  std::condition_variable cv;  // its answer came, or a connection it may take is free (slot_mu_)
  bool done = false;   // its batch was sent (or failed: `failed`)
  bool failed = false;
  bool won = false, busy = false, released = false;
  std::int64_t holder_remaining_ms = 0;
  const std::string& name() const { return release ? ref.name : attempt.name; }
};

bool ClientCore::coalesces(const ClientLease& l) const noexcept {
  return batch_plan_ && !borrowed_ && options_.batch_max > 1 && l.kind == RowKind::kLease && !l.options.fair;
}

bool ClientCore::coalesces_release(const ClientLease& l, ReleaseCommit commit) const noexcept {
  // A durable release keeps its own flushed statement (PostgreSQL).
  return coalesces(l) && (commit == ReleaseCommit::kCoveredByNextAcquire || !release_skips_flush_);
}

std::optional<ClientCore::Borrowed> ClientCore::join(Pending& p) {
  check_process();
  std::unique_lock<std::mutex> lk(slot_mu_);
  const auto same_kind = [&](const Pending* q) { return q->release == p.release; };
  if (std::none_of(pending_.begin(), pending_.end(), same_kind)) {
    const int s = free_slot_locked(p.slot);
    if (s >= 0) return claim(lk, s);  // idle: alone, at once
  }
  pending_.push_back(&p);
  const auto deadline = steady_clock::now() + options_.borrow_timeout;
  int got = -1;
  // Woken alone: by the caller that sends its batch (done), or, while it is
  // the oldest queued call, by a connection coming free (Borrowed).
  auto ready = [&] {
    if (stop_ || p.done) return true;
    if (p.taken) return false;  // in another caller's batch: wait for its answer
    got = free_slot_locked(p.slot);
    return got >= 0;
  };
  if (!p.cv.wait_until(lk, deadline, ready)) {
    if (!p.taken) {
      pending_.erase(std::find(pending_.begin(), pending_.end(), &p));
      wake_pending_locked();  // (a connection may be free for the next one)
      throw_exhausted_locked(p.slot);
    }
    p.cv.wait(lk, [&] { return p.done; });  // being sent: its answer comes
  }
  if (p.done) return std::nullopt;
  pending_.erase(std::find(pending_.begin(), pending_.end(), &p));
  if (got < 0) throw_exhausted_locked(p.slot);  // stopping
  // This caller sends: its own call and up to batch_max - 1 queued calls of
  // the same kind (distinct names; a release pinned to this session or none).
  std::vector<Pending*> batch{&p};
  std::set<std::string> names{p.name()};
  for (auto it = pending_.begin(); it != pending_.end() && batch.size() < options_.batch_max;) {
    Pending* q = *it;
    if (same_kind(q) && (q->slot < 0 || q->slot == got) && names.insert(q->name()).second) {
      q->taken = true;
      batch.push_back(q);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  if (batch.size() == 1) return claim(lk, got);  // nobody to carry: alone
  p.taken = true;
  std::optional<Borrowed> conn;
  try {
    conn.emplace(claim(lk, got));
    send_batch(*conn, batch);
  } catch (...) {
    // No connection: every call of the batch is sent alone by its caller
    // (which meets the same error, or a connection that works again).
    for (Pending* q : batch) q->failed = true;
  }
  {
    std::lock_guard<std::mutex> g(slot_mu_);
    for (Pending* q : batch) {
      q->done = true;
      q->cv.notify_one();
    }
    ++batches_;
    batched_calls_ += batch.size();
  }
  if (p.failed) return std::nullopt;  // (its connection may be gone)
  return conn;
}

void ClientCore::wake_pending_locked() {
  for (Pending* q : pending_)
    if (free_slot_locked(q->slot) >= 0) {
      q->cv.notify_one();
      return;
    }
}

void ClientCore::send_batch(Borrowed& c, std::vector<Pending*>& batch) {
  Connection& conn = *c;
  const auto sent = steady_clock::now();
  try {
    if (batch.front()->release) {
      std::vector<BatchRelease> refs;
      for (Pending* q : batch) refs.push_back(q->ref);
      const auto out = batch_plan_->release(conn, refs);
      for (std::size_t i = 0; i < batch.size(); ++i) batch[i]->released = out[i];
      return;
    }
    std::vector<BatchTry> tries;
    for (Pending* q : batch) tries.push_back(q->attempt);
    const auto out = batch_plan_->acquire(conn, tries);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      Pending& q = *batch[i];
      const BatchTook& t = out[i];
      const auto rule = q.lease->options.take_over;
      if (t.taken) {
        ++metric::lock_attempts();
        ++metric::lock_acquired();
        watches().forget(watch_key(conn, q.attempt.name));
        took(q.lease, c.slot(), q.attempt.owner, t.fence, t.expire_at, sent);
        q.won = true;
        continue;
      }
      // Held: busy, unless this process may take it over (its watch is ripe,
      // the database clock rule says it ran out, it is released but was
      // locked at that instant) or has never looked at it (the machine's
      // watch is asked first), or the name is another kind's: sent alone.
      if (!t.seen || t.holder_expire_at == kReservedExpireAt) continue;
      const std::string key = watch_key(conn, q.attempt.name);
      const auto look = rule == TakeOver::kWatched ? watches().look(key, steady_clock::now()) : WatchBook::Look{};
      if (may_take_over(*t.seen, look.ripe, rule)) continue;
      const bool ran_out = !t.seen->released && t.seen->version.expire_at <= t.seen->db_now;
      if (rule == TakeOver::kWatched && !look.known && ran_out) continue;
      AcquireResult r = busy(q.attempt.owner, t.holder_expire_at - t.seen->db_now);
      watched_busy(r, key, *t.seen, rule);
      ++metric::lock_attempts();
      ++metric::lock_busy();
      q.busy = true;
      q.holder_remaining_ms = r.holder_remaining_ms;
    }
  } catch (const Error& e) {
    // The session may be broken (or, MariaDB, in an unknown transaction
    // state): closed, so nobody sends on it again. Every call of the batch
    // that has no answer is sent alone by its caller.
    if (is_outage(e)) c.discard();
    throw;
  }
}

bool ClientCore::try_coalesced(const std::shared_ptr<ClientLease>& l, milliseconds budget,
                               milliseconds* holder_remaining) {
  if (l->renew) admit(*l);
  Pending p;
  p.lease = l;
  p.attempt = BatchTry{l->name, l->options.owner.empty() ? make_owner_token() : l->options.owner, l->options.ttl,
                       l->options.min_hold};
  auto alone = join(p);
  if (p.done && !p.failed) {
    if (p.won) return true;
    if (p.busy) {
      *holder_remaining = p.holder_remaining_ms > 0 ? milliseconds(p.holder_remaining_ms) : l->options.ttl;
      note_refusal(*l->state, p.holder_remaining_ms);
      return false;
    }
  }
  if (alone) return attempt_on(*alone, l, budget, holder_remaining);
  auto c = borrow();
  return attempt_on(c, l, budget, holder_remaining);
}

bool ClientCore::coalesced_release(const ClientLease& l, const std::string& owner, std::int64_t fence,
                                   std::optional<Borrowed>& alone) {
  Pending p;
  p.release = true;
  {
    std::lock_guard<std::mutex> lk(l.state->mu);
    p.slot = l.slot;
  }
  p.ref = BatchRelease{l.name, owner, fence};
  auto conn = join(p);
  if (conn) alone.emplace(std::move(*conn));
  if (!p.done || p.failed || !p.released) return false;
  ++metric::lock_releases();
  return true;
}

}  // namespace sqlguard::detail
