// What a lock name is (names.h): the seams rule's refusal, in one place.
#include "strategies/names.h"

#include "core/catalog.h"
#include "sqlguard/validate.h"

namespace sqlguard {

std::string_view to_string(LockKind kind) noexcept { return detail::kind_name(kind); }

namespace detail {

std::string_view kind_name(LockKind kind) noexcept {
  switch (kind) {
    case LockKind::kLease: return "lease";
    case LockKind::kFairLease: return "fair";
    case LockKind::kSemaphore: return "semaphore";
    case LockKind::kReadWrite: return "rw";
  }
  return "lease";
}

Error kind_clash(const std::string& name, std::string_view stored, std::int64_t permits, std::string_view asked) {
  auto what = [](std::string_view k) -> std::string {
    if (k == "lease") return "a lease";
    if (k == "fair") return "a fair lease";
    if (k == "semaphore") return "a semaphore";
    if (k == "rw") return "a read-write lease";
    if (k == "reserved") return "a semaphore or read-write lease";
    return "a lock of kind '" + printable(k, 32) + "'";
  };
  std::string is = what(stored);
  if (stored == "semaphore" && permits > 0) is += " of " + std::to_string(permits) + " permits";
  return Error(ErrorCode::kInvalidArgument,
               "'" + printable(name, 64) + "' is " + is + "; asked as " + what(asked) +
                   ": a name is one lock, of one kind while its rows exist (use another name for " + what(asked) + ")");
}

void refuse_if_reserved(Connection& conn, const std::string& name, std::int64_t holder_expire_at,
                        std::string_view asked) {
  if (holder_expire_at != kReservedExpireAt) return;
  auto r = run(conn, Sql::sync_state, {name});
  if (r.rows.empty()) throw kind_clash(name, "reserved", 0, asked);  // its sqlguard_sync row is gone
  const auto& row = r.rows.front();
  throw kind_clash(name, cell(row, column(Sql::sync_state, "kind")).as_string(),
                   cell(row, column(Sql::sync_state, "permits")).as_int(), asked);
}

}  // namespace detail
}  // namespace sqlguard
