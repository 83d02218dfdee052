// Acquire plan "read first, then update" (SQLite; Galera without RETURNING):
// a plain read decides first (lease_precheck), so a busy attempt takes no
// write lock (SQLite takes the database write lock for any UPDATE); only an
// expired row is updated and only a missing name inserted.
#include "plans/acquire_common.h"

namespace sqlguard::detail {
namespace {

class ReadThenUpdate final : public AcquirePlan {
 public:
  explicit ReadThenUpdate(bool returning) : returning_(returning) {}
  // SQLite (returning): one writer at a time, no row locks. Galera: a row
  // lock of a local transaction is waited for.
  bool never_waits_on_an_existing_row() const noexcept override { return returning_; }
  std::string_view name() const noexcept override {
    return returning_ ? "read first, then update returning" : "read first, then update and read back";
  }

  AcquireResult attempt(Connection& conn, const LeaseRequest& req, QueueSeat*) const override {
    bool missing = false;
    if (auto held = precheck(conn, req, missing)) {
      // A lease handed to this wait's turn, held as the release wrote it;
      // Galera: with its wake-up lock, as lease_read_mine takes it.
      if (held->acquired && !returning_) await_wakeup_lock(conn, lease_wakeup_channel(req.name));
      return *held;
    }
    const Params args{req.name, req.owner, req.ttl.count(), req.min_hold.count()};
    if (!missing) {
      Params take = args;
      req.add_rule_args(take);
      if (returning_) {
        auto r = run(conn, Sql::lease_take_expired, take);
        if (r.rows.empty()) return busy(req.owner, 0);  // another contender took it just now
        return acquired_row<Sql::lease_take_expired>(req.owner, r.rows[0]);
      }
      if (run(conn, Sql::lease_update_expired, take).affected != 1) return busy(req.owner, 0);
      return read_back(conn, req);
    }
    auto ins = try_insert(conn, returning_ ? Sql::lease_insert : Sql::lease_create, args);
    if (!ins) return busy(req.owner, 0);  // someone created it first
    if (returning_) return acquired_row<Sql::lease_insert>(req.owner, ins->rows[0]);
    return read_back(conn, req);
  }

 private:
  bool returning_;
};

}  // namespace

const AcquirePlan& read_then_update(bool returning) {
  static const ReadThenUpdate with(true), without(false);
  return returning ? with : without;
}

}  // namespace sqlguard::detail
