// Contention: a busy acquire attempt is a read on every dialect -- it writes
// nothing, takes no row lock and no write lock -- so a hot lock does not
// slow its holder down. Performance itself is measured by `sqlguard bench`
// (lease-hot, handoff); these tests assert the behaviour behind it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
#include <thread>

#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"
#include "sql_audit.h"
#include "test_context.h"
#include "test_helpers.h"

using namespace sqlguard;
using namespace std::chrono_literals;
using sgtest::ctx;

namespace {
// The WAL insert position in bytes: immediate and cluster-wide (pg_stat_wal
// counters are flushed by each backend at most once a second).
std::int64_t pg_wal_bytes(Connection& c) {
  return c.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::BIGINT").rows.at(0)[0].as_int();
}
std::int64_t pg_next_xid(Connection& c) {
  return c.execute("SELECT txid_snapshot_xmax(txid_current_snapshot())").rows.at(0)[0].as_int();
}
}  // namespace

TEST_CASE("on PostgreSQL 1000 busy acquire attempts write no WAL and take no transaction id, unlike an upsert", "[lease][contention]") {
  if (!ctx().is(DialectKind::kPostgresql)) {
    SUCCEED("pg_stat_wal is PostgreSQL's; the other dialects have their own test below");
    return;
  }
  auto holder_conn = ctx().connect(), loser_conn = ctx().connect(), stats = ctx().connect();
  const auto name = ctx().unique("hot");
  LeaseLock holder(*holder_conn, name);
  REQUIRE(holder.try_acquire());
  LeaseLock loser(*loser_conn, name);
  REQUIRE_FALSE(loser.try_acquire());  // warm: statements prepared

  // Two rounds of 1000, the smaller WAL growth counts: a timed checkpoint
  // that lands in one round makes the next reads of its pages write full
  // page images for their hint bits (80 kB once, through PgBouncer in CI);
  // a record per attempt would put both rounds over 50 kB.
  std::int64_t wal = -1, xids = -1;
  for (int round = 0; round < 2 && (wal < 0 || wal > 8192); ++round) {
    const auto wal0 = pg_wal_bytes(*stats);
    const auto xid0 = pg_next_xid(*stats);
    for (int i = 0; i < 1000; ++i) REQUIRE_FALSE(loser.try_acquire());
    const auto w = pg_wal_bytes(*stats) - wal0;
    const auto x = pg_next_xid(*stats) - xid0;
    UNSCOPED_INFO("round " << round + 1 << ": WAL bytes " << w << ", transaction ids " << x);
    if (wal < 0 || w < wal) wal = w, xids = x;
  }
  CHECK(wal <= 8192);  // background activity only
  CHECK(xids <= 10);

  // Negative control: the upsert this replaced (ON CONFLICT DO UPDATE ...
  // WHERE false) locks the row and writes WAL on every busy attempt.
  const auto ctl0 = pg_wal_bytes(*stats);
  for (int i = 0; i < 200; ++i)
    loser_conn->execute(
        "INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at) VALUES (?, 'x', 0, 0, 0, 0) "
        "ON CONFLICT (name) DO UPDATE SET owner = excluded.owner WHERE sqlguard_lock.expire_at < 0",
        {name});
  CHECK(pg_wal_bytes(*stats) - ctl0 >= 200 * 40);
  CHECK(holder.release());
}

