// Row-lock scopes: wait / NOWAIT / SKIP LOCKED / shared, lock timeouts,
// rollback on scope exit, deadlocks, and multi-process job claiming.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <set>
#include <sstream>
#include <thread>

#include "sqlguard/row_lock.h"
#include "sqlguard/retry.h"
#ifdef SQLGUARD_TEST_SQLITE
#include "sqlguard/sqlite.h"
#endif
#include "test_context.h"

using namespace sqlguard;
using sgtest::ctx;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;

namespace {
std::string make_stock(Connection& c, int rows = 4) {
  std::string t = ctx().unique("rl_stock");
  c.execute_script("CREATE TABLE " + t + " (id INTEGER NOT NULL PRIMARY KEY, qty INTEGER NOT NULL)");
  for (int i = 1; i <= rows; ++i) c.execute("INSERT INTO " + t + " (id, qty) VALUES (?, ?)", {i, 10 * i});
  return t;
}
RowLockSpec spec(const std::string& t) { return {.table = t, .key_column = "id", .columns = {"qty"}}; }
std::int64_t qty(Connection& c, const std::string& t, int id) {
  return c.execute("SELECT qty FROM " + t + " WHERE id = ?", {id}).rows.at(0)[0].as_int();
}
RowLockOptions opts(LockWait w, LockStrength s = LockStrength::kExclusive) {
  RowLockOptions o;
  o.wait = w;
  o.strength = s;
  return o;
}
}  // namespace

TEST_CASE("a row-lock scope returns the locked row and rolls back on exit unless committed", "[rowlock]") {
  auto c = ctx().connect();
  auto t = make_stock(*c);
  RowLocker locker(*c, spec(t));
  {
    auto s = locker.lock(2);
    REQUIRE(s.status() == LockStatus::kLocked);
    REQUIRE(s.rows().size() == 1);
    CHECK(s.rows()[0][0].as_int() == 2);
    CHECK(s.rows()[0][1].as_int() == 20);
    s.execute("UPDATE " + t + " SET qty = 0 WHERE id = 2");
  }  // no commit: rolled back
  CHECK_FALSE(c->in_transaction());
  CHECK(qty(*c, t, 2) == 20);
  {
    auto s = locker.lock(2);
    s.execute("UPDATE " + t + " SET qty = 1 WHERE id = 2");
    s.commit();
    CHECK_FALSE(s.active());
  }
  CHECK(qty(*c, t, 2) == 1);
}

TEST_CASE("a row-lock scope on a missing key reports NotFound and keeps its transaction open", "[rowlock]") {
  auto c = ctx().connect();
  auto t = make_stock(*c);
  RowLocker locker(*c, spec(t));
  auto s = locker.lock(99);
  CHECK(s.status() == LockStatus::kNotFound);
  CHECK(s.active());
  s.execute("INSERT INTO " + t + " (id, qty) VALUES (99, 7)");
  s.commit();
  CHECK(qty(*c, t, 99) == 7);
}

TEST_CASE("a second scope on the same row waits, then proceeds and sees the first scope's write", "[rowlock]") {
  auto a = ctx().connect();
  auto t = make_stock(*a);
  auto b = ctx().connect();
  RowLocker la(*a, spec(t)), lb(*b, spec(t));
  auto s1 = la.lock(1);
  REQUIRE(s1);
  std::atomic<bool> done{false};
  LockStatus status = LockStatus::kBusy;
  std::int64_t seen = -1;
  std::string error;
  std::thread waiter([&] {
    try {
      RowLockOptions o;
      o.lock_timeout = 30s;
      auto s2 = lb.lock(1, o);
      status = s2.status();
      if (s2) seen = s2.rows()[0][1].as_int();
      s2.commit();
    } catch (const std::exception& e) {
      error = e.what();
    }
    done = true;
  });
  std::this_thread::sleep_for(300ms);
  CHECK_FALSE(done.load());  // still blocked behind s1
  s1.execute("UPDATE " + t + " SET qty = 99 WHERE id = 1");
  s1.commit();
  waiter.join();
  CHECK(error.empty());
  CHECK(status == LockStatus::kLocked);
  CHECK(seen == 99);  // it read the row after s1 committed: it really waited
}

