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

  // ---- strategy SQL pieces (row locks, CAS, transitions) ----------------

  // ---- strategy SQL pieces (idempotency, inbox) --------------------------

  // Throws Error(kNotSupported) naming the dialect and the feature.
  [[noreturn]] void not_supported(std::string_view feature) const;
};

// Shared quoting helper: wraps each dot-separated part in q.
std::string quote_parts(std::string_view validated, char q);

}  // namespace sqlguard
