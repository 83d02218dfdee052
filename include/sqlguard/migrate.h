// sqlguard/migrate.h — schema migrations embedded in the library.
//
// Migration files live in migrations/<dialect>/NNNN_name.sql and are compiled
// into the library. migrate() applies the pending ones under a database-wide
// mutex (PostgreSQL advisory lock, MySQL GET_LOCK, SQLite BEGIN IMMEDIATE),
// so concurrent runs are safe: each migration is applied exactly once.
// Applied migrations are recorded in sqlguard_schema_version with their
// SHA-256; a file that changed after it was applied is a checksum mismatch:
// reported, never re-run, and migrate() refuses to continue.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sqlguard/connection.h"

namespace sqlguard {

struct Migration {
  int version = 0;       // NNNN
  std::string name{};    // file name without NNNN_ and .sql
  std::string sql{};
  std::string checksum{};  // hex SHA-256 of sql
};

struct MigrationState {
  int version = 0;
  std::string name{};
  std::string checksum{};                 // of the embedded file
  bool applied = false;
  std::optional<std::int64_t> applied_at_ms{};  // DB clock
  bool checksum_mismatch = false;         // applied, but the file changed since
  std::string applied_checksum{};         // as recorded when applied
};

struct MigrateReport {
  std::vector<MigrationState> applied_now{}; // applied by this call
  std::vector<MigrationState> already{};     // applied before
};

// The migrations compiled in for a dialect, ordered by version.
std::vector<Migration> embedded_migrations(DialectKind kind);
// The same by dialect name ("sqlite", ...: the folder migrations/<name>/).
std::vector<Migration> embedded_migrations(std::string_view dialect);

// Applies pending migrations. Throws Error(kSchemaMismatch) naming the
// migration when an applied one no longer matches its file.
MigrateReport migrate(Connection& conn);
MigrateReport migrate(Connection& conn, const std::vector<Migration>& migrations);

// State of every known migration (embedded ones, plus any recorded in the
// database that this build does not know, listed with an empty checksum).
std::vector<MigrationState> migration_status(Connection& conn);
std::vector<MigrationState> migration_status(Connection& conn, const std::vector<Migration>& migrations);

// Throws Error(kSchemaMismatch, "... run `sqlguard migrate`") unless every
// embedded migration is applied. Cheap: one query.
void require_migrated(Connection& conn);

}  // namespace sqlguard