TEST_CASE("a busy acquire attempt takes no lock: it answers at once while the lock row or database is write-locked",
          "[lease][contention]") {
  auto holder_conn = ctx().connect(), loser_conn = ctx().connect(), blocker = ctx().connect();
  const auto name = ctx().unique("hot");
  LeaseLock holder(*holder_conn, name);
  REQUIRE(holder.try_acquire());
  LeaseLock loser(*loser_conn, name);
  REQUIRE_FALSE(loser.try_acquire());

  // Another session write-locks the lock row (MariaDB, PostgreSQL) or the
  // whole database (SQLite) and keeps its transaction open.
  if (ctx().is_sqlite()) {
    blocker->begin();  // BEGIN IMMEDIATE: the database write lock
  } else {
    blocker->begin();
    REQUIRE(blocker->execute("SELECT name FROM sqlguard_lock WHERE name = ? FOR UPDATE", {name}).rows.size() == 1);
  }
  // Waits would now last the lock wait / busy timeout (set to 3 s).
  if (ctx().is(DialectKind::kMysql)) loser_conn->execute("SET SESSION innodb_lock_wait_timeout = 3");
  if (ctx().is(DialectKind::kPostgresql)) loser_conn->execute("SET lock_timeout = '3s'");
  auto t0 = std::chrono::steady_clock::now();
  bool got = true;
  REQUIRE_NOTHROW(got = loser.try_acquire());
  auto took = std::chrono::steady_clock::now() - t0;
  CHECK_FALSE(got);
  CHECK(took < 2s);  // a functional bound: a locking attempt would wait the full 3 s

  // Negative control: a write to that row (or database) really does wait.
  auto other = ctx().connect(sqlguard::ConnectOptions{10s, 1s, std::nullopt});
  if (ctx().is(DialectKind::kMysql)) other->execute("SET SESSION innodb_lock_wait_timeout = 1");
  if (ctx().is(DialectKind::kPostgresql)) other->execute("SET lock_timeout = '1s'");
  auto c = sgtest::code_of([&] { force_release(*other, name); });
  CHECK((c == ErrorCode::kLockBusy || c == ErrorCode::kTimeout));
  blocker->rollback();
  CHECK(holder.release());
}

