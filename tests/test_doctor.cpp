// sqlguard doctor / check_environment(): the verdicts on the test database
// of every dialect, the CLI contract, and (hidden tag [.topology], run by the
// ctest entries of tools/test.sh that start them) the verdicts on the
// PostgreSQL HA and pooler topologies of tools/dbservers.sh.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sqlguard/doctor.h"
#include "core/clock_step.h"
#include "core/doctor.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/migrate.h"
#include "test_context.h"
#include "test_helpers.h"

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

using sgtest::required_env;
using sgtest::with_query;

// The durability verdict the server's settings call for, read here apart
// from the doctor: kFail when an acquire's commit may not survive a crash.
// (The test servers run without fsync unless SQLGUARD_DURABLE=1.)
CheckStatus expected_durability(sqlguard::Connection& c) {
  if (ctx().is_sqlite()) return CheckStatus::kOk;  // sqlguard opens files with synchronous=NORMAL
  auto value = [&](const std::string& sql) { return c.execute(sql).rows.at(0)[0].as_string(); };
  if (ctx().is(sqlguard::DialectKind::kPostgresql)) {
    auto setting = [&](const char* name) { return value(std::string("SELECT current_setting('") + name + "')"); };
    if (setting("fsync") == "off" || setting("synchronous_commit") == "off") return CheckStatus::kFail;
    return setting("full_page_writes") == "off" ? CheckStatus::kWarn : CheckStatus::kOk;
  }
  // The test server is not a Galera node and runs without a binary log.
  return value("SELECT CAST(@@GLOBAL.innodb_flush_log_at_trx_commit AS CHAR)") == "1" ? CheckStatus::kOk
                                                                                        : CheckStatus::kFail;
}

// Server-wide durability settings of the test server, changed for one test
// and put back (ALTER SYSTEM / SET GLOBAL; the test user is a superuser).
class DurabilitySettings {
 public:
  DurabilitySettings() : admin_(sqlguard::make_connection(ctx().uri)) {
    if (is_pg())
      for (const char* n : {"fsync", "synchronous_commit", "full_page_writes"}) saved_[n] = read(n);
    else
      saved_["innodb_flush_log_at_trx_commit"] = read("innodb_flush_log_at_trx_commit");
  }
  ~DurabilitySettings() {
    try {
      if (is_pg()) {
        for (const auto& [n, v] : saved_) admin_->execute_script("ALTER SYSTEM RESET " + n);
        reload_until(saved_);
      } else {
        set(saved_);
      }
    } catch (const std::exception& e) {
      WARN("could not restore the test server's settings: " << e.what());
    }
  }
  void set(const std::map<std::string, std::string>& values) {
    for (const auto& [n, v] : values)
      admin_->execute_script(is_pg() ? "ALTER SYSTEM SET " + n + " = '" + v + "'" : "SET GLOBAL " + n + " = " + v);
    if (is_pg()) reload_until(values);
  }

 private:
  static bool is_pg() { return ctx().is(sqlguard::DialectKind::kPostgresql); }
  std::string read(const std::string& name) {
    return admin_->execute(is_pg() ? "SELECT current_setting('" + name + "')" : "SELECT CAST(@@GLOBAL." + name + " AS CHAR)")
        .rows.at(0)[0].as_string();
  }
  // pg_reload_conf() only signals: wait until a new session sees the values.
  void reload_until(const std::map<std::string, std::string>& values) {
    admin_->execute("SELECT pg_reload_conf()");
    for (int i = 0; i < 100; ++i) {
      auto fresh = sqlguard::make_connection(ctx().uri);
      bool all = true;
      for (const auto& [n, v] : values)
        all = all && fresh->execute("SELECT current_setting('" + n + "')").rows.at(0)[0].as_string() == v;
      if (all) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL("the server did not take the new settings within 10 s");
  }
  std::unique_ptr<sqlguard::Connection> admin_;
  std::map<std::string, std::string> saved_;
};

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
  CHECK(m["clock"].detail.find("monotonic clock") != std::string::npos);  // says which clock decides what
  REQUIRE(m.count("durability") == 1);
  auto conn = sqlguard::make_connection(ctx().uri);
  CHECK(m["durability"].status == expected_durability(*conn));
  for (const auto& r : rs)
    if (r.check != "durability") CHECK(r.status != CheckStatus::kFail);
  if (ctx().is_sqlite()) {
    CHECK(m["journal_mode"].status == CheckStatus::kOk);
    CHECK(m["filesystem"].status == CheckStatus::kOk);
    CHECK(m.count("engine") == 0);
  } else {
    CHECK(m["engine"].status == CheckStatus::kOk);
    CHECK(m["server_version"].status == CheckStatus::kOk);
    CHECK(m.count("isolation") == 1);
    CHECK(m.count("timeouts") == 1);
  }
  if (ctx().is(sqlguard::DialectKind::kPostgresql)) {
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
    std::string bad = ctx().is(sqlguard::DialectKind::kPostgresql)
                          ? "postgresql://sg:s3cret-pw@127.0.0.1:1/nope?connect_timeout=2"
                          : "mysql://sg:s3cret-pw@127.0.0.1:1/nope?connect_timeout=2";
    auto rs = sqlguard::check_environment(bad);
    REQUIRE(rs.size() == 1);
    CHECK(rs[0].check == "connect");
    CHECK(rs[0].status == CheckStatus::kFail);
    CHECK(rs[0].detail.find("s3cret-pw") == std::string::npos);
  }
}

