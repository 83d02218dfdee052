#include "plans/acquire_common.h"

namespace sqlguard::detail {

AcquireResult read_back(Connection& conn, const LeaseRequest& req) {
  auto mine = run(conn, Sql::lease_read_mine, {req.name, req.owner, lease_wakeup_channel(req.name)});
  if (mine.rows.empty()) return busy(req.owner, 0);
  return acquired_row<Sql::lease_read_mine>(req.owner, mine.rows[0]);
}

std::optional<AcquireResult> precheck(Connection& conn, const LeaseRequest& req, bool& missing) {
  static constexpr auto kHeld = column(Sql::lease_precheck, "held");
  static constexpr auto kExpireAt = column(Sql::lease_precheck, "expire_at");
  static constexpr auto kNow = column(Sql::lease_precheck, "db_now_ms");
  auto pre = run(conn, Sql::lease_precheck, {req.name});
  missing = pre.rows.empty();
  if (!missing && cell(pre.rows[0], kHeld).as_int() == 1)
    return busy_until(conn, req, cell(pre.rows[0], kExpireAt).as_int(), cell(pre.rows[0], kNow).as_int());
  return std::nullopt;
}

}  // namespace sqlguard::detail
