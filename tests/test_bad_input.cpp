// Issue 7's table of bad inputs across the public API and the CLI: each gets
// a clear error in bounded time, and nothing already committed is lost or
// changed. Plus a connection that dies mid-transaction / mid-commit.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "sqlguard/idempotency.h"
#include "sqlguard/inbox.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/migrate.h"
#include "sqlguard/transition.h"
#include "sqlguard/version_cas.h"
#include "test_context.h"

using namespace sqlguard;
using namespace std::chrono_literals;
using sgtest::ctx;

namespace {
struct Outcome {
  bool threw = false;
  ErrorCode code = ErrorCode::kInternal;
  std::string what;
};

Outcome run(const std::function<void()>& f) {
  Outcome o;
  try {
    f();
  } catch (const Error& e) {
    o.threw = true;
    o.code = e.code();
    o.what = e.what();
  }
  return o;
}

// A committed state to compare before/after: a held lease, a completed
// idempotency key, a processed message and a business row.
struct Sentinel {
  std::string lock, scope, table;
  std::int64_t fence = 0;
};

Sentinel make_sentinel(Connection& c) {
  Sentinel s{ctx().unique("sentinel"), ctx().unique("scope"), ctx().unique("biz")};
  auto r = acquire_lease(c, s.lock, "sentinel-owner", 10min);
  REQUIRE(r.acquired);
  s.fence = r.fence;
  IdempotencyKeys keys(c);
  REQUIRE(keys.execute(s.scope, "k1", request_fingerprint("req"), [](IdempotencyExecution&) {
                return StoredResponse{201, "first"};
              }).outcome == IdempotencyOutcome::kExecuted);
  c.execute_script("CREATE TABLE " + s.table + " (id INTEGER NOT NULL PRIMARY KEY, status VARCHAR(16) NOT NULL, qty INTEGER NOT NULL, version INTEGER NOT NULL)");
  c.execute("INSERT INTO " + s.table + " (id, status, qty, version) VALUES (1, 'new', 5, 0)");
  return s;
}

void check_sentinel(Connection& c, const Sentinel& s) {
  auto info = lease_info(c, s.lock);
  REQUIRE(info);
  CHECK(info->owner == "sentinel-owner");
  CHECK(info->fence == s.fence);
  CHECK(info->held());
  IdempotencyKeys keys(c);
  auto r = keys.execute(s.scope, "k1", request_fingerprint("req"), [](IdempotencyExecution&) -> StoredResponse {
    FAIL("the handler must not run again");
    return {};
  });
  CHECK(r.outcome == IdempotencyOutcome::kReplayed);
  CHECK(r.response.body == "first");
  auto row = c.execute("SELECT status, qty, version FROM " + s.table + " WHERE id = 1");
  REQUIRE(row.rows.size() == 1);
  CHECK(row.rows[0][0].as_string() == "new");
  CHECK(row.rows[0][1].as_int() == 5);
  CHECK(row.rows[0][2].as_int() == 0);
}
}  // namespace

TEST_CASE("bad inputs across the API get clear errors and change nothing already committed", "[badinput]") {
  auto c = ctx().connect();
  auto s = make_sentinel(*c);
  const std::string evil = s.table + "; DROP TABLE " + s.table + " --";
  struct Case {
    std::string what;
    std::function<void()> call;
    ErrorCode expect;
  };
  LeaseOptions period;
  period.ttl = 30s;
  period.renew_period = 20s;
  LeaseOptions zero_ttl;
  zero_ttl.ttl = 0ms;
  LeaseOptions neg_ttl;
  neg_ttl.ttl = -1s;
  LeaseOptions huge_ttl;
  huge_ttl.ttl = std::chrono::hours(24 * 365 * 100);
  IdempotencyOptions neg_lease;
  neg_lease.lease = -5s;
  std::vector<Case> cases = {
      {"identifier injection in a CAS table", [&] { VersionCas v(*c, {.table = evil, .columns = {"qty"}}); },
       ErrorCode::kInvalidArgument},
      {"identifier injection in a column", [&] {
         GuardedUpdate g(*c, {.table = s.table, .assignments = {{"qty = 0 --", AssignOp::kSet}}});
       }, ErrorCode::kInvalidArgument},
      {"identifier injection in a state machine", [&] {
         StateMachine m(*c, {.table = s.table, .status_column = "status; DELETE", .states = {"new", "paid"},
                             .transitions = {{.event = "pay", .from = {"new"}, .to = "paid"}}});
       }, ErrorCode::kInvalidArgument},
      {"empty lock name", [&] { LeaseLock l(*c, ""); }, ErrorCode::kInvalidArgument},
      {"oversize lock name", [&] { LeaseLock l(*c, std::string(256, 'x')); }, ErrorCode::kInvalidArgument},
      {"zero ttl", [&] { LeaseLock l(*c, "x", zero_ttl); }, ErrorCode::kInvalidArgument},
      {"negative ttl", [&] { LeaseLock l(*c, "x", neg_ttl); }, ErrorCode::kInvalidArgument},
      {"huge ttl", [&] { LeaseLock l(*c, "x", huge_ttl); }, ErrorCode::kInvalidArgument},
      {"renew period above ttl/2", [&] { LeaseLock l(*c, "x", period); }, ErrorCode::kInvalidArgument},
      {"negative idempotency lease", [&] { IdempotencyKeys k(*c, neg_lease); }, ErrorCode::kInvalidArgument},
      {"empty idempotency scope", [&] {
         IdempotencyKeys k(*c);
         k.execute("", "key", request_fingerprint("r"), [](IdempotencyExecution&) { return StoredResponse{}; });
       }, ErrorCode::kInvalidArgument},
      {"oversize idempotency key", [&] {
         IdempotencyKeys k(*c);
         k.execute(s.scope, std::string(300, 'k'), request_fingerprint("r"),
                   [](IdempotencyExecution&) { return StoredResponse{}; });
       }, ErrorCode::kInvalidArgument},
      {"empty inbox message id", [&] {
         Inbox in(*c);
         in.process("consumer", "", [](Transaction&) {});
       }, ErrorCode::kInvalidArgument},
      {"undeclared transition", [&] {
         StateMachine m(*c, {.table = s.table, .states = {"new", "paid"},
                             .transitions = {{.event = "pay", .from = {"new"}, .to = "paid"}}});
         m.fire(1, "refund");
       }, ErrorCode::kInvalidTransition},
      {"unknown URI scheme", [&] { make_connection("oracle://u:p@h/db"); }, ErrorCode::kInvalidArgument},
      {"malformed URI", [&] { make_connection("mysql://u:p@h:99999/db"); }, ErrorCode::kInvalidArgument},
      {"unreachable host (refused port)", [&] { make_connection("postgresql://u:p@127.0.0.1:1/db"); },
       ErrorCode::kConnectionLost},
  };
  for (const auto& k : cases) {
    INFO(k.what);
    auto t0 = std::chrono::steady_clock::now();
    auto o = run(k.call);
    CHECK(o.threw);
    CHECK(o.code == k.expect);
    CHECK_FALSE(o.what.empty());
    CHECK(std::chrono::steady_clock::now() - t0 < 30s);  // bounded, never hangs
  }
  check_sentinel(*c, s);
}

