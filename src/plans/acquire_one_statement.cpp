// Acquire plan "one-statement take-over" (PostgreSQL): lease_acquire takes
// a released row or one this process watched unchanged for its ttl (the
// take-over rule's compare-and-set), or answers with what it saw of the
// holder's row and the database clock, in one round trip; a held row does not match its WHERE, so a busy
// attempt is a read. The waiter queue of notify_queue_head() rides in the
// same statement (queue_role). A name never seen: lease_insert.
#include "plans/acquire_common.h"

namespace sqlguard::detail {
namespace {

class OneStatementTakeover final : public AcquirePlan {
 public:
  std::string_view name() const noexcept override { return "one-statement take-over"; }
  bool joins_fair_queue_in_one_statement() const noexcept override { return true; }
  bool never_waits_on_an_existing_row() const noexcept override { return true; }  // FOR UPDATE SKIP LOCKED

  AcquireResult attempt(Connection& conn, const LeaseRequest& req, QueueSeat* seat) const override {
    static constexpr auto kFence = column(Sql::lease_acquire, "fence");
    static constexpr auto kHolderExpireAt = column(Sql::lease_acquire, "holder_expire_at");
    static constexpr auto kNow = column(Sql::lease_acquire, "db_now_ms");
    static constexpr auto kLeft = column(Sql::lease_acquire, "left_queue");
    static constexpr auto kJoined = column(Sql::lease_acquire, "joined_queue");
    static constexpr SightingColumns kSeen{column(Sql::lease_acquire, "holder_fence"),
                                           column(Sql::lease_acquire, "holder_beat"),
                                           column(Sql::lease_acquire, "holder_expire_at"),
                                           column(Sql::lease_acquire, "holder_watch_ms"),
                                           column(Sql::lease_acquire, "holder_released"), kNow};
    const char* role = !seat ? "" : seat->head ? "head" : "join";
    Params args{req.name, req.owner, req.ttl.count(), req.min_hold.count(), role, seat ? *seat->channel : std::string()};
    req.add_rule_args(args);
    auto r = run(conn, Sql::lease_acquire, args);
    // Always one row: fence NULL when busy, holder_expire_at NULL when the
    // name does not exist yet.
    if (r.rows.size() != 1)
      throw Error(ErrorCode::kInternal, "lease_acquire answered " + std::to_string(r.rows.size()) + " rows, not one");
    const Row& row = r.rows[0];
    const bool took = !cell(row, kFence).is_null();
    if (seat) {
      const Value& yes = cell(row, took ? kLeft : kJoined);
      (took ? seat->left : seat->joined) = !yes.is_null() && yes.as_int() == 1;
    }
    if (took) return acquired_row<Sql::lease_acquire>(req.owner, row);
    if (!cell(row, kHolderExpireAt).is_null()) {
      const std::int64_t until = cell(row, kHolderExpireAt).as_int();
      if (until == kReservedExpireAt && seat && seat->joined) {
        // Refused below: leave the waiter queue's head place it just took.
        seat->joined = false;
        run(conn, Sql::lease_queue_leave, {*seat->channel});
      }
      req.seen = sighting_of(row, kSeen);
      req.next_seen = next_turn_seen<Sql::lease_acquire>(row, *req.seen);
      return busy_until(conn, req, until, cell(row, kNow).as_int());
    }
    auto ins = try_insert(conn, Sql::lease_insert, {req.name, req.owner, req.ttl.count(), req.min_hold.count()});
    if (!ins) return busy(req.owner, 0);  // someone created it first
    return acquired_row<Sql::lease_insert>(req.owner, ins->rows[0]);
  }
};

}  // namespace

const AcquirePlan& one_statement_takeover() {
  static const OneStatementTakeover plan;
  return plan;
}

}  // namespace sqlguard::detail
