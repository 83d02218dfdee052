// Fairness, the lock client's one policy for who waits how long: FIFO
// waiters (fair leases and fair semaphores), whose queue place
// (sqlguard_lock_queue) is taken, renewed while it waits, read for its turn,
// kept by the holder until its release, and left; and bounded barging of the
// default lease (LeaseOptions::barging_limit), whose waiter competes with
// every contender until it has waited barging_limit, then asks for the
// lease's next turn (next_owner on the lease's row; the earliest waiter on
// the database clock wins it). The holder's release hands the lease to the
// waiter with the turn in its own commit (sql/<dialect>/lease.sql,
// lease_release); that waiter's next attempt confirms it. Nothing here
// decides who holds a lease: a place or a turn decides only who may try,
// and the take-over rule is unchanged.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
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
    p->joined = start;
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
                              milliseconds* holder_remaining, std::int64_t* lease_left_ms, FairGrant* grant,
                              std::optional<std::int64_t>* wake_lock) {
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
  if (wake_lock) *wake_lock = turn.wake_lock;
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
  if (!w) {
    std::lock_guard<std::mutex> lk(wait_mu_);
    l.tried_ahead = turn.ahead;
    l.tried_at = steady_clock::now();
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
  if (grant && turn.granted) *grant = FairGrant{turn.fence, turn.expire_at, turn.ttl_ms};
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

// ---- bounded barging: a default lease's next turn --------------------------------

bool ClientCore::ask_next_turn(Connection& conn, const ClientLease& l, NextTurn& t, const NextTurnSeen* seen) {
  const auto& limit = l.options.barging_limit;
  if (!limit) return false;
  const auto waited = std::chrono::duration_cast<milliseconds>(steady_clock::now() - t.began);
  if (waited < *limit) return false;
  t.past_limit = true;
  // The attempt's read saw the turn: still its own (nothing to ask), or
  // taken by a waiter that began earlier (look again now, not after
  // kRecheckEvery attempts believing it its own).
  if (seen && t.asked) {
    t.mine = seen->owner == t.owner;
    if (t.mine) {
      t.unchecked = 0;
      return false;
    }
  }
  if (t.mine && ++t.unchecked < FairPolicy::kRecheckEvery) return false;
  t.unchecked = 0;
  static constexpr auto kMine = column(Sql::lease_next_read, "mine");
  static constexpr auto kGranted = column(Sql::lease_next_read, "granted");
  static constexpr auto kOpen = column(Sql::lease_next_read, "open");
  static constexpr auto kFree = column(Sql::lease_next_read, "free");
  static constexpr auto kFence = column(Sql::lease_next_read, "fence");
  try {
    // The earliest waiter wins the turn: its place is when it began to wait,
    // on the database clock (one clock for every process; a step of it only
    // reorders waiters, it never decides who holds the lease).
    if (t.since < 0) t.since = std::max<std::int64_t>(0, (seen ? seen->holder.db_now : conn.db_now_ms()) - waited.count());
    std::int64_t fence;
    bool released, open;
    if (seen && !seen->holder.released) {
      // The attempt's read saw the row held (not handed to this wait: the
      // take would have taken that): the turn is open when nobody has it, or
      // a wait that began later does (lease_next_read's rule; lease_next_set
      // decides again on the row as it is). (Seen released, the take lost
      // it to another waiter, whose take the read below sees.)
      const NextTurnSeen& s = *seen;
      fence = s.holder.version.fence;
      released = false;
      t.mine = s.owner == t.owner;
      open = !t.mine && (s.owner.empty() || s.since > t.since || (s.since == t.since && s.owner > t.owner));
    } else {
      auto r = run(conn, Sql::lease_next_read, {l.name, t.owner, t.since});
      if (r.rows.empty()) {
        t.mine = false;
        return false;
      }
      const Row& read = r.rows[0];
      // Handed to it: try again at once.
      if (cell(read, kGranted).as_int() != 0) return true;
      fence = cell(read, kFence).as_int();
      released = cell(read, kFree).as_int() != 0;
      t.mine = cell(read, kMine).as_int() != 0;
      open = cell(read, kOpen).as_int() != 0;
    }
    t.same_holder = fence == t.seen_fence ? t.same_holder + 1 : 0;
    t.seen_fence = fence;
    if (released) return true;  // released since: try again at once
    if (t.mine || !open) return false;
    t.asked = true;  // before the statement: one whose answer is lost may have committed
    t.mine = run(conn, Sql::lease_next_set, {l.name, t.owner, t.since, l.options.ttl.count()}).affected == 1;
    if (t.mine) {
      std::lock_guard<std::mutex> lk(wait_mu_);
      ++turns_asked_;
    }
  } catch (const Error& e) {
    // A turn is a hint: a deadlock victim or a certification failure (the
    // row was being released) only means it asks again on its next attempt.
    if (is_outage(e)) throw;
    log(LogLevel::kDebug, "asking for the next turn of lease '" + l.name + "' failed: " + e.what());
    t.mine = false;
  }
  return false;
}

void ClientCore::drop_next_turn(Connection* held, const ClientLease& l, NextTurn& t) noexcept {
  if (!t.asked) return;
  t.asked = t.mine = false;
  try {
    std::optional<Borrowed> own;
    if (!held) own.emplace(borrow());
    Connection& c = held ? *held : **own;
    // One try, no reconnect loop: a turn that stays costs at most one ttl
    // (the lease handed to nobody). The statement wakes the waiters itself
    // where a release does (PostgreSQL, SQLite); on MariaDB nobody holds a
    // handed lease's wake-up lock, so they are not blocked on it.
    run(c, Sql::lease_next_drop, {l.name, t.owner, lease_wakeup_channel(l.name)});
  } catch (const std::exception& e) {
    log(LogLevel::kDebug, "giving back the next turn of lease '" + l.name +
                              "' failed (a lease handed to this wait runs out by itself): " + e.what());
  }
}

// ---- the waiter thread's side of fairness ------------------------------------------

std::optional<NextTurn> FairPolicy::next_turn_for(const ClientLease& l) {
  if (!l.options.barging_limit || l.kind != RowKind::kLease || !l.wakes) return std::nullopt;
  NextTurn t;
  t.owner = l.options.owner.empty() ? make_owner_token() : l.options.owner;
  return t;
}

milliseconds FairPolicy::turn_pause_cap(const NextTurn* t, const ClientLease& l) {
  const auto& limit = l.options.barging_limit;
  if (!t || !limit) return milliseconds::max();
  if (t->past_limit) {
    const std::int64_t doubled = std::int64_t{1} << std::min(t->same_holder, 16);
    return std::min(l.options.backoff_initial * doubled, l.options.backoff_max);
  }
  const auto waited = std::chrono::duration_cast<milliseconds>(steady_clock::now() - t->began);
  return std::max(milliseconds(1), *limit - waited);
}


std::int64_t FairPolicy::ticket(const ClientWait& w) {
  if (!w.place) return std::numeric_limits<std::int64_t>::max();
  std::lock_guard<std::mutex> g(w.place->state->mu);
  return w.place->key;
}

bool FairPolicy::far_in_line(const NameQueue& q, const WaitPlan& plan) {
  if (q.waits.empty() || plan.wakes_fair_by_ticket()) return false;
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

std::string FairPolicy::listen_channel(const NameQueue& q, const WaitPlan& plan) {
  if (q.waits.empty() || q.channel.empty() || !plan.wakes_fair_by_ticket()) return q.channel;
  const ClientWait& w = *q.waits.front();
  if (!w.place || !w.lease->options.fair) return q.channel;
  return fair_ticket_channel(q.channel, ticket(w));
}

namespace {

// What a release granted, as its wake-up's payload goes on after the name:
// '|fence|expire_at|ttl_ms' and nothing more (lease_release_fair's and
// lease_release's payloads). Into `grant` when whole and sane.
bool read_grant(const char* tail, FairGrant* grant) {
  FairGrant got;
  char more = 0;
  if (std::sscanf(tail, "|%" SCNd64 "|%" SCNd64 "|%" SCNd64 "%c", &got.fence, &got.expire_at, &got.ttl_ms, &more) !=
          3 ||
      got.fence <= 0 || got.ttl_ms <= 0)
    return false;
  *grant = got;
  return true;
}

}  // namespace

std::int64_t FairPolicy::names_head(const NameQueue& q, const std::vector<std::string>& payloads,
                                    const WaitPlan& plan, FairGrant* grant) {
  *grant = FairGrant{};
  if (q.waits.empty() || !plan.wakes_fair_by_ticket()) return -1;
  const ClientWait& w = *q.waits.front();
  if (!w.place || w.attempt || !w.lease->options.fair) return -1;  // a fair lease's wait only
  std::int64_t t;
  std::string named;
  {
    std::lock_guard<std::mutex> g(w.place->state->mu);
    t = w.place->key;
    named = std::to_string(t) + ":" + w.place->state->owner;
  }
  for (const auto& p : payloads) {
    // (An owner token holds ':' but never '|': make_owner_token.)
    const auto bar = p.find('|');
    if (p.compare(0, bar, named) != 0) continue;
    if (bar != std::string::npos) read_grant(p.c_str() + bar, grant);
    return t;
  }
  return -1;
}

bool FairPolicy::turn_grant(const std::vector<std::string>& payloads, const std::string& turn_owner,
                            FairGrant* grant) {
  *grant = FairGrant{};
  if (turn_owner.empty()) return false;
  const std::string named = "turn:" + turn_owner;
  for (const auto& p : payloads) {
    // (An owner token never holds '|': make_owner_token, validate_name.)
    const auto bar = p.find('|');
    if (bar == std::string::npos || p.compare(0, bar, named) != 0) continue;
    if (read_grant(p.c_str() + bar, grant)) return true;
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
  } else if (w.not_turn) {
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
