// The lock client's one acquire attempt (attempt_on) and the handle calls
// built on it: try_acquire and a blocking acquire.
#include <algorithm>
#include <limits>

#include "client/client.h"
#include "client/fairness.h"
#include "core/catalog.h"
#include "core/reconnect.h"
#include "plans/acquire_common.h"
#include "plans/plans.h"
#include "plans/waiter.h"
#include "sqlguard/validate.h"
#include "strategies/lease/takeover.h"
#include "strategies/sync/sync_ops.h"

namespace sqlguard::detail {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

bool ClientCore::attempt_on(Borrowed& c, const std::shared_ptr<ClientLease>& l, milliseconds budget,
                            milliseconds* holder_remaining, ClientWait* w, Waiter* session, NextTurn* turn) {
  if (l->renew) admit(*l);
  Connection& conn = *c;
  const auto& o = l->options;
  bool seen_free = false;
  bool named = false;  // a release named this wait's place as the next: no queue read
  FairGrant grant;     // ... and granted it the lease in its own commit
  std::shared_ptr<ClientLease> place;  // a fair wait's queue place
  std::string place_owner;             // its token: a lease granted to it is taken with it
  if (o.fair && w) {
    std::lock_guard<std::mutex> lk(wait_mu_);
    place = w->place;
    const std::int64_t t = std::exchange(w->named_ticket, -1);
    grant = std::exchange(w->grant, FairGrant{});
    if (t >= 0 && w->place) {
      // Still that place, and live (one taken over meanwhile, or lapsed and
      // replaced by a new ticket, reads the queue as every other attempt).
      std::lock_guard<std::mutex> pg(w->place->state->mu);
      named = w->place->key == t && w->place->state->hold > 0 && !w->place->state->lost;
    }
    if (named) {
      // The watch of the places ahead goes (a queue read that found none
      // would have ended it).
      group_watches().forget(places_watch_key(description_, l->name, t));
      w->ahead = 0;
      w->ahead_since = steady_clock::now();
      w->not_turn = false;
    } else {
      grant = FairGrant{};
    }
    if (place) {
      std::lock_guard<std::mutex> pg(place->state->mu);
      place_owner = place->state->owner;
    }
  }
  if (named && grant.fence > 0 && take_up_grant(c, l, w, *place, grant, true)) return true;
  // The wake-up lock a queue read took for a grant to this wait's place
  // (MariaDB): freed again if the attempt ends without the lease, or the
  // waiters behind would block on it while nobody holds the lease with it.
  struct GateWakeLock {
    const WaitPlan& plan;
    Connection& conn;
    const std::string& name;
    bool held = false;
    ~GateWakeLock() {
      if (held) plan.wake_waiters(conn, name);  // frees it: its waiters return
    }
  } gate_wake{*wait_plan_, conn, l->name};
  if (o.fair && !named && place && w && l->kind == RowKind::kLease && catalog(conn).has(Sql::fair_grant_read)) {
    // Where wake-ups name nobody (MariaDB's wake-up lock), a wait that its
    // last queue read found next in line reads first whether the release
    // that woke it granted its place the lease: one read by primary key
    // (fair_grant_read) instead of the queue read at each hand-off.
    bool next_in_line;
    {
      std::lock_guard<std::mutex> lk(wait_mu_);
      next_in_line = w->ahead >= 0 && w->ahead <= 1;
    }
    if (next_in_line) {
      // (A lost session is reconnected within the attempt's budget, as the
      // queue read's is.)
      const Result r = with_reconnect(conn, std::max(budget, milliseconds(1)), "reading the grant of '" + l->name + "'",
                                      [&](int) {
                                        return run(conn, Sql::fair_grant_read,
                                                   {l->name, place_owner, lease_wakeup_channel(l->name)});
                                      });
      if (!r.rows.empty()) {
        const Row& g = r.rows[0];
        const Value& wl = cell(g, column(Sql::fair_grant_read, "wake_lock"));
        gate_wake.held = !wl.is_null() && wl.as_int() == 1;
        const FairGrant read{cell(g, column(Sql::fair_grant_read, "fence")).as_int(),
                             cell(g, column(Sql::fair_grant_read, "expire_at")).as_int(),
                             cell(g, column(Sql::fair_grant_read, "ttl_ms")).as_int()};
        if (take_up_grant(c, l, w, *place, read, false)) {
          std::int64_t ticket;
          {
            std::lock_guard<std::mutex> pg(place->state->mu);
            ticket = place->key;
          }
          group_watches().forget(places_watch_key(description_, l->name, ticket));
          if (!gate_wake.held) await_wakeup_lock(conn, lease_wakeup_channel(l->name));
          gate_wake.held = false;
          return true;
        }
      }
    }
  }
  if (o.fair && !named) {
    std::int64_t lease_left = 0;
    FairGrant gate_grant;
    std::optional<std::int64_t> wake_lock;
    const bool turn = fair_turn_on(conn, *l, w, budget, holder_remaining, &lease_left, &gate_grant, &wake_lock);
    gate_wake.held = gate_wake.held || wake_lock == 1;
    if (!turn) {
      note_refusal(*l->state, 0);  // not its turn: no take-over to count down to
      return false;
    }
    // A release granted the lease to this wait's place in its own commit and
    // the read saw it (a wake-up that does not carry the grant: MariaDB's
    // wake-up lock, a pooler's polling, a timer's attempt): held as written.
    if (gate_grant.fence > 0 && place && take_up_grant(c, l, w, *place, gate_grant, false)) {
      // The wake-up lock was busy for an instant (a listener passing it on):
      // wait that long for it, as a take does (lease_take).
      if (wake_lock && *wake_lock != 1) await_wakeup_lock(conn, lease_wakeup_channel(l->name));
      gate_wake.held = false;
      return true;
    }
    if (lease_left <= 0) {
      // The gate's read saw the lease released (or run out on the database
      // clock): straight to the take, whose own condition decides by the
      // take-over rule (MariaDB: no lease_precheck round trip at a hand-off).
      seen_free = true;
    } else if (o.take_over == TakeOver::kDatabaseClock && place_owner.empty()) {
      // Its turn, but the lease is still held: the same read said so. (A
      // wait with a place goes on to the take: the lease may be held by a
      // grant to its place whose wake-up it missed, a pooler's waiter always;
      // the take confirms that, and is a read otherwise.)
      *holder_remaining = milliseconds(lease_left);
      note_refusal(*l->state, lease_left);
      return false;
    }
    // Watched and still held by the database clock: that decides nothing;
    // the attempt's own read is the sighting its watch needs.
  }
  // A fresh owner token per attempt (a retry's lease_read_mine may only find
  // this attempt's own take); a waiting acquire's next turn has a token of
  // its own for the whole wait (a lease handed to it is taken with `owner`).
  const std::string owner = o.owner.empty() ? make_owner_token() : o.owner;
  // (A fair wait's: a lease a release granted its place, whose wake-up it
  // missed or whose window was too short to take up as it stands, is
  // taken with a fence and expiry of its own.)
  const std::string& turn_owner = turn ? turn->owner : place_owner;
  auto start = steady_clock::now();
  // A lease a release hands to this wait's turn may be held as written
  // (where the plan's read sees it, LeaseRequest::hold_grant) while at least
  // half a ttl of trust is left counted from when the wait began: the turn
  // was asked for after that, and the release came after the turn, so the
  // hand-over's expiry and any watch of the handed row end later on every
  // clock. Else (a wait that long) the take confirms it.
  const bool hold_turn_grant = turn && turn->began + o.ttl - l->margin - start >= o.ttl / 2;
  budget = std::max(std::min<milliseconds>(o.ttl - l->margin, budget), milliseconds(1));
  if (turn && session) {
    // The wake-up that ended its pause carried the hand-over to its turn
    // (PostgreSQL: lease_release's NOTIFY, sent after the flushed commit
    // that wrote it): held as handed, with no statement, while the trust
    // window allows (hold_turn_grant); else the take below confirms it.
    FairGrant g;
    if (FairPolicy::turn_grant(session->take_wake_payloads(), turn->owner, &g) && hold_turn_grant &&
        g.ttl_ms == o.ttl.count()) {
      took(l, c.slot(), turn->owner, g.fence, g.expire_at, turn->began);
      turn->asked = turn->mine = false;
      std::lock_guard<std::mutex> lk(wait_mu_);
      ++turn_grants_;
      return true;
    }
  }
  std::optional<NextTurnSeen> next_seen;  // what the take's read saw of the turn (LeaseRequest::next_seen)
  const auto take = [&] {
    return with_reconnect(conn, budget, "acquiring lease '" + l->name + "'", [&](int attempt) {
      if (attempt > 1) {
        // A retry after an unanswered attempt first asks whether that attempt
        // took the lease (the owner token is ours alone).
        auto mine = run(conn, Sql::lease_read_mine, {l->name, owner, l->channel()});
        if (!mine.rows.empty()) {
          static constexpr auto kFence = column(Sql::lease_read_mine, "fence");
          static constexpr auto kExpireAt = column(Sql::lease_read_mine, "expire_at");
          if (cell(mine.rows[0], kExpireAt).as_int() > conn.db_now_ms())
            return AcquireResult{true, cell(mine.rows[0], kFence).as_int(), cell(mine.rows[0], kExpireAt).as_int(),
                                 owner};
        }
        if (session) session->session_lost();  // a new session: it holds no queue place and listens to nothing
      }
      auto res = acquire_lease_seated(conn, l->name, owner, o.ttl, o.min_hold, session ? session->seat() : nullptr,
                                      seen_free && attempt == 1, o.take_over, turn_owner, hold_turn_grant,
                                      &next_seen);
      if (session) session->seated();
      return res;
    });
  };
  auto r = take();
  if (turn) turn->other_turn = next_seen && !next_seen->owner.empty() && next_seen->owner != turn->owner;
  if (!r.acquired && turn && ask_next_turn(conn, *l, *turn, next_seen ? &*next_seen : nullptr)) {
    // A release handed the lease to this wait (its next turn), or freed it,
    // just now: once more, in what is left of the budget.
    seen_free = false;
    budget = std::max(budget - std::chrono::duration_cast<milliseconds>(steady_clock::now() - start), milliseconds(1));
    start = steady_clock::now();
    r = take();
  }
  if (!r.acquired) {
    *holder_remaining = r.holder_remaining_ms > 0 ? milliseconds(r.holder_remaining_ms) : o.ttl;
    note_refusal(*l->state, r.holder_remaining_ms);
    return false;
  }
  gate_wake.held = false;  // (the take kept it: lease_take takes it once per session)
  if (turn && !turn_owner.empty() && r.owner == turn_owner) {
    // Held as the release handed it to the turn: with the turn's token, and
    // a trust window from when the wait began (hold_turn_grant).
    took(l, c.slot(), turn_owner, r.fence, r.expire_at_ms, turn->began);
    turn->asked = turn->mine = false;  // the turn was used: nothing to give back
    std::lock_guard<std::mutex> lk(wait_mu_);
    ++turn_grants_;
    return true;
  }
  took(l, c.slot(), owner, r.fence, r.expire_at_ms, start);
  if (named) {
    std::lock_guard<std::mutex> lk(wait_mu_);
    ++named_handoffs_;
  }
  if (o.fair && w) keep_place_for_release(conn, *l, w);
  return true;
}

// A fair lease a release granted to this wait's place in its own commit
// (lease_release_fair; the wake-up named the place and carried the grant):
// held without a statement of its own, as the release wrote it, when the
// grant's ttl is this handle's and enough of a trust window is left. The
// window starts when the place's join was sent: the grant needs the place,
// so it came later on every clock, and no watcher can have counted the
// granted row unchanged from before it. (Not a renewal's send: the place
// stays after the grant, so a renewal may have come after it.) Less than
// half a ttl left (a wait that long, a late wake-up): false, and the
// attempt confirms it by a take.
bool ClientCore::take_up_grant(Borrowed& c, const std::shared_ptr<ClientLease>& l, ClientWait* w,
                               const ClientLease& place, const FairGrant& grant, bool named) {
  const auto& o = l->options;
  if (grant.ttl_ms != o.ttl.count()) return false;
  std::string owner;
  steady_clock::time_point since;
  {
    std::lock_guard<std::mutex> lk(place.state->mu);
    if (place.state->hold == 0 || place.state->lost) return false;
    owner = place.state->owner;
    since = place.joined;
  }
  if (since + o.ttl - l->margin - steady_clock::now() < o.ttl / 2) return false;
  took(l, c.slot(), owner, grant.fence, grant.expire_at, since);
  {
    std::lock_guard<std::mutex> lk(wait_mu_);
    if (named) ++named_handoffs_;
    ++granted_handoffs_;
  }
  keep_place_for_release(*c, *l, w);
  return true;
}

void ClientCore::took(const std::shared_ptr<ClientLease>& l, int slot, const std::string& owner, std::int64_t fence,
                      std::int64_t expire_at, steady_clock::time_point sent) {
  {
    std::lock_guard<std::mutex> lk(l->state->mu);
    l->state->hold = 1;
    l->state->owner = owner;
    l->state->fence = fence;
    ++l->state->acquisition;
    l->state->expire_at = expire_at;
    l->state->valid_until = sent + l->options.ttl - l->margin;
    l->state->lost = false;
    l->state->loss.reset();
    l->state->takeover_in.reset();
    l->slot = session_bound_release_ ? slot : -1;
    l->held_place = HeldPlace{};
  }
  if (l->renew) renew_register(l);
}

bool ClientCore::try_acquire(const std::shared_ptr<ClientLease>& l) {
  check_process();
  {
    std::lock_guard<std::mutex> lk(wait_mu_);
    if (l->waiting)  // (a handle with a pending acquire holds nothing: re-entry is not at stake)
      throw Error(ErrorCode::kInvalidArgument,
                  "lease '" + l->name + "': an asynchronous acquire of this handle is still pending (cancel_acquire() "
                  "it first)");
  }
  milliseconds holder{0};
  // A borrowed connection's session waiter hears of a reconnect too.
  return try_here(l, l->options.ttl, &holder, l->session_waiter.get());
}

bool ClientCore::acquire(const std::shared_ptr<ClientLease>& l, milliseconds wait) {
  check_process();
  check_duration(wait, "wait", milliseconds(0), std::chrono::hours(24 * 365));
  if (wait.count() == 0) return try_acquire(l);
  if (std::this_thread::get_id() == waiter_thread_id_.load())
    throw Error(ErrorCode::kInvalidArgument,
                "lease '" + l->name + "': a blocking acquire() from a callback on the lock client's waiter thread "
                "would wait for that thread itself; use acquire_async()");
  if (borrowed_) return acquire_here(l, wait);
  const auto deadline = steady_clock::now() + wait;
  bool queued;
  {
    std::lock_guard<std::mutex> lk(wait_mu_);
    queued = queues_.count(l->name) > 0;
  }
  if (!queued) {  // nobody of this process waits for it: try at once on this thread
    try {
      if (try_acquire(l)) return true;
    } catch (const Error& e) {
      if (!is_outage(e) && e.code() != ErrorCode::kResourceExhausted) throw;
    }
  }
  {
    std::lock_guard<std::mutex> lk(l->state->mu);
    if (l->state->hold > 0) return false;  // holding a lost lease: waiting cannot help
  }
  auto [done, f] = completion_future();
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
  acquire_async(l, std::max(left, milliseconds(1)), std::move(done));
  return f.get();
}

}  // namespace sqlguard::detail
