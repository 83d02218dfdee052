// Inbox (consumer-side dedup): exactly-once effects under redelivery,
// concurrent delivery, consumers killed mid-transaction, retention cleanup.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "sqlguard/inbox.h"
#include "test_context.h"
#include "test_helpers.h"
#ifdef SQLGUARD_TEST_SQLITE
#include <sqlite3.h>
#include "sqlguard/sqlite.h"
#endif
#ifdef SQLGUARD_TEST_POSTGRESQL
#include <pqxx/pqxx>
#include "sqlguard/postgresql.h"
#endif
#ifdef SQLGUARD_TEST_MYSQL
#include <cppconn/connection.h>
#include <cppconn/statement.h>
#include "sqlguard/mysql.h"
#endif

using namespace sqlguard;
using namespace std::chrono_literals;
using sgtest::code_of;
using sgtest::ctx;
using sgtest::probe;
using sgtest::query_int;
using Catch::Matchers::Contains;

namespace {

struct Tables {
  std::string effects = ctx().unique("inbox_effects");
  std::string counter = ctx().unique("inbox_counter");
  Tables() {
    probe().execute_script("CREATE TABLE " + effects + " (msg VARCHAR(255) NOT NULL, who VARCHAR(64) NOT NULL)");
    probe().execute_script("CREATE TABLE " + counter + " (id INTEGER NOT NULL PRIMARY KEY, n INTEGER NOT NULL)");
    probe().execute("INSERT INTO " + counter + " (id, n) VALUES (1, 0)");
  }
  std::int64_t effect_rows() const { return query_int("SELECT COUNT(*) FROM " + effects); }
  std::int64_t distinct_effects() const { return query_int("SELECT COUNT(DISTINCT msg) FROM " + effects); }
  std::int64_t count() const { return query_int("SELECT n FROM " + counter + " WHERE id = 1"); }
  // The business write every handler does.
  void apply(Transaction& tx, const std::string& msg) const {
    tx.execute("INSERT INTO " + effects + " (msg, who) VALUES (?, ?)", {msg, "test"});
    tx.execute("UPDATE " + counter + " SET n = n + 1 WHERE id = 1");
  }
};

std::int64_t dedup_rows(const std::string& consumer, const std::string& msg) {
  return query_int("SELECT COUNT(*) FROM sqlguard_inbox WHERE consumer = ? AND message_id = ?", {consumer, msg});
}

std::string csv(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += i + ",";
  return out;
}

// M distinct messages, 30% of them delivered a second time, shuffled.
std::vector<std::string> deliveries(int m, std::mt19937& rng) {
  std::vector<std::string> d;
  for (int i = 0; i < m; ++i) d.push_back("msg-" + std::to_string(i));
  for (int i = 0; i < m; ++i)
    if (std::uniform_int_distribution<int>(0, 99)(rng) < 30) d.push_back("msg-" + std::to_string(i));
  std::shuffle(d.begin(), d.end(), rng);
  return d;
}

std::vector<std::vector<std::string>> consumer_argvs(const std::string& consumer, const Tables& t,
                                                     const std::vector<std::string>& d, int procs,
                                                     const std::vector<int>& crash_after) {
  std::vector<std::vector<std::string>> parts(static_cast<std::size_t>(procs));
  for (std::size_t i = 0; i < d.size(); ++i) parts[i % static_cast<std::size_t>(procs)].push_back(d[i]);
  std::vector<std::vector<std::string>> argvs;
  for (int p = 0; p < procs; ++p)
    argvs.push_back({sgtest::worker_path(), "inbox-consume", ctx().uri, consumer, t.effects, t.counter,
                     csv(parts[static_cast<std::size_t>(p)]), std::to_string(crash_after[static_cast<std::size_t>(p)])});
  return argvs;
}

}  // namespace

