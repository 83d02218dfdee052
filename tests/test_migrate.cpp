// Migrations: idempotent, concurrent-safe, checksum-checked.
#include <catch2/catch.hpp>

#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"
#include "sqlguard/migrate.h"
#include "test_context.h"
#include "test_helpers.h"

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

namespace {

struct Updates {
  std::int64_t all = 0, hot = 0;
};

// Acquires and releases of a few leases through a lock client on a database
// of their own; then the table's update counts as PostgreSQL's statistics
// have them (flushed when the client's sessions end).
Updates lease_updates(const std::string& uri, bool expire_index) {
  auto c = make_connection(uri);
  migrate(*c);
  if (expire_index) c->execute("CREATE INDEX sqlguard_lock_expire ON sqlguard_lock (expire_at)");
  {
    auto client = LockClient::create(uri);
    LeaseOptions o;
    o.ttl = std::chrono::seconds(30);
    std::vector<std::unique_ptr<LeaseLock>> locks;
    for (int i = 0; i < 5; ++i)
      locks.push_back(std::make_unique<LeaseLock>(client, "hot:" + std::to_string(i), o));
    for (int round = 0; round < 20; ++round) {
      for (auto& l : locks) REQUIRE(l->try_acquire());
      for (auto& l : locks) REQUIRE(l->release());
    }
  }  // (the client's sessions end: their statistics are flushed)
  Updates u;
  REQUIRE(sgtest::eventually([&] {
    c->execute("SELECT pg_stat_clear_snapshot()");
    auto r = c->execute("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'sqlguard_lock'");
    u.all = r.rows[0][0].as_int();
    u.hot = r.rows[0][1].as_int();
    return u.all >= 195;  // 5 names x 20 rounds: 5 inserts, then 95 acquires of a released row and 100 releases
  }, std::chrono::seconds(30)));
  return u;
}

}  // namespace

TEST_CASE("PostgreSQL updates lock rows in place (HOT): no index on expire_at; MariaDB and SQLite keep theirs",
          "[migrate][hot]") {
  auto c = ctx().connect();
  if (!ctx().is(DialectKind::kPostgresql)) {
    // No HOT there; an InnoDB purge without the index would lock every row it scans.
    const std::string q = ctx().is_sqlite()
                              ? "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = 'sqlguard_lock_expire'"
                              : "SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE() "
                                "AND table_name = 'sqlguard_lock' AND index_name = 'sqlguard_lock_expire'";
    CHECK(c->execute(q).rows[0][0].as_int() >= 1);
    return;
  }
  auto r = c->execute("SELECT COUNT(*) FROM pg_indexes WHERE schemaname = current_schema() AND tablename IN "
                      "('sqlguard_lock', 'sqlguard_sync_holder', 'sqlguard_lock_queue') AND indexdef LIKE '%(expire_at)%'");
  CHECK(r.rows[0][0].as_int() == 0);
  const Updates hot = lease_updates(ctx().fresh_database(), false);
  INFO("updates " << hot.all << ", HOT " << hot.hot);
  CHECK(hot.hot * 10 >= hot.all * 9);  // (a page full at that instant makes an update non-HOT)
  // Negative control: with the index back every update changes an indexed column.
  const Updates cold = lease_updates(ctx().fresh_database(), true);
  INFO("with the index: updates " << cold.all << ", HOT " << cold.hot);
  CHECK(cold.hot * 10 <= cold.all);
}