TEST_CASE("sqlguard doctor prints one JSON object per check and exits 1 only on a failed check", "[doctor][cli]") {
  std::string out;
  int rc = sgtest::run_process({sgtest::cli_path(), "doctor", "--db", ctx().uri, "--json"}, &out);
  INFO(out);
  auto conn = sqlguard::make_connection(ctx().uri);
  const bool durable = expected_durability(*conn) != CheckStatus::kFail;
  CHECK(rc == (durable ? 0 : 1));
  std::istringstream in(out);
  int lines = 0;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    CHECK(j.contains("check"));
    if (j["check"] == "durability" && !durable)
      CHECK(j["status"] == "fail");
    else
      CHECK((j["status"] == "ok" || j["status"] == "warn"));
    CHECK(j["detail"].is_string());
    ++lines;
  }
  CHECK(lines >= 5);
  // A failing check (no server there) exits 1.
  if (!ctx().is_sqlite()) {
    rc = sgtest::run_process({sgtest::cli_path(), "doctor", "--db",
                              ctx().is(sqlguard::DialectKind::kPostgresql) ? "postgresql://u:pw@127.0.0.1:1/x"
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
  // The test server behind the pooler runs without fsync: durability is its
  // own verdict (tested on direct connections), every other check passes.
  for (const auto& r : with)
    if (r.check != "migrations" && r.check != "durability") CHECK(r.status != CheckStatus::kFail);
  // The CLI names the pooler failure without the flag, not with it.
  std::string out;
  CHECK(sgtest::run_process({sgtest::cli_path(), "doctor", "--db", uri}, &out) == 1);
  CHECK(out.find("fail  pooler") != std::string::npos);
  sgtest::run_process({sgtest::cli_path(), "doctor", "--db", with_query(uri, "pooler=transaction")}, &out);
  INFO(out);
  CHECK(out.find("ok    pooler") != std::string::npos);
  CHECK(out.find("fail  pooler") == std::string::npos);
}

TEST_CASE("connecting through PgBouncer without ?pooler= is refused with an error naming ?pooler=transaction",
          "[.topology][pgbouncer]") {
  const std::string uri = required_env("SQLGUARD_TEST_PGBOUNCER_URI");
  try {
    auto c = sqlguard::make_connection(uri);
    FAIL("connected through a transaction pooler the URI does not declare");
  } catch (const sqlguard::Error& e) {
    INFO(e.what());
    CHECK(e.code() == sqlguard::ErrorCode::kInvalidArgument);
    CHECK(e.message().find("?pooler=transaction") != std::string::npos);
    CHECK(e.message().find("sqlguard:sqlguard@") == std::string::npos);  // masked
  }
  // ?pooler=none says the same, explicitly; the declared kinds connect.
  CHECK_THROWS_AS(sqlguard::make_connection(with_query(uri, "pooler=none")), sqlguard::Error);
  CHECK_NOTHROW(sqlguard::make_connection(with_query(uri, "pooler=transaction")));
  CHECK_NOTHROW(sqlguard::make_connection(with_query(uri, "pooler=session")));
  // Negative control: the same check on a direct connection passes.
  CHECK_NOTHROW(sqlguard::make_connection(required_env("SQLGUARD_TEST_PG_URI_DIRECT")));
}

TEST_CASE("behind a transaction pooler declared as a session pooler, a statement never runs as another client's",
          "[.topology][pgbouncer]") {
  // ?pooler=session is a lie here: named prepared statements are used and
  // the pooler moves each client between server sessions. Every answer must
  // be the client's own statement's, or an error naming ?pooler=transaction.
  const std::string uri = with_query(required_env("SQLGUARD_TEST_PGBOUNCER_URI"), "pooler=session");
  constexpr int kClients = 6;
  std::vector<std::unique_ptr<sqlguard::Connection>> cs;
  for (int i = 0; i < kClients; ++i) cs.push_back(sqlguard::make_connection(uri));
  int right = 0, refused = 0;
  auto refused_with_flag = [&](const sqlguard::Error& e) {
    INFO(e.what());
    CHECK(e.code() == sqlguard::ErrorCode::kInvalidArgument);
    CHECK(e.message().find("?pooler=transaction") != std::string::npos);
  };
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < kClients; ++i) {
      // Another client holds a transaction open meanwhile: it pins a server
      // session, so the pooler hands client i another one than last time.
      auto& pin = *cs[(i + 1 + round) % kClients];
      pin.begin();
      try {
        pin.execute("SELECT 0 * ?::int AS pinned", {sqlguard::Value(std::int64_t{round})});
      } catch (const sqlguard::Error& e) {
        refused_with_flag(e);
      }
      // A different statement per client, each the first (and so the same
      // counter) this client prepares with that text.
      const std::string sql = "SELECT " + std::to_string(i + 1) + " + 0 * ?::int AS v";
      try {
        auto r = cs[i]->execute(sql, {sqlguard::Value(std::int64_t{round})});
        REQUIRE(r.rows.size() == 1);
        CHECK(r.rows[0][0].as_int() == i + 1);
        ++right;
      } catch (const sqlguard::Error& e) {
        refused_with_flag(e);
        ++refused;
      }
      pin.rollback();
    }
  }
  INFO("right " << right << ", refused " << refused);
  CHECK(right + refused == 20 * kClients);
  CHECK(refused > 0);  // the pooler did move clients: the check had something to catch
}

