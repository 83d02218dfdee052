// sqlguard/inbox.h — consumer-side message dedup (NServiceBus-style inbox):
// at-least-once delivery made exactly-once in effect.
//
//   sqlguard::Inbox inbox(conn);
//   auto r = inbox.process("billing", msg.id, [&](sqlguard::Transaction& tx) {
//     tx.execute("UPDATE account SET balance = balance - ? WHERE id = ?", {msg.amount, msg.account});
//   });
//   ack(msg);  // both Processed and Duplicate mean "done"
//
// process() opens ONE database transaction, inserts the dedup row
// (consumer, message_id) into sqlguard_inbox first, then runs the handler's
// business writes in the same transaction and commits. So:
//   - a redelivered message finds the row and is skipped (kDuplicate), the
//     handler is not called;
//   - a crash or exception mid-handler rolls back the effect AND the dedup
//     row, and the redelivery processes the message;
//   - concurrent delivery of one message to two consumer instances applies
//     the effect once: the second INSERT waits for the first transaction
//     (PostgreSQL/MariaDB row lock, SQLite write lock) and then sees the
//     duplicate.
// The handler writes through the Transaction (tx.execute) or the native
// escape hatch on tx.connection() (sqlguard/sqlite.h, postgresql.h, mysql.h).
// It must not commit or roll back itself.
//
// Retries: a deadlock or serialization failure (Conflict — MariaDB 1213
// rolls back the whole transaction) or a busy database (LockBusy) makes
// process() roll back and run the whole attempt again, up to max_attempts;
// the handler may therefore be called more than once, each time in a fresh
// transaction, so it must keep its effects inside the transaction.
// CommitInDoubt and ConnectionLost propagate (let the broker redeliver: the
// dedup row decides). A handler exception rolls back and propagates.
//
// Thread safety: an Inbox borrows one Connection and must not outlive it;
// one instance (and Connection) per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string_view>

#include "sqlguard/connection.h"

namespace sqlguard {

struct InboxOptions {
  // How long a dedup row is kept. It must exceed the longest redelivery
  // window of your broker: a message redelivered after its row was purged is
  // processed again. Default: 7 days (NServiceBus's default dedup window;
  // brokers redeliver well beyond a day after outages). Range: 1ms..3650 days.
  std::chrono::milliseconds retention{std::chrono::hours(24 * 7)};
  // Attempts on Conflict/LockBusy before the Error propagates. Default: 5.
  // Range: 1..100.
  int max_attempts = 5;
  // Isolation of the transaction. Default: the server's default (sqlguard
  // sessions: READ COMMITTED on PostgreSQL and MariaDB).
  Isolation isolation = Isolation::kDefault;
  // Longest accepted message id in bytes (refused, never truncated).
  // Default: 255 (the column size). Range: 1..255.
  std::size_t max_message_id_bytes = 255;
};

enum class InboxOutcome { kProcessed, kDuplicate };
// "processed", "duplicate".
std::string_view to_string(InboxOutcome outcome) noexcept;

struct InboxResult {
  InboxOutcome outcome = InboxOutcome::kProcessed;
  // Transaction attempts used (1 unless a Conflict/LockBusy was retried).
  int attempts = 1;
};

class Inbox {
 public:
  using Handler = std::function<void(Transaction&)>;

  // Validates `options` (Error kInvalidArgument). Borrows `conn`.
  explicit Inbox(Connection& conn, InboxOptions options = {});

  // Processes `message_id` for `consumer` (the logical endpoint; its
  // instances share dedup) exactly once in effect. `consumer`: 1..128 bytes
  // UTF-8; `message_id`: 1..max_message_id_bytes UTF-8 (kInvalidArgument
  // otherwise). Must not be called inside a transaction open on the
  // connection.
  InboxResult process(std::string_view consumer, std::string_view message_id, const Handler& handler);

  const InboxOptions& options() const noexcept { return opt_; }

 private:
  Connection& conn_;
  InboxOptions opt_;
};

// Retention cleanup, called by `sqlguard cleanup`: deletes sqlguard_inbox rows
// whose expire_at (database clock) has passed, in autocommit batches of at
// most `batch_size` rows; stops after a short batch or `max_batches`
// batches and returns the number deleted. Refuses to run inside an open
// transaction. Errors: kInvalidArgument (batch_size outside 1..100000,
// max_batches < 1), database errors.
// `batches`, when given, is increased by the number of DELETE batches run.
std::int64_t purge_expired_inbox_messages(Connection& conn, int batch_size = 1000, int max_batches = 1000,
                                  int* batches = nullptr);

}  // namespace sqlguard
