// The fault proxy (tools/faultproxy): real PostgreSQL / MariaDB connections
// through it work in pass mode, stall while it is frozen (a silent
// partition) and resume after pass; drop closes them; delay delays. SQLite
// has no network path: only the dialect-free checks run there.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>

#include "fault_proxy.h"
#include "sqlguard/lease_lock.h"
#include "process_helpers.h"
#include "test_context.h"
#include "test_helpers.h"

using namespace sqlguard;
using namespace std::chrono_literals;
using faultproxy::FaultProxy;
using faultproxy::ProxyOptions;
using sgtest::ctx;

namespace {

ProxyOptions to_server() {
  ProxyOptions o;
  std::tie(o.target_host, o.target_port) = faultproxy::uri_endpoint(ctx().uri);
  o.lifetime = std::chrono::minutes(5);
  return o;
}

std::int64_t select_int(Connection& c, int v) {
  return c.execute("SELECT " + std::to_string(v)).rows.at(0)[0].as_int();
}

}  // namespace

TEST_CASE("through the fault proxy a statement works in pass mode, does not complete while frozen and completes "
          "after pass",
          "[faultproxy]") {
  if (ctx().is_sqlite()) {
    SUCCEED("SQLite is embedded: no network path to partition");
    return;
  }
  FaultProxy proxy(to_server());
  auto conn = make_connection(faultproxy::uri_via(ctx().uri, proxy.port()));
  CHECK(select_int(*conn, 1) == 1);
  CHECK(proxy.stats().open == 1);

  proxy.freeze();
  auto answer = std::async(std::launch::async, [&] { return select_int(*conn, 2); });
  // The client-side bound of this test: no answer within 1.5 s while frozen.
  CHECK(answer.wait_for(1500ms) == std::future_status::timeout);
  proxy.pass();
  REQUIRE(answer.wait_for(20s) == std::future_status::ready);
  CHECK(answer.get() == 2);
  CHECK(select_int(*conn, 3) == 3);
}

TEST_CASE("a frozen fault proxy also holds new connections until pass", "[faultproxy]") {
  if (ctx().is_sqlite()) {
    SUCCEED("SQLite is embedded: no network path to partition");
    return;
  }
  FaultProxy proxy(to_server());
  proxy.freeze();
  std::string uri = faultproxy::uri_via(ctx().uri, proxy.port());
  auto connected = std::async(std::launch::async, [&] {
    ConnectOptions co;
    co.connect_timeout = 20s;
    auto c = make_connection(uri, co);
    return select_int(*c, 4);
  });
  CHECK(connected.wait_for(1500ms) == std::future_status::timeout);
  proxy.pass();
  REQUIRE(connected.wait_for(20s) == std::future_status::ready);
  CHECK(connected.get() == 4);
}

TEST_CASE("drop mode closes the open connections and refuses new ones until pass", "[faultproxy]") {
  if (ctx().is_sqlite()) {
    SUCCEED("SQLite is embedded: no network path to drop");
    return;
  }
  FaultProxy proxy(to_server());
  std::string uri = faultproxy::uri_via(ctx().uri, proxy.port());
  auto conn = make_connection(uri);
  CHECK(select_int(*conn, 1) == 1);
  proxy.drop();
  CHECK(proxy.stats().open == 0);
  CHECK(proxy.stats().dropped >= 1);
  std::string what;
  CHECK(sgtest::code_of([&] { select_int(*conn, 2); }, &what) == ErrorCode::kConnectionLost);
  INFO(what);
  ConnectOptions quick;
  quick.connect_timeout = 3s;
  CHECK_THROWS_AS(make_connection(uri, quick), Error);
  proxy.pass();
  conn->reconnect();
  CHECK(select_int(*conn, 5) == 5);
}

TEST_CASE("delay mode forwards every chunk only after the delay", "[faultproxy]") {
  if (ctx().is_sqlite()) {
    SUCCEED("SQLite is embedded: no network path to delay");
    return;
  }
  FaultProxy proxy(to_server());
  auto conn = make_connection(faultproxy::uri_via(ctx().uri, proxy.port()));
  proxy.delay(300ms);
  auto t0 = std::chrono::steady_clock::now();
  CHECK(select_int(*conn, 6) == 6);
  // The query and its answer each waited 300 ms in the proxy.
  CHECK(std::chrono::steady_clock::now() - t0 >= 590ms);
  proxy.pass();
  CHECK(select_int(*conn, 7) == 7);
}

