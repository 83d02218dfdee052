// Test entry point: builds the per-dialect context, then hands over to
// Catch2's own session. A dialect whose server is unavailable is a failure
// when required (SQLGUARD_REQUIRE_DIALECTS lists it, or CI=true), else the
// run exits 77, which CTest reports as skipped.
#define CATCH_CONFIG_RUNNER
// Catch2 v2's console reporter indents a failing test's name after its
// ": " and aborts (TextFlow assertion, or substr out of range in a release
// build) when that indent passes the console width: a name with ": " after
// column 80 turned one failure into the whole run's abort (CI's pgbouncer
// step, 2026-12-06). Our longest names put ": " near column 135.
#define CATCH_CONFIG_CONSOLE_WIDTH 256
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>
#include <thread>

#include "sqlguard/migrate.h"
#include "sql_audit.h"
#include "test_context.h"

namespace sgtest::detail {
extern Context g_ctx;
extern std::vector<std::string>* g_fresh_dbs;

std::string with_database(const std::string& uri, const std::string& db) {
  // scheme://authority[/db][?query] -> scheme://authority/<db>[?query]
  auto authority = uri.find("://") + 3;
  auto q = uri.find('?');
  std::string query = q == std::string::npos ? "" : uri.substr(q);
  std::string rest = uri.substr(0, q);
  auto slash = rest.find('/', authority);
  return rest.substr(0, slash) + "/" + db + query;
}
}  // namespace sgtest::detail

namespace {
std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool required(const std::string& dialect) {
  if (env("CI") == "true") return true;
  std::string list = "," + env("SQLGUARD_REQUIRE_DIALECTS") + ",";
  return list.find("," + dialect + ",") != std::string::npos;
}

int unavailable(const std::string& dialect, const std::string& why) {
  if (required(dialect)) {
    std::cerr << "FAIL: dialect " << dialect << " is required but unavailable: " << why << "\n";
    return 1;
  }
  std::cerr << "SKIP: dialect " << dialect << " unavailable (" << why
            << "); set SQLGUARD_REQUIRE_DIALECTS to make this a failure\n";
  return 77;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace sgtest;
  auto& c = detail::g_ctx;
  c.name = env("SQLGUARD_TEST_DIALECT");
  if (c.name.empty()) c.name = "sqlite";
  std::random_device rd;
  char id[16];
  std::snprintf(id, sizeof id, "%08x", rd());
  c.run_id = id;
  std::vector<std::string> fresh;
  detail::g_fresh_dbs = &fresh;
  std::string tmpdir;
  std::string dbname = "sgtest_" + c.run_id;

  // SQLGUARD_TEST_FILE_DIALECT=1: another dialect on SQLite's engine whose
  // URI is <name>://<file> (tests/fourth_dialect/run.sh).
  if (c.name == "sqlite" || env("SQLGUARD_TEST_FILE_DIALECT") == "1") {
    c.kind = sqlguard::DialectKind::kSqlite;
    if (c.name == "sqlite" && !sqlguard::dialect_available(c.kind))
      return unavailable(c.name, "not compiled into this build (SQLGUARD_WITH_SQLITE=OFF or libsqlite3-dev missing)");
    char tmpl[] = "/tmp/sqlguard-test-XXXXXX";
    if (!mkdtemp(tmpl)) return unavailable(c.name, "mkdtemp failed");
    tmpdir = tmpl;
    c.base_uri = c.uri = c.name + "://" + tmpdir + "/test.db";
  } else if (c.name == "postgresql" || c.name == "mysql") {
    c.kind = c.name == "mysql" ? sqlguard::DialectKind::kMysql : sqlguard::DialectKind::kPostgresql;
    c.base_uri = env(c.name == "mysql" ? "SQLGUARD_TEST_MYSQL_URI" : "SQLGUARD_TEST_PG_URI");
    if (c.base_uri.empty())
      return unavailable(c.name, std::string(c.name == "mysql" ? "SQLGUARD_TEST_MYSQL_URI" : "SQLGUARD_TEST_PG_URI") +
                                     " is not set (start servers with tools/dbservers.sh start; eval \"$(tools/dbservers.sh env)\")");
    if (!sqlguard::dialect_available(c.kind)) return unavailable(c.name, "not compiled into this build");
    try {
      auto admin = sqlguard::make_connection(c.base_uri);
      admin->execute_script("CREATE DATABASE " + dbname);
    } catch (const std::exception& e) {
      return unavailable(c.name, e.what());
    }
    c.uri = detail::with_database(c.base_uri, dbname);
    c.pooler = c.uri.find("pooler=transaction") != std::string::npos;
  } else {
    std::cerr << "unknown SQLGUARD_TEST_DIALECT '" << c.name << "'\n";
    return 2;
  }
  try {
    // A multi-host URI (pg-ha) may try a standby first: libpq does not move
    // on to the next host after a FATAL at startup, and the standby may not
    // have replayed the CREATE DATABASE yet (sync = flushed, not applied).
    std::unique_ptr<sqlguard::Connection> conn;
    for (int attempt = 1;; ++attempt) {
      try {
        conn = sqlguard::make_connection(c.uri);
        break;
      } catch (const sqlguard::Error& e) {
        if (e.code() != sqlguard::ErrorCode::kNotFound || attempt >= 100) throw;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    sqlguard::migrate(*conn);
  } catch (const std::exception& e) {
    std::cerr << "FAIL: cannot prepare the test database: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "sqlguard tests on " << c.name << " (" << sqlguard::mask_uri(c.uri) << ")\n";

  install_sql_audit();
  int rc = Catch::Session().run(argc, argv);
  auto bad = sql_audit_failures();
  std::cerr << "SQL audit: " << sql_audit_checked() << " catalog statements checked (" << sql_audit_entries_seen()
            << " distinct entries), " << bad.size() << " not as written in sql/" << c.name << "/\n";
  for (const auto& b : bad) std::cerr << "  not in the catalog: " << b << "\n";
  if (!env("SQLGUARD_TEST_AUDIT_COUNTS").empty())
    for (const auto& [entry, n] : sql_audit_counts()) std::cerr << "  " << n << " " << entry << "\n";
  if (!bad.empty() && rc == 0) rc = 1;

  if (env("SQLGUARD_TEST_KEEP").empty()) {
    if (!tmpdir.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(tmpdir, ec);
    } else {
      fresh.push_back(dbname);
      try {
        auto admin = sqlguard::make_connection(c.base_uri);
        for (const auto& db : fresh)
          admin->execute_script(std::string("DROP DATABASE IF EXISTS ") + db +
                                (c.kind == sqlguard::DialectKind::kPostgresql ? " WITH (FORCE)" : ""));
      } catch (const std::exception& e) {
        std::cerr << "warning: dropping test databases failed: " << e.what() << "\n";
      }
    }
  }
  return rc;
}
