// Internal: what the acquire plans share: the busy answer, the acquired
// answer, and reading back the fence where a statement cannot return it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/catalog.h"
#include "sqlguard/lease_lock.h"
#include "plans/plans.h"
#include "strategies/names.h"

namespace sqlguard::detail {

inline AcquireResult busy(const std::string& owner, std::int64_t holder_remaining_ms) {
  AcquireResult out;
  out.owner = owner;
  out.holder_remaining_ms = std::max<std::int64_t>(0, holder_remaining_ms);
  return out;
}

inline AcquireResult acquired(const std::string& owner, std::int64_t fence, std::int64_t expire_at_ms) {
  AcquireResult out;
  out.owner = owner;
  out.acquired = true;
  out.fence = fence;
  out.expire_at_ms = expire_at_ms;
  return out;
}

// The busy answer when the lease is held until `holder_expire_at` (database
// clock, `now`); refuses a name a semaphore or read-write lease reserved (a
// name is one lock: refuse_if_reserved, kInvalidArgument naming both kinds).
inline AcquireResult busy_until(Connection& conn, const LeaseRequest& req, std::int64_t holder_expire_at,
                                std::int64_t now) {
  refuse_if_reserved(conn, req.name, holder_expire_at, LockKind::kLease);
  return busy(req.owner, holder_expire_at - now);
}

// What a statement answered of the holder's row: its fence, beat and expiry,
// the watch it needs and whether it is released, with the database clock.
struct SightingColumns {
  Column fence, beat, expire_at, watch_ms, released, db_now;
};
inline Sighting sighting_of(const Row& row, const SightingColumns& c) {
  Sighting s;
  s.version = RowVersion{cell(row, c.fence).as_int(), cell(row, c.beat).as_int(), cell(row, c.expire_at).as_int()};
  s.watch = std::chrono::milliseconds(cell(row, c.watch_ms).as_int());
  s.released = cell(row, c.released).as_int() != 0;
  s.db_now = cell(row, c.db_now).as_int();
  return s;
}
// The columns named as in lease_precheck, lease_take and lease_poll.
template <Sql Id>
constexpr SightingColumns plain_sighting_columns() {
  return {column(Id, "fence"), column(Id, "beat"), column(Id, "expire_at"), column(Id, "watch_ms"),
          column(Id, "released"), column(Id, "db_now_ms")};
}

// The lease's next turn as a statement answered it (columns next_owner and
// next_since; NULL: a row written before the next turn existed), with the
// holder it saw.
template <Sql Id>
NextTurnSeen next_turn_seen(const Row& row, const Sighting& holder) {
  static constexpr auto kOwner = column(Id, "next_owner");
  static constexpr auto kSince = column(Id, "next_since");
  NextTurnSeen t;
  if (!cell(row, kOwner).is_null()) t.owner = cell(row, kOwner).as_string();
  if (!cell(row, kSince).is_null()) t.since = cell(row, kSince).as_int();
  t.holder = holder;
  return t;
}

// A row of a statement that returns (fence, expire_at) of the lease it took.
template <Sql Id>
AcquireResult acquired_row(const std::string& owner, const Row& row) {
  return acquired(owner, cell(row, column(Id, "fence")).as_int(), cell(row, column(Id, "expire_at")).as_int());
}

// The fence of a lease the caller just took with a statement that cannot
// return it (lease_read_mine; on MariaDB it also takes the wake-up lock).
// Not acquired when another contender took it over already (a tiny ttl).
AcquireResult read_back(Connection& conn, const LeaseRequest& req);

// A plain read that decides first (lease_precheck) by the take-over rule
// (LeaseRequest::may_take_over): the busy answer when the lease may not be
// taken (no write, no lock; req.seen set), else nothing; `missing`: no such
// name.
std::optional<AcquireResult> precheck(Connection& conn, const LeaseRequest& req, bool& missing);

// A new holder whose statement found the lease's wake-up lock busy (MariaDB:
// the previous holder has not freed it yet, or a listener is passing it on)
// waits a round trip or two for it (lease_wakeup_wait, at most 2 ms), so
// later waiters block on it; without it they poll with backoff (slower, never
// unsafe). Not longer: a waiter woken while nobody holds it (a lease handed
// to another's turn) takes it for its own attempt, frees it and takes it
// again at once, so a longer wait mostly ran to its end, every hand-over
// (measured, fast MariaDB, lease-hot at --barging-limit 20ms: 20 ms -> 45-48
// cycles/s at 8 and 16 clients, 5 ms -> 385 and 130, 2 ms -> 549 and 203).
// A failure is logged, never thrown.
void await_wakeup_lock(Connection& conn, const std::string& channel) noexcept;

}  // namespace sqlguard::detail