TEST_CASE("a message is processed once and its redelivery is a Duplicate that skips the handler", "[inbox]") {
  Tables t;
  auto conn = ctx().connect();
  std::string consumer = ctx().unique("billing");
  Inbox inbox(*conn);
  int calls = 0;
  auto h = [&](Transaction& tx) {
    ++calls;
    t.apply(tx, "m1");
  };
  auto first = inbox.process(consumer, "m1", h);
  CHECK(first.outcome == InboxOutcome::kProcessed);
  CHECK(first.attempts == 1);
  auto again = inbox.process(consumer, "m1", h);
  CHECK(again.outcome == InboxOutcome::kDuplicate);
  CHECK(to_string(again.outcome) == "duplicate");
  CHECK(calls == 1);
  CHECK(t.effect_rows() == 1);
  CHECK(t.count() == 1);
  CHECK(dedup_rows(consumer, "m1") == 1);
  CHECK_FALSE(conn->in_transaction());
}

TEST_CASE("a handler that throws leaves neither the effect nor the dedup row, and the redelivery processes it",
          "[inbox]") {
  Tables t;
  auto conn = ctx().connect();
  std::string consumer = ctx().unique("billing");
  Inbox inbox(*conn);
  CHECK_THROWS_WITH(inbox.process(consumer, "m1",
                                  [&](Transaction& tx) {
                                    t.apply(tx, "m1");
                                    throw std::runtime_error("downstream failed");
                                  }),
                    "downstream failed");
  CHECK_FALSE(conn->in_transaction());
  CHECK(t.effect_rows() == 0);
  CHECK(t.count() == 0);
  CHECK(dedup_rows(consumer, "m1") == 0);
  CHECK(inbox.process(consumer, "m1", [&](Transaction& tx) { t.apply(tx, "m1"); }).outcome ==
        InboxOutcome::kProcessed);
  CHECK(t.effect_rows() == 1);
}

TEST_CASE("business writes through the native handle commit and roll back with the dedup row", "[inbox]") {
  auto conn = ctx().connect();
  std::string table = ctx().unique("native_fx");
  conn->execute_script("CREATE TABLE " + table + " (msg VARCHAR(64) NOT NULL)");
  std::string consumer = ctx().unique("native");
  Inbox inbox(*conn);
  auto native_insert = [&](Transaction& tx, const std::string& msg) {
    std::string sql = "INSERT INTO " + table + " (msg) VALUES ('" + msg + "')";  // test constants only
    switch (tx.connection().kind()) {
      case DialectKind::kSqlite:
#ifdef SQLGUARD_TEST_SQLITE
        REQUIRE(sqlite3_exec(sqlite::native_handle(tx.connection()), sql.c_str(), nullptr, nullptr, nullptr) ==
                SQLITE_OK);
#endif
        break;
      case DialectKind::kPostgresql:
#ifdef SQLGUARD_TEST_POSTGRESQL
        postgresql::native_transaction(tx.connection()).exec(sql);
#endif
        break;
      case DialectKind::kMysql:
#ifdef SQLGUARD_TEST_MYSQL
      {
        std::unique_ptr<sql::Statement> st(mysql::native_handle(tx.connection())->createStatement());
        st->execute(sql);
      }
#endif
      break;
    }
  };
  CHECK(inbox.process(consumer, "ok", [&](Transaction& tx) { native_insert(tx, "ok"); }).outcome ==
        InboxOutcome::kProcessed);
  CHECK_THROWS(inbox.process(consumer, "bad", [&](Transaction& tx) {
    native_insert(tx, "bad");
    throw std::runtime_error("after the native write");
  }));
  CHECK(query_int("SELECT COUNT(*) FROM " + table + " WHERE msg = 'ok'") == 1);
  CHECK(query_int("SELECT COUNT(*) FROM " + table + " WHERE msg = 'bad'") == 0);
  CHECK(dedup_rows(consumer, "ok") == 1);
  CHECK(dedup_rows(consumer, "bad") == 0);
}

TEST_CASE("consumers are separate: the same message id is processed once per consumer", "[inbox]") {
  Tables t;
  auto conn = ctx().connect();
  std::string a = ctx().unique("billing"), b = ctx().unique("shipping");
  Inbox inbox(*conn);
  auto h = [&](Transaction& tx) { t.apply(tx, "m"); };
  CHECK(inbox.process(a, "m", h).outcome == InboxOutcome::kProcessed);
  CHECK(inbox.process(b, "m", h).outcome == InboxOutcome::kProcessed);
  CHECK(inbox.process(a, "m", h).outcome == InboxOutcome::kDuplicate);
  CHECK(t.count() == 2);
}

