#include "sqlguard/migrate.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string_view>

#include "core/crypto.h"
#include "core/embedded_migrations.h"
#include "core/catalog.h"
#include "core/migration_lock.h"
#include "dialect/dialect.h"

namespace sqlguard {
namespace {

using detail::Sql;
using detail::run;

struct Applied {
  std::string name;
  std::string checksum;
  std::int64_t applied_at;
};

std::map<int, Applied> read_applied(Connection& conn) {
  using detail::cell;
  static constexpr auto kVersion = detail::column(Sql::migrate_read_applied, "version");
  static constexpr auto kName = detail::column(Sql::migrate_read_applied, "name");
  static constexpr auto kChecksum = detail::column(Sql::migrate_read_applied, "checksum");
  static constexpr auto kAppliedAt = detail::column(Sql::migrate_read_applied, "applied_at");
  std::map<int, Applied> out;
  auto r = run(conn, Sql::migrate_read_applied);
  for (const auto& row : r.rows)
    out[static_cast<int>(cell(row, kVersion).as_int())] = {cell(row, kName).as_string(), cell(row, kChecksum).as_string(),
                                                           cell(row, kAppliedAt).as_int()};
  return out;
}

// A migration file may name earlier texts of itself that left the database in
// an equivalent state (a later migration completes it), one per line:
// `-- sqlguard-accepts-checksum: <sha256 hex>`. Migrations stay append-only in
// effect, while a statement that could never run somewhere (MariaDB's cached
// SEQUENCE on Galera) can still be fixed for fresh installs.
bool accepts_checksum(const Migration& m, const std::string& applied) {
  static constexpr std::string_view kTag = "-- sqlguard-accepts-checksum: ";
  for (std::size_t at = m.sql.find(kTag); at != std::string::npos; at = m.sql.find(kTag, at + 1)) {
    auto begin = at + kTag.size();
    auto end = m.sql.find_first_of("\r\n", begin);
    if (m.sql.compare(begin, end == std::string::npos ? std::string::npos : end - begin, applied) == 0) return true;
  }
  return false;
}

std::vector<MigrationState> compare(const std::vector<Migration>& migrations, const std::map<int, Applied>& applied) {
  std::vector<MigrationState> out;
  for (const auto& m : migrations) {
    MigrationState s;
    s.version = m.version;
    s.name = m.name;
    s.checksum = m.checksum;
    auto it = applied.find(m.version);
    if (it != applied.end()) {
      s.applied = true;
      s.applied_at_ms = it->second.applied_at;
      s.applied_checksum = it->second.checksum;
      s.checksum_mismatch = it->second.checksum != m.checksum && !accepts_checksum(m, it->second.checksum);
    }
    out.push_back(std::move(s));
  }
  for (const auto& [version, a] : applied) {
    bool known = std::any_of(migrations.begin(), migrations.end(), [&](const Migration& m) { return m.version == version; });
    if (known) continue;
    MigrationState s;
    s.version = version;
    s.name = a.name;
    s.applied = true;
    s.applied_at_ms = a.applied_at;
    s.applied_checksum = a.checksum;
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.version < b.version; });
  return out;
}

std::string label(int version, const std::string& name) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04d_", version);
  return buf + name;
}

void check_mismatch(const std::vector<MigrationState>& states, std::string_view dialect) {
  for (const auto& s : states) {
    if (s.checksum_mismatch)
      throw Error(ErrorCode::kSchemaMismatch,
                  "checksum mismatch: migration " + label(s.version, s.name) + " was applied with checksum " +
                      s.applied_checksum.substr(0, 12) + "... but the file now has " + s.checksum.substr(0, 12) +
                      "...; it is not re-run. Restore the original file or repair the database by hand.",
                  std::string(dialect));
  }
}

}  // namespace

std::vector<Migration> embedded_migrations(DialectKind kind) { return embedded_migrations(to_string(kind)); }

std::vector<Migration> embedded_migrations(std::string_view dialect) {
  std::vector<Migration> out;
  std::string_view want = dialect;
  for (std::size_t i = 0; i < detail::kEmbeddedMigrationCount; ++i) {
    const auto& e = detail::kEmbeddedMigrations[i];
    if (want != e.dialect) continue;
    out.push_back({e.version, e.name, e.sql, detail::sha256_hex(e.sql)});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.version < b.version; });
  return out;
}

MigrateReport migrate(Connection& conn) { return migrate(conn, embedded_migrations(conn.dialect().name())); }

MigrateReport migrate(Connection& conn, const std::vector<Migration>& migrations) {
  require_no_transaction(conn, "migrate()");
  if (!conn.capabilities().sequences)
    throw Error(ErrorCode::kNotSupported,
                std::string(conn.dialect().name()) + " server " + conn.capabilities().server_version +
                    " is not supported: sqlguard's fencing tokens need SEQUENCE; see the support matrix, docs/support-matrix.md",
                std::string(conn.dialect().name()));
  MigrateReport report;
  // How runs are serialized is the dialect's named plan (core/migration_lock.h).
  const detail::MigrationLockPlan& plan = *conn.dialect().plans().migrations;
  const bool whole_run_tx = plan.whole_run_in_one_transaction();
  const bool per_migration_tx = !whole_run_tx && conn.capabilities().transactional_ddl;
  std::unique_ptr<Transaction> run_tx;
  if (whole_run_tx) run_tx = std::make_unique<Transaction>(conn);
  const auto lock = plan.lock(conn, std::chrono::seconds(300));  // inside the run's transaction when it has one
  run(conn, Sql::migrate_version_table);
  auto states = compare(migrations, read_applied(conn));
  check_mismatch(states, conn.dialect().name());
  for (const auto& m : migrations) {
    auto st = std::find_if(states.begin(), states.end(), [&](const auto& s) { return s.version == m.version; });
    if (st->applied) {
      report.already.push_back(*st);
      continue;
    }
    std::unique_ptr<Transaction> tx;
    if (per_migration_tx) tx = std::make_unique<Transaction>(conn);
    try {
      conn.execute_script(m.sql);
      run(conn, Sql::migrate_record, {m.version, m.name, m.checksum});
    } catch (const Error& e) {
      throw e.with_context("migration " + label(m.version, m.name) + " failed");
    }
    if (tx) tx->commit();
    st->applied = true;
    report.applied_now.push_back(*st);
  }
  if (run_tx) run_tx->commit();
  return report;
}

std::vector<MigrationState> migration_status(Connection& conn) {
  return migration_status(conn, embedded_migrations(conn.dialect().name()));
}

std::vector<MigrationState> migration_status(Connection& conn, const std::vector<Migration>& migrations) {
  std::map<int, Applied> applied;
  try {
    applied = read_applied(conn);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kSchemaMismatch) throw;  // table missing: nothing applied yet
  }
  return compare(migrations, applied);
}

void require_migrated(Connection& conn) {
  auto want = embedded_migrations(conn.dialect().name());
  int max_version = want.empty() ? 0 : want.back().version;
  std::int64_t have = 0;
  try {
    static constexpr auto kApplied = detail::column(Sql::migrate_count, "applied");
    auto r = run(conn, Sql::migrate_count, {max_version});
    have = detail::cell(r.rows.at(0), kApplied).as_int();
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kSchemaMismatch) throw;
  }
  if (have < static_cast<std::int64_t>(want.size()))
    throw Error(ErrorCode::kSchemaMismatch,
                "the sqlguard tables are missing or out of date on " + conn.description() + ": run `sqlguard migrate`",
                std::string(conn.dialect().name()));
}

}  // namespace sqlguard
