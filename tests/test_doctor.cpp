// sqlguard doctor / check_environment(): the verdicts on the test database
// of every dialect, the CLI contract, and (hidden tag [.topology], run by the
// ctest entries of tools/test.sh that start them) the verdicts on the
// PostgreSQL HA and pooler topologies of tools/dbservers.sh.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sqlguard/doctor.h"
#include "test_context.h"

using sgtest::ctx;
using sqlguard::CheckResult;
using sqlguard::CheckStatus;

namespace {

std::map<std::string, CheckResult> by_check(const std::vector<CheckResult>& rs) {
  std::map<std::string, CheckResult> m;
  for (const auto& r : rs) m[r.check] = r;
  return m;
}

std::string dump(const std::vector<CheckResult>& rs) {
  std::string s;
  for (const auto& r : rs) s += std::string(sqlguard::to_string(r.status)) + " " + r.check + ": " + r.detail + "\n";
  return s;
}

std::string required_env(const char* name) {
  const char* v = std::getenv(name);
  INFO(name << " must be set (tools/dbservers.sh env <topology>); a missing server is a failure");
  REQUIRE(v);
  REQUIRE(*v);
  return v;
}

std::string with_query(const std::string& uri, const std::string& kv) {
  return uri + (uri.find('?') == std::string::npos ? "?" : "&") + kv;
}

}  // namespace

TEST_CASE("doctor passes on the migrated test database and names every check once", "[doctor]") {
  auto rs = sqlguard::check_environment(ctx().uri);
  INFO(dump(rs));
  auto m = by_check(rs);
  CHECK(m.size() == rs.size());
  REQUIRE(m.count("connect"));
  CHECK(m["connect"].status == CheckStatus::kOk);
  CHECK(m["migrations"].status == CheckStatus::kOk);
  CHECK(m["clock"].status == CheckStatus::kOk);
  CHECK(m["clock"].detail.find("database clock") != std::string::npos);
  for (const auto& r : rs) CHECK(r.status != CheckStatus::kFail);
  if (ctx().is_sqlite()) {
    CHECK(m["journal_mode"].status == CheckStatus::kOk);
    CHECK(m["filesystem"].status == CheckStatus::kOk);
    CHECK(m.count("synchronous") == 1);
  } else {
    CHECK(m["server_version"].status == CheckStatus::kOk);
    CHECK(m.count("isolation") == 1);
    CHECK(m.count("timeouts") == 1);
  }
  if (ctx().is(sqlguard::DialectKind::kPostgres)) {
    CHECK(m["primary"].status == CheckStatus::kOk);
    CHECK(m["pooler"].status == CheckStatus::kOk);
    CHECK(m.count("replication") == 1);
  }
}

TEST_CASE("doctor reports missing sqlguard tables as a warning and an unreachable server as a failed connect",
          "[doctor]") {
  auto fresh = ctx().fresh_database();
  auto m = by_check(sqlguard::check_environment(fresh));
  CHECK(m["migrations"].status == CheckStatus::kWarn);
  CHECK(m["migrations"].detail.find("sqlguard migrate") != std::string::npos);
  if (!ctx().is_sqlite()) {
    std::string bad = ctx().is(sqlguard::DialectKind::kPostgres)
                          ? "postgresql://sg:s3cret-pw@127.0.0.1:1/nope?connect_timeout=2"
                          : "mysql://sg:s3cret-pw@127.0.0.1:1/nope?connect_timeout=2";
    auto rs = sqlguard::check_environment(bad);
    REQUIRE(rs.size() == 1);
    CHECK(rs[0].check == "connect");
    CHECK(rs[0].status == CheckStatus::kFail);
    CHECK(rs[0].detail.find("s3cret-pw") == std::string::npos);
  }
}