namespace {
// WAL writes (XLogWrite calls) counted by pg_stat_wal after `conn` closes: a
// backend reports its WAL counters at exit, so wait until it is gone.
std::int64_t pg_wal_writes_after_close(std::unique_ptr<Connection> conn, Connection& stats) {
  const auto pid = conn->session_id();
  conn.reset();
  for (int i = 0; i < 200; ++i) {
    if (stats.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ?", {pid}).rows.at(0)[0].as_int() == 0) break;
    std::this_thread::sleep_for(10ms);
  }
  return stats.execute("SELECT wal_write FROM pg_stat_wal").rows.at(0)[0].as_int();
}
}  // namespace

TEST_CASE("on PostgreSQL a release on its own does not wait for a WAL flush unless asked to be durable; an acquire does",
          "[lease][contention]") {
  if (!ctx().is(DialectKind::kPostgresql)) {
    SUCCEED("synchronous_commit is PostgreSQL's (MariaDB's flush is server-wide, SQLite runs synchronous=NORMAL)");
    return;
  }
  if (ctx().pooler) {
    // The count needs a session-level SET and the backend's exit (its WAL
    // counters); behind a transaction pooler neither is the client's. The
    // release statement is the same there (set_config is transaction-local).
    SUCCEED("measured on a direct connection");
    return;
  }
  auto stats = ctx().connect();
  const auto name = ctx().unique("relflush");
  constexpr int kCycles = 100;
  auto cycles = [&](ReleaseCommit commit) {
    auto c = ctx().connect();
    c->execute("SET synchronous_commit = on");  // the test server runs with it off
    const auto before = pg_wal_writes_after_close(ctx().connect(), *stats);
    for (int i = 0; i < kCycles; ++i) {
      const auto owner = "relflush-" + std::to_string(i);
      auto got = acquire_lease(*c, name, owner, 30s);
      REQUIRE(got.acquired);
      REQUIRE(release_lease(*c, name, owner, got.fence, commit));
    }
    return pg_wal_writes_after_close(std::move(c), *stats) - before;
  };
  const auto with_async_release = cycles(ReleaseCommit::kCoveredByNextAcquire);
  const auto with_durable_release = cycles(ReleaseCommit::kDurable);
  INFO("WAL writes for " << kCycles << " cycles: " << with_async_release << " (release as shipped), "
                         << with_durable_release << " (ReleaseCommit::kDurable)");
  CHECK(with_durable_release >= 2 * kCycles);  // one flush per acquire and one per release
  CHECK(with_async_release < kCycles + kCycles / 2);  // acquires only, plus background writes

  // Inside a caller's transaction the release leaves synchronous_commit alone.
  auto c = ctx().connect();
  c->execute("SET synchronous_commit = on");
  LeaseLock lock(*c, name);
  REQUIRE(lock.try_acquire());
  c->begin();
  REQUIRE(lock.release());
  CHECK(c->execute("SELECT current_setting('synchronous_commit')").rows.at(0)[0].as_string() == "on");
  c->commit();

  // A LeaseLock asked for durable releases sends the flushed form.
  std::vector<std::string> sent;
  c->set_statement_observer([&](const StatementEvent& e) { sent.emplace_back(e.catalog_name); });
  LeaseOptions durable;
  durable.release_commit = ReleaseCommit::kDurable;
  LeaseLock dlock(*c, name, durable);
  REQUIRE(dlock.try_acquire());
  REQUIRE(dlock.release());
  c->set_statement_observer({});
  CHECK(std::find(sent.begin(), sent.end(), "lease_release_flushed") != sent.end());
  CHECK(std::find(sent.begin(), sent.end(), "lease_release") == sent.end());
}

TEST_CASE("a lock cycle costs the fewest round trips: take-over and fence in one statement on every dialect",
          "[lease][contention]") {
  auto c = ctx().connect();
  const auto name = ctx().unique("rt");
  {
    LeaseLock warm(*c, name);  // the row exists: later cycles are take-overs
    REQUIRE(warm.try_acquire());
    REQUIRE(warm.release());
  }
  std::vector<std::string> sent;
  c->set_statement_observer([&](const StatementEvent& e) {
    sent.push_back(e.catalog_name.empty() ? std::string(e.sql.substr(0, 40)) : std::string(e.catalog_name));
  });
  LeaseLock lock(*c, name);
  REQUIRE(lock.try_acquire());
  REQUIRE(lock.release());
  c->set_statement_observer({});
  std::string list;
  for (const auto& s : sent) list += s + " ";
  INFO("sent: " << list);
  if (ctx().is(DialectKind::kPostgresql)) {
    // UPDATE ... RETURNING fence; release with the NOTIFY inside.
    CHECK(sent == std::vector<std::string>{"lease_acquire", "lease_release"});
  } else if (ctx().is(DialectKind::kMysql)) {
    // Consistent precheck (a busy attempt stops there), then take-over + fence +
    // wake-up lock in one INSERT ... ON DUPLICATE KEY UPDATE ... RETURNING.
    CHECK(sent == std::vector<std::string>{"lease_precheck", "lease_take", "lease_release", "lease_wakeup_signal"});
  } else {
    CHECK(sent == std::vector<std::string>{"lease_precheck", "lease_take_expired", "lease_release"});
  }
}

TEST_CASE("a fair lease's turn goes straight to the take when the gate's read saw the lease free; held by another, "
          "the turn reads first (MariaDB: lease_precheck)",
          "[lease][contention][fair]") {
  // A fair lease needs a lock client: its statements are counted by the
  // suite's statement audit (every connection's), as deltas per entry.
  auto client = LockClient::create(ctx().uri);
  const auto name = ctx().unique("fairrt");
  LeaseOptions fair;
  fair.fair = true;
  {
    LeaseLock warm(client, name, fair);  // the row exists and is released
    REQUIRE(warm.try_acquire());
    REQUIRE(warm.release());
  }
  const std::string d = ctx().name + "/";
  std::map<std::string, std::size_t> before;
  auto mark = [&] { before = sgtest::sql_audit_counts(); };
  auto sent = [&](const char* entry) {
    auto now = sgtest::sql_audit_counts();
    return now[d + entry] - before[d + entry];
  };
  const bool mysql = ctx().is(DialectKind::kMysql);

  LeaseLock lock(client, name, fair);
  mark();
  REQUIRE(lock.try_acquire());
  CHECK(sent("fair_gate") >= 1);
  // MariaDB reads first only when it must; PostgreSQL's take is one
  // statement that reads too; SQLite's plan always reads first (no row
  // lock waits there).
  if (mysql) {
    CHECK(sent("lease_precheck") == 0);
    CHECK(sent("lease_take") == 1);
  }
  if (ctx().is(DialectKind::kPostgresql)) CHECK(sent("lease_precheck") == 0);

  // The control: the lease is held (by `lock`), so the other handle's turn
  // reads first and takes nothing.
  auto other_client = LockClient::create(ctx().uri);
  LeaseLock other(other_client, name, fair);
  mark();
  CHECK_FALSE(other.try_acquire());
  if (mysql) {
    CHECK(sent("lease_precheck") == 1);
    CHECK(sent("lease_take") == 0);
  }
  CHECK(lock.owns());
  REQUIRE(lock.release());
}

TEST_CASE("releases hand the lock down a queue of waiters, each woken at once", "[lease][contention][notify]") {
  if (ctx().pooler) {
    SUCCEED("behind a transaction pooler waiters poll (tested in test_lease_lock.cpp)");
    return;
  }
  auto c = ctx().connect();
  const auto name = ctx().unique("queue");
  LeaseLock holder(*c, name);
  REQUIRE(holder.try_acquire());
  constexpr int kWaiters = 3;
  std::atomic<int> started{0};
  std::vector<std::future<std::chrono::steady_clock::duration>> waiters;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kWaiters; ++i) {
    waiters.push_back(std::async(std::launch::async, [&] {
      auto wc = ctx().connect();
      LeaseOptions o;
      // A missed wake-up = a nap of up to 2 minutes. PostgreSQL wakes only
      // the head of the waiters (one listener: every NOTIFY signals every
      // listening backend); the others poll with their backoff, here 1 s.
      o.backoff_initial = o.backoff_max = ctx().is(DialectKind::kPostgresql) ? std::chrono::milliseconds(1000)
                                                                           : std::chrono::milliseconds(120000);
      LeaseLock w(*wc, name, o);
      ++started;
      if (!w.acquire(60s)) throw std::runtime_error("waiter timed out");
      const auto got = std::chrono::steady_clock::now() - t0;
      std::this_thread::sleep_for(50ms);
      if (!w.release()) throw std::runtime_error("waiter's lease lost");
      return got;
    }));
  }
  while (started < kWaiters) std::this_thread::sleep_for(5ms);
  std::this_thread::sleep_for(300ms);  // all three are waiting
  REQUIRE(holder.release());
  for (auto& w : waiters) {
    auto got = w.get();
    // Functional bound: every hand-off came from a wake-up, none from a poll.
    CHECK(got < 20s);
  }
  CHECK(std::chrono::steady_clock::now() - t0 < 20s);
}