TEST_CASE("NOWAIT fails fast with LockBusy while the row is locked and succeeds once it is free", "[rowlock]") {
  auto a = ctx().connect();
  auto t = make_stock(*a);
  auto b = ctx().connect();
  RowLocker la(*a, spec(t)), lb(*b, spec(t));
  auto s1 = la.lock(1);
  REQUIRE(s1);
  {
    auto s2 = lb.lock(1, opts(LockWait::kNoWait));
    CHECK(s2.status() == LockStatus::kBusy);
    CHECK_FALSE(s2);
    CHECK_FALSE(s2.active());
    REQUIRE(s2.busy_error());
    CHECK(s2.busy_error()->code() == ErrorCode::kLockBusy);
    CHECK_FALSE(b->in_transaction());
  }
  if (!ctx().is_sqlite()) {
    // Row granularity: another row is free (SQLite locks the whole database).
    auto s3 = lb.lock(2, opts(LockWait::kNoWait));
    CHECK(s3.status() == LockStatus::kLocked);
  }
  s1.commit();
  auto s4 = lb.lock(1, opts(LockWait::kNoWait));
  CHECK(s4.status() == LockStatus::kLocked);
}

TEST_CASE("a lock wait that exceeds the lock timeout reports LockBusy and restores the session setting", "[rowlock]") {
  auto a = ctx().connect();
  auto t = make_stock(*a);
  auto b = ctx().connect();
  auto session_setting = [&]() -> std::int64_t {
    if (ctx().is(DialectKind::kMysql)) return b->execute("SELECT @@SESSION.innodb_lock_wait_timeout").rows[0][0].as_int();
#ifdef SQLGUARD_TEST_SQLITE
    if (ctx().is_sqlite()) return sqlguard::sqlite::busy_timeout(*b).count();
#endif
    return 0;
  };
  auto before = session_setting();
  RowLocker la(*a, spec(t)), lb(*b, spec(t));
  auto s1 = la.lock(1);
  REQUIRE(s1);
  RowLockOptions o;
  o.lock_timeout = ctx().is(DialectKind::kMysql) ? 1s : 150ms;  // MySQL: whole seconds
  auto s2 = lb.lock(1, o);
  CHECK(s2.status() == LockStatus::kBusy);
  REQUIRE(s2.busy_error());
  CHECK(s2.busy_error()->code() == ErrorCode::kLockBusy);
  CHECK_FALSE(b->in_transaction());
  CHECK(session_setting() == before);
  // The setting is also restored after a successful scope.
  s1.commit();
  auto s3 = lb.lock(1, o);
  CHECK(s3);
  CHECK(session_setting() == before);
}

TEST_CASE("SKIP LOCKED claims the next unlocked rows, or is refused clearly where unsupported", "[rowlock]") {
  auto a = ctx().connect();
  auto t = make_stock(*a);
  auto b = ctx().connect();
  RowLocker la(*a, spec(t)), lb(*b, spec(t));
  if (!b->capabilities().skip_locked) {
    try {
      lb.claim(2, {}, opts(LockWait::kSkipLocked));
      FAIL("expected NotSupported");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::kNotSupported);
      CHECK_THAT(e.what(), Contains("SKIP LOCKED") && Contains(ctx().name));
    }
    CHECK_FALSE(b->in_transaction());
    return;
  }
  auto s1 = la.claim(1);  // locks id 1, the lowest key
  REQUIRE(s1.rows().size() == 1);
  CHECK(s1.rows()[0][0].as_int() == 1);
  auto s2 = lb.claim(2, {}, opts(LockWait::kSkipLocked));
  REQUIRE(s2.status() == LockStatus::kLocked);
  REQUIRE(s2.rows().size() == 2);
  CHECK(s2.rows()[0][0].as_int() == 2);
  CHECK(s2.rows()[1][0].as_int() == 3);
  // SKIP LOCKED on a single key would lock nothing silently: refused.
  CHECK_THROWS_AS(lb.lock(1, opts(LockWait::kSkipLocked)), Error);
}

TEST_CASE("shared row locks coexist and exclude writers (SQLite: one exclusive write lock)", "[rowlock]") {
  auto a = ctx().connect();
  auto t = make_stock(*a);
  auto b = ctx().connect();
  auto c = ctx().connect();
  RowLocker la(*a, spec(t)), lb(*b, spec(t)), lc(*c, spec(t));
  auto s1 = la.lock(1, opts(LockWait::kNoWait, LockStrength::kShared));
  REQUIRE(s1);
  auto s2 = lb.lock(1, opts(LockWait::kNoWait, LockStrength::kShared));
  if (c->capabilities().shared_row_locks) {
    CHECK(s2.status() == LockStatus::kLocked);
  } else {
    CHECK(s2.status() == LockStatus::kBusy);  // documented: stronger than asked
  }
  auto s3 = lc.lock(1, opts(LockWait::kNoWait));
  CHECK(s3.status() == LockStatus::kBusy);
}

