// sqlguard/version_cas.h — optimistic concurrency on the user's own table
// through a version column:
//
//   UPDATE t SET c1 = ?, c2 = ?, version = version + 1 WHERE key = ? AND version = ?
//
// and rows affected decides (1 = applied, 0 = someone else won or the row is
// gone). No lock is held between the read and the write.
//
//   sqlguard::VersionCas acct(conn, {.table = "accounts", .columns = {"balance"}});
//   auto r = acct.update(7, [](const sqlguard::Versioned& cur) -> std::optional<sqlguard::Params> {
//     return sqlguard::Params{cur.values[0].as_int() + 100};   // std::nullopt = leave as is
//   });
//   // r.status: kApplied / kConflict (attempts ran out) / kNotFound / kSkipped; r.stats.attempts
//
// The version column must be an integer; sqlguard only ever increments it.
// Works the same on all three dialects. On SQLite each update() attempt runs
// under BEGIN IMMEDIATE, which serializes writers, so attempts there rarely
// conflict; compare_and_set() from separate reads conflicts as anywhere else.
//
// The one version rule. A table is declared versioned ONCE, in the database
// (sqlguard_versioned_table, migration 0005): declare_versioned_table(), or
// simply constructing a VersionCas on it (VersionCasSpec::declare_versioned,
// on by default). From then on every sqlguard writer on that table moves the
// version in the same statement as its write: GuardedUpdate::apply(),
// StateMachine::fire()/transition_to(), VersionCas, and the leased claims of
// RowLocker (claim_leased/renew_claim/complete_claim/release_claim). So a
// compare_and_set() from a version read before any of those writes returns
// kConflict instead of silently overwriting them.
//  - Spelling does not matter. A declaration is stored under the canonical
//    name the DATABASE resolves the spelling to: PostgreSQL schema.table
//    (to_regclass, so the search_path decides an unqualified name; quoted
//    names keep their case), MariaDB database.table (an unqualified name is
//    in DATABASE()), SQLite schema.table (temp, then main, then attached;
//    case ignored). Writers resolve their own spelling the same way, so
//    `acct`, `public.acct` and `MAIN.ACCT` (SQLite) name one declaration.
//    Declaring a table that does not exist: Error(kNotFound) naming it.
//  - The version column must exist. Declaring a table (or building a
//    VersionCas, declaring or not) whose version column it does not have is
//    refused with Error(kNotFound) naming the table and the column, and
//    nothing is stored: a declaration naming a missing column would make
//    every sqlguard writer of the table fail.
//  - Construction order does not matter. Writers look the declaration up at
//    every write (in the write's transaction when it has one: fire(),
//    claim_leased(), or the caller's) until they find it, then keep it for
//    their lifetime. A "not declared" answer is kept for 1 s
//    per process, database and spelling, so an undeclared table's writes
//    cost at most one lookup a second: a declaration made in this process
//    reaches its writers at once, one made by another process within 1 s.
//    Only writes in that second (or racing the declaration itself) can miss
//    it: still declare at deployment time.
//  - A zero bump is no bump. A GuardedUpdate assignment that ADDS to the
//    version column (a hand-made bump written before the rule) is that
//    write's bump, and apply() refuses an addend that is not an integer
//    >= 1 (kInvalidArgument) before anything is sent. Setting or subtracting
//    the version column (GuardedUpdate, StateMachine events, RowLocker
//    complete_columns) is refused: at construction when the table is
//    declared by then, else by the first write after the declaration.
//    Column names compare without case on SQLite and MariaDB.
// Statements you run yourself (RowLockScope::execute(), your own SQL) must
// bump the version themselves. A VersionCas built with declare_versioned =
// false on an undeclared table logs a warning at construction (other
// writers would not bump); declaring a table again with another version
// column is refused (kInvalidArgument). Declarations an older build stored
// under a raw spelling are rewritten to canonical names by migration 0006
// where the table resolves, and still count for their exact spelling where
// it does not.
//
// Ownership and threads: borrows the Connection (which must outlive it);
// one connection per thread. Identifiers are validated and quoted once, at
// construction (Error kInvalidArgument). Database failures throw
// sqlguard::Error; a lost CAS is a return value.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sqlguard/connection.h"
#include "sqlguard/retry.h"

