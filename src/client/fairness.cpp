// Fairness, the lock client's one policy for FIFO waiters (fair leases and
// fair semaphores): a waiter's queue place (sqlguard_lock_queue), taken,
// renewed while it waits, read for its turn, kept by the holder until its
// release, and left.
#include <algorithm>
#include <limits>

#include "client/client.h"
#include "strategies/lease/takeover.h"
#include "client/fairness.h"
#include "core/catalog.h"
#include "core/reconnect.h"
#include "plans/plans.h"
#include "plans/waiter.h"
#include "sqlguard/validate.h"
#include "strategies/sync/sync_ops.h"

namespace sqlguard::detail {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

std::shared_ptr<ClientLease> ClientCore::take_place(Connection& conn, const ClientLease& l) {
  admit(l);  // a place is renewed as a lease is
  auto p = std::make_shared<ClientLease>();
  p->kind = RowKind::kPlace;
  p->name = l.name;
  p->options.ttl = l.options.place_ttl;
  p->margin = l.options.place_ttl / 10;
  p->period = l.options.place_ttl / 3;
  const std::string owner = make_owner_token();
  const auto start = steady_clock::now();
  const std::int64_t ticket = with_reconnect(conn, std::max<milliseconds>(l.options.place_ttl, milliseconds(1000)),
                                             "joining the queue of fair lease '" + l.name + "'",
                                             [&](int) {
                                               return fair_enqueue(conn, l.name, owner, l.options.place_ttl,
                                                                   l.options.queue_kind, l.options.queue_permits);
                                             });
  {
    std::lock_guard<std::mutex> lk(p->state->mu);
    p->key = ticket;
    p->state->hold = 1;
    p->state->owner = owner;
    p->state->fence = ticket;
    ++p->state->acquisition;
    p->state->valid_until = start + p->options.ttl - p->margin;
  }
  renew_register(p);
  return p;
}

void ClientCore::leave_place(const std::shared_ptr<ClientLease>& p, Connection* held, bool wake) noexcept {
  if (!p) return;
  renew_unregister(p.get());
  std::string owner;
  std::int64_t ticket;
  {
    std::lock_guard<std::mutex> lk(p->state->mu);
    if (p->state->hold == 0) return;
    p->state->hold = 0;
    owner = p->state->owner;
    ticket = p->key;
  }
  // Its watch of the places ahead goes with it.
  group_watches().forget(places_watch_key(description_, p->name, ticket));
  try {
    // Idempotent: retried on a fresh connection (a killed session, a
    // restart), or the place would hold up the queue until it expires.
    // On the caller's connection when it holds one (an attempt: borrowing a
    // second could wait for the only work connection, its own).
    std::optional<Borrowed> own;
    if (!held) own.emplace(borrow());
    Connection& c = held ? *held : **own;
    with_reconnect(c, std::clamp<milliseconds>(p->options.ttl / 3, milliseconds(100), milliseconds(2000)),
                   "leaving the queue of fair lease '" + p->name + "'",
                   [&](int) { fair_leave(c, p->name, ticket, owner, wake); });
  } catch (const std::exception& e) {
    log(LogLevel::kDebug, "leaving the queue of fair lease '" + p->name + "' failed (the place expires by itself): " +
                              e.what());
  }
}

bool ClientCore::fair_turn_on(Connection& conn, const ClientLease& l, ClientWait* w, milliseconds budget,
                              milliseconds* holder_remaining, std::int64_t* lease_left_ms) {
  // Only the lowest live ticket may take it. A waiter whose place lapsed (it
  // was gone longer than place_ttl) queues again at the tail; a try without
  // a place (try_acquire) goes only when nobody waits.
  std::shared_ptr<ClientLease> place;
  if (w) {
    std::lock_guard<std::mutex> lk(wait_mu_);
    place = w->place;
  }
  std::int64_t ticket = std::numeric_limits<std::int64_t>::max();
  std::string place_owner;
  if (place) {
    std::lock_guard<std::mutex> lk(place->state->mu);
    ticket = place->key;
    place_owner = place->state->owner;
  }
  const FairTurn turn = with_reconnect(conn, std::max(budget, milliseconds(1)), "reading the queue of '" + l.name + "'",
                                       [&](int) {
                                         return fair_turn(conn, l.name, ticket, place_owner, l.options.take_over,
                                                          l.options.place_ttl);
                                       });
  // A fair lease of a name a semaphore or read-write lease reserved: refused.
  if (lease_left_ms && turn.reserved) refuse_if_reserved(conn, l.name, kReservedExpireAt, LockKind::kFairLease);
  if (place && !turn.place_live) {
    leave_place(place, &conn, false);
    auto fresh = take_place(conn, l);
    std::lock_guard<std::mutex> lk(wait_mu_);
    w->place = fresh;
    w->ahead = -1;
    *holder_remaining = l.options.backoff_initial;
    return false;
  }
  if (w) {
    std::lock_guard<std::mutex> lk(wait_mu_);
    const auto now = steady_clock::now();
    if (w->ahead > turn.ahead) {
      // The fastest turn seen since its last check: a check paced by it is
      // seldom late (a late one leaves the turn unused with nobody woken).
      const auto per = std::chrono::duration_cast<std::chrono::microseconds>(now - w->ahead_since) /
                       (w->ahead - turn.ahead);
      w->fastest_turn = w->fastest_turn.count() > 0 ? std::min(w->fastest_turn, per) : per;
      w->lease->fair_turn = w->fastest_turn;
    }
    w->ahead = turn.ahead;
    w->ahead_since = now;
    w->not_turn = turn.ahead > 0;
  }
  if (turn.ahead > 0) {
    *holder_remaining = l.options.ttl;  // paced by the waiter thread; a release wakes it
    return false;
  }
  if (lease_left_ms) *lease_left_ms = turn.holder_left_ms;
  return true;
}

void ClientCore::fair_acquired(Connection& conn, ClientWait* w) noexcept {
  if (!w) return;
  std::shared_ptr<ClientLease> place;
  {
    std::lock_guard<std::mutex> lk(wait_mu_);
    place = std::move(w->place);
    w->place.reset();
  }
  leave_place(place, &conn, false);
}

// A fair lease acquired from its queue place: the place stays until the
// release removes it in its own commit: the next waiter is still behind it,
// and the hand-off costs no commit of its own. It is not renewed any more: a
// holder that dies leaves it to expire at its last renewal + place_ttl, as a
// waiter's. Where place_ttl is longer than the lease's ttl, its expiry is
// first brought down to the lease's (one statement, after the take-over
// committed): a dead holder then holds up the queue for ttl at most, not
// place_ttl.
void ClientCore::keep_place_for_release(Connection& conn, ClientLease& lease, ClientWait* w) {
  const auto& o = lease.options;
  std::shared_ptr<ClientLease> place;
  {
    std::lock_guard<std::mutex> lk(wait_mu_);
    place = std::move(w->place);
    w->place.reset();
  }
  HeldPlace kept;
  if (place) {
    renew_unregister(place.get());
    std::lock_guard<std::mutex> lk(place->state->mu);
    if (place->state->hold > 0) kept = HeldPlace{place->key, place->state->owner};
    place->state->hold = 0;
  }
  if (!kept.owner.empty() && o.place_ttl > o.ttl) {
    try {
      const RowRenewal row{lease.name, kept.ticket, kept.owner, kept.ticket, o.ttl};
      renew_places(conn, std::span<const RowRenewal>(&row, 1));
    } catch (const std::exception& e) {
      log(LogLevel::kDebug, "shortening the held queue place of fair lease '" + lease.name +
                                "' failed (it expires at its place_ttl): " + e.what());
    }
  }
  std::lock_guard<std::mutex> lk(lease.state->mu);
  lease.held_place = std::move(kept);
}

// ---- the waiter thread's side of fairness ------------------------------------------

std::int64_t FairPolicy::ticket(const ClientWait& w) {
  if (!w.place) return std::numeric_limits<std::int64_t>::max();
  std::lock_guard<std::mutex> g(w.place->state->mu);
  return w.place->key;
}

bool FairPolicy::far_in_line(const NameQueue& q, const WaitPlan& plan) {
  if (q.waits.empty() || plan.wakes_fair_by_ticket() || (plan.wakes_every_waiter() && !q.channel.empty())) return false;
  const auto& w = *q.waits.front();
  return w.place && w.ahead >= kFarInLine;
}

bool FairPolicy::wakes_head(const NameQueue& q, const std::vector<std::string>& payloads) {
  if (q.waits.empty() || !q.waits.front()->place) return true;
  const std::int64_t mine = ticket(*q.waits.front());
  for (const auto& p : payloads) {
    if (p.empty()) return true;
    try {
      if (std::stoll(p) >= mine) return true;
    } catch (const std::exception&) {
      return true;
    }
  }
  return false;
}

void FairPolicy::enqueue(NameQueue& q, std::shared_ptr<ClientWait> w) {
  // The local queue keeps ticket order (two threads may take their places
  // in the other order than they get here), so the local head is always
  // this process's lowest ticket.
  const std::int64_t mine = ticket(*w);
  auto pos = q.waits.end();
  for (auto it = q.waits.begin(); it != q.waits.end(); ++it)
    if ((it != q.waits.begin() || !q.busy) && ticket(**it) > mine) {
      pos = it;
      break;
    }
  q.waits.insert(pos, std::move(w));
}

void FairPolicy::pace(NameQueue& q, const ClientWait& w, steady_clock::time_point t, const WaitPlan& plan) {
  const auto& o = w.lease->options;
  if (w.not_turn && plan.wakes_fair_by_ticket()) {
    // Its ticket's wake-up comes when it is next: the timer only covers a
    // waiter ahead that died (its place expires), so the waiters in line do
    // not poll the queue.
    const auto net = std::max(o.backoff_max, o.backoff_initial);
    q.next_try = t + net / 2 + jitter(net / 2);
  } else if (w.not_turn && (!plan.wakes_every_waiter() || q.channel.empty())) {
    // (A fair semaphore's waiters have no wake-up channel at all: they are
    // paced the same way on every dialect.)
    const auto turn = w.fastest_turn.count() > 0          ? w.fastest_turn
                      : w.lease->fair_turn.count() > 0 ? w.lease->fair_turn
                                                        : std::chrono::microseconds(1000);
    if (far_in_line(q, plan)) {
      // Back before it is next: 4/5 of the turns until then, by the fastest
      // turn seen (early rather than late: a late check leaves the lease
      // free with nobody woken for it).
      const auto pace = std::chrono::duration_cast<milliseconds>(turn * (w.ahead - 1) * 4 / 5);
      q.next_try = t + std::clamp(pace, milliseconds(1), kFarCheckMax);
    } else {
      // Next in line: the release wakes it; the timer only covers a wake-up
      // it missed.
      const auto net = std::chrono::duration_cast<milliseconds>(turn * 4);
      q.next_try = t + std::clamp(net, o.backoff_initial, kFarCheckMax);
    }
  } else if (!w.not_turn && q.channel.empty()) {
    // A fair semaphore's first waiter: its turn has come and only permits
    // are missing. A release by another process wakes nothing here
    // (semaphores have no wake-up channel), so it looks again within
    // kFarCheckMax, not after its backoff (which grew to hundreds of ms):
    // the documented bound for a fair waiter.
    q.next_try = std::min(q.next_try, t + kFarCheckMax);
  }
}

void FairPolicy::after_busy(NameQueue& q, const std::shared_ptr<ClientWait>& w, steady_clock::time_point t,
                            const WaitPlan& plan, bool outage) {
  if (!outage) pace(q, *w, t, plan);
  // A fair head whose place had lapsed queued again at the tail (a new,
  // higher ticket): the local queue goes back to ticket order, or the head
  // would wait for a turn its followers hold.
  if (q.waits.size() > 1) {
    std::stable_sort(q.waits.begin(), q.waits.end(), [](const auto& a, const auto& b) { return ticket(*a) < ticket(*b); });
    if (q.waits.front() != w) q.woken = true;
  }
}

}  // namespace sqlguard::detail