TEST_CASE("opposite lock orders deadlock into a Conflict error for exactly one side", "[rowlock][deadlock]") {
  if (ctx().is_sqlite()) {
    SUCCEED("SQLite takes one database write lock up front: no lock-order deadlocks");
    return;
  }
  auto a = ctx().connect();
  auto t = make_stock(*a);
  auto b = ctx().connect();
  RowLocker la(*a, spec(t)), lb(*b, spec(t));
  std::atomic<int> locked{0};
  std::atomic<int> conflicts{0}, committed{0};
  std::string other_error;
  auto side = [&](RowLocker& l, int first, int second) {
    try {
      auto s = l.lock(first);
      ++locked;
      while (locked.load() < 2) std::this_thread::sleep_for(1ms);
      s.execute("UPDATE " + t + " SET qty = qty + 1 WHERE id = ?", {second});
      s.commit();
      ++committed;
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kConflict) ++conflicts;
      else other_error = e.what();
    }
  };
  std::thread ta([&] { side(la, 1, 2); });
  std::thread tb([&] { side(lb, 2, 1); });
  ta.join();
  tb.join();
  CHECK(other_error.empty());
  CHECK(conflicts == 1);
  CHECK(committed == 1);
  CHECK_FALSE(a->in_transaction());
  CHECK_FALSE(b->in_transaction());
}

TEST_CASE("row-lock options and identifiers are validated with clear errors", "[rowlock]") {
  auto c = ctx().connect();
  CHECK_THROWS_WITH(RowLocker(*c, {.table = "stock; DROP TABLE x"}), Contains("RowLockSpec::table") && Contains("not a valid SQL identifier"));
  CHECK_THROWS_WITH(RowLocker(*c, {.table = "stock", .key_column = "id", .columns = {"a b"}}), Contains("RowLockSpec::columns"));
  auto t = make_stock(*c);
  RowLocker l(*c, spec(t));
  RowLockOptions o;
  o.lock_timeout = 0ms;
  CHECK_THROWS_WITH(l.lock(1, o), Contains("lock_timeout"));
  CHECK_THROWS_WITH(l.claim(0), Contains("limit"));
  CHECK_THROWS_WITH(l.claim(1, {"x"}), Contains("filter"));
  Transaction tx(*c);
  CHECK_THROWS_WITH(l.lock(1), Contains("already in a transaction"));
}

TEST_CASE("four worker processes claiming jobs with SKIP LOCKED never claim the same job twice", "[rowlock][multiprocess]") {
  auto c = ctx().connect();
  if (!c->capabilities().skip_locked) {
    SUCCEED("SKIP LOCKED is not supported on " + ctx().name + " (refusal tested above)");
    return;
  }
  std::string jobs = ctx().unique("rl_jobs");
  c->execute_script("CREATE TABLE " + jobs +
                    " (id INTEGER NOT NULL PRIMARY KEY, status VARCHAR(16) NOT NULL, claimed_by INTEGER, claims INTEGER NOT NULL)");
  const int kJobs = 120, kWorkers = 4;
  {
    Transaction tx(*c);
    for (int i = 1; i <= kJobs; ++i)
      tx.execute("INSERT INTO " + jobs + " (id, status, claimed_by, claims) VALUES (?, 'pending', NULL, 0)", {i});
    tx.commit();
  }
  auto start = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count() + 300;
  std::vector<std::vector<std::string>> argv;
  for (int w = 0; w < kWorkers; ++w)
    argv.push_back({sgtest::worker_path(), "claim-jobs", ctx().uri, jobs, std::to_string(w), std::to_string(start)});
  std::vector<std::string> outs;
  auto rcs = sgtest::run_parallel(argv, &outs);
  std::multiset<int> claimed;
  int workers_with_jobs = 0;
  for (int w = 0; w < kWorkers; ++w) {
    CHECK(rcs[w] == 0);
    std::istringstream in(outs[w]);
    int id, n = 0;
    while (in >> id) claimed.insert(id), ++n;
    workers_with_jobs += n > 0;
  }
  CHECK(claimed.size() == kJobs);
  CHECK(std::set<int>(claimed.begin(), claimed.end()).size() == kJobs);  // no duplicates
  CHECK(sgtest::query_int("SELECT COUNT(*) FROM " + jobs + " WHERE claims = 1 AND status = 'done'") == kJobs);
  CHECK(workers_with_jobs >= 2);  // they really ran side by side
}
