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
#include "core/process.h"
#include "core/reconnect.h"
#include "dialect/dialect.h"
#include "plans/acquire_common.h"
#include "plans/plans.h"
#include "strategies/names.h"

namespace sqlguard::detail {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// Sender threads of asynchronous calls, at most (one per work connection):
// two batches in flight (measured, PostgreSQL durable, 256 coroutine
// requesters: 15,322 acquire+release/s with one, 17,957 with two).
constexpr std::size_t kSenderThreads = 2;

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
  // An asynchronous call (no thread waits on `cv`): owned by the queue, then
  // by the sender thread that finishes it. `batchable` false: never batched.
  ClientCore::AsyncFinish finish;
  bool batchable = true;
  // When it leaves the queue unsent if no work connection came free (as a
  // blocked call: after borrow_timeout), and the error it then gets. (An
  // acquire's first try waits so even past its wait's deadline: a wait
  // makes one attempt at least, so a false answer always means "busy".)
  steady_clock::time_point give_up;
  std::optional<Error> error;
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
  std::vector<Pending*> batch = gather_locked(p, got, false);
  if (batch.size() == 1) return claim(lk, got);  // nobody to carry: alone
  p.taken = true;
  std::optional<Borrowed> conn;
  try {
    conn.emplace(claim(lk, got));
  } catch (...) {
    // No connection: every call of the batch is sent alone by its caller
    // (which meets the same error, or a connection that works again).
    for (Pending* q : batch) q->failed = true;
  }
  if (conn) (void)send_gathered(*conn, batch);  // (no asynchronous call in it)
  else (void)send_failed(batch);
  if (p.failed) return std::nullopt;  // (its connection may be gone)
  return conn;
}

