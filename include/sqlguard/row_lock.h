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
// Leased claims (rescuable; every dialect, SQLite included). claim() holds
// its rows only as long as its transaction: fine for short jobs, but the
// job is invisible to the database once claimed, and a claimer that stops
// (SIGSTOP, a partition) keeps its rows as long as its session lives.
// claim_leased() instead writes the claim INTO the row, like river's
// rescuer: owner column = this RowLocker's owner token, until column =
// database clock + lease (ms since the epoch), in one short transaction
// (SKIP LOCKED on PostgreSQL/MySQL, BEGIN IMMEDIATE on SQLite). A row is
// claimable when it matches claim_filter and its claim is empty or its lease
// ended, so the rows of a claimer that was killed, paused or cut off become
// claimable again once their lease ends -- no job is lost. The claimer
// renews (renew_claim) while it works and finishes with complete_claim()
// (writes complete_columns, e.g. status = 'done', and clears the claim) or
// release_claim(); both are owner-checked single statements, so a claimer
// whose row was rescued by another gets false and cannot complete it a
// second time. Run complete_claim() inside your own transaction to commit
// the job's effects with the completion (true = commit, false = roll back).
// The table needs the two columns, e.g.
//   claimed_by VARCHAR(255) NULL, claimed_until BIGINT NULL
// On a table declared versioned (version_cas.h) every leased-claim write
// also moves the version.
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

// The columns of leased claims (RowLockSpec::lease).
struct ClaimLease {
  std::string owner_column = "claimed_by";     // text, NULL = unclaimed
  std::string until_column = "claimed_until";  // BIGINT ms (DB clock), NULL = unclaimed
  // Written by complete_claim() (values bound per call). Default: none.
  std::vector<std::string> complete_columns{};
  // This claimer's owner token. Default: "" = make_owner_token() (unique).
  std::string owner{};
};

// The user's table. Names are validated and quoted once, at construction.
struct RowLockSpec {
  std::string table{};               // required
  std::string key_column = "id";     // Default: "id"
  // Extra columns returned in rows() after the key. Default: none.
  std::vector<std::string> columns{};
  // Columns compared for equality by claim() (values bound per call), e.g.
  // {"status"} for "WHERE status = ?". Default: none (claim any row).
  std::vector<std::string> claim_filter{};
  // Leased claims (claim_leased() and friends). Default: std::nullopt = not used.
  std::optional<ClaimLease> lease = std::nullopt;
};

struct LeaseClaimOptions {
  // How long a claim lasts without renewal, on the database clock.
  // Default: 30 s. Range: 10 ms .. 24 h.
  std::chrono::milliseconds lease{std::chrono::seconds(30)};
  // Throws Error(kInvalidArgument) naming the offending field.
  void validate() const;
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

  // Leased claims (see the top of this header; RowLockSpec::lease required,
  // Error kInvalidArgument otherwise). Claims up to `limit` (1..10000)
  // claimable rows matching claim_filter = `filter_values`, lowest keys
  // first, and returns them (key first, then RowLockSpec::columns); empty =
  // nothing to claim. Opens and commits its own short transaction (the
  // connection must not be in one). SQLite: Error(kLockBusy) when another
  // writer kept the database past the busy timeout (retry).
  std::vector<Row> claim_leased(std::int64_t limit, const Params& filter_values = {},
                                const LeaseClaimOptions& options = {});
  // Extends this claimer's claim on `key` to `lease` from now (DB clock).
  // false = the claim is no longer ours (rescued by another claimer,
  // completed, released). Runs in the caller's transaction if one is open.
  bool renew_claim(const Value& key, std::chrono::milliseconds lease);
  // Writes complete_columns = `values` and clears the claim, only if this
  // claimer still holds it (an expired claim nobody rescued still counts).
  // false = not ours: do not commit the job's effects. Runs in the caller's
  // transaction if one is open.
  bool complete_claim(const Value& key, const Params& values = {});
  // Clears this claimer's claim without completing (the row is claimable
  // again at once). false = not ours.
  bool release_claim(const Value& key);
  // The owner token written into claimed rows.
  const std::string& claim_owner() const noexcept { return owner_; }

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
  // Leased claims: rendered once at construction; their versioned twins once
  // the table is found declared (the one version rule, version_cas.h, looked
  // up at every leased write until then).
  bool leased_ = false, versioned_ = false;
  std::size_t ncomplete_ = 0;
  std::string owner_, lease_select_sql_, lease_mark_sql_, lease_renew_sql_, lease_complete_sql_, lease_release_sql_;
  std::string table_name_, key_name_, owner_col_, until_col_;  // as given
  std::vector<std::string> complete_columns_, complete_sets_;  // as given; rendered fragments
  std::optional<std::string> version_column_;                  // declared version column, once seen
  std::string complete_error_;  // why complete_claim() may not run on the declared table
  std::string lease_mark_v_sql_, lease_renew_v_sql_, lease_complete_v_sql_, lease_release_v_sql_;
  void require_lease(const char* what) const;
  // True when the table is declared versioned (looks it up; renders once).
  bool versioned_now();
};

}  // namespace sqlguard