TEST_CASE("using sqlguard before migrate gives a clear 'run sqlguard migrate' error", "[badinput]") {
  auto uri = ctx().fresh_database();
  auto c = make_connection(uri);
  auto o = run([&] { acquire_lease(*c, "x", "owner", 1s); });
  CHECK(o.code == ErrorCode::kSchemaMismatch);
  CHECK_THAT(o.what, Catch::Matchers::Contains("sqlguard migrate"));
  std::string out;
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", uri, "lock", "list"}, &out) == 1);
}

TEST_CASE("bad inputs to the CLI exit non-zero with one line and change nothing", "[badinput][cli]") {
  auto c = ctx().connect();
  auto s = make_sentinel(*c);
  auto cli = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {sgtest::cli_path(), "--db", ctx().uri};
    argv.insert(argv.end(), args.begin(), args.end());
    return sgtest::run_process(argv);
  };
  CHECK(cli({"lock", "acquire", s.lock}) == 75);                      // held: not stolen
  CHECK(cli({"lock", "release", s.lock, "--owner", "intruder"}) == 3);  // not the owner
  CHECK(cli({"lock", "renew", s.lock, "--owner", "intruder"}) == 3);
  // A bad value is a bad command line: exit 2, before anything is sent.
  CHECK(cli({"lock", "acquire", "", "--ttl", "1s"}) == 2);
  CHECK(cli({"lock", "acquire", std::string(300, 'n')}) == 2);
  CHECK(cli({"lock", "acquire", "x", "--ttl", "-1s"}) == 2);
  CHECK(cli({"lock", "acquire", "x", "--ttl", "100000d"}) == 2);
  CHECK(cli({"lock", "acquire", "x", "--wait", "soon"}) == 2);
  CHECK(cli({"lock", "acquire", "x", "--wait", "200000d"}) == 2);
  CHECK(cli({"lock", "acquire", "\xff\xfe"}) == 2);
  CHECK(cli({"run", "--lock", s.lock, "--wait", "100ms", "--", "/bin/true"}) == 75);
  CHECK(cli({"cleanup", "--batch", "0"}) == 1);
  CHECK(cli({"lock", "frobnicate"}) == 2);
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", "mysql://u:p@127.0.0.1:1/db", "--connect-timeout", "2s",
                             "lock", "list"}) == 1);
  check_sentinel(*c, s);
}

TEST_CASE("a connection killed inside a transaction or at commit is classified and commits nothing", "[badinput][faults]") {
  if (ctx().is_sqlite()) {
    SUCCEED("SQLite is embedded: no server connection to lose");
    return;
  }
  auto c = ctx().connect();
  auto killer = ctx().connect();
  std::string t = ctx().unique("killed");
  c->execute_script("CREATE TABLE " + t + " (id INTEGER NOT NULL PRIMARY KEY)");
  auto kill = [&](std::int64_t id) {
    if (ctx().is(DialectKind::kPostgres)) killer->execute("SELECT pg_terminate_backend(?)", {id});
    else killer->execute_script("KILL " + std::to_string(id));
    std::this_thread::sleep_for(100ms);
  };
  // Mid-transaction: the next statement fails with ConnectionLost.
  {
    auto id = c->session_id();
    c->begin();
    c->execute("INSERT INTO " + t + " (id) VALUES (1)");
    kill(id);
    auto o = run([&] { c->execute("INSERT INTO " + t + " (id) VALUES (2)"); });
    CHECK(o.code == ErrorCode::kConnectionLost);
    c->rollback();
  }
  // At commit: ConnectionLost or CommitInDoubt, never success, never another code.
  {
    auto id = c->session_id();
    c->begin();
    c->execute("INSERT INTO " + t + " (id) VALUES (3)");
    kill(id);
    auto o = run([&] { c->commit(); });
    CHECK(o.threw);
    CHECK((o.code == ErrorCode::kConnectionLost || o.code == ErrorCode::kCommitInDoubt));
  }
  // The server rolled both back, and the connection works again.
  CHECK(c->execute("SELECT COUNT(*) FROM " + t).rows[0][0].as_int() == 0);
}