TEST_CASE("sqlguard doctor prints one JSON object per check and exits 0 without a failed check", "[doctor][cli]") {
  std::string out;
  int rc = sgtest::run_process({sgtest::cli_path(), "doctor", "--db", ctx().uri, "--json"}, &out);
  INFO(out);
  CHECK(rc == 0);
  std::istringstream in(out);
  int lines = 0;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    CHECK(j.contains("check"));
    CHECK((j["status"] == "ok" || j["status"] == "warn"));
    CHECK(j["detail"].is_string());
    ++lines;
  }
  CHECK(lines >= 5);
  // A failing check (no server there) exits 1.
  if (!ctx().is_sqlite()) {
    rc = sgtest::run_process({sgtest::cli_path(), "doctor", "--db",
                              ctx().is(sqlguard::DialectKind::kPostgres) ? "postgresql://u:pw@127.0.0.1:1/x"
                                                                          : "mysql://u:pw@127.0.0.1:1/x",
                              "--connect-timeout", "2s"},
                             &out);
    CHECK(rc == 1);
    CHECK(out.find("fail  connect") == 0);
  }
}

// ---- topologies (tools/dbservers.sh start pg-ha|pg-async|pgbouncer) ---------------

TEST_CASE("doctor on pg-ha: the primary, and every standby synchronous", "[.topology][pg-ha]") {
  auto rs = sqlguard::check_environment(required_env("SQLGUARD_TEST_PG_HA_URI"));
  INFO(dump(rs));
  auto m = by_check(rs);
  REQUIRE(m["connect"].status == CheckStatus::kOk);
  CHECK(m["primary"].status == CheckStatus::kOk);
  CHECK(m["replication"].status == CheckStatus::kOk);
  CHECK(m["replication"].detail.find("synchronous") != std::string::npos);
  CHECK(m["pooler"].status == CheckStatus::kOk);
}

TEST_CASE("doctor on pg-async warns about the asynchronous standby and names the hazard", "[.topology][pg-async]") {
  auto rs = sqlguard::check_environment(required_env("SQLGUARD_TEST_PG_ASYNC_URI"));
  INFO(dump(rs));
  auto m = by_check(rs);
  REQUIRE(m["connect"].status == CheckStatus::kOk);
  CHECK(m["primary"].status == CheckStatus::kOk);
  CHECK(m["replication"].status == CheckStatus::kWarn);
  CHECK(m["replication"].detail.find("asynchronous standby") != std::string::npos);
  CHECK(m["replication"].detail.find("two clients can hold one lock") != std::string::npos);
}

TEST_CASE("doctor behind PgBouncer: fails without pooler=transaction, passes with it", "[.topology][pgbouncer]") {
  const std::string uri = required_env("SQLGUARD_TEST_PGBOUNCER_URI");
  auto without = sqlguard::check_environment(uri);
  INFO(dump(without));
  auto m = by_check(without);
  REQUIRE(m["connect"].status == CheckStatus::kOk);
  CHECK(m["pooler"].status == CheckStatus::kFail);
  CHECK(m["pooler"].detail.find("pooler=transaction") != std::string::npos);
  CHECK(m["pooler"].detail.find("named prepared statements") != std::string::npos);

  auto with = sqlguard::check_environment(with_query(uri, "pooler=transaction"));
  INFO(dump(with));
  auto w = by_check(with);
  CHECK(w["pooler"].status == CheckStatus::kOk);
  CHECK(w["pooler"].detail.find("pooler detected") != std::string::npos);
  for (const auto& r : with)
    if (r.check != "migrations") CHECK(r.status != CheckStatus::kFail);
  // The CLI exits 1 on the failing verdict, 0 with the flag.
  std::string out;
  CHECK(sgtest::run_process({sgtest::cli_path(), "doctor", "--db", uri}, &out) == 1);
  CHECK(out.find("fail  pooler") != std::string::npos);
  CHECK(sgtest::run_process({sgtest::cli_path(), "doctor", "--db", with_query(uri, "pooler=transaction")}, &out) == 0);
}
