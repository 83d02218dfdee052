// Migrations: idempotent, concurrent-safe, checksum-checked.
#include <catch2/catch.hpp>

#include "sqlguard/migrate.h"
#include "test_context.h"

using namespace sqlguard;
using sgtest::ctx;

TEST_CASE("migrate on a fresh database applies everything, and a second run is a no-op", "[migrate]") {
  auto uri = ctx().fresh_database();
  auto c = make_connection(uri);
  CHECK_THROWS_AS(require_migrated(*c), Error);
  auto first = migrate(*c);
  auto embedded = embedded_migrations(c->kind());
  REQUIRE(embedded.size() >= 2);
  CHECK(first.applied_now.size() == embedded.size());
  CHECK(first.already.empty());
  CHECK_NOTHROW(require_migrated(*c));
  auto second = migrate(*c);
  CHECK(second.applied_now.empty());
  CHECK(second.already.size() == embedded.size());
  for (const auto& s : migration_status(*c)) {
    CHECK(s.applied);
    CHECK_FALSE(s.checksum_mismatch);
  }
}

TEST_CASE("concurrent migrate runs all succeed and apply each migration exactly once", "[migrate][multiprocess]") {
  auto uri = ctx().fresh_database();
  std::vector<std::vector<std::string>> argvs(4, {sgtest::worker_path(), "migrate", uri});
  std::vector<std::string> outs;
  auto rcs = sgtest::run_parallel(argvs, &outs);
  int applied_total = 0;
  for (std::size_t i = 0; i < rcs.size(); ++i) {
    INFO("worker " << i << " output: " << outs[i]);
    CHECK(rcs[i] == 0);
    applied_total += std::atoi(outs[i].c_str());
  }
  auto c = make_connection(uri);
  CHECK(applied_total == static_cast<int>(embedded_migrations(c->kind()).size()));
  CHECK(c->execute("SELECT COUNT(*) FROM sqlguard_schema_version").rows[0][0].as_int() == applied_total);
}

TEST_CASE("a changed migration file is reported as a checksum mismatch and not re-run", "[migrate]") {
  auto uri = ctx().fresh_database();
  auto c = make_connection(uri);
  std::vector<Migration> v1 = {{1, "probe", "CREATE TABLE sg_probe (id INTEGER)", "aaaa"}};
  migrate(*c, v1);
  c->execute("INSERT INTO sg_probe (id) VALUES (1)");
  std::vector<Migration> v2 = {{1, "probe", "DROP TABLE sg_probe", "bbbb"}};
  try {
    migrate(*c, v2);
    FAIL("expected a checksum mismatch");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kSchemaMismatch);
    CHECK_THAT(e.what(), Catch::Matchers::Contains("checksum mismatch"));
    CHECK_THAT(e.what(), Catch::Matchers::Contains("0001_probe"));
  }
  auto st = migration_status(*c, v2);
  REQUIRE(st.size() == 1);
  CHECK(st[0].checksum_mismatch);
  // Not re-run: the table and its row are still there.
  CHECK(c->execute("SELECT COUNT(*) FROM sg_probe").rows[0][0].as_int() == 1);
}

TEST_CASE("a failing migration reports which one failed and leaves it pending", "[migrate]") {
  auto uri = ctx().fresh_database();
  auto c = make_connection(uri);
  std::vector<Migration> bad = {{1, "ok", "CREATE TABLE sg_ok (id INTEGER)", "c1"},
                                {2, "broken", "CREATE TABLE sg_broken (id INTEGER", "c2"}};
  try {
    migrate(*c, bad);
    FAIL("expected failure");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Matchers::Contains("0002_broken"));
  }
  auto st = migration_status(*c, bad);
  REQUIRE(st.size() == 2);
  CHECK_FALSE(st[1].applied);
}

TEST_CASE("the CLI migrates, reports status, and a second run is a no-op", "[migrate][cli]") {
  auto uri = ctx().fresh_database();
  std::string out;
  REQUIRE(sgtest::run_process({sgtest::cli_path(), "--db", uri, "--json", "migrate"}, &out) == 0);
  CHECK_THAT(out, Catch::Matchers::Contains("\"applied\":[{"));
  REQUIRE(sgtest::run_process({sgtest::cli_path(), "--db", uri, "--json", "migrate"}, &out) == 0);
  CHECK_THAT(out, Catch::Matchers::Contains("\"applied\":[]"));
  REQUIRE(sgtest::run_process({sgtest::cli_path(), "--db", uri, "migrate", "--status"}, &out) == 0);
  CHECK_THAT(out, Catch::Matchers::Matches("0001_lease_lock +applied +20[0-9-]+T(.|\\n)*"));
}

TEST_CASE("the CLI gives a one-line error and non-zero exit for bad URIs without leaking passwords", "[cli][uri]") {
  std::string out;
  for (std::string uri : {"redis://u:hunter2@localhost/x", "mysql://u:hunter2@127.0.0.1:1/db",
                          "postgresql://u:hunter2@127.0.0.1:1/db", "sqlite:///no/such/dir/x.db", "garbage"}) {
    INFO(uri);
    int rc = sgtest::run_process({sgtest::cli_path(), "--db", uri, "--connect-timeout", "2s", "--json", "migrate"}, &out);
    // A malformed URI is a bad command line (2); one that parses but cannot be reached is an error (1).
    const bool malformed = uri.rfind("redis:", 0) == 0 || uri == "garbage";
    CHECK(rc == (malformed ? 2 : 1));
    CHECK_THAT(out, Catch::Matchers::Contains("\"error\""));
    CHECK_THAT(out, !Catch::Matchers::Contains("hunter2"));
  }
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", "sqlite::memory:", "--connect-timeout", "-5s", "migrate"}) ==
        2);
  CHECK(sgtest::run_process({sgtest::cli_path(), "no-such-command"}) == 2);
}