TEST_CASE("the fault proxy refuses non-loopback addresses and stops by itself after its lifetime", "[faultproxy]") {
  ProxyOptions o;
  o.target_port = 9;
  o.target_host = "10.1.2.3";
  CHECK_THROWS_AS(FaultProxy(o), std::invalid_argument);
  o.target_host = "127.0.0.1";
  o.listen_host = "0.0.0.0";
  CHECK_THROWS_AS(FaultProxy(o), std::invalid_argument);
  o.listen_host = "127.0.0.1";
  o.lifetime = 200ms;
  FaultProxy p(o);
  CHECK(p.port() > 0);
  for (int i = 0; i < 100 && p.running(); ++i) std::this_thread::sleep_for(20ms);
  CHECK_FALSE(p.running());
  CHECK(faultproxy::uri_via("postgresql://u:p@db.example:5432/x?sslmode=disable", 4000) ==
        "postgresql://u:p@127.0.0.1:4000/x?sslmode=disable");
  CHECK(faultproxy::uri_endpoint("mysql://u:p@127.0.0.1/db") == std::pair<std::string, int>("127.0.0.1", 3306));
  CHECK_THROWS_AS(faultproxy::uri_endpoint("postgresql://u@h1:1,h2:2/db"), std::invalid_argument);
}

TEST_CASE("run behind a frozen path stops CMD's tree when the trust window ends and exits 5 in bounded time",
          "[run][faultproxy]") {
  using namespace sgtest::tree;
  if (ctx().is_sqlite()) {
    SUCCEED("SQLite is embedded: no network path to partition");
    return;
  }
  FaultProxy proxy(to_server());
  TempDir dir;
  std::string f = dir.file("pids");
  pid_t run = sgtest::spawn({sgtest::cli_path(), "--db", faultproxy::uri_via(ctx().uri, proxy.port()), "run", "--lock",
                             ctx().unique("frozen"), "--ttl", "2s", "--kill-grace", "1s", "--", "/bin/sh", "-c",
                             "echo $$ >> " + f + "; sleep 100 & echo $! >> " + f + "; wait"});
  auto pids = wait_for_pids(f, 2);
  REQUIRE(pids.size() == 2);
  proxy.freeze();  // the lease connection and the watchdog's hear nothing from now on
  auto t0 = Clock::now();
  int st = wait_raw(run, 15s);
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
  proxy.pass();
  if (st == -1) st = wait_raw(run);  // reap it either way
  INFO("run exited " << took.count() << " ms after the freeze");
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 5);
  CHECK(took < 2000ms + 1000ms + 1000ms);  // ttl (trust end) + --kill-grace + 1 s, with the path still frozen
  for (pid_t p : pids) CHECK_FALSE(alive(p));
}

// ---- client-side I/O deadlines (ConnectOptions::io_timeout) -----------------
// The negative control is the first test of this file: without io_timeout a
// statement on a frozen path is still waiting after 1.5 s, and completes
// only when the path heals.

