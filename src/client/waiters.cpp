// The lock client's waiters: every pending acquire of the client waits in a
// queue per lock name (arrival order inside the process); one waiter thread
// runs the heads' attempts, and one listener thread turns the dialect's
// wake-ups (WaitPlan::make_listener) into "try now". A head without a
// wake-up tries again after a full-jitter backoff capped by what the
// holder's lease has left; names due together are polled with one
// statement (lease_poll) and only the free ones tried.
#include <algorithm>
#include <limits>
#include <set>
#include <span>
#include <utility>

#include "core/catalog.h"
#include "core/process.h"
#include "sqlguard/validate.h"
#include "plans/batch_rows.h"
#include "client/client.h"
#include "client/fairness.h"
#include "core/reconnect.h"
#include "plans/acquire_common.h"
#include "plans/plans.h"

namespace sqlguard::detail {

using std::chrono::milliseconds;
using std::chrono::steady_clock;


void ClientCore::start_waiter_threads() {
  std::lock_guard<std::mutex> lk(wait_mu_);
  if (waiter_threads_ || stop_) return;
  waiter_threads_ = true;
  waiter_ = std::thread([this] { waiter_loop(); });
  listener_ = std::thread([this] { listener_loop(); });
  name_thread(waiter_, "sqlguard-wait");
  name_thread(listener_, "sqlguard-listen");
}

void ClientCore::acquire_async(const std::shared_ptr<ClientLease>& l, milliseconds wait, AcquireDone done) {
  check_process();
  if (borrowed_)
    throw Error(ErrorCode::kNotSupported, "lease '" + l->name + "': acquire_async needs a handle of a LockClient (this "
                                          "one borrows a connection: its waits run on the caller's thread)");
  check_duration(wait, "wait", milliseconds(0), std::chrono::hours(24 * 365));
  if (!done) throw Error(ErrorCode::kInvalidArgument, "acquire_async: the completion callback is empty");
  int reentrant = 0;  // 1: held, one more hold; -1: holding a lost lease (release() it first)
  {
    std::lock_guard<std::mutex> lk(l->state->mu);
    if (l->state->hold > 0) {
      reentrant = l->state->valid_locked() ? 1 : -1;
      if (reentrant > 0) ++l->state->hold;
    }
  }
  if (reentrant != 0) {
    done(reentrant > 0, nullptr);
    return;
  }
  auto w = std::make_shared<ClientWait>();
  w->lease = l;
  w->turn = FairPolicy::next_turn_for(*l);  // bounded barging: its next turn, past barging_limit
  if (coalesces(*l)) {
    // The first try goes in a batch with other asynchronous (and blocked)
    // calls of the client; the wait, if any is left, to the waiter thread.
    // Not while others of this client wait for the name (or try it first):
    // it queues behind them, first come first served.
    // (A client whose renewals are behind admits no new lease: the wait
    // goes to the queue, whose attempts are paced until it admits again.)
    bool first = admitted(*l);
    {
      std::lock_guard<std::mutex> lk(wait_mu_);
      const std::string& key = queue_key(*l);
      first = first && !queues_.count(key) && !first_try_names_.count(key);
      if (first) {
        if (l->waiting)
          throw Error(ErrorCode::kInvalidArgument, "lease '" + l->name + "': an asynchronous acquire of this handle "
                                                   "is already pending");
        w->deadline = steady_clock::now() + wait;
        w->done = std::move(done);
        l->waiting = true;
        first_tries_[l.get()] = w;
        ++first_try_names_[key];
      }
    }
    if (first) {
      try {
        acquire_async_batched(w);
      } catch (...) {
        std::lock_guard<std::mutex> lk(wait_mu_);
        first_try_done_locked(*l);
        l->waiting = false;
        throw;
      }
      return;
    }
  }
  acquire_async(std::move(w), wait, std::move(done));
}

void ClientCore::first_try_done_locked(const ClientLease& l) {
  first_tries_.erase(&l);
  auto it = first_try_names_.find(queue_key(l));
  if (it != first_try_names_.end() && --it->second <= 0) first_try_names_.erase(it);
}

void ClientCore::enqueue_wait_locked(std::shared_ptr<ClientWait> w, std::int64_t busy_for_ms, bool first_try) {
  const std::shared_ptr<ClientLease>& l = w->lease;
  auto& q = queues_[queue_key(*l)];
  if (q.waits.empty()) {
    q.channel = l->channel();
    q.since = steady_clock::now();
    q.next_try = q.since;
    q.woken = true;
    q.idle_wakes = 0;
    q.backoff = l->options.backoff_initial;
    if (busy_for_ms > 0) {
      // Its first try (a batch's) found the lease held: it waits for the
      // release's wake-up, or its timer, as after a busy attempt.
      q.woken = false;
      q.holder_remaining = milliseconds(busy_for_ms);
      q.next_try = q.since + jitter(std::min(q.backoff, std::max(q.holder_remaining, l->options.backoff_initial)));
      q.backoff = std::min(q.backoff * 2, l->options.backoff_max);
    }
  }
  if (w->place) FairPolicy::enqueue(q, std::move(w));
  else if (first_try && !q.waits.empty() && !w->lease->options.fair) {
    // A first try answered after later acquires of the name queued (they
    // came while it was in its batch): it goes before them, as it came
    // first (behind a head whose attempt runs).
    q.waits.insert(q.waits.begin() + (q.busy ? 1 : 0), std::move(w));
  } else {
    q.waits.push_back(std::move(w));
  }
  listen_now_locked(q);
}

void ClientCore::acquire_async(std::shared_ptr<ClientWait> w, milliseconds wait, AcquireDone done) {
  check_process();
  if (borrowed_)
    throw Error(ErrorCode::kNotSupported, "'" + w->lease->name + "': acquire_async needs a handle of a LockClient");
  check_duration(wait, "wait", milliseconds(0), std::chrono::hours(24 * 365));
  if (!done) throw Error(ErrorCode::kInvalidArgument, "acquire_async: the completion callback is empty");
  const std::shared_ptr<ClientLease> l = w->lease;
  start_waiter_threads();
  w->deadline = steady_clock::now() + wait;
  w->done = std::move(done);
  if (l->options.fair) {
    {
      std::lock_guard<std::mutex> lk(wait_mu_);
      if (l->waiting)
        throw Error(ErrorCode::kInvalidArgument, "lease '" + l->name + "': an asynchronous acquire of this handle is "
                                                 "already pending");
    }
    // Its place in the name's queue: the database's ticket is its turn.
    auto c = borrow();
    w->place = take_place(*c, *l);
  }
  {
    std::unique_lock<std::mutex> lk(wait_mu_);
    if (l->waiting) {
      auto place = std::move(w->place);
      lk.unlock();
      leave_place(place);
      throw Error(ErrorCode::kInvalidArgument, "lease '" + l->name + "': an asynchronous acquire of this handle is "
                                               "already pending");
    }
    l->waiting = true;
    // A fair wait that joins right after its try read the queue (a blocking
    // acquire's first try) starts from that read: far in line, it is paced
    // as after a queue read instead of reading the queue again at once.
    const bool seeded = w->place && l->tried_ahead >= FairPolicy::kFarInLine &&
                        steady_clock::now() - l->tried_at < FairPolicy::kTriedAheadFresh;
    if (seeded) {
      w->ahead = l->tried_ahead;
      w->ahead_since = l->tried_at;
      w->not_turn = true;
    }
    l->tried_ahead = -1;
    const auto seeded_wait = seeded ? w : nullptr;
    enqueue_wait_locked(std::move(w), 0);
    if (seeded_wait) {
      auto& q = queues_[queue_key(*l)];
      if (q.waits.size() == 1 && q.waits.front() == seeded_wait && !q.busy) {
        q.woken = false;
        FairPolicy::after_busy(q, seeded_wait, steady_clock::now(), *wait_plan_, false);
      }
    }
  }
  wait_cv_.notify_all();
}

bool ClientCore::waiting(const ClientLease& l) const {
  std::lock_guard<std::mutex> lk(wait_mu_);
  return l.waiting;
}

bool ClientCore::cancel_acquire(const std::shared_ptr<ClientLease>& l) {
  std::shared_ptr<ClientWait> gone;
  {
    std::lock_guard<std::mutex> lk(wait_mu_);
    if (!l->waiting) return false;
    if (auto f = first_tries_.find(l.get()); f != first_tries_.end()) {
      // Its first try is in a batch: its callback gets false once the batch
      // answered (a lease the batch took for it is released).
      f->second->cancelled = true;
      l->waiting = false;
      return true;
    }
    auto qi = queues_.find(queue_key(*l));
    if (qi == queues_.end()) return false;
    auto& q = qi->second;
    for (std::size_t i = 0; i < q.waits.size(); ++i) {
      if (q.waits[i]->lease != l) continue;
      if (i == 0 && q.busy) {
        q.waits[0]->cancelled = true;  // its attempt is running: the waiter thread finishes it
        gone = nullptr;
      } else {
        gone = q.waits[i];
        q.waits.erase(q.waits.begin() + static_cast<std::ptrdiff_t>(i));
        if (i == 0) {
          q.since = steady_clock::now();
          q.woken = true;
        }
        if (q.waits.empty()) erase_queue_locked(qi);
      }
      l->waiting = false;
      break;
    }
  }
  wait_cv_.notify_all();
  if (gone) {
    leave_place(gone->place);
    gone->done(false, nullptr);
    if (gone->turn) drop_next_turn(nullptr, *gone->lease, *gone->turn);
  }
  return true;
}

void ClientCore::local_release(const std::string& name) {
  {
    std::lock_guard<std::mutex> lk(wait_mu_);
    auto qi = queues_.find(name);
    if (qi == queues_.end()) return;
    qi->second.woken = true;
  }
  wait_cv_.notify_all();
}

void ClientCore::release_quietly(const std::shared_ptr<ClientLease>& l) noexcept {
  std::string owner;
  std::int64_t fence = 0;
  int slot = -1;
  {
    std::lock_guard<std::mutex> lk(l->state->mu);
    if (l->state->hold == 0) return;
    owner = l->state->owner;
    fence = l->state->fence;
    slot = l->slot;
    l->state->hold = 0;
  }
  renew_unregister(l.get());
  try {
    auto c = borrow(slot);
    release_lease(*c, l->name, owner, fence, l->options.release_commit, l->options.fair, take_held_place(*l));
  } catch (const std::exception& e) {
    log(LogLevel::kWarning, "releasing lease '" + l->name + "' after its acquire was cancelled failed (it expires by "
                            "itself): " + e.what());
  }
  local_release(l->name);
}

void call_done(ClientWait& w, bool acquired, std::exception_ptr error) noexcept {
  try {
    w.done(acquired, error);
  } catch (const std::exception& e) {
    log(LogLevel::kError, std::string("an acquire_async callback threw: ") + e.what());
  } catch (...) {
    log(LogLevel::kError, "an acquire_async callback threw a non-standard exception");
  }
}

// A completed wait: its callback runs outside the waiter thread's mutex.
struct Completion {
  std::shared_ptr<ClientWait> wait;
  bool acquired;
  std::exception_ptr error;
};

namespace {

void complete(ClientCore& core, std::vector<Completion>& done) noexcept {
  for (auto& c : done) {
    // A fair waiter leaves the queue when its wait ends (acquired: left already).
    if (c.wait->place) core.leave_place(std::exchange(c.wait->place, nullptr));
    call_done(*c.wait, c.acquired, c.error);
    // A wait that ended unacquired gives the lease's next turn back (after
    // its callback: a wait returns on time whatever this statement does).
    if (c.wait->turn && !c.acquired) core.drop_next_turn(nullptr, *c.wait->lease, *c.wait->turn);
  }
  done.clear();
}

std::exception_ptr timed_out_error(const ClientWait& w) {
  if (w.outage) return std::make_exception_ptr(*w.outage);
  return nullptr;
}
}  // namespace

void ClientCore::waiter_loop() {
  waiter_thread_id_ = std::this_thread::get_id();
  std::vector<Completion> done;
  std::unique_lock<std::mutex> lk(wait_mu_);
  while (!stop_) {
    expire_waits_locked(done);
    std::vector<std::string> woken, timed;
    const auto next = due_heads_locked(woken, timed);
    if (woken.empty() && timed.empty()) {
      if (!done.empty()) {
        lk.unlock();
        complete(*this, done);
        lk.lock();
        continue;
      }
      wait_cv_.wait_until(lk, next);
      continue;
    }
    lk.unlock();
    complete(*this, done);
    std::vector<std::string> direct = without_poll(timed);
    // Several names due by their timers: one poll says which are free.
    if (timed.size() > 1) poll_heads(timed);
    timed.insert(timed.end(), direct.begin(), direct.end());
    // The heads try, one attempt each.
    std::vector<std::string> order = woken;
    order.insert(order.end(), timed.begin(), timed.end());
    const std::set<std::string> was_woken(woken.begin(), woken.end());
    for (const auto& name : order) run_head(name, was_woken.count(name) > 0, done);
    lk.lock();
  }
  // Stopping: every pending wait ends unacquired.
  for (auto& [name, q] : queues_)
    for (auto& w : q.waits) {
      w->lease->waiting = false;
      done.push_back(Completion{w, false, nullptr});
    }
  queues_.clear();
  lk.unlock();
  complete(*this, done);
}

// Waits past their deadline leave (a head whose attempt runs finishes it first).
void ClientCore::expire_waits_locked(std::vector<Completion>& done) {
  const auto now = steady_clock::now();
  for (auto qi = queues_.begin(); qi != queues_.end();) {
    auto& q = qi->second;
    for (std::size_t i = 0; i < q.waits.size();) {
      auto& w = q.waits[i];
      if ((i == 0 && q.busy) || w->deadline > now) {
        ++i;
        continue;
      }
      w->lease->waiting = false;
      done.push_back(Completion{w, false, timed_out_error(*w)});
      q.waits.erase(q.waits.begin() + static_cast<std::ptrdiff_t>(i));
      if (i == 0) {
        q.since = now;
        q.woken = true;
      }
    }
    qi = q.waits.empty() && !q.busy ? erase_queue_locked(qi) : std::next(qi);
  }
}

// The heads that try now: woken by a release, or due by their timers.
// Answers when to look again.
steady_clock::time_point ClientCore::due_heads_locked(std::vector<std::string>& woken,
                                                      std::vector<std::string>& timed) const {
  const auto now = steady_clock::now();
  auto next = now + std::chrono::seconds(1);
  for (const auto& [name, q] : queues_) {
    if (q.busy || q.waits.empty()) continue;
    if (q.woken && !FairPolicy::far_in_line(q, *wait_plan_)) woken.push_back(name);
    else if (q.next_try <= now) timed.push_back(name);
    else next = std::min(next, q.next_try);
    for (const auto& w : q.waits) next = std::min(next, w->deadline);
  }
  return next;
}

// Queues with no wake-up channel (semaphores, read-write leases) are not
// leases: their heads try without the poll. Nor do fair heads poll: a held
// lease says nothing of their turn. Moves them out of `timed`.
std::vector<std::string> ClientCore::without_poll(std::vector<std::string>& timed) {
  std::vector<std::string> direct;
  std::lock_guard<std::mutex> g(wait_mu_);
  for (auto it = timed.begin(); it != timed.end();) {
    auto qi = queues_.find(*it);
    if (qi != queues_.end() && (qi->second.channel.empty() || qi->second.waits.front()->place)) {
      direct.push_back(*it);
      it = timed.erase(it);
    } else {
      ++it;
    }
  }
  return direct;
}

// One lease_poll statement per 1000 names says which of `timed` are free:
// `timed` keeps those; the held ones wait again, paced by their holders'
// expiries. A failed poll leaves every head to try.
void ClientCore::poll_heads(std::vector<std::string>& timed) {
  std::set<std::string> free(timed.begin(), timed.end());
  std::map<std::string, milliseconds> remaining;
  std::map<std::string, TakeOver> rules;
  std::map<std::string, NextTurn> turns;  // heads past barging_limit (a copy: the head's is the waiter thread's)
  {
    std::lock_guard<std::mutex> g(wait_mu_);
    for (const auto& n : timed)
      if (auto qi = queues_.find(n); qi != queues_.end() && !qi->second.waits.empty()) {
        const auto& head = *qi->second.waits.front();
        rules[n] = head.lease->options.take_over;
        if (head.turn && head.turn->past_limit) turns[n] = *head.turn;
      }
  }
  try {
    auto c = borrow();
    for (std::size_t b = 0; b < timed.size(); b += kMaxRenewalBatch) {
      const std::size_t e = std::min(timed.size(), b + kMaxRenewalBatch);
      const std::size_t places = padded_size(e - b);
      const std::string sql = render_rows(catalog(*c), Sql::lease_poll, "names", Sql::lease_name_ref, places);
      static const Params pad{std::string()};  // no lease has an empty name
      const Params values = padded_values(std::span<const std::string>(timed.data() + b, e - b), places, pad,
                                          [](Params& v, const std::string& n) { v.emplace_back(n); });
      auto r = run_rendered(*c, Sql::lease_poll, sql, values);
      {
        std::lock_guard<std::mutex> g(wait_mu_);
        ++polls_;
      }
      static constexpr auto kName = column(Sql::lease_poll, "name");
      static constexpr auto kSeen = plain_sighting_columns<Sql::lease_poll>();
      const auto at = steady_clock::now();
      for (const auto& row : r.rows) {
        // Each row is a sighting for this process's watch (takeover.h); the
        // head tries only what the take-over rule would let it take.
        const std::string n = cell(row, kName).as_string();
        const Sighting seen = sighting_of(row, kSeen);
        const std::string key = watch_key(*c, n);
        const milliseconds unchanged = watches().sighted(key, seen, at);
        const TakeOver rule = rules.count(n) ? rules[n] : TakeOver::kWatched;
        // Ripe when this version has been seen unchanged for its whole watch
        // (what sighted() just answered: no second lookup of the book).
        const auto ripe = unchanged >= seen.watch ? std::optional<RowVersion>(seen.version) : std::nullopt;
        if (may_take_over(seen, rule == TakeOver::kWatched ? ripe : std::nullopt, rule)) continue;
        // A head past barging_limit tries a lease a release handed to a turn
        // (its own, if it asked), and one that changed hands since it last
        // looked (it asks for the turn again).
        static constexpr auto kHanded = column(Sql::lease_poll, "handed");
        if (auto t = turns.find(n); t != turns.end() &&
                                    ((t->second.asked && cell(row, kHanded).as_int() != 0) ||
                                     seen.version.fence != t->second.seen_fence))
          continue;
        free.erase(n);
        remaining[n] = rule == TakeOver::kWatched ? std::max(milliseconds(1), seen.watch - unchanged)
                                                  : milliseconds(std::max<std::int64_t>(1, seen.version.expire_at - seen.db_now));
      }
    }
  } catch (const Error& e) {
    log(LogLevel::kDebug, std::string("lock client poll failed (the heads try instead): ") + e.what());
  }
  std::lock_guard<std::mutex> g(wait_mu_);
  const auto now = steady_clock::now();
  for (const auto& n : timed) {
    auto qi = queues_.find(n);
    if (qi == queues_.end() || free.count(n)) continue;
    auto& q = qi->second;
    const auto& o = q.waits.front()->lease->options;
    q.holder_remaining = remaining[n];
    const auto cap = std::min(q.backoff, std::max(q.holder_remaining, o.backoff_initial));
    q.next_try = now + jitter(cap);
    q.backoff = std::min(q.backoff * 2, o.backoff_max);
  }
  timed.assign(free.begin(), free.end());
}

// The head of `name`'s queue makes one attempt; its wait ends (acquired,
// failed, cancelled) or it is paced for its next try.
void ClientCore::run_head(const std::string& name, bool was_woken, std::vector<Completion>& done) {
  std::shared_ptr<ClientWait> w;
  {
    std::lock_guard<std::mutex> g(wait_mu_);
    auto qi = queues_.find(name);
    if (qi == queues_.end() || qi->second.busy || qi->second.waits.empty()) return;
    qi->second.busy = true;
    qi->second.woken = false;
    w = qi->second.waits.front();
    ++attempts_;
  }
  bool ok = false;
  std::exception_ptr err;
  std::optional<Error> outage;
  milliseconds holder{0};
  try {
    // After a busy attempt, no connection free by the wait's deadline: no
    // attempt (the wait expires, reporting an earlier outage if it had one).
    if (auto c = w->tried ? borrow_until(w->deadline) : std::optional<Borrowed>(borrow())) {
      const auto left = std::chrono::duration_cast<milliseconds>(w->deadline - steady_clock::now());
      ok = w->attempt ? w->attempt(*this, **c, &holder, w.get())
                      : attempt_on(*c, w->lease, std::max(left, milliseconds(1)), &holder, w.get(), nullptr,
                                   w->turn ? &*w->turn : nullptr);
      w->tried = true;
    }
  } catch (const Error& e) {
    // Unreachable, or no connection free: keep waiting, report it if the wait ends so.
    if (is_outage(e) || e.code() == ErrorCode::kResourceExhausted) outage = e;
    else err = std::current_exception();
  } catch (...) {
    err = std::current_exception();
  }
  bool release_now = false;
  {
    std::lock_guard<std::mutex> g(wait_mu_);
    auto qi = queues_.find(name);
    auto& q = qi->second;  // stays: a busy queue is not erased
    q.busy = false;
    if (w->cancelled || ok || err) {
      release_now = w->cancelled && ok;
      done.push_back(w->cancelled ? Completion{w, false, nullptr} : Completion{w, ok, err});
      head_done_locked(qi, ok);
    } else {
      head_busy_locked(q, w, was_woken, holder, outage);
    }
  }
  wait_cv_.notify_all();  // the listener may block on this name again
  if (release_now) {
    if (w->release) w->release(*this);
    else release_quietly(w->lease);
  }
  complete(*this, done);
}

// The last wait of a name ended: its queue goes, and with it this process's
// watch of the name's lease (kept by nobody now: a later try starts again,
// or continues this machine's shared sighting).
std::map<std::string, NameQueue>::iterator ClientCore::erase_queue_locked(std::map<std::string, NameQueue>::iterator qi) {
  watches().forget(watch_key(description_, qi->first));
  return queues_.erase(qi);
}

// The head's wait ended: the next one's turn.
void ClientCore::head_done_locked(std::map<std::string, NameQueue>::iterator qi, bool acquired) {
  auto& q = qi->second;
  const std::shared_ptr<ClientWait> w = q.waits.front();
  const auto& o = w->lease->options;
  const auto t = steady_clock::now();
  q.waits.pop_front();
  w->lease->waiting = false;
  q.since = t;
  q.idle_wakes = 0;
  q.backoff = q.waits.empty() ? o.backoff_initial : q.waits.front()->lease->options.backoff_initial;
  // The next head: right after a local take-over the lease is ours, so it
  // waits for the local release (or its timer) — unless several may hold at
  // once (a semaphore, shared holders).
  const bool wait_release = acquired && !w->several;
  q.holder_remaining = wait_release ? o.ttl : milliseconds(0);
  q.woken = !wait_release;
  q.next_try = t + (wait_release ? std::min(o.ttl, o.backoff_max) : milliseconds(0));
  if (q.waits.empty()) erase_queue_locked(qi);
  else listen_now_locked(q);
}

// The head's attempt found it taken (or could not be made): its next try,
// after a full-jitter backoff capped by what the holder's lease has left;
// a fair head is paced by its place in line.
void ClientCore::head_busy_locked(NameQueue& q, const std::shared_ptr<ClientWait>& w, bool was_woken,
                                  milliseconds holder, const std::optional<Error>& outage) {
  const auto t = steady_clock::now();
  const auto& o = w->lease->options;
  w->outage = outage;
  // A fair waiter woken while others are ahead of it was woken rightly (the
  // release was for the next ticket): the listener must keep waking it.
  if (was_woken && !outage && !w->not_turn && !wait_plan_->wakes_every_waiter()) ++q.idle_wakes;
  q.holder_remaining = holder;
  // Bounded barging: no pause outlasts barging_limit; past it, a hot lock's
  // head looks again soon (for the turn, or the lease the next release hands
  // to it), a long hold's less and less often (batched by lease_poll, which
  // lets a head that asked for the turn try a lease handed to a turn).
  const auto tc = FairPolicy::turn_pause_cap(w->turn ? &*w->turn : nullptr, *w->lease);
  if (!outage && tc != milliseconds::max()) {
    q.holder_remaining = std::min(holder, tc);
    q.backoff = std::min(q.backoff, tc);
  }
  const auto cap = outage ? q.backoff : std::min(q.backoff, std::max(q.holder_remaining, o.backoff_initial));
  q.next_try = t + jitter(cap);
  q.backoff = std::min(q.backoff * 2, o.backoff_max);
  q.outage_until = outage ? q.next_try : steady_clock::time_point{};
  if (w->place) {
    FairPolicy::after_busy(q, w, t, *wait_plan_, outage.has_value());
    // A head that queued again under a new ticket (its place had lapsed), or
    // the follower now ahead of it: the listener waits on the new head's
    // ticket channel at once, not after its wait's slice.
    listen_now_locked(q);
  }
}


bool ClientCore::set_wakeups() const noexcept {
  // MariaDB's listener blocks on one wake-up lock, which a set's take would
  // then wait for: sets keep their timers there.
  return !wait_plan_->release_on_acquiring_session() && !borrowed_;
}

void ClientCore::set_nap_name(const std::string& key, const std::string& from, const std::string& to) {
  if (!set_wakeups() || from == to) return;
  if (!to.empty()) start_waiter_threads();
  std::lock_guard<std::mutex> lk(wait_mu_);
  if (!from.empty())
    if (auto it = set_nap_names_.find(from); it != set_nap_names_.end()) {
      if (auto k = it->second.keys.find(key); k != it->second.keys.end() && --k->second <= 0) it->second.keys.erase(k);
      if (it->second.keys.empty()) set_nap_names_.erase(it);
    }
  if (to.empty()) return;
  auto [it, fresh] = set_nap_names_.try_emplace(to);
  if (fresh) it->second.since = steady_clock::now();
  ++it->second.keys[key];
  // The listener's wait in progress does not cover it: it listens at once.
  if (fresh && !listener_channels_.count(lease_wakeup_channel(to))) {
    if (listener_conn_) listener_conn_->interrupt_wait();
    wait_cv_.notify_all();
  }
}

void ClientCore::add_set_names_locked(std::vector<std::pair<steady_clock::time_point, WaitedName>>& found,
                                      std::map<std::string, std::vector<std::string>>& set_queues) const {
  std::set<std::string> have;
  for (const auto& f : found) have.insert(f.second.name);
  auto add = [&](const std::string& n, steady_clock::time_point since) {
    if (have.insert(n).second) found.push_back({since, WaitedName{n, lease_wakeup_channel(n), false}});
  };
  for (const auto& [n, e] : set_nap_names_) add(n, e.since);
  for (const auto& [key, q] : queues_)
    for (const auto& w : q.waits) {
      if (!w->wake_name) continue;
      const std::string n = w->wake_name();
      if (n.empty()) continue;
      add(n, q.since);
      set_queues[n].push_back(key);
    }
}

bool ClientCore::wake_sets_locked(const std::string& name,
                                  const std::map<std::string, std::vector<std::string>>& set_queues,
                                  std::vector<std::string>& naps) {
  bool mine = false;
  if (auto it = set_nap_names_.find(name); it != set_nap_names_.end()) {
    mine = true;
    for (const auto& [key, n] : it->second.keys) {
      naps.push_back(key);
      ++wakeups_;
    }
  }
  if (auto s = set_queues.find(name); s != set_queues.end()) {
    mine = true;
    for (const auto& key : s->second)
      if (auto q = queues_.find(key); q != queues_.end() && !q->second.waits.empty()) {
        q->second.woken = true;
        ++wakeups_;
      }
  }
  return mine;
}

void ClientCore::deliver_wakeups_locked(const std::vector<WokenName>& woken,
                                        const std::map<std::string, std::vector<std::string>>* set_queues) {
  bool any = false;
  std::vector<std::string> naps;
  for (const auto& n : woken) {
    const bool for_sets = set_queues && wake_sets_locked(n.name, *set_queues, naps);
    any = any || for_sets;
    auto qi = queues_.find(n.name);
    if (qi == queues_.end() || !FairPolicy::wakes_head(qi->second, n.payloads)) {
      if (!for_sets) ++stray_wakeups_;
      continue;
    }
    FairGrant grant;
    if (const auto t = FairPolicy::names_head(qi->second, n.payloads, *wait_plan_, &grant); t >= 0) {
      qi->second.waits.front()->named_ticket = t;
      qi->second.waits.front()->grant = grant;
    }
    qi->second.woken = true;
    ++wakeups_;
    any = true;
  }
  if (any) wait_cv_.notify_all();
  for (const auto& key : naps) sync_notify(key);  // (wait_mu_ before sync_mu_, never the other way)
}

void ClientCore::listener_loop() {
  auto listener = wait_plan_->make_listener();
  const bool sets = listener && set_wakeups();
  std::unique_ptr<Connection> conn;
  bool listened = false;
  const milliseconds slice(100);
  std::unique_lock<std::mutex> lk(wait_mu_);
  while (!stop_) {
    std::vector<std::pair<steady_clock::time_point, WaitedName>> found;
    const auto now = steady_clock::now();
    for (const auto& [name, q] : queues_)
      // Not blocked on while its head is about to try or trying (a wake-up
      // lock it waited for would be granted again at once, before the take-over
      // takes it for the new holder), after two idle wake-ups in a row, nor
      // while its head waits out an attempt that could not be made.
      if (!q.waits.empty() && !q.channel.empty())
        found.push_back({q.since, WaitedName{name, FairPolicy::listen_channel(q, *wait_plan_),
                                             q.idle_wakes >= 2 || q.woken || q.busy || q.outage_until > now ||
                                                 FairPolicy::far_in_line(q, *wait_plan_)}});
    // Lock sets' waits: their lease names too (name -> their queues).
    std::map<std::string, std::vector<std::string>> set_queues;
    if (sets) add_set_names_locked(found, set_queues);
    if (!listener) {  // no wake-up source (a transaction pooler): the heads poll
      wait_cv_.wait_for(lk, std::chrono::seconds(1));
      continue;
    }
    if (found.empty() && !listened) {
      wait_cv_.wait_for(lk, slice * 2);
      continue;
    }
    if (conn && listener->waits_on_active_only() &&
        std::none_of(found.begin(), found.end(), [](const auto& f) { return !f.second.idle; })) {
      // Nothing to block on now (heads trying, or names left out): look
      // again when a head's attempt ends (the waiter thread notifies).
      listening_ = 0;
      listened = false;
      wait_cv_.wait_for(lk, std::chrono::milliseconds(5));
      continue;
    }
    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<WaitedName> names;
    listener_channels_.clear();
    for (auto& f : found) {
      listener_channels_.insert(f.second.channel);
      names.push_back(std::move(f.second));
    }
    lk.unlock();
    std::vector<WokenName> woken;
    bool failed = false;
    try {
      if (!conn) {
        conn = connect(false);
        listener->session_lost();
        std::lock_guard<std::mutex> g(wait_mu_);
        listener_open_ = true;
        listener_conn_ = conn.get();
      }
      // No names: one call with none stops listening to the old ones.
      woken = listener->wait(*conn, names, names.empty() ? milliseconds(0) : slice);
      listened = !names.empty();
    } catch (const std::exception& e) {
      log(LogLevel::kInfo, std::string("lock client wake-up listener failed (waiters poll meanwhile): ") + e.what());
      {
        std::lock_guard<std::mutex> g(wait_mu_);
        listener_conn_ = nullptr;
      }
      conn.reset();
      listened = false;
      failed = true;
    }
    lk.lock();
    if (!conn) listener_open_ = false;
    listening_ = failed ? 0 : names.size();
    deliver_wakeups_locked(woken, sets ? &set_queues : nullptr);
    if (failed) wait_cv_.wait_for(lk, slice * 5);
  }
  listener_conn_ = nullptr;  // (lk is held: nobody interrupts the session it closes)
  listener_channels_.clear();
}

void ClientCore::listen_now_locked(const NameQueue& q) {
  if (!listener_conn_ || q.channel.empty()) return;
  if (!listener_channels_.count(FairPolicy::listen_channel(q, *wait_plan_))) listener_conn_->interrupt_wait();
}

}  // namespace sqlguard::detail
