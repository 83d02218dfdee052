// sqlguard/row_lock.h — RAII row-lock scopes: SELECT ... FOR UPDATE / FOR
// SHARE on the user's own table, with wait (bounded by a lock timeout),
// NOWAIT and SKIP LOCKED (job-queue claiming).
//
//   sqlguard::RowLocker stock(conn, {.table = "stock", .key_column = "id", .columns = {"qty"}});
//   auto scope = stock.lock(42);                // BEGIN; SELECT id, qty ... FOR UPDATE
//   if (scope.status() == sqlguard::LockStatus::kLocked) {
//     auto qty = scope.rows()[0][1].as_int();
//     scope.execute("UPDATE stock SET qty = ? WHERE id = ?", {qty - 1, 42});
//     scope.commit();
//   }                                           // otherwise / on exception: rollback
//
// Support matrix (capabilities() says the same at run time):
//                  PostgreSQL           MariaDB/MySQL (InnoDB)        SQLite
//   wait           FOR UPDATE +         FOR UPDATE + session          BEGIN IMMEDIATE: the whole
//                  SET LOCAL            innodb_lock_wait_timeout      database write lock, bounded
//                  lock_timeout (ms)    (whole seconds, rounded up,   by the busy timeout (ms)
//                                       min 1 s; restored after)
//   NOWAIT         FOR UPDATE NOWAIT    FOR UPDATE NOWAIT             busy timeout 0: fails if ANY
//                                                                     other writer is active
//   SKIP LOCKED    yes                  yes                           NotSupported
//   shared         FOR SHARE            LOCK IN SHARE MODE            the same exclusive write lock
//                                                                     (stronger: shared scopes
//                                                                     exclude each other)
// On SQLite a "row lock" therefore locks the whole database for writes;
// readers (WAL) still proceed.
//
// Outcomes: kLocked, kNotFound (no matching row; the transaction stays
// open so you may insert), kBusy (NOWAIT refused or the lock timeout
// elapsed; the transaction was rolled back). Deadlocks (PostgreSQL 40P01,
// MySQL 1213) throw Error(kConflict): redo the whole transaction, e.g.
// through with_retry() (retry.h). Other failures throw sqlguard::Error.
//
// Ownership and threads: a RowLocker and its scopes borrow the Connection
// (which must outlive them). The connection must not be in a transaction
// when a scope opens; while the scope is active, the connection belongs to
// it (run your statements through scope.execute() or the connection, not a
// second Transaction). One connection per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sqlguard/connection.h"

namespace sqlguard {

enum class LockWait {
  kWait,        // wait up to RowLockOptions::lock_timeout
  kNoWait,      // fail at once (kBusy) if a row is locked
  kSkipLocked,  // silently skip locked rows (claim(); NotSupported on SQLite)
};

enum class LockStrength {
  kExclusive,  // FOR UPDATE
  kShared,     // FOR SHARE / LOCK IN SHARE MODE
};

struct RowLockOptions {
  // Default: kWait.
  LockWait wait = LockWait::kWait;
  // Default: kExclusive.
  LockStrength strength = LockStrength::kExclusive;
  // Bound on waiting for the scope's locks in kWait mode, 1 ms .. 24 h.
  // MySQL rounds it up to whole seconds and restores the session's previous
  // innodb_lock_wait_timeout right after the locking SELECT; SQLite applies
  // it to BEGIN IMMEDIATE only; PostgreSQL keeps it (SET LOCAL) for the rest
  // of the scope's transaction. Default: 5 s.
  std::chrono::milliseconds lock_timeout{std::chrono::seconds(5)};
  // Isolation of the scope's transaction. Default: the server's default
  // (sqlguard's MySQL sessions use READ COMMITTED).
  Isolation isolation = Isolation::kDefault;

  // Throws Error(kInvalidArgument) naming the offending field.
  void validate() const;
};

// The user's table. Names are validated and quoted once, at construction.
struct RowLockSpec {
  std::string table;                 // required
  std::string key_column = "id";     // Default: "id"
  // Extra columns returned in rows() after the key. Default: none.
  std::vector<std::string> columns;
  // Columns compared for equality by claim() (values bound per call), e.g.
  // {"status"} for "WHERE status = ?". Default: none (claim any row).
  std::vector<std::string> claim_filter;
};

enum class LockStatus { kLocked, kNotFound, kBusy };
std::string_view to_string(LockStatus s) noexcept;

class RowLockScope {
 public:
  RowLockScope(RowLockScope&& other) noexcept;
  RowLockScope& operator=(RowLockScope&&) = delete;
  RowLockScope(const RowLockScope&) = delete;
  RowLockScope& operator=(const RowLockScope&) = delete;
  // Rolls back unless committed. Never throws: failures go to sqlguard::log().
  ~RowLockScope();

  LockStatus status() const noexcept { return status_; }
  explicit operator bool() const noexcept { return status_ == LockStatus::kLocked; }
  // The locked rows: key first, then RowLockSpec::columns, ordered by key.
  const std::vector<Row>& rows() const noexcept { return rows_; }
  // For kBusy: the LockBusy error the database reported.
  const std::optional<Error>& busy_error() const noexcept { return busy_; }
  // True while the scope's transaction is open.
  bool active() const noexcept { return active_; }

  // Runs a statement inside the scope's transaction.
  Result execute(std::string_view sql, const Params& params = {});
  Connection& connection() noexcept { return *conn_; }

  // Commits (releases the locks). Throws on failure (kCommitInDoubt if the
  // connection broke during COMMIT); the scope is inactive afterwards.
  void commit();
  // Rolls back now (the destructor would do the same).
  void rollback();

 private:
  friend class RowLocker;
  explicit RowLockScope(Connection& conn) : conn_(&conn) {}
  void finish(bool commit);
  Connection* conn_;
  LockStatus status_ = LockStatus::kBusy;
  bool active_ = false;
  std::vector<Row> rows_;
  std::optional<Error> busy_;
};

class RowLocker {
 public:
  // Throws Error(kInvalidArgument) for a bad identifier.
  RowLocker(Connection& conn, RowLockSpec spec);

  // Opens a transaction and locks the row whose key equals `key`.
  // kSkipLocked is refused (Error kInvalidArgument): use claim().
  RowLockScope lock(const Value& key, const RowLockOptions& options = {});

  // Opens a transaction and locks up to `limit` (1..10000) rows matching
  // claim_filter = `filter_values` (one value per filter column), lowest
  // keys first. With kSkipLocked rows locked by others are skipped, so N
  // workers never claim the same row. Status kNotFound = nothing to claim.
  // SKIP LOCKED on SQLite: Error(kNotSupported).
  RowLockScope claim(std::int64_t limit, const Params& filter_values = {}, const RowLockOptions& options = {});

 private:
  // `claim`: the claim statement (with or without filter), else the
  // single-key lock. The SQL is the catalog's (sql/<dialect>/strategies.sql).
  RowLockScope run(bool claim, const Params& params, const RowLockOptions& options);
  std::string select_sql(const RowLockOptions& o, bool claim) const;
  Connection& conn_;
  std::string table_, key_;
  std::vector<std::string> cols_, filter_;  // quoted columns; rendered filter fragments
  std::size_t filter_count_ = 0;
  std::vector<std::string> lock_names_, claim_names_;  // names of the values, for errors
};

}  // namespace sqlguard
