// Internal: the per-dialect SQL builder. Strategies are written once against
// this interface; only src/dialect/<name>/ knows a driver or an SQL flavour.
#pragma once

#include <string>
#include <string_view>

#include "sqlguard/connection.h"

namespace sqlguard {

class Dialect {
 public:
  virtual ~Dialect() = default;
  virtual DialectKind kind() const noexcept = 0;
  std::string_view name() const noexcept { return to_string(kind()); }

  // SQL expression for the database clock in ms since the Unix epoch (UTC),
  // evaluated at each statement (PostgreSQL: clock_timestamp(), never now()).
  virtual std::string_view now_ms() const noexcept = 0;
  // Quotes an identifier that validate_identifier() already accepted
  // ("schema.table" becomes two quoted parts).
  virtual std::string quote(std::string_view validated) const = 0;
  // Scalar two-argument max/min: GREATEST/LEAST, or MAX/MIN on SQLite.
  virtual std::string_view greatest() const noexcept { return "GREATEST"; }
  virtual std::string_view least() const noexcept { return "LEAST"; }
  // Column type for binary payloads (response bodies).
  virtual std::string_view blob_type() const noexcept = 0;

  // Database-wide mutex for migrations; empty = take it with the migration
  // transaction itself (SQLite BEGIN IMMEDIATE).
  virtual std::string_view migration_lock_sql() const noexcept { return {}; }
  virtual std::string_view migration_unlock_sql() const noexcept { return {}; }

  // DELETE at most N rows of `table` that match `where` (which may hold ?
  // placeholders; N is bound as the LAST parameter). `key_cols` is the
  // comma-separated primary key. Bounded batches keep cleanup from holding
  // locks for long.
  virtual std::string delete_limited(std::string_view table, std::string_view key_cols,
                                     std::string_view where) const {
    std::string k(key_cols);
    std::string keys = k.find(',') == std::string::npos ? k : "(" + k + ")";
    return "DELETE FROM " + std::string(table) + " WHERE " + keys + " IN (SELECT " + k + " FROM " +
           std::string(table) + " WHERE " + std::string(where) + " LIMIT ?)";
  }

  // ---- lease lock --------------------------------------------------------
  // Expression yielding the next fencing token: one counter per database
  // that never goes back, across row deletes and server restarts.
  virtual std::string_view next_fence() const noexcept = 0;
  // True where INSERT ... ON CONFLICT (k) DO UPDATE ... WHERE ... RETURNING
  // gives a one-statement acquire (PostgreSQL, SQLite). MySQL/MariaDB use a
  // conditional take-over UPDATE, then a plain INSERT for a missing row.
  virtual bool upsert_returning() const noexcept { return true; }
  // Suffix that write-locks selected rows until commit; "" where the
  // transaction already holds the database write lock (SQLite).
  virtual std::string_view for_update() const noexcept { return " FOR UPDATE"; }
  // Statement that NOTIFYs channel ? (bound); "" where unsupported.
  virtual std::string_view notify_sql() const noexcept { return {}; }
  // INSERT that silently does nothing when the key already exists.
  virtual std::string insert_if_absent(std::string_view table, std::string_view cols,
                                       std::string_view values) const {
    return "INSERT INTO " + std::string(table) + " (" + std::string(cols) + ") VALUES (" + std::string(values) +
           ") ON CONFLICT DO NOTHING";
  }

  // ---- strategy SQL pieces (row locks, CAS, transitions) ----------------
  // Suffix that row-locks what a SELECT returns: " FOR UPDATE" / " FOR SHARE"
  // plus " NOWAIT" or " SKIP LOCKED". "" where BEGIN already took the
  // database write lock (SQLite BEGIN IMMEDIATE).
  virtual std::string row_lock_suffix(bool shared, bool nowait, bool skip_locked) const {
    std::string s = shared ? " FOR SHARE" : " FOR UPDATE";
    if (nowait) s += " NOWAIT";
    if (skip_locked) s += " SKIP LOCKED";
    return s;
  }
  // Lock wait bound of a row-lock scope. A session-scoped setting (MySQL
  // innodb_lock_wait_timeout, SQLite busy timeout) is set BEFORE begin() and
  // returns the previous value, which restore_session_lock_timeout() puts
  // back after the scope. A transaction-local one (PostgreSQL lock_timeout)
  // is set right AFTER begin() by set_local_lock_timeout(). Values are bound.
  virtual std::optional<std::int64_t> push_session_lock_timeout(Connection&, std::chrono::milliseconds) const {
    return std::nullopt;
  }
  virtual void restore_session_lock_timeout(Connection&, std::int64_t /*previous*/) const {}
  virtual void set_local_lock_timeout(Connection&, std::chrono::milliseconds) const {}

  // ---- strategy SQL pieces (idempotency, inbox) --------------------------
  // INSERT of a dedup/placeholder row keyed by `key_cols`. An existing key
  // shows up EITHER as affected == 0 OR as Error(kAlreadyExists); callers
  // handle both. Default: ON CONFLICT (key_cols) DO NOTHING (PostgreSQL,
  // SQLite; a concurrent uncommitted insert of the key waits, then does
  // nothing). Other errors (oversize values, ...) always raise.
  virtual std::string insert_dedup(std::string_view table, std::string_view cols, std::string_view values,
                                   std::string_view key_cols) const {
    return "INSERT INTO " + std::string(table) + " (" + std::string(cols) + ") VALUES (" + std::string(values) +
           ") ON CONFLICT (" + std::string(key_cols) + ") DO NOTHING";
  }

  // Throws Error(kNotSupported) naming the dialect and the feature.
  [[noreturn]] void not_supported(std::string_view feature) const;
};

// Shared quoting helper: wraps each dot-separated part in q.
std::string quote_parts(std::string_view validated, char q);

}  // namespace sqlguard
