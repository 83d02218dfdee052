// Acquire plan "read first, then upsert returning" (MariaDB): a consistent
// read decides first (lease_precheck: InnoDB's UPDATE by primary key waits
// for the row lock even when the row will not match); then lease_take
// creates or takes over, reads the fence and takes the wake-up lock in one
// round trip, returning the row as it left it.
#include "plans/acquire_common.h"
#include "sqlguard/errors.h"

namespace sqlguard::detail {
namespace {

class ReadThenUpsertReturning final : public AcquirePlan {
 public:
  std::string_view name() const noexcept override { return "read first, then upsert returning"; }

  AcquireResult attempt(Connection& conn, const LeaseRequest& req, QueueSeat*) const override {
    static constexpr auto kOwner = column(Sql::lease_take, "owner");
    static constexpr auto kExpireAt = column(Sql::lease_take, "expire_at");
    static constexpr auto kAcquiredAt = column(Sql::lease_take, "acquired_at");
    static constexpr auto kNow = column(Sql::lease_take, "db_now_ms");
    static constexpr auto kWakeLock = column(Sql::lease_take, "wake_lock");
    bool missing = false;
    const std::string channel = lease_wakeup_channel(req.name);
    if (!req.seen_free)
      if (auto held = precheck(conn, req, missing)) {
        // A lease handed to this wait's turn, held as the release wrote it:
        // the holder's wake-up lock is taken as a take takes it (nobody
        // holds a handed lease's).
        if (held->acquired) await_wakeup_lock(conn, channel);
        return *held;
      }
    Params args{req.name, req.owner, req.ttl.count(), req.min_hold.count(), channel};
    req.add_rule_args(args);
    auto r = run(conn, Sql::lease_take, args);
    if (r.rows.empty()) return busy(req.owner, 0);
    const Row& row = r.rows[0];
    // Ours only if this statement took it (another contender may have just now).
    if (cell(row, kOwner).as_string() != req.owner || cell(row, kAcquiredAt).as_int() != cell(row, kNow).as_int()) {
      static constexpr auto kSeen = plain_sighting_columns<Sql::lease_take>();
      req.seen = sighting_of(row, kSeen);
      return busy_until(conn, req, cell(row, kExpireAt).as_int(), cell(row, kNow).as_int());
    }
    // The wake-up lock was busy: the previous holder has not freed it yet, or
    // a woken waiter is finding out that it lost. Both let go within a round
    // trip or two.
    const Value& wake = cell(row, kWakeLock);
    if (wake.is_null() || wake.as_int() != 1) await_wakeup_lock(conn, channel);
    return acquired_row<Sql::lease_take>(req.owner, row);
  }
};

}  // namespace

const AcquirePlan& read_then_upsert_returning() {
  static const ReadThenUpsertReturning plan;
  return plan;
}

}  // namespace sqlguard::detail