TEST_CASE("on a database whose default isolation is serializable, sqlguard's statements run at read committed",
          "[doctor][postgres]") {
  if (!ctx().is(sqlguard::DialectKind::kPostgresql) || ctx().pooler) {
    SUCCEED("PostgreSQL direct connections (behind a transaction pooler the doctor fails this setting)");
    return;
  }
  const std::string uri = ctx().fresh_database();
  {
    auto admin = sqlguard::make_connection(uri);
    const std::string db = uri.substr(uri.rfind('/') + 1);
    admin->execute_script("ALTER DATABASE " + db + " SET default_transaction_isolation = 'serializable'");
  }
  auto c = sqlguard::make_connection(uri);
  sqlguard::migrate(*c);
  // Negative control: the database default really is serializable (a plain
  // libpq session would run every statement at it).
  CHECK(c->execute("SELECT reset_val FROM pg_settings WHERE name = 'default_transaction_isolation'")
            .rows.at(0)[0].as_string() == "serializable");
  CHECK(c->execute("SELECT current_setting('transaction_isolation')").rows.at(0)[0].as_string() == "read committed");
  {
    sqlguard::Transaction tx(*c);
    CHECK(c->execute("SELECT current_setting('transaction_isolation')").rows.at(0)[0].as_string() == "read committed");
    tx.commit();
  }
  // The behaviour: contended acquire/release cycles never fail with 40001.
  const std::string name = ctx().unique("serializable_lock");
  std::atomic<int> releases{0}, errors{0};
  std::string first_error;
  std::mutex m;
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&] {
      try {
        auto conn = sqlguard::make_connection(uri);
        for (int i = 0; i < 40; ++i) {
          sqlguard::LeaseLock lock(*conn, name, {.ttl = std::chrono::seconds(5)});
          if (lock.acquire(std::chrono::seconds(5)) && lock.release()) ++releases;
        }
      } catch (const sqlguard::Error& e) {
        ++errors;
        std::lock_guard<std::mutex> g(m);
        first_error = e.what();
      }
    });
  for (auto& t : ts) t.join();
  INFO(first_error);
  CHECK(errors == 0);
  CHECK(releases == 160);
  auto rs = by_check(sqlguard::check_environment(uri));
  CHECK(rs["isolation"].status == CheckStatus::kOk);
  CHECK(rs["isolation"].detail.find("serializable") != std::string::npos);
}

