// Internal: fairness, the lock client's one policy for who waits how long
// (fairness.cpp, its one home). A fair waiter (fair leases and fair
// semaphores) holds a queue place (sqlguard_lock_queue) with a ticket the
// database assigns; only the lowest live ticket may take the lock. The
// place's life (taken, renewed while it waits, read for its turn, kept by the
// holder until its release, left) is ClientCore's take_place / fair_turn_on /
// keep_place_for_release / leave_place. A default lease's waiter barges
// until barging_limit, then asks for the lease's next turn (ClientCore's
// ask_next_turn / drop_next_turn). How long either kind of waiter pauses,
// and how the waiter thread orders, wakes and paces fair heads, is here.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/client.h"
#include "plans/plans.h"

namespace sqlguard::detail {

struct FairPolicy {
  // Where wake-ups do not name the next ticket (MariaDB's wake-up lock:
  // each woken listener costs a statement; SQLite's futex word: free, but
  // it wakes every waiter of the name), each woken fair head would read the
  // queue once per release: a fair head with kFarInLine or more places
  // ahead is left out of them: the listener does not block on its name and
  // a wake-up does not make it try. It checks its turn again after 4/5 of
  // the turns until it is next, timed by the fastest turn of the queue it
  // saw (a check after its turn came would leave the lease free with nobody
  // woken, so early beats late). Only the next in line waits for the
  // release's wake-up.
  static constexpr std::int64_t kFarInLine = 2;
  // ... and never later than this: a check late by a misjudged pace costs
  // the queue at most this long.
  static constexpr std::chrono::milliseconds kFarCheckMax{20};
  // A blocking acquire's try read the queue, then its wait joins: the wait
  // starts from that read (ClientLease::tried_ahead) when it is this recent.
  static constexpr std::chrono::milliseconds kTriedAheadFresh{50};

  // Bounded barging (LeaseOptions::barging_limit): a new wait's next turn
  // (nullopt: the lease never asks).
  static std::optional<NextTurn> next_turn_for(const ClientLease& lease);
  // How long a busy waiter of a default lease may pause before it looks
  // again (max(): no cap): before barging_limit, no later than the limit (a
  // long nap would outlast it); past it, backoff_initial while the lease
  // changes hands, doubling up to backoff_max while one holder keeps it
  // (NextTurn::same_holder).
  static std::chrono::milliseconds turn_pause_cap(const NextTurn* turn, const ClientLease& lease);
  // While the turn is its own, a waiter looks again only every this many
  // busy attempts (an older waiter may take the turn; a take-over of a dead
  // holder clears it): the turn's owner attempts often.
  static constexpr int kRecheckEvery = 8;

  // A fair waiter's ticket (its queue place's); other waits sort last.
  static std::int64_t ticket(const ClientWait& w);
  // The queue's head is fair and far in line (see kFarInLine).
  static bool far_in_line(const NameQueue& q, const WaitPlan& plan);
  // Whether a wake-up is for this queue's head: a fair head's when it names
  // no ticket, the head's own, or a later one (the head's place lapsed: it
  // queues again); every wake-up for other heads.
  static bool wakes_head(const NameQueue& q, const std::vector<std::string>& payloads);
  // The ticket of this queue's fair lease head when a wake-up names its place
  // as the next (lease_release_fair's payload 'ticket:owner token', where the
  // plan wakes by ticket), else -1: the release saw no live place ahead of
  // it, so its attempt need not read the queue (a place or a turn decides
  // only who may try; the take decides).
  // A payload may go on with what the release granted that place
  // ('ticket:owner|fence|expire_at|ttl_ms'): into `grant`.
  static std::int64_t names_head(const NameQueue& q, const std::vector<std::string>& payloads, const WaitPlan& plan,
                                 FairGrant* grant);
  // A default lease's hand-over to the next turn `turn_owner` among a
  // wake-up's payloads (lease_release's 'turn:owner|fence|expire_at|ttl_ms',
  // PostgreSQL): into `grant`, true when one names it.
  static bool turn_grant(const std::vector<std::string>& payloads, const std::string& turn_owner, FairGrant* grant);
  // The channel the listener waits on for this queue: the name's, or, for a
  // fair lease's head where the plan wakes by ticket, its ticket's own
  // (fair_ticket_channel): a release wakes only the waiter it names.
  static std::string listen_channel(const NameQueue& q, const WaitPlan& plan);
  // A fair wait joins its local queue in ticket order.
  static void enqueue(NameQueue& q, std::shared_ptr<ClientWait> w);
  // A fair head's attempt did not get it: when it looks again (unless
  // `outage`), and the local queue back in ticket order.
  static void after_busy(NameQueue& q, const std::shared_ptr<ClientWait>& w, std::chrono::steady_clock::time_point t,
                         const WaitPlan& plan, bool outage);

 private:
  static void pace(NameQueue& q, const ClientWait& w, std::chrono::steady_clock::time_point t, const WaitPlan& plan);
};

}  // namespace sqlguard::detail