TEST_CASE("two concurrent deliveries of one message apply its effect once", "[inbox]") {
  Tables t;
  std::string consumer = ctx().unique("billing");
  std::promise<void> in_handler, second_started;
  auto started_f = second_started.get_future().share();
  auto first = std::async(std::launch::async, [&] {
    auto conn = ctx().connect();
    Inbox inbox(*conn);
    return inbox.process(consumer, "m", [&](Transaction& tx) {
      t.apply(tx, "m");
      in_handler.set_value();
      started_f.wait_for(30s);
      // Usually lets the second delivery block on the dedup row; the outcome
      // must be the same either way.
      std::this_thread::sleep_for(100ms);
    });
  });
  REQUIRE(in_handler.get_future().wait_for(30s) == std::future_status::ready);
  auto conn = ctx().connect();
  Inbox inbox(*conn);
  int second_calls = 0;
  second_started.set_value();
  auto second = inbox.process(consumer, "m", [&](Transaction& tx) {
    ++second_calls;
    t.apply(tx, "m");
  });
  auto r1 = first.get();
  CHECK(r1.outcome == InboxOutcome::kProcessed);
  CHECK(second.outcome == InboxOutcome::kDuplicate);
  CHECK(second_calls == 0);
  CHECK(t.effect_rows() == 1);
  CHECK(t.count() == 1);
}

TEST_CASE("a Conflict inside the handler is retried in a fresh transaction; the last one propagates", "[inbox]") {
  Tables t;
  auto conn = ctx().connect();
  std::string consumer = ctx().unique("billing");
  Inbox inbox(*conn);
  int calls = 0;
  auto r = inbox.process(consumer, "m", [&](Transaction& tx) {
    t.apply(tx, "m");
    if (++calls == 1) throw Error(ErrorCode::kConflict, "simulated deadlock");
  });
  CHECK(r.outcome == InboxOutcome::kProcessed);
  CHECK(r.attempts == 2);
  CHECK(t.count() == 1);

  InboxOptions o;
  o.max_attempts = 2;
  Inbox limited(*conn, o);
  calls = 0;
  CHECK(code_of([&] {
          limited.process(consumer, "m2", [&](Transaction& tx) {
            t.apply(tx, "m2");
            ++calls;
            throw Error(ErrorCode::kConflict, "simulated deadlock");
          });
        }) == ErrorCode::kConflict);
  CHECK(calls == 2);
  CHECK(t.count() == 1);
  CHECK(dedup_rows(consumer, "m2") == 0);
}

TEST_CASE("M messages with 30% redelivery to 4 concurrent consumer processes apply each effect exactly once",
          "[inbox]") {
  Tables t;
  std::string consumer = ctx().unique("billing");
  std::mt19937 rng(Catch::rngSeed() + 1);
  const int m = 60;
  auto d = deliveries(m, rng);
  std::vector<std::string> outs;
  auto rcs = sgtest::run_parallel(consumer_argvs(consumer, t, d, 4, {0, 0, 0, 0}), &outs);
  int processed = 0, duplicate = 0;
  for (std::size_t i = 0; i < rcs.size(); ++i) {
    CHECK(rcs[i] == 0);
    std::istringstream in(outs[i]);
    std::string msg, outcome;
    int attempts;
    while (in >> msg >> outcome >> attempts) {
      processed += outcome == "processed";
      duplicate += outcome == "duplicate";
    }
  }
  CHECK(processed == m);
  CHECK(duplicate == static_cast<int>(d.size()) - m);
  CHECK(t.effect_rows() == m);
  CHECK(t.distinct_effects() == m);
  CHECK(t.count() == m);
}