TEST_CASE("on PostgreSQL waiters take their place in the queue inside their acquire attempts: one head, no extra statement",
          "[lease][contention][notify]") {
  if (!ctx().is(DialectKind::kPostgresql) || ctx().pooler) {
    SUCCEED("the waiter queue is PostgreSQL's (behind a transaction pooler waiters poll)");
    return;
  }
  auto c = ctx().connect();
  const auto name = ctx().unique("seat");
  // This lock's queue place only (class 'SQLG', key hashtext(channel) as an oid).
  const std::string places =
      "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 1397836871 AND granted AND "
      "objid::bigint = (hashtext(?)::bigint + 4294967296) % 4294967296";
  const Params channel{lease_wakeup_channel(name)};
  LeaseLock holder(*c, name);
  REQUIRE(holder.try_acquire());
  constexpr int kWaiters = 3;
  std::mutex mu;
  std::vector<std::string> sent;
  // The waiters' connections stay open until the end: a session lock left
  // behind would otherwise go with its session.
  std::vector<std::unique_ptr<Connection>> conns;
  for (int i = 0; i < kWaiters; ++i) {
    conns.push_back(ctx().connect());
    conns.back()->set_statement_observer([&](const StatementEvent& e) {
      std::lock_guard<std::mutex> lk(mu);
      sent.push_back(e.catalog_name.empty() ? std::string(e.sql.substr(0, 40)) : std::string(e.catalog_name));
    });
  }
  std::atomic<int> started{0};
  std::vector<std::future<bool>> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.push_back(std::async(std::launch::async, [&, i] {
      LeaseOptions o;
      o.backoff_initial = o.backoff_max = 300ms;
      o.barging_limit = std::chrono::hours(1);  // no next turn here (its statements: test_bounded_barging.cpp)
      LeaseLock w(*conns[static_cast<std::size_t>(i)], name, o);
      ++started;
      const bool got = w.acquire(30s);
      if (got) w.release();
      return got;
    }));
  }
  while (started < kWaiters) std::this_thread::sleep_for(5ms);
  std::this_thread::sleep_for(500ms);  // all three have tried and are waiting
  CHECK(c->execute(places, channel).rows.at(0)[0].as_int() == 1);  // exactly one head
  {
    std::lock_guard<std::mutex> lk(mu);
    std::string list;
    for (const auto& s : sent) list += s + " ";
    INFO("waiters sent: " << list);
    // Every catalog statement of a waiting waiter is an acquire attempt: the
    // queue rides in it (no statement of its own to join).
    for (const auto& s : sent) CHECK(s == "lease_acquire");
    CHECK(sent.size() >= static_cast<std::size_t>(kWaiters));
  }
  REQUIRE(holder.release());
  for (auto& w : waiters) CHECK(w.get());
  // Everyone left the queue, their sessions still open: no place stays taken.
  CHECK(c->execute(places, channel).rows.at(0)[0].as_int() == 0);
}