std::vector<Pending*> ClientCore::gather_locked(Pending& lead, int slot, bool with_async) {
  std::vector<Pending*> batch{&lead};
  std::set<std::string> names{lead.name()};
  for (auto it = pending_.begin(); it != pending_.end() && batch.size() < options_.batch_max;) {
    Pending* q = *it;
    if (q->release == lead.release && q->batchable && (with_async || !q->finish) && (q->slot < 0 || q->slot == slot) &&
        names.insert(q->name()).second) {
      q->taken = true;
      if (q->finish) --async_pending_;
      batch.push_back(q);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  return batch;
}

std::vector<Pending*> ClientCore::send_gathered(Borrowed& conn, std::vector<Pending*>& batch) noexcept {
  try {
    send_batch(conn, batch);
  } catch (...) {
    for (Pending* q : batch) q->failed = true;
  }
  return send_failed(batch);
}

// Every call of a sent (or failed) batch gets its answer: a waiting caller
// is woken; the asynchronous ones are returned for their finish.
std::vector<Pending*> ClientCore::send_failed(std::vector<Pending*>& batch) noexcept {
  std::vector<Pending*> async;
  std::lock_guard<std::mutex> g(slot_mu_);
  for (Pending* q : batch) {
    q->done = true;
    if (q->finish) async.push_back(q);
    else q->cv.notify_one();
  }
  if (batch.size() > 1) {  // (a sender thread's lone call is no batch)
    ++batches_;
    batched_calls_ += batch.size();
  }
  return async;
}

void ClientCore::wake_pending_locked() {
  for (Pending* q : pending_)
    if (free_slot_locked(q->slot) >= 0) {
      if (q->finish) sender_cv_.notify_one();  // asynchronous: a sender thread sends it
      else q->cv.notify_one();
      return;
    }
}

// ---- asynchronous calls: the sender threads ---------------------------------

void ClientCore::submit_async(std::unique_ptr<Pending> p) {
  check_process();
  std::lock_guard<std::mutex> lk(slot_mu_);
  if (stop_) throw Error(ErrorCode::kInternal, "the lock client is shutting down: no new asynchronous call");
  // One sender with the first call; a second (one per work connection, at
  // most kSenderThreads) once calls come while none is idle.
  const std::size_t cap = std::clamp<std::size_t>(slots_.size(), 1, kSenderThreads);
  if (senders_.empty() || (senders_idle_ == 0 && senders_.size() < cap))
    name_thread(senders_.emplace_back([this] { sender_loop(); }), "sqlguard-send");
  p->give_up = steady_clock::now() + options_.borrow_timeout;
  pending_.push_back(p.release());
  ++async_pending_;
  sender_cv_.notify_one();
}

// The oldest asynchronous call a connection is free for: `got` is the
// connection (a call that is not batched borrows one itself when it is
// sent). Else one whose time to give up came (`got` -1), else none; `next`
// is when one gives up.
Pending* ClientCore::next_async_locked(int& got, steady_clock::time_point& next) {
  const auto now = steady_clock::now();
  next = steady_clock::time_point::max();
  Pending* expired = nullptr;
  for (Pending* q : pending_) {
    if (!q->finish) continue;
    got = free_slot_locked(q->slot);
    if (got >= 0) return q;
    if (q->give_up <= now) expired = expired ? expired : q;
    next = std::min(next, q->give_up);
  }
  got = -1;
  return expired;
}

void ClientCore::sender_loop() {
  std::unique_lock<std::mutex> lk(slot_mu_);
  for (;;) {
    Pending* lead = nullptr;
    int got = -1;
    // Stopping, the thread ends once no call is left (a handle's destructor
    // waits for its releases, so none is dropped).
    ++senders_idle_;
    for (;;) {
      steady_clock::time_point next;
      lead = next_async_locked(got, next);
      if (lead || (stop_ && async_pending_ == 0)) break;
      if (next == steady_clock::time_point::max()) sender_cv_.wait(lk);
      else sender_cv_.wait_until(lk, next);
    }
    --senders_idle_;
    if (!lead) return;
    pending_.erase(std::find(pending_.begin(), pending_.end(), lead));
    --async_pending_;
    // No work connection came free in time: it fails as a blocked call does
    // after borrow_timeout (held leases are not at stake).
    if (got < 0) lead->error = exhausted_error_locked(lead->slot);
    if (!lead->batchable || lead->error) {
      lk.unlock();
      finish_async(lead, false);
      lk.lock();
      continue;
    }
    lead->taken = true;
    std::vector<Pending*> batch = gather_locked(*lead, got, true);
    std::vector<Pending*> async;
    try {
      Borrowed conn = claim(lk, got);
      async = send_gathered(conn, batch);
    } catch (...) {
      for (Pending* q : batch) q->failed = true;  // no connection: each call alone
      async = send_failed(batch);
    }
    // (the batch's connection is back: a finish may borrow one)
    for (Pending* q : async) finish_async(q, false);
    lk.lock();
  }
}

void ClientCore::finish_async(Pending* p, bool stopping) noexcept {
  std::unique_ptr<Pending> own(p);
  AsyncAnswer a;
  a.stopping = stopping;
  a.won = p->won;
  a.busy = p->busy;
  a.released = p->released;
  a.holder_remaining_ms = p->holder_remaining_ms;
  a.error = p->error;
  a.batched = p->done && !p->failed && (p->won || p->busy || p->released);
  try {
    p->finish(a);
  } catch (const std::exception& e) {
    log(LogLevel::kError, std::string("lock client: an asynchronous call's completion threw: ") + e.what());
  } catch (...) {
    log(LogLevel::kError, "lock client: an asynchronous call's completion threw a non-standard exception");
  }
}

void ClientCore::release_async(const ClientLease& l, const std::string& owner, std::int64_t fence, bool batchable,
                               AsyncFinish finish) {
  auto p = std::make_unique<Pending>();
  p->release = true;
  {
    std::lock_guard<std::mutex> lk(l.state->mu);
    p->slot = l.slot;
  }
  p->ref = BatchRelease{l.name, owner, fence};
  p->batchable = batchable;
  p->finish = std::move(finish);
  async_release_begin(l);
  try {
    submit_async(std::move(p));
  } catch (...) {
    async_release_end(l);
    throw;
  }
}

void ClientCore::async_release_begin(const ClientLease& l) {
  std::lock_guard<std::mutex> lk(slot_mu_);
  ++async_releases_[&l];
}

void ClientCore::async_release_end(const ClientLease& l) noexcept {
  {
    std::lock_guard<std::mutex> lk(slot_mu_);
    auto it = async_releases_.find(&l);
    if (it != async_releases_.end() && --it->second <= 0) async_releases_.erase(it);
  }
  async_release_cv_.notify_all();
}

void ClientCore::wait_async_releases(const ClientLease& l) noexcept {
  std::unique_lock<std::mutex> lk(slot_mu_);
  async_release_cv_.wait(lk, [&] { return async_releases_.count(&l) == 0; });
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

namespace {
// A lease's try in a batch: its owner token (a fresh one unless the options
// name one), ttl and minimum hold.
BatchTry batch_try_of(const ClientLease& l) {
  return BatchTry{l.name, l.options.owner.empty() ? make_owner_token() : l.options.owner, l.options.ttl,
                  l.options.min_hold};
}
}  // namespace

bool ClientCore::try_coalesced(const std::shared_ptr<ClientLease>& l, milliseconds budget,
                               milliseconds* holder_remaining) {
  if (l->renew) admit(*l);
  Pending p;
  p.lease = l;
  p.attempt = batch_try_of(*l);
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

void ClientCore::acquire_async_batched(std::shared_ptr<ClientWait> w) {
  const std::shared_ptr<ClientLease> l = w->lease;
  auto p = std::make_unique<Pending>();
  p->lease = l;
  p->attempt = batch_try_of(*l);
  p->finish = [this, w](const AsyncAnswer& a) {
    const std::shared_ptr<ClientLease>& lease = w->lease;
    bool cancelled = false, stopping = false, ends = false;
    {
      std::lock_guard<std::mutex> lk(wait_mu_);
      first_try_done_locked(*lease);
      cancelled = w->cancelled;
      stopping = stop_;
      if (a.batched) ++attempts_;
      if (a.error) w->outage = *a.error;  // (reported if the wait ends so)
      // Ends here: taken, cancelled, the client stopping, or busy (or never
      // sent) with no time left. Else the wait goes on in the waiter
      // thread's queue.
      if (a.batched && a.busy) w->tried = true;
      ends = cancelled || stopping || (a.batched && a.won) ||
             (((a.batched && a.busy) || a.error) && steady_clock::now() >= w->deadline);
      if (!ends)
        enqueue_wait_locked(w, a.batched && a.busy ? std::max<std::int64_t>(1, a.holder_remaining_ms) : 0, true);
      else if (!cancelled) lease->waiting = false;  // (cancel_acquire cleared it)
      // A wait that ends here keeps nothing of the name, as one that ends
      // in the queue (erase_queue_locked): the watch its busy answer started
      // goes, unless another wait of the client goes on with it.
      const std::string& key = queue_key(*lease);
      if (ends && a.busy && !queues_.count(key) && !first_try_names_.count(key))
        watches().forget(watch_key(description_, key));
    }
    if (!ends) {
      start_waiter_threads();
      wait_cv_.notify_all();
      return;
    }
    if ((cancelled || stopping) && a.batched && a.won) release_quietly(lease);
    call_done(*w, !cancelled && !stopping && a.batched && a.won,
              cancelled || stopping || !a.error ? nullptr : std::make_exception_ptr(*a.error));
  };
  submit_async(std::move(p));
}

}  // namespace sqlguard::detail