namespace sqlguard {

struct VersionCasSpec {
  std::string table{};                   // required
  std::string key_column = "id";         // Default: "id"
  std::string version_column = "version";  // Default: "version"
  // Columns read by read() and written by compare_and_set(), in this order.
  // At least one; none may be the key or the version column.
  std::vector<std::string> columns{};
  // Declare `table` versioned (by `version_column`) at construction, so
  // every other sqlguard writer on it bumps the version (the one version
  // rule, above). false: not declared; if no declaration exists, a warning
  // is logged. Default: true.
  bool declare_versioned = true;
};

// Declares `table` versioned by `version_column` (idempotent), stored under
// the table's canonical name (above). Runs in the caller's transaction if one
// is open. Error(kInvalidArgument) for a bad identifier or when the table is
// already declared with another column; Error(kNotFound) when no such table
// exists (as this connection resolves the name) or it has no column
// `version_column` — nothing is stored then.
void declare_versioned_table(Connection& conn, std::string_view table, std::string_view version_column = "version");
// The declared version column of the table `table` names (any spelling), or
// std::nullopt if undeclared.
std::optional<std::string> versioned_table_column(Connection& conn, std::string_view table);

// Removes the declaration of the table `table` names (any spelling while the
// table exists; for a dropped table, the name as versioned_tables() shows
// it), including one an older build stored under that raw spelling. Returns
// true if a declaration was removed, false if there was none. Runs in the
// caller's transaction if one is open. Writers built afterwards (in any
// process) no longer bump the version; a writer object that already found
// the declaration keeps bumping until it is rebuilt (it keeps what it found,
// above). The way out of a declaration that names the wrong column; the CLI
// is `sqlguard versioned drop TABLE`. Error(kInvalidArgument) for a bad
// identifier.
bool undeclare_versioned_table(Connection& conn, std::string_view table);

// One stored declaration: the table's canonical name, its version column and
// when it was declared (ms since the epoch, database clock).
struct VersionedTable {
  std::string table{};
  std::string version_column{};
  std::int64_t declared_at_ms = 0;
};
// Every declaration, ordered by table name (`sqlguard versioned list`).
std::vector<VersionedTable> versioned_tables(Connection& conn);

struct Versioned {
  std::int64_t version = 0;
  std::vector<Value> values{};  // VersionCasSpec::columns order
};

enum class CasStatus {
  kApplied,   // written; version is now the returned version
  kConflict,  // the version did not match (after the last attempt, for update())
  kNotFound,  // no row with that key
  kSkipped,   // update(): the modify function returned std::nullopt; nothing written
};
std::string_view to_string(CasStatus s) noexcept;

struct CasResult {
  CasStatus status = CasStatus::kConflict;
  // kApplied: the new version. kConflict: the version found instead (if the
  // row still existed). kNotFound: 0.
  std::int64_t version = 0;
  explicit operator bool() const noexcept { return status == CasStatus::kApplied; }
};

struct CasUpdateResult {
  CasStatus status = CasStatus::kConflict;
  // kApplied: the committed state. kSkipped: the state the function saw.
  std::optional<Versioned> state{};
  RetryStats stats{};               // attempts, conflicts (lost CAS + serialization/deadlock), busy
  std::optional<Error> last_error{};  // kConflict: the last retryable error
  explicit operator bool() const noexcept { return status == CasStatus::kApplied; }
};

class VersionCas {
 public:
  // Returns the new column values, or std::nullopt to stop without writing.
  // Runs once per attempt, so it must not have side effects of its own.
  using Modify = std::function<std::optional<Params>(const Versioned& current)>;

  VersionCas(Connection& conn, VersionCasSpec spec);

  // Plain read (no lock). Runs in the caller's transaction if one is open.
  std::optional<Versioned> read(const Value& key);

  // One conditional UPDATE; on 0 rows one SELECT tells kConflict from
  // kNotFound. Runs in the caller's transaction if one is open, otherwise
  // autocommits. `values` has one entry per column.
  CasResult compare_and_set(const Value& key, std::int64_t expected_version, const Params& values);

  // Read-modify-write with bounded retries: each attempt opens its own
  // transaction, reads, calls `modify`, and CASes; a lost CAS, serialization
  // failure, deadlock or lock timeout is retried after a full-jitter backoff
  // (retry.h). kCommitInDoubt and other errors throw. The connection must not
  // be in a transaction (Error kInvalidArgument).
  CasUpdateResult update(const Value& key, const Modify& modify, const RetryPolicy& policy = {});

 private:
  Connection& conn_;
  std::size_t ncols_ = 0;
  std::string select_sql_, update_sql_, version_sql_;
  std::vector<std::string> update_names_;  // names of the UPDATE's values, for errors
};

}  // namespace sqlguard
