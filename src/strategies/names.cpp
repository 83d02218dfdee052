// What a lock name is (names.h): the seams rule's refusal, in one place.
#include "strategies/names.h"

#include "core/catalog.h"
#include "sqlguard/validate.h"
#include "strategies/kinds.h"

namespace sqlguard {

namespace detail {

Error kind_clash(const std::string& name, std::string_view stored, std::int64_t permits, LockKind asked_kind) {
  const std::string_view asked = kind_name(asked_kind);
  auto what = [](std::string_view k) { return kind_noun(k); };
  std::string is = what(stored);
  if (stored == "semaphore" && permits > 0) is += " of " + std::to_string(permits) + " permits";
  return Error(ErrorCode::kInvalidArgument,
               "'" + printable(name, 64) + "' is " + is + "; asked as " + what(asked) +
                   ": a name is one lock, of one kind while its rows exist (use another name for " + what(asked) + ")");
}

void refuse_if_reserved(Connection& conn, const std::string& name, std::int64_t holder_expire_at, LockKind asked) {
  if (holder_expire_at != kReservedExpireAt) return;
  auto r = run(conn, Sql::sync_state, {name});
  if (r.rows.empty()) throw kind_clash(name, "reserved", 0, asked);  // its sqlguard_sync row is gone
  const auto& row = r.rows.front();
  throw kind_clash(name, cell(row, column(Sql::sync_state, "kind")).as_string(),
                   cell(row, column(Sql::sync_state, "permits")).as_int(), asked);
}

void check_name(const std::string& name, const StoredName& stored, LockKind asked, std::int64_t permits) {
  if (stored.kind != kind_name(asked)) throw kind_clash(name, stored.kind, stored.permits, asked);
  // A semaphore handle asks with its own count: one that differs from the
  // name's is refused, so a count changed in one place is never silently
  // ignored in another.
  if (asked != LockKind::kSemaphore || permits <= 0 || permits == stored.permits) return;
  const std::string n = printable(name, 64);
  throw Error(ErrorCode::kInvalidArgument,
              "semaphore '" + n + "' has " + std::to_string(stored.permits) + " permits; asked with " +
                  std::to_string(permits) + ": ask with " + std::to_string(stored.permits) +
                  ", or change its count for every user of the name (Semaphore::set_permits, or `sqlguard lock "
                  "resize " + n + " --permits " + std::to_string(permits) + "`)");
}

void reserve_name(Connection& conn, const StoredName& stored, const std::string& name, LockKind asked) {
  if (asked == LockKind::kFairLease) return;
  if (stored.lease_owner) {
    if (stored.lease_owner->empty()) return;
    throw kind_clash(name, "lease", 0, asked);
  }
  // Two first uses at once insert one primary key: the later one waits for
  // the earlier and finds its row.
  if (run(conn, Sql::sync_reserve_name, {name}).affected == 1) return;
  auto info = run(conn, Sql::lease_info, {name});
  if (info.rows.empty())
    throw Error(ErrorCode::kConflict, "'" + printable(name, 64) + "': its lease row came and went while reserving it");
  if (!cell(info.rows.front(), column(Sql::lease_info, "owner")).as_string().empty())
    throw kind_clash(name, "lease", 0, asked);
}

}  // namespace detail
}  // namespace sqlguard
