// Consumer-side dedup: the sqlguard_inbox row and the handler's business
// writes commit in one transaction, so "seen" and "applied" cannot diverge.
#include "sqlguard/inbox.h"

#include <mutex>

#include <algorithm>
#include <random>
#include <thread>

#include "dialect/dialect.h"
#include "strategies/purge.h"
#include "sqlguard/validate.h"

namespace sqlguard {
namespace {
constexpr std::string_view kTable = "sqlguard_inbox";
constexpr std::size_t kMaxConsumerBytes = 128;  // column size

std::chrono::milliseconds retry_backoff(int attempt) {
  static thread_local std::mt19937 rng{std::random_device{}()};
  long cap = std::min<long>(200, 5L << std::min(attempt, 6));
  return std::chrono::milliseconds(std::uniform_int_distribution<long>(0, cap)(rng));
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
  if (conn_.in_transaction())
    throw Error(ErrorCode::kInvalidArgument, "Inbox::process() must not run inside a transaction open on the connection");

  // Built once per dialect: this is the hot path of every delivery.
  static std::once_flag once[3];
  static std::string built[3];
  const auto di = static_cast<std::size_t>(conn_.kind());
  std::call_once(once[di], [&] {
    const Dialect& d = conn_.dialect();
    const std::string now(d.now_ms());
    built[di] = d.insert_dedup(kTable, "consumer, message_id, processed_at, expire_at",
                               "?, ?, " + now + ", " + now + " + ?", "consumer, message_id");
  });
  const std::string& insert_sql = built[di];
  const Params params{consumer, message_id, opt_.retention.count()};

  for (int attempt = 1;; ++attempt) {
    try {
      Transaction tx(conn_, opt_.isolation);
      // The dedup row goes first: a concurrent delivery of the same message
      // waits here for our commit instead of running its handler in parallel.
      bool fresh;
      try {
        fresh = tx.execute(insert_sql, params).affected == 1;
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kAlreadyExists) throw;
        fresh = false;  // MariaDB: duplicate key (1062); the transaction stays open until ~tx
      }
      if (!fresh) return {InboxOutcome::kDuplicate, attempt};  // ~tx rolls back (nothing was written)
      handler(tx);
      tx.commit();
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
  const Dialect& d = conn.dialect();
  const std::string sql = d.delete_limited(kTable, "consumer, message_id", "expire_at <= " + std::string(d.now_ms()));
  return detail::purge_in_batches(conn, "purge_expired_inbox_messages()", sql, {}, {batch_size, max_batches}, batches);
}

}  // namespace sqlguard
