// Internal: the one version rule (include/sqlguard/version_cas.h) as the
// writers apply it. A declaration is stored under the table's canonical name
// (versioned_resolve in sql/<dialect>/strategies.sql: the database resolves
// the spelling), and a writer looks it up when it writes, not only when it
// is built, so neither the spelling nor the order of construction and
// declaration decide whether the version moves.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "sqlguard/connection.h"

namespace sqlguard::detail {

// The canonical values of versioned_resolve / versioned_lookup for a
// validated spelling: quoted_name, schema (NULL when unqualified), table.
Params resolve_params(const Connection& conn, std::string_view spelling);

// True when `a` and `b` name the same column of a table: exact on
// PostgreSQL (sqlguard quotes identifiers), ignoring ASCII case on SQLite
// and MariaDB, whose column names ignore case.
bool same_column(const Connection& conn, std::string_view a, std::string_view b);

// The declared version column of the table `spelling` (validated) names, as
// declared. Asks the database (versioned_lookup, in the caller's transaction
// if one is open) unless `known` already holds the answer; a found column is
// kept in `known`: a writer keeps what it found (undeclare_versioned_table() reaches writers
// built after it), and another column is
// refused (declare_versioned_table()). Writers call it at every write; a
// "not declared" answer is kept process-wide for kUndeclaredRecheck per
// database and spelling, so writes on a table nobody declares cost no extra
// round trip each: a declaration in this process clears it at once, one
// made by another process reaches running writers within that time.
// `recheck_now`: ask the database whatever was kept (versioned_table_column()).
inline constexpr std::chrono::milliseconds kUndeclaredRecheck{1000};
const std::optional<std::string>& version_column(Connection& conn, std::string_view spelling,
                                                 std::optional<std::string>& known, bool recheck_now = false);

// Forgets every kept "not declared" answer (a declaration was just made).
void forget_undeclared() noexcept;

// Logs a warning when `column` of user table `table` compares keys loosely
// (key_column_collation: MariaDB PAD SPACE or _ci, a nondeterministic
// PostgreSQL collation), so that "a " or "A" would find the row "a". `who`
// names the writer. Never throws: a failed check is logged at debug level.
void warn_loose_key_collation(Connection& conn, std::string_view table, std::string_view column,
                              std::string_view who) noexcept;

}  // namespace sqlguard::detail
