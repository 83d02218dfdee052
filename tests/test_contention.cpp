// Contention: a busy acquire attempt is a read on every dialect -- it writes
// nothing, takes no row lock and no write lock -- so a hot lock does not
// slow its holder down. Performance itself is measured by `sqlguard bench`
// (lease-hot, handoff); these tests assert the behaviour behind it.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <thread>

#include "sqlguard/lease_lock.h"
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
  if (!ctx().is(DialectKind::kPostgres)) {
    SUCCEED("pg_stat_wal is PostgreSQL's; the other dialects have their own test below");
    return;
  }
  auto holder_conn = ctx().connect(), loser_conn = ctx().connect(), stats = ctx().connect();
  const auto name = ctx().unique("hot");
  LeaseLock holder(*holder_conn, name);
  REQUIRE(holder.try_acquire());
  LeaseLock loser(*loser_conn, name);
  REQUIRE_FALSE(loser.try_acquire());  // warm: statements prepared

  const auto wal0 = pg_wal_bytes(*stats);
  const auto xid0 = pg_next_xid(*stats);
  for (int i = 0; i < 1000; ++i) REQUIRE_FALSE(loser.try_acquire());
  const auto wal1 = pg_wal_bytes(*stats);
  const auto xid1 = pg_next_xid(*stats);
  INFO("WAL bytes " << wal1 - wal0 << ", transaction ids " << xid1 - xid0);
  CHECK(wal1 - wal0 <= 8192);  // background activity only (a record per attempt would be >= 50 kB)
  CHECK(xid1 - xid0 <= 10);

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
  if (ctx().is(DialectKind::kPostgres)) loser_conn->execute("SET lock_timeout = '3s'");
  auto t0 = std::chrono::steady_clock::now();
  bool got = true;
  REQUIRE_NOTHROW(got = loser.try_acquire());
  auto took = std::chrono::steady_clock::now() - t0;
  CHECK_FALSE(got);
  CHECK(took < 2s);  // a functional bound: a locking attempt would wait the full 3 s

  // Negative control: a write to that row (or database) really does wait.
  auto other = ctx().connect(sqlguard::ConnectOptions{10s, 1s, std::nullopt});
  if (ctx().is(DialectKind::kMysql)) other->execute("SET SESSION innodb_lock_wait_timeout = 1");
  if (ctx().is(DialectKind::kPostgres)) other->execute("SET lock_timeout = '1s'");
  auto c = sgtest::code_of([&] { force_release(*other, name); });
  CHECK((c == ErrorCode::kLockBusy || c == ErrorCode::kTimeout));
  blocker->rollback();
  CHECK(holder.release());
}