TEST_CASE("consumers killed mid-transaction leave no partial effect and redelivery applies every message once",
          "[inbox]") {
  Tables t;
  std::string consumer = ctx().unique("billing");
  std::mt19937 rng(Catch::rngSeed() + 2);
  const int m = 60;
  auto d = deliveries(m, rng);
  std::vector<int> crash_after;
  for (int p = 0; p < 4; ++p) crash_after.push_back(std::uniform_int_distribution<int>(1, 6)(rng));
  std::vector<std::string> outs;
  auto rcs = sgtest::run_parallel(consumer_argvs(consumer, t, d, 4, crash_after), &outs);
  int crashed = 0;
  for (int rc : rcs) {
    CHECK((rc == 0 || rc == 3));
    crashed += rc == 3;
  }
  CHECK(crashed >= 1);
  // Whatever committed has its dedup row and nothing else did.
  CHECK(t.effect_rows() == t.distinct_effects());
  CHECK(t.effect_rows() == query_int("SELECT COUNT(*) FROM sqlguard_inbox WHERE consumer = ?", {consumer}));
  CHECK(t.count() == t.effect_rows());
  CHECK(t.effect_rows() < m);

  // The broker redelivers everything that was not acknowledged (here: all).
  auto again = sgtest::run_parallel(consumer_argvs(consumer, t, d, 2, {0, 0}), &outs);
  for (int rc : again) CHECK(rc == 0);
  CHECK(t.effect_rows() == m);
  CHECK(t.distinct_effects() == m);
  CHECK(t.count() == m);
}

TEST_CASE("inbox retention cleanup removes only expired rows and a message redelivered after it is processed again",
          "[inbox]") {
  Tables t;
  auto conn = ctx().connect();
  std::string consumer = ctx().unique("billing");
  InboxOptions brief_opt;
  brief_opt.retention = 1ms;
  Inbox brief(*conn, brief_opt);
  Inbox normal(*conn);
  auto h = [&](Transaction& tx) { t.apply(tx, "x"); };
  REQUIRE(brief.process(consumer, "old-1", h).outcome == InboxOutcome::kProcessed);
  REQUIRE(brief.process(consumer, "old-2", h).outcome == InboxOutcome::kProcessed);
  REQUIRE(normal.process(consumer, "recent", h).outcome == InboxOutcome::kProcessed);
  std::int64_t until = conn->execute("SELECT MAX(expire_at) FROM sqlguard_inbox WHERE consumer = ? AND message_id "
                                     "LIKE 'old%'", {consumer}).rows.at(0)[0].as_int();
  while (conn->db_now_ms() <= until) std::this_thread::sleep_for(2ms);
  CHECK(purge_expired_inbox_messages(*conn, 1) >= 2);
  CHECK(dedup_rows(consumer, "old-1") == 0);
  CHECK(dedup_rows(consumer, "old-2") == 0);
  CHECK(dedup_rows(consumer, "recent") == 1);
  CHECK(normal.process(consumer, "recent", h).outcome == InboxOutcome::kDuplicate);
  CHECK(normal.process(consumer, "old-1", h).outcome == InboxOutcome::kProcessed);
  CHECK(t.count() == 4);
  CHECK(code_of([&] { purge_expired_inbox_messages(*conn, 0); }) == ErrorCode::kInvalidArgument);
}

TEST_CASE("an empty consumer, an oversize message id and process inside a transaction are refused", "[inbox]") {
  auto conn = ctx().connect();
  Inbox inbox(*conn);
  auto h = [](Transaction&) {};
  std::string what;
  CHECK(code_of([&] { inbox.process("", "m", h); }, &what) == ErrorCode::kInvalidArgument);
  CHECK_THAT(what, Contains("inbox consumer"));
  CHECK(code_of([&] { inbox.process("c", std::string(256, 'm'), h); }, &what) == ErrorCode::kInvalidArgument);
  CHECK_THAT(what, Contains("inbox message id"));
  CHECK(code_of([&] { inbox.process(std::string(129, 'c'), "m", h); }) == ErrorCode::kInvalidArgument);
  std::string consumer = ctx().unique("c");
  CHECK(inbox.process(consumer, std::string(255, 'm'), h).outcome == InboxOutcome::kProcessed);
  {
    Transaction tx(*conn);
    CHECK(code_of([&] { inbox.process(consumer, "m", h); }) == ErrorCode::kInvalidArgument);
  }
  InboxOptions bad;
  bad.max_attempts = 0;
  CHECK(code_of([&] { Inbox x(*conn, bad); }) == ErrorCode::kInvalidArgument);
  bad = {};
  bad.retention = 0ms;
  CHECK(code_of([&] { Inbox x(*conn, bad); }) == ErrorCode::kInvalidArgument);
}
