// What a lost answer means (errors.h): a statement outside a transaction
// commits itself, so once it has left, a lost answer is commit_in_doubt —
// a retry could repeat a committed write. Only a failure before the
// statement left is connection_lost (nothing committed, retryable).
//
// Each case makes the server end the session in the middle of a real
// statement whose write has already committed: PostgreSQL — an INSERT
// waiting for a synchronous standby that does not exist (it has committed
// locally) is terminated; MariaDB — a procedure's INSERT commits (autocommit)
// and its next statement sleeps when the session is killed.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <thread>

#include "sqlguard/connection.h"
#include "test_context.h"
#include "test_helpers.h"

using namespace sqlguard;
using namespace std::chrono_literals;
using sgtest::ctx;

namespace {

std::int64_t count_rows(Connection& c, const std::string& table) {
  return c.execute("SELECT COUNT(*) FROM " + table).rows.at(0)[0].as_int();
}

// Waits until `pred` holds (polled every 20 ms) or `limit` passes.
bool eventually(std::chrono::milliseconds limit, const std::function<bool()>& pred) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return pred();
}

// PostgreSQL: synchronous_standby_names set to a standby that never comes,
// for the duration of one case (ALTER SYSTEM; reset and reloaded on exit).
struct NoSuchSyncStandby {
  explicit NoSuchSyncStandby(Connection& admin) : admin_(admin) {
    admin_.execute_script("ALTER SYSTEM SET synchronous_standby_names = 'sg_no_such_standby'");
    admin_.execute("SELECT pg_reload_conf()");
  }
  // On a fresh connection, retried: the case may have restarted the server
  // (the setting survives a restart in postgresql.auto.conf, and every
  // commit after it would wait forever).
  ~NoSuchSyncStandby() {
    std::string last;
    for (auto until = std::chrono::steady_clock::now() + 60s; std::chrono::steady_clock::now() < until;
         std::this_thread::sleep_for(200ms)) {
      try {
        auto c = ctx().connect();
        c->execute_script("ALTER SYSTEM RESET synchronous_standby_names");
        c->execute("SELECT pg_reload_conf()");
        return;
      } catch (const Error& e) {
        last = e.what();
      }
    }
    WARN("could not reset synchronous_standby_names: " << last);
  }
  Connection& admin_;
};

// The write commits, then its session ends before the answer leaves:
// `end_session` ends it (the server terminates the session, or the server
// is restarted). Returns what the caller was told.
ErrorCode committed_then_lost(Connection& admin, Connection& victim, const std::string& t,
                              const std::function<void(std::int64_t pid)>& end_session) {
  const std::int64_t pid = victim.session_id();
  std::future<ErrorCode> outcome;
  if (ctx().is(DialectKind::kPostgresql)) {
    victim.execute_script("SET synchronous_commit = on");
    NoSuchSyncStandby standby(admin);
    // The reload reaches each backend by itself (a signal): the victim's
    // session must see the setting before its INSERT.
    REQUIRE(eventually(10s, [&] {
      return victim.execute("SELECT current_setting('synchronous_standby_names')").rows.at(0)[0].as_string() ==
             "sg_no_such_standby";
    }));
    // Commits wait for a standby once the checkpointer has also read the
    // reload (it publishes "synchronous standbys defined" to the backends).
    std::this_thread::sleep_for(1s);
    outcome = std::async(std::launch::async, [&] {
      return sgtest::code_of([&] { victim.execute("INSERT INTO " + t + " (id) VALUES (1)"); });
    });
    // Committed locally, waiting for the standby.
    REQUIRE(eventually(10s, [&] {
      return admin.execute("SELECT COUNT(*) FROM pg_stat_activity WHERE pid = ? AND wait_event = 'SyncRep'", {pid})
                 .rows.at(0)[0].as_int() == 1;
    }));
    end_session(pid);
    REQUIRE(outcome.wait_for(60s) == std::future_status::ready);
  } else {
    const std::string proc = ctx().unique("sg_in_doubt_p");
    admin.execute_script("CREATE PROCEDURE " + proc + "() BEGIN INSERT INTO " + t +
                         " (id) VALUES (1); DO SLEEP(30); END");
    outcome = std::async(std::launch::async, [&] {
      return sgtest::code_of([&] { victim.execute("CALL " + proc + "()"); });
    });
    REQUIRE(eventually(10s, [&] {
      return admin.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND INFO LIKE 'DO SLEEP%'",
                           {pid})
                 .rows.at(0)[0].as_int() == 1;
    }));
    end_session(pid);
    REQUIRE(outcome.wait_for(60s) == std::future_status::ready);
  }
  return outcome.get();
}

}  // namespace

