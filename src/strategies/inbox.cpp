// Consumer-side dedup: the sqlguard_inbox row and the handler's business
// writes commit in one transaction, so "seen" and "applied" cannot diverge.
#include "sqlguard/inbox.h"

#include <mutex>

#include <algorithm>
#include <random>
#include <thread>

#include "core/metric_hooks.h"
#include "core/catalog.h"
#include "strategies/purge.h"
#include "sqlguard/backoff.h"
#include "sqlguard/validate.h"

namespace sqlguard {
namespace {
constexpr std::size_t kMaxConsumerBytes = 128;  // column size

std::chrono::milliseconds retry_backoff(int attempt) {
  return jittered(std::chrono::milliseconds(std::min<long>(200, 5L << std::min(attempt, 6))));
}
}  // namespace

std::string_view to_string(InboxOutcome o) noexcept {
  switch (o) {
    case InboxOutcome::kProcessed: return "processed";
    case InboxOutcome::kDuplicate: return "duplicate";
  }
  return "unknown";
}

Inbox::Inbox(Connection& conn, InboxOptions options) : conn_(conn), opt_(options) {
  using namespace std::chrono;
  check_duration(opt_.retention, "inbox retention", milliseconds(1), hours(24 * 3650));
  if (opt_.max_attempts < 1 || opt_.max_attempts > 100)
    throw Error(ErrorCode::kInvalidArgument,
                "inbox max_attempts must be 1..100, got " + std::to_string(opt_.max_attempts));
  if (opt_.max_message_id_bytes < 1 || opt_.max_message_id_bytes > kMaxNameBytes)
    throw Error(ErrorCode::kInvalidArgument, "inbox max_message_id_bytes must be 1..255, got " +
                                                 std::to_string(opt_.max_message_id_bytes));
}

InboxResult Inbox::process(std::string_view consumer, std::string_view message_id, const Handler& handler) {
  validate_name(consumer, "inbox consumer", kMaxConsumerBytes);
  validate_name(message_id, "inbox message id", opt_.max_message_id_bytes);
  if (!handler) throw Error(ErrorCode::kInvalidArgument, "inbox handler is empty");
  require_no_transaction(conn_, "Inbox::process()");

  const Params params{consumer, message_id, opt_.retention.count()};

  for (int attempt = 1;; ++attempt) {
    try {
      Transaction tx(conn_, opt_.isolation);
      // The dedup row goes first: a concurrent delivery of the same message
      // waits here for our commit instead of running its handler in parallel.
      // (MariaDB reports a duplicate as 1062; the transaction stays open until ~tx.)
      if (!detail::insert_if_absent(conn_, detail::Sql::inbox_insert, params)) {
        detail::metric::inbox_duplicates().inc();
        return {InboxOutcome::kDuplicate, attempt};
      }  // ~tx rolls back (nothing was written)
      handler(tx);
      tx.commit();
      detail::metric::inbox_processed().inc();
      return {InboxOutcome::kProcessed, attempt};
    } catch (const Error& e) {
      // Deadlock / serialization failure / busy database: the whole
      // transaction is gone (MariaDB 1213 rolls it back server-side), so the
      // attempt is redone from BEGIN. Everything else propagates.
      bool retry = (e.code() == ErrorCode::kConflict || e.code() == ErrorCode::kLockBusy) &&
                   attempt < opt_.max_attempts;
      if (!retry) throw;
      std::this_thread::sleep_for(retry_backoff(attempt));
    }
  }
}

std::int64_t purge_expired_inbox_messages(Connection& conn, int batch_size, int max_batches, int* batches) {
  if (max_batches < 1) throw Error(ErrorCode::kInvalidArgument, "purge_expired_inbox_messages: max_batches must be >= 1");
  return detail::purge_in_batches(conn, "purge_expired_inbox_messages()", detail::Sql::inbox_purge, {}, {batch_size, max_batches}, batches);
}

}  // namespace sqlguard