TEST_CASE("with io_timeout a statement on a frozen path fails in bounded time, and the connection recovers after pass",
          "[faultproxy][deadline]") {
  if (ctx().is_sqlite()) {
    SUCCEED("SQLite is embedded: no network path to freeze (its waits are bounded by busy_timeout)");
    return;
  }
  FaultProxy proxy(to_server());
  ConnectOptions co;
  co.io_timeout = 1s;
  co.connect_timeout = 2s;
  auto conn = make_connection(faultproxy::uri_via(ctx().uri, proxy.port()), co);
  CHECK(select_int(*conn, 1) == 1);
  proxy.freeze();
  // Never a hang: the path stays frozen the whole time.
  auto failed = sgtest::failure_within(10s, [&] { select_int(*conn, 2); });
  REQUIRE(failed);
  auto [code, what, took] = *failed;
  INFO(what << " after " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
  // A statement outside a transaction commits itself: it was sent and its
  // answer never came, so its outcome is unknown (errors.h), not retryable.
  CHECK(code == ErrorCode::kCommitInDoubt);
  CHECK(took >= 900ms);  // not before the deadline
  proxy.pass();
  CHECK(select_int(*conn, 3) == 3);  // reconnected on next use
}

TEST_CASE("with io_timeout a COMMIT on a frozen path is commit_in_doubt, never a hang", "[faultproxy][deadline]") {
  if (ctx().is_sqlite()) {
    SUCCEED("SQLite is embedded: no network path to freeze");
    return;
  }
  FaultProxy proxy(to_server());
  ConnectOptions co;
  co.io_timeout = 1s;
  co.connect_timeout = 2s;
  auto conn = make_connection(faultproxy::uri_via(ctx().uri, proxy.port()), co);
  conn->execute("CREATE TEMPORARY TABLE sg_deadline_t (x INTEGER)");
  conn->begin();
  conn->execute("INSERT INTO sg_deadline_t (x) VALUES (1)");
  proxy.freeze();
  auto failed = sgtest::failure_within(10s, [&] { conn->commit(); });
  REQUIRE(failed);
  auto [code, what, took] = *failed;
  INFO(what);
  CHECK(code == ErrorCode::kCommitInDoubt);
  CHECK_FALSE(conn->in_transaction());
  proxy.pass();
  CHECK(select_int(*conn, 4) == 4);
}

TEST_CASE("a lease whose path freezes: release() gives up in bounded time and keeps the lease; after pass it frees it",
          "[faultproxy][deadline][lease]") {
  if (ctx().is_sqlite()) {
    SUCCEED("SQLite is embedded: no network path to freeze");
    return;
  }
  FaultProxy proxy(to_server());
  LeaseOptions lo;
  lo.ttl = 6s;  // LeaseLock's own connection: io_timeout = connect_timeout = 2 s
  const std::string name = ctx().unique("frozen-release");
  LeaseLock lock(faultproxy::uri_via(ctx().uri, proxy.port()), name, lo);
  REQUIRE(lock.acquire());
  proxy.freeze();
  // The release budget is min(ttl, 10 s) plus one deadline or reconnect.
  auto failed = sgtest::failure_within(15s, [&] { lock.release(); });
  REQUIRE(failed);
  auto [code, what, took] = *failed;
  INFO(what << " after " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
  CHECK(took < 6s + 4s);
  CHECK((code == ErrorCode::kTimeout || code == ErrorCode::kConnectionLost));
  CHECK(lock.hold_count() == 1);  // not forgotten: it may still be held in the database
  proxy.pass();
  // The retry ends it: released, or (the freeze outlasted the ttl) found
  // expired and reported as not held; either way the row is free.
  CHECK_NOTHROW(lock.release());
  CHECK(lock.hold_count() == 0);
  auto check = ctx().connect();  // not the shared probe: an earlier test may have restarted the server under it
  auto info = lease_info(*check, name);
  REQUIRE(info);
  CHECK_FALSE(info->held());
}

TEST_CASE("run_guarded survives a killed session: the transaction runs again on a fresh connection",
          "[deadline][lease]") {
  if (ctx().is_sqlite()) {
    SUCCEED("SQLite sessions cannot be killed from outside");
    return;
  }
  auto conn = ctx().connect();
  conn->execute("CREATE TABLE IF NOT EXISTS sg_guarded_retry (k VARCHAR(100) PRIMARY KEY)");
  const std::string name = ctx().unique("guarded-retry");
  LeaseLock lock(*conn, name);
  REQUIRE(lock.acquire());
  const auto id = conn->session_id();
  if (ctx().is(DialectKind::kPostgresql)) sgtest::exec("SELECT pg_terminate_backend(?)", {id});
  else sgtest::probe().execute_script("KILL " + std::to_string(id));
  std::this_thread::sleep_for(100ms);
  int calls = 0;
  bool ok = lock.run_guarded([&](Transaction&) {
    ++calls;
    conn->execute("INSERT INTO sg_guarded_retry (k) VALUES (?)", {name});
  });
  CHECK(ok);
  CHECK(calls == 1);  // the killed session failed before the work ran
  CHECK(sgtest::query_int("SELECT COUNT(*) FROM sg_guarded_retry WHERE k = ?", {name}) == 1);
  // Behind a transaction pooler the client keeps its PgBouncer connection
  // (the pooler replaces the killed server session): nothing to reconnect.
  if (!ctx().pooler) CHECK(conn->session_id() != id);
  CHECK(lock.release());
}