TEST_CASE("an autocommit write that committed before its answer was lost is commit_in_doubt, not connection_lost",
          "[faults][in_doubt]") {
  if (ctx().is_sqlite() || ctx().pooler) {
    SUCCEED("needs a server session of its own (SQLite is embedded; behind a pooler the session is the pooler's)");
    return;
  }
  const std::string t = ctx().unique("sg_in_doubt");
  auto admin = ctx().connect();
  auto victim = ctx().connect();
  admin->execute_script("CREATE TABLE " + t + " (id INTEGER PRIMARY KEY)");
  auto terminate = [&](std::int64_t pid) {
    if (ctx().is(DialectKind::kPostgresql)) admin->execute("SELECT pg_terminate_backend(?)", {pid});
    else admin->execute_script("KILL CONNECTION " + std::to_string(pid));
  };
  const ErrorCode code = committed_then_lost(*admin, *victim, t, terminate);
  INFO("reported " << to_string(code));
  // The write is there (the case is the one the rule is about) ...
  REQUIRE(count_rows(*admin, t) == 1);
  // ... so the caller must not have been told that nothing was committed.
  CHECK(code == ErrorCode::kCommitInDoubt);
  CHECK_FALSE(is_retryable(code));

  // Negative control: a session the server ended while the connection was
  // idle fails the next statement before it leaves: connection_lost, and
  // nothing of it is committed.
  terminate(victim->session_id());
  std::this_thread::sleep_for(200ms);
  std::string what;
  CHECK(sgtest::code_of([&] { victim->execute("INSERT INTO " + t + " (id) VALUES (2)"); }, &what) ==
        ErrorCode::kConnectionLost);
  INFO(what);
  CHECK(count_rows(*admin, t) == 1);
  // And the connection works again on next use.
  victim->execute("INSERT INTO " + t + " (id) VALUES (3)");
  CHECK(count_rows(*admin, t) == 2);
  admin->execute_script("DROP TABLE " + t);
}

TEST_CASE("a server stopped while an autocommit write that committed waits for its answer: commit_in_doubt",
          "[faults][in_doubt][restart]") {
  const char* servers = std::getenv("SQLGUARD_DBSERVERS");
  if (ctx().is_sqlite() || ctx().pooler || !servers) {
    SUCCEED("needs a server of its own and SQLGUARD_DBSERVERS (tools/dbservers.sh)");
    return;
  }
  const std::string t = ctx().unique("sg_in_doubt_r");
  auto admin = ctx().connect();
  auto victim = ctx().connect();
  admin->execute_script("CREATE TABLE " + t + " (id INTEGER PRIMARY KEY)");
  const std::string which = ctx().is(DialectKind::kPostgresql) ? "pg" : "mariadb";
  auto restart = [&](std::int64_t) {
    REQUIRE(sgtest::run_process({"/bin/bash", servers, "restart", which}) == 0);
  };
  const ErrorCode code = committed_then_lost(*admin, *victim, t, restart);
  INFO("reported " << to_string(code));
  auto after = ctx().connect();  // the old sessions died with the server
  REQUIRE(count_rows(*after, t) == 1);
  CHECK(code == ErrorCode::kCommitInDoubt);
  after->execute_script("DROP TABLE " + t);
}

TEST_CASE("a write a read-only session refuses (PostgreSQL 25006, a standby after a failover) is connection_lost, "
          "not in doubt",
          "[faults][in_doubt]") {
  if (!ctx().is(DialectKind::kPostgresql) || ctx().pooler) {
    SUCCEED("PostgreSQL's 25006 on a direct connection");
    return;
  }
  const std::string t = ctx().unique("sg_ro");
  auto c = ctx().connect();
  c->execute_script("CREATE TABLE " + t + " (id INTEGER PRIMARY KEY)");
  auto ro = ctx().connect();
  ro->execute_script("SET default_transaction_read_only = on");
  std::string what;
  CHECK(sgtest::code_of([&] { ro->execute("INSERT INTO " + t + " (id) VALUES (1)"); }, &what) ==
        ErrorCode::kConnectionLost);  // answered by the server: nothing ran, retry elsewhere
  INFO(what);
  CHECK(count_rows(*c, t) == 0);
  c->execute_script("DROP TABLE " + t);
}
