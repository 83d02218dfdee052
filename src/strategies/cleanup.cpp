#include "sqlguard/cleanup.h"

#include "core/catalog.h"
#include "sqlguard/idempotency.h"
#include "sqlguard/inbox.h"
#include "sqlguard/validate.h"
#include "strategies/purge.h"
#include "strategies/sync/sync_ops.h"

namespace sqlguard {

CleanupReport cleanup(Connection& conn, const CleanupOptions& o) {
  check_duration(o.lock_grace, "lock_grace", std::chrono::milliseconds(0), std::chrono::hours(24 * 365));
  check_duration(o.pause, "pause", std::chrono::milliseconds(0), std::chrono::minutes(10));
  if (o.batch_size < 1 || o.batch_size > 100000)
    throw Error(ErrorCode::kInvalidArgument, "batch_size must be between 1 and 100000");
  if (o.max_batches < 0) throw Error(ErrorCode::kInvalidArgument, "max_batches must not be negative");
  CleanupReport r;
  if (o.locks) {
    r.locks_deleted = detail::purge_in_batches(conn, "cleanup()", detail::Sql::lock_purge,
                                               {o.lock_grace.count()}, {o.batch_size, o.max_batches, o.pause},
                                               &r.batches);
    r.lease_watches_deleted = detail::purge_in_batches(conn, "cleanup()", detail::Sql::lease_watch_purge, {},
                                                       {o.batch_size, o.max_batches, o.pause}, &r.batches);
    r.lease_watches_deleted += detail::purge_in_batches(conn, "cleanup()", detail::Sql::sync_watch_purge, {},
                                                        {o.batch_size, o.max_batches, o.pause}, &r.batches);
    r.holdings_deleted = detail::purge_in_batches(conn, "cleanup()", detail::Sql::sync_purge_all,
                                                  {o.lock_grace.count()}, {o.batch_size, o.max_batches, o.pause},
                                                  &r.batches);
    r.queue_places_deleted = detail::purge_in_batches(conn, "cleanup()", detail::Sql::fair_purge_all,
                                                      {o.lock_grace.count()}, {o.batch_size, o.max_batches, o.pause},
                                                      &r.batches);
    // Last: a head goes only once its holdings and places are gone.
    r.sync_heads_deleted =
        detail::purge_idle_heads(conn, o.lock_grace, o.batch_size, o.max_batches, o.pause, &r.batches);
  }
  // The dedup tables have their own retention rules (a live in-progress
  // placeholder is never deleted): their purge functions own them.
  const int max_batches = o.max_batches == 0 ? 1'000'000 : o.max_batches;
  if (o.idempotency)
    r.idempotency_deleted = purge_expired_idempotency_keys(conn, o.batch_size, max_batches, &r.batches);
  if (o.inbox) r.inbox_deleted = purge_expired_inbox_messages(conn, o.batch_size, max_batches, &r.batches);
  // (A database that never recorded has no row: no DELETE, which on SQLite
  // would take the write lock on every call.)
  if (o.history && !detail::run(conn, detail::Sql::history_any, {}).rows.empty())
    r.history_deleted = detail::purge_in_batches(conn, "cleanup()", detail::Sql::history_purge, {},
                                                 {o.batch_size, o.max_batches, o.pause}, &r.batches);
  return r;
}

}  // namespace sqlguard
