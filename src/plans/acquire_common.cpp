#include "plans/acquire_common.h"

namespace sqlguard::detail {

AcquireResult read_back(Connection& conn, const LeaseRequest& req) {
  auto mine = run(conn, Sql::lease_read_mine, {req.name, req.owner, lease_wakeup_channel(req.name)});
  if (mine.rows.empty()) return busy(req.owner, 0);
  return acquired_row<Sql::lease_read_mine>(req.owner, mine.rows[0]);
}

std::optional<AcquireResult> precheck(Connection& conn, const LeaseRequest& req, bool& missing) {
  static constexpr auto kCols = plain_sighting_columns<Sql::lease_precheck>();
  auto pre = run(conn, Sql::lease_precheck, {req.name});
  missing = pre.rows.empty();
  if (missing) return std::nullopt;
  const Sighting seen = sighting_of(pre.rows[0], kCols);
  req.next_seen = next_turn_seen<Sql::lease_precheck>(pre.rows[0], seen);
  if (req.may_take_over(seen)) return std::nullopt;
  // A release handed the lease to this wait (its next turn, bounded
  // barging): held as the release wrote it when the caller may (hold_grant)
  // and the hand-over's ttl is this request's; else the take confirms it.
  static constexpr auto kOwner = column(Sql::lease_precheck, "owner");
  static constexpr auto kGranted = column(Sql::lease_precheck, "granted");
  if (cell(pre.rows[0], kGranted).as_int() != 0 && !req.turn_owner.empty() &&
      cell(pre.rows[0], kOwner).as_string() == req.turn_owner) {
    if (req.hold_grant && seen.watch == req.ttl && seen.version.expire_at > seen.db_now)
      return AcquireResult{true, seen.version.fence, seen.version.expire_at, req.turn_owner};
    return std::nullopt;
  }
  req.seen = seen;
  return busy_until(conn, req, seen.version.expire_at, seen.db_now);
}

void await_wakeup_lock(Connection& conn, const std::string& channel) noexcept {
  try {
    run(conn, Sql::lease_wakeup_wait, {channel, 0.002});
  } catch (const std::exception& e) {
    log(LogLevel::kDebug, std::string("taking the wake-up lock failed: ") + e.what());
  }
}

}  // namespace sqlguard::detail