TEST_CASE("doctor fails a server whose commits may not survive a crash, and passes it once durable",
          "[doctor][durability]") {
  auto durability = [](sqlguard::Connection& c) { return by_check(sqlguard::check_environment(c, ctx().uri))["durability"]; };
  if (ctx().is_sqlite()) {
    auto c = sqlguard::make_connection(ctx().uri);
    CHECK(durability(*c).status == CheckStatus::kOk);  // NORMAL, sqlguard's default
    c->execute_script("PRAGMA synchronous = FULL");
    CHECK(durability(*c).status == CheckStatus::kOk);
    c->execute_script("PRAGMA synchronous = OFF");
    auto d = durability(*c);
    INFO(d.detail);
    CHECK(d.status == CheckStatus::kFail);
    CHECK(d.detail.find("synchronous=OFF") != std::string::npos);
    return;
  }
  if (ctx().pooler) {
    SUCCEED("server-wide settings: changed and checked on the direct connection's run");
    return;
  }
  DurabilitySettings settings;
  auto verdict = [&](const std::string& name, CheckStatus want) {
    auto c = sqlguard::make_connection(ctx().uri);
    auto d = durability(*c);
    INFO(d.detail);
    CHECK(d.status == want);
    if (!name.empty()) CHECK(d.detail.find("with " + name) != std::string::npos);
    return d;
  };
  std::string out;
  if (ctx().is(sqlguard::DialectKind::kPostgresql)) {
    settings.set({{"fsync", "on"}, {"synchronous_commit", "on"}, {"full_page_writes", "on"}});
    verdict("", CheckStatus::kOk);
    CHECK(sgtest::run_process({sgtest::cli_path(), "doctor", "--db", ctx().uri}, &out) == 0);
    settings.set({{"full_page_writes", "off"}});
    verdict("full_page_writes=off", CheckStatus::kWarn);
    settings.set({{"full_page_writes", "on"}, {"synchronous_commit", "off"}});
    verdict("synchronous_commit=off", CheckStatus::kFail);
    settings.set({{"synchronous_commit", "on"}, {"fsync", "off"}});
    CHECK(verdict("fsync=off", CheckStatus::kFail).detail.find("with synchronous_commit") == std::string::npos);
    settings.set({{"synchronous_commit", "off"}});  // both named
    CHECK(verdict("fsync=off", CheckStatus::kFail).detail.find("with synchronous_commit=off") != std::string::npos);
  } else {
    settings.set({{"innodb_flush_log_at_trx_commit", "1"}});
    verdict("", CheckStatus::kOk);
    CHECK(sgtest::run_process({sgtest::cli_path(), "doctor", "--db", ctx().uri}, &out) == 0);
    for (const char* lazy : {"0", "2"}) {
      settings.set({{"innodb_flush_log_at_trx_commit", lazy}});
      auto d = verdict("", CheckStatus::kFail);
      CHECK(d.detail.find(std::string("innodb_flush_log_at_trx_commit=") + lazy) != std::string::npos);
    }
  }
  INFO(out);
  CHECK(sgtest::run_process({sgtest::cli_path(), "doctor", "--db", ctx().uri}, &out) == 1);
  CHECK(out.find("fail  durability") != std::string::npos);
}

TEST_CASE("the clock check fails when the database and this host disagree by more than a second the round trip cannot "
          "explain, and warns beyond 100 ms",
          "[doctor][takeover]") {
  using sqlguard::detail::clock_skew_status;
  CHECK(clock_skew_status(0, 1) == CheckStatus::kOk);
  CHECK(clock_skew_status(-40, 2) == CheckStatus::kOk);
  CHECK(clock_skew_status(300, 2) == CheckStatus::kWarn);
  CHECK(clock_skew_status(1100, 400) == CheckStatus::kWarn);  // half the round trip explains 200 ms of it
  // What the clock issue measured doctor calling "ok": the server 90 s and 120 s ahead.
  CHECK(clock_skew_status(90'000, 3) == CheckStatus::kFail);
  CHECK(clock_skew_status(120'000, 3) == CheckStatus::kFail);
  CHECK(clock_skew_status(-3'600'000, 3) == CheckStatus::kFail);
}

TEST_CASE("a step of the database clock between two renewal rounds is told from round trips and drift", "[takeover]") {
  using sqlguard::detail::clock_step_ms;
  using sqlguard::detail::ClockSample;
  using namespace std::chrono_literals;
  const auto t0 = std::chrono::steady_clock::now();
  const std::int64_t db0 = 1'700'000'000'000;
  auto sample = [&](std::chrono::milliseconds at, std::chrono::milliseconds rtt, std::int64_t db) {
    return ClockSample{db, t0 + at, t0 + at + rtt};
  };
  const ClockSample a = sample(0ms, 2ms, db0 + 1);
  // 10 s later on both clocks: no step (and a slow answer explains its own share).
  CHECK(clock_step_ms(a, sample(10s, 2ms, db0 + 10'001)) == 0);
  CHECK(clock_step_ms(a, sample(10s, 1500ms, db0 + 10'700)) == 0);
  // The clock issue's steps: +30 s, +1 h, -1 h, within one round.
  CHECK(clock_step_ms(a, sample(10s, 2ms, db0 + 40'001)) == 30'000);
  CHECK(clock_step_ms(a, sample(10s, 2ms, db0 + 3'610'001)) == 3'600'000);
  CHECK(clock_step_ms(a, sample(10s, 2ms, db0 + 10'001 - 3'600'000)) == -3'600'000);
  // The bound: 1 s plus what the round trips and 1000 ppm over the interval explain.
  CHECK(clock_step_ms(a, sample(10s, 2ms, db0 + 11'001)) == 0);        // 1 s: within
  CHECK(clock_step_ms(a, sample(10s, 2ms, db0 + 11'100)) == 1'099);    // beyond
}
