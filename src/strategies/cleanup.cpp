#include "sqlguard/cleanup.h"

#include <thread>

#include "dialect/dialect.h"
#include "sqlguard/idempotency.h"
#include "sqlguard/inbox.h"
#include "sqlguard/validate.h"

namespace sqlguard {
namespace {

// Deletes in batches with `sql` (LIMIT bound last). Deadlock victims
// (cleanup against acquirers on MariaDB) are retried.
std::int64_t purge(Connection& conn, const std::string& sql, Params params, const CleanupOptions& o, int* batches) {
  params.emplace_back(o.batch_size);
  std::int64_t total = 0;
  for (int b = 0; o.max_batches == 0 || b < o.max_batches; ++b) {
    std::int64_t n = 0;
    for (int attempt = 0;; ++attempt) {
      try {
        n = conn.execute(sql, params).affected;
        break;
      } catch (const Error& e) {
        if (!(e.code() == ErrorCode::kConflict || e.code() == ErrorCode::kLockBusy) || attempt >= 5) throw;
        std::this_thread::sleep_for(std::chrono::milliseconds(5 << attempt));
      }
    }
    ++*batches;
    total += n;
    if (n < o.batch_size) break;
    if (o.pause.count() > 0) std::this_thread::sleep_for(o.pause);
  }
  return total;
}

}  // namespace

CleanupReport cleanup(Connection& conn, const CleanupOptions& o) {
  check_duration(o.lock_grace, "lock_grace", std::chrono::milliseconds(0), std::chrono::hours(24 * 365));
  check_duration(o.pause, "pause", std::chrono::milliseconds(0), std::chrono::minutes(10));
  if (o.batch_size < 1 || o.batch_size > 100000)
    throw Error(ErrorCode::kInvalidArgument, "batch_size must be between 1 and 100000");
  if (o.max_batches < 0) throw Error(ErrorCode::kInvalidArgument, "max_batches must not be negative");
  if (conn.in_transaction())
    throw Error(ErrorCode::kInvalidArgument, "cleanup() runs its own short transactions; call it outside one");
  const Dialect& d = conn.dialect();
  CleanupReport r;
  if (o.locks) {
    std::string where = "expire_at < " + std::string(d.now_ms()) + " - ?";
    r.locks_deleted = purge(conn, d.delete_limited("sqlguard_lock", "name", where), {o.lock_grace.count()}, o, &r.batches);
  }
  // The dedup tables have their own retention rules (a live in-progress
  // placeholder is never deleted): their purge functions own them.
  const int max_batches = o.max_batches == 0 ? 1'000'000 : o.max_batches;
  if (o.idempotency) r.idempotency_deleted = purge_expired_idempotency_keys(conn, o.batch_size, max_batches);
  if (o.inbox) r.inbox_deleted = purge_expired_inbox_messages(conn, o.batch_size, max_batches);
  return r;
}

}  // namespace sqlguard
