// Lease lock: the invariants of design.md §3 on every dialect.
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "sqlguard/cleanup.h"
#include "sqlguard/fenced_write.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"
#include "sqlguard/metrics.h"
#include "sqlguard/migrate.h"
#include "sqlguard/semaphore.h"
#include "client/bounded_call.h"
#include "test_context.h"
#include "test_helpers.h"

using namespace sqlguard;
using namespace std::chrono_literals;
using sgtest::code_of;
using sgtest::ctx;
using std::chrono::milliseconds;

namespace {
LeaseOptions ttl(milliseconds t) {
  LeaseOptions o;
  o.ttl = t;
  return o;
}

// Captures log lines for the duration of a test.
struct LogCapture {
  std::mutex mu;
  std::vector<std::string> lines;
  LogCapture() {
    set_log_hook([this](LogLevel, std::string_view m) {
      std::lock_guard<std::mutex> lk(mu);
      lines.emplace_back(m);
    });
  }
  ~LogCapture() { set_log_hook(nullptr); }
  bool contains(const std::string& s) {
    std::lock_guard<std::mutex> lk(mu);
    return std::any_of(lines.begin(), lines.end(), [&](const auto& l) { return l.find(s) != std::string::npos; });
  }
};
}  // namespace

TEST_CASE("a second owner cannot acquire a held lock, and different names are independent", "[lease]") {
  auto c1 = ctx().connect();
  auto c2 = ctx().connect();
  auto name = ctx().unique("lk");
  LeaseLock a(*c1, name), b(*c2, name), other(*c2, name + "-other");
  REQUIRE(a.try_acquire());
  CHECK(a.owns());
  CHECK(a.fence() > 0);
  CHECK_FALSE(b.try_acquire());
  CHECK_FALSE(b.owns());
  CHECK(other.try_acquire());
  CHECK(a.release());
  CHECK(b.try_acquire());
  CHECK(b.fence() > a.fence());
}

TEST_CASE("a lease left unrenewed for its ttl goes to another owner whose earlier look started the watch", "[lease]") {
  auto c1 = ctx().connect();
  auto c2 = ctx().connect();
  auto name = ctx().unique("lk");
  LeaseLock a(*c1, name, ttl(200ms)), b(*c2, name, ttl(5s));
  REQUIRE(a.try_acquire());
  CHECK_FALSE(b.try_acquire());
  std::this_thread::sleep_for(300ms);
  CHECK_FALSE(a.owns());  // trust window over
  REQUIRE(b.try_acquire());
  CHECK(b.fence() > a.fence());
}

TEST_CASE("a pre-existing expired row is taken over with no duplicate-key error", "[lease]") {
  auto c = ctx().connect();
  auto name = ctx().unique("lk");
  c->execute("INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at, beat) "
             "VALUES (?, 'crashed-owner', 1, 0, 0, 0, 0, 0)", {name});  // released (beat 0)
  LeaseLock a(*c, name);
  REQUIRE(a.try_acquire());
  auto info = lease_info(*c, name);
  REQUIRE(info);
  CHECK(info->owner == a.owner());
  CHECK(info->owner != "crashed-owner");
}

TEST_CASE("release and renew by a non-owner return false and change nothing", "[lease]") {
  auto c = ctx().connect();
  auto name = ctx().unique("lk");
  auto got = acquire_lease(*c, name, "owner-a", 5s);
  REQUIRE(got.acquired);
  auto before = lease_info(*c, name);
  CHECK_FALSE(release_lease(*c, name, "owner-b"));
  CHECK_FALSE(renew_lease(*c, name, "owner-b", 60s));
  auto after = lease_info(*c, name);
  REQUIRE(after);
  CHECK(after->owner == "owner-a");
  CHECK(after->fence == before->fence);
  CHECK(after->expire_at_ms == before->expire_at_ms);
  CHECK(after->held());
}

TEST_CASE("release after expiry and take-over does not touch the new holder, and renew after loss fails", "[lease]") {
  LogCapture logs;
  auto c1 = ctx().connect();
  auto c2 = ctx().connect();
  auto name = ctx().unique("lk");
  LeaseLock a(*c1, name, ttl(150ms)), b(*c2, name, ttl(10s));
  REQUIRE(a.try_acquire());
  REQUIRE_FALSE(b.try_acquire());  // b's first look starts its watch of a's lease
  std::this_thread::sleep_for(250ms);
  REQUIRE(b.try_acquire());  // unrenewed for a's whole ttl: taken over
  CHECK_FALSE(a.renew());
  REQUIRE(a.last_loss());
  CHECK(a.last_loss()->cause == LossCause::kTakenOver);
  CHECK_FALSE(a.release());  // reported, not silent
  CHECK(logs.contains("no longer held"));
  auto info = lease_info(*c1, name);
  REQUIRE(info);
  CHECK(info->owner == b.owner());
  CHECK(info->held());
  CHECK(b.owns());
}

TEST_CASE("releasing a lock that was never acquired is reported", "[lease]") {
  LogCapture logs;
  auto c = ctx().connect();
  LeaseLock a(*c, ctx().unique("lk"));
  CHECK_FALSE(a.release());
  CHECK(logs.contains("does not hold"));
}

TEST_CASE("the same handle is re-entrant: n acquires need n releases", "[lease]") {
  auto c1 = ctx().connect();
  auto c2 = ctx().connect();
  auto name = ctx().unique("lk");
  LeaseLock a(*c1, name), b(*c2, name);
  REQUIRE(a.try_acquire());
  auto fence = a.fence();
  REQUIRE(a.try_acquire());
  REQUIRE(a.acquire(0ms));
  CHECK(a.hold_count() == 3);
  CHECK(a.fence() == fence);
  CHECK(a.release());
  CHECK(a.release());
  CHECK_FALSE(b.try_acquire());  // still held once
  CHECK(a.release());
  CHECK(a.hold_count() == 0);
  CHECK(b.try_acquire());
}

TEST_CASE("a minimum hold keeps the lease after an early release", "[lease]") {
  auto c1 = ctx().connect();
  auto c2 = ctx().connect();
  auto name = ctx().unique("lk");
  LeaseOptions o;
  o.ttl = 10s;
  o.min_hold = 600ms;
  LeaseLock a(*c1, name, o), b(*c2, name);
  REQUIRE(a.try_acquire());
  REQUIRE(a.release());
  CHECK_FALSE(b.try_acquire());
  std::this_thread::sleep_for(800ms);
  CHECK(b.try_acquire());
}

TEST_CASE("lease options and names are validated with clear errors", "[lease][validate]") {
  auto c = ctx().connect();
  auto bad = [&](LeaseOptions o) { return code_of([&] { LeaseLock l(*c, "x", o); }); };
  LeaseOptions o;
  o.ttl = 0ms;
  CHECK(bad(o) == ErrorCode::kInvalidArgument);
  o.ttl = -5s;
  CHECK(bad(o) == ErrorCode::kInvalidArgument);
  o = {};
  o.ttl = 30s;
  o.renew_period = 16s;  // > ttl/2
  CHECK(bad(o) == ErrorCode::kInvalidArgument);
  o.renew_period = 15s;
  CHECK_NOTHROW(LeaseLock(*c, "x", o));
  o = {};
  o.min_hold = 31s;
  CHECK(bad(o) == ErrorCode::kInvalidArgument);
  o = {};
  o.safety_margin = 20s;
  CHECK(bad(o) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { LeaseLock l(*c, ""); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { LeaseLock l(*c, std::string(256, 'n')); }) == ErrorCode::kInvalidArgument);
  // A 255-byte name works and is stored whole, never truncated.
  std::string base = ctx().unique("lk");
  std::string longest = base + std::string(255 - base.size(), 'z');
  LeaseLock l(*c, longest);
  REQUIRE(l.try_acquire());
  auto info = lease_info(*c, longest);
  REQUIRE(info);
  CHECK(info->name == longest);
  CHECK(code_of([&] { acquire_lease(*c, "x", "o", 0ms); }) == ErrorCode::kInvalidArgument);
}

TEST_CASE("the fence strictly increases across release, expiry, take-over, cleanup and reconnect", "[lease][fence]") {
  auto name = ctx().unique("lk");
  std::vector<std::int64_t> fences;
  {
    auto c = ctx().connect();
    LeaseLock a(*c, name, ttl(150ms));
    REQUIRE(a.try_acquire());
    fences.push_back(a.fence());
    REQUIRE(a.release());
    REQUIRE(a.try_acquire());  // after release
    fences.push_back(a.fence());
    LeaseLock b(*c, name, ttl(150ms));
    REQUIRE_FALSE(b.try_acquire());  // its first look starts the watch of a's lease
    std::this_thread::sleep_for(250ms);
    REQUIRE(b.try_acquire());  // take-over: unrenewed for a's whole ttl
    fences.push_back(b.fence());
    REQUIRE(b.release());  // cleanup deletes released rows only
    std::this_thread::sleep_for(20ms);
    CleanupOptions co;
    co.lock_grace = 0ms;
    co.idempotency = co.inbox = co.history = false;
    auto rep = cleanup(*c, co);
    CHECK(rep.locks_deleted >= 1);
    CHECK_FALSE(lease_info(*c, name));  // the row is gone
    LeaseLock d(*c, name, ttl(10s));
    REQUIRE(d.try_acquire());  // after the cleanup delete
    fences.push_back(d.fence());
    REQUIRE(d.release());
  }
  auto fresh = ctx().connect();  // reconnect
  LeaseLock e(*fresh, name);
  REQUIRE(e.try_acquire());
  fences.push_back(e.fence());
  for (std::size_t i = 1; i < fences.size(); ++i) {
    INFO("fences: " << fences[i - 1] << " then " << fences[i]);
    CHECK(fences[i] > fences[i - 1]);
  }
}

TEST_CASE("the fence keeps increasing across a database server restart", "[lease][fence][restart]") {
  const char* servers = std::getenv("SQLGUARD_DBSERVERS");
  if (ctx().is_sqlite() || !servers) {
    SUCCEED("needs a server and SQLGUARD_DBSERVERS (tools/dbservers.sh); SQLite state is the file itself");
    return;
  }
  auto name = ctx().unique("lk");
  std::int64_t before;
  {
    auto c = ctx().connect();
    LeaseLock a(*c, name);
    REQUIRE(a.try_acquire());
    before = a.fence();
    REQUIRE(a.release());
  }
  std::string which = ctx().is(DialectKind::kPostgresql) ? "pg" : "mariadb";
  REQUIRE(sgtest::run_process({"/bin/bash", servers, "restart", which}) == 0);
  auto c = ctx().connect();
  LeaseLock b(*c, name);
  REQUIRE(b.try_acquire());
  CHECK(b.fence() > before);
}

TEST_CASE("the watchdog keeps a lock for at least five times its TTL while work runs", "[lease][watchdog]") {
  auto c = ctx().connect();
  auto rival_conn = ctx().connect();
  auto name = ctx().unique("lk");
  std::atomic<int> losses{0};
  LeaseOptions o;
  // 600 ms: the trust window (540 ms) must cover the watchdog's first
  // connect, which took 0.2-0.4 s on a loaded 2-core machine.
  o.ttl = 600ms;
  o.watchdog_connection = [] { return ctx().connect(); };
  o.on_lost = [&](const LeaseLoss&) { ++losses; };
  LeaseLock a(*c, name, o);
  LeaseLock rival(*rival_conn, name, ttl(10s));
  REQUIRE(a.try_acquire());
  auto start = std::chrono::steady_clock::now();
  int rival_wins = 0;
  while (std::chrono::steady_clock::now() - start < 3100ms) {  // > 5 x TTL
    if (rival.try_acquire()) ++rival_wins;
    std::this_thread::sleep_for(50ms);
  }
  CHECK(rival_wins == 0);
  CHECK(a.owns());
  CHECK(losses == 0);
  CHECK(a.release());
}

TEST_CASE("a handle on a borrowed connection is the one handle of a lock client of its own: one engine renews it",
          "[lease][watchdog][lock-client]") {
  auto c = ctx().connect();
  auto name = ctx().unique("lk");
  LeaseOptions o = ttl(600ms);
  o.watchdog_connection = [] { return ctx().connect(); };
  LeaseLock a(*c, name, o);
  LeaseLock plain(*c, ctx().unique("lk"), ttl(10s));  // no watchdog_connection: nothing renews it
  REQUIRE(a.client());
  REQUIRE(plain.client());
  CHECK(a.client() != plain.client());  // a client of its own each, over the caller's connection
  auto s0 = a.client()->stats();
  CHECK(s0.threads == 0);  // no renewal thread before a renewed lease is held
  CHECK(s0.connections_open == 0);  // the borrowed connection is the caller's
  REQUIRE(a.try_acquire());
  REQUIRE(plain.try_acquire());
  std::this_thread::sleep_for(700ms);  // more than a ttl: renewed, or lost
  auto s = a.client()->stats();
  CHECK(s.held_leases == 1);
  CHECK(s.leases_renewed >= 2);  // every ttl/3
  CHECK(s.renewal_rounds >= 2);
  CHECK(s.threads >= 1);          // the client's one renewal thread (and the worker that bounds it)
  CHECK(s.connections_open == 1);  // its renewal connection, from watchdog_connection
  CHECK(a.owns());
  CHECK(plain.client()->stats().held_leases == 0);
  CHECK(plain.client()->stats().threads == 0);
  // A borrowed connection's client has no waiter thread: acquire_async is refused with a clear error.
  try {
    a.acquire_async(1s, [](bool, std::exception_ptr) {});
    FAIL("acquire_async on a borrowed connection must throw");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kNotSupported);
    CHECK(std::string(e.what()).find("borrows a connection") != std::string::npos);
  }
  // That client serves its one handle: another handle of it would share the caller's connection.
  CHECK(code_of([&] { LeaseLock other(a.client(), ctx().unique("lk")); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { Semaphore other(a.client(), ctx().unique("sem"), 2); }) == ErrorCode::kInvalidArgument);
  CHECK(a.release());
  CHECK(plain.release());
}

TEST_CASE("on_lost may destroy its own LeaseLock on a borrowed connection (the handle owns its client)",
          "[lease][watchdog][lock-client]") {
  auto c = ctx().connect();
  auto op = ctx().connect();
  auto name = ctx().unique("lk");
  std::unique_ptr<LeaseLock> a;
  std::promise<void> gone;
  LeaseOptions o = ttl(600ms);
  o.watchdog_connection = [] { return ctx().connect(); };
  o.on_lost = [&](const LeaseLoss&) {
    a.reset();  // on the client's renewal thread: the client must not join itself
    gone.set_value();
  };
  a = std::make_unique<LeaseLock>(*c, name, o);
  REQUIRE(a->try_acquire());
  REQUIRE(force_release(*op, name));
  REQUIRE(acquire_lease(*op, name, "rival", 30s).acquired);
  CHECK(gone.get_future().wait_for(5s) == std::future_status::ready);
  std::this_thread::sleep_for(100ms);  // the client is destroyed on a thread of its own meanwhile
  CHECK(lease_info(*op, name)->owner == "rival");
}

TEST_CASE("the watchdog reports a taken-over lease with its cause before the trust window ends", "[lease][watchdog]") {
  auto c = ctx().connect();
  auto op = ctx().connect();
  auto name = ctx().unique("lk");
  std::promise<LeaseLoss> lost;
  LeaseOptions o;
  o.ttl = 1500ms;
  o.watchdog_connection = [] { return ctx().connect(); };
  o.on_lost = [&](const LeaseLoss& l) { lost.set_value(l); };
  LeaseLock a(*c, name, o);
  REQUIRE(a.try_acquire());
  REQUIRE(force_release(*op, name));  // operator override
  REQUIRE(acquire_lease(*op, name, "intruder", 30s).acquired);
  auto f = lost.get_future();
  REQUIRE(f.wait_for(5s) == std::future_status::ready);
  auto l = f.get();
  CHECK(l.cause == LossCause::kTakenOver);
  CHECK(l.window_left > 0ms);
  CHECK(l.fence == a.fence());
  CHECK_FALSE(a.owns());
}

TEST_CASE("the watchdog reports a lease row deleted before its expiry as taken over, not expired",
          "[lease][watchdog]") {
  auto c = ctx().connect();
  auto op = ctx().connect();
  auto name = ctx().unique("lk");
  std::promise<LeaseLoss> lost;
  LeaseOptions o;
  o.ttl = 1500ms;
  o.watchdog_connection = [] { return ctx().connect(); };
  o.on_lost = [&](const LeaseLoss& l) { lost.set_value(l); };
  LeaseLock a(*c, name, o);
  REQUIRE(a.try_acquire());
  op->execute("DELETE FROM sqlguard_lock WHERE name = ?", {name});
  auto f = lost.get_future();
  REQUIRE(f.wait_for(5s) == std::future_status::ready);
  auto l = f.get();
  INFO(l.detail);
  CHECK(l.cause == LossCause::kTakenOver);
  CHECK(l.detail.find("row was deleted") != std::string::npos);
  CHECK(l.window_left > 0ms);
}

TEST_CASE("the watchdog reports an unreachable database before the trust window ends", "[lease][watchdog][faults]") {
  if (ctx().is_sqlite()) {
    SUCCEED("SQLite is embedded: there is no server to lose");
    return;
  }
  auto c = ctx().connect();
  auto killer = ctx().connect();
  auto name = ctx().unique("lk");
  std::promise<LeaseLoss> lost;
  std::atomic<int> factory_calls{0};
  std::atomic<std::int64_t> session{0};
  // The first watchdog connection is real; once it is killed, reconnecting
  // goes to a port where nothing listens: the database is unreachable.
  std::string dead = ctx().uri;
  auto at = dead.find('@');
  auto colon = dead.find(':', at);
  auto slash = dead.find('/', at);
  dead = dead.substr(0, colon) + ":1" + dead.substr(slash);
  LeaseOptions o;
  o.ttl = 1200ms;
  o.watchdog_connection = [&]() -> std::unique_ptr<Connection> {
    // Behind a transaction pooler the watchdog's connection owns no server
    // session to kill: the database is unreachable from its first connection.
    if (factory_calls++ == 0 && ctx().pooler) {
      session = -1;
      return make_connection(dead);
    }
    if (factory_calls == 1) {
      auto conn = ctx().connect();
      session = conn->session_id();
      return conn;
    }
    return make_connection(dead);
  };
  o.on_lost = [&](const LeaseLoss& l) { lost.set_value(l); };
  LeaseLock a(*c, name, o);
  REQUIRE(a.try_acquire());
  for (int i = 0; i < 100 && session == 0; ++i) std::this_thread::sleep_for(20ms);
  REQUIRE(session != 0);
  if (ctx().pooler) {
    // nothing to kill: the watchdog never reached the database (see above)
  } else if (ctx().is(DialectKind::kPostgresql)) killer->execute("SELECT pg_terminate_backend(?)", {session.load()});
  else killer->execute_script("KILL " + std::to_string(session.load()));
  auto f = lost.get_future();
  REQUIRE(f.wait_for(5s) == std::future_status::ready);
  auto l = f.get();
  CHECK((l.cause == LossCause::kUnreachable || l.cause == LossCause::kOutcomeUnknown));
  CHECK(l.window_left > 0ms);
  CHECK(factory_calls > 1);
  CHECK(lease_metrics().lost_unreachable + lease_metrics().lost_outcome_unknown >= 1);
}

TEST_CASE("a guarded transaction by a holder whose lease was taken over commits nothing", "[lease][guarded]") {
  auto c1 = ctx().connect();
  auto c2 = ctx().connect();
  auto name = ctx().unique("lk");
  std::string t = ctx().unique("guarded");
  c1->execute_script("CREATE TABLE " + t + " (id INTEGER NOT NULL PRIMARY KEY, v INTEGER NOT NULL)");
  LeaseLock a(*c1, name, ttl(5s));
  REQUIRE(a.try_acquire());
  CHECK(a.run_guarded([&](Transaction& tx) { tx.execute("INSERT INTO " + t + " (id, v) VALUES (1, 1)"); }));
  REQUIRE(force_release(*c2, name));
  REQUIRE(acquire_lease(*c2, name, "new-holder", 30s).acquired);
  bool ran = false;
  CHECK_FALSE(a.run_guarded([&](Transaction& tx) {
    ran = true;
    tx.execute("INSERT INTO " + t + " (id, v) VALUES (2, 2)");
  }));
  CHECK_FALSE(ran);
  CHECK(c2->execute("SELECT COUNT(*) FROM " + t).rows[0][0].as_int() == 1);
  REQUIRE(a.last_loss());
  CHECK(a.last_loss()->cause == LossCause::kTakenOver);
}

TEST_CASE("a guarded transaction blocks a take-over until it commits", "[lease][guarded]") {
  auto c1 = ctx().connect();
  auto name = ctx().unique("lk");
  LeaseLock a(*c1, name, ttl(400ms));
  REQUIRE(a.try_acquire());
  std::atomic<bool> in_tx{false};
  std::atomic<bool> committed{false};
  auto taker = std::async(std::launch::async, [&] {
    while (!in_tx) std::this_thread::sleep_for(5ms);
    auto c2 = ctx().connect();
    std::this_thread::sleep_for(500ms);  // the lease has expired on the DB clock by now
    // The take-over must wait for the guarded transaction (row lock / SQLite
    // write lock) and only then succeed.
    for (;;) {
      auto r = acquire_lease(*c2, name, "taker", 10s);
      if (r.acquired) return committed.load();
      std::this_thread::sleep_for(20ms);
    }
  });
  CHECK(a.run_guarded([&](Transaction&) {
    in_tx = true;
    std::this_thread::sleep_for(900ms);
    committed = true;
  }));
  CHECK(taker.get());  // the taker saw the guarded work committed first
}

TEST_CASE("the fenced-write helper rejects a stale token", "[lease][fence]") {
  auto c = ctx().connect();
  auto res = ctx().unique("resource");
  CHECK(fenced_write(*c, res, 5));
  CHECK(fenced_write(*c, res, 5));  // the same holder may write again
  CHECK(fenced_write(*c, res, 7));
  CHECK_FALSE(fenced_write(*c, res, 6));  // a paused old holder wakes up
  CHECK(fenced_write(*c, ctx().unique("other"), 1));
  {
    Transaction tx(*c);
    CHECK_FALSE(fenced_write(*c, res, 3));
    tx.rollback();
  }
  CHECK(code_of([&] { fenced_write(*c, res, 0); }) == ErrorCode::kInvalidArgument);
}

TEST_CASE("blocking acquire gets the lock once the holder releases it", "[lease][wait]") {
  auto c1 = ctx().connect();
  auto name = ctx().unique("lk");
  LeaseLock a(*c1, name);
  REQUIRE(a.try_acquire());
  auto waiter = std::async(std::launch::async, [&] {
    auto c2 = ctx().connect();
    LeaseLock b(*c2, name);
    bool got = b.acquire(10s);
    return std::make_pair(got, b.fence());
  });
  std::this_thread::sleep_for(300ms);
  REQUIRE(a.release());
  auto [got, fence] = waiter.get();
  CHECK(got);
  CHECK(fence > a.fence());
}

TEST_CASE("blocking acquire gives up after its wait timeout", "[lease][wait]") {
  auto c1 = ctx().connect();
  auto c2 = ctx().connect();
  auto name = ctx().unique("lk");
  LeaseLock a(*c1, name), b(*c2, name);
  REQUIRE(a.try_acquire());
  CHECK_FALSE(b.acquire(300ms));
  CHECK_FALSE(b.owns());
}

TEST_CASE("std::unique_lock works with a lease lock", "[lease]") {
  auto c = ctx().connect();
  auto name = ctx().unique("lk");
  LeaseLock a(*c, name);
  {
    std::unique_lock<LeaseLock> lk(a);
    CHECK(a.owns());
    auto c2 = ctx().connect();
    LeaseLock b(*c2, name);
    CHECK_FALSE(b.try_lock());
  }
  CHECK_FALSE(a.owns());
  LeaseGuard g(a, 1s);
  CHECK(g.owns());
}

TEST_CASE("16 threads hammering one hot name keep mutual exclusion without surfacing deadlocks", "[lease][hot]") {
  auto name = ctx().unique("hot");
  std::atomic<int> inside{0}, max_inside{0}, total{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&] {
      try {
        auto c = ctx().connect();
        LeaseOptions o;
        o.ttl = 10s;
        LeaseLock l(*c, name, o);
        for (int i = 0; i < 10; ++i) {
          if (!l.acquire(60s)) {
            ++errors;
            return;
          }
          int now = ++inside;
          int m = max_inside;
          while (now > m && !max_inside.compare_exchange_weak(m, now)) {
          }
          std::this_thread::sleep_for(std::chrono::microseconds(300));
          --inside;
          ++total;
          l.release();
        }
      } catch (const std::exception& e) {
        WARN(e.what());
        ++errors;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(errors == 0);
  CHECK(max_inside == 1);
  CHECK(total == 160);
}

TEST_CASE("8 processes doing read-then-write increments under the lock end with the exact count", "[lease][multiprocess]") {
  auto c = ctx().connect();
  std::string t = ctx().unique("counter");
  c->execute_script("CREATE TABLE " + t + " (id INTEGER NOT NULL PRIMARY KEY, v INTEGER NOT NULL)");
  c->execute("INSERT INTO " + t + " (id, v) VALUES (1, 0)");
  auto name = ctx().unique("lk");
  const int procs = 8, iters = 20;
  std::vector<std::vector<std::string>> argvs(procs, {sgtest::worker_path(), "lease-counter", ctx().uri, name, t,
                                                      std::to_string(iters), "1"});
  auto rcs = sgtest::run_parallel(argvs);
  for (int rc : rcs) CHECK(rc == 0);
  CHECK(c->execute("SELECT v FROM " + t + " WHERE id = 1").rows[0][0].as_int() == procs * iters);
}

TEST_CASE("negative control: the same increments without the lock lose updates", "[lease][multiprocess][control]") {
  auto c = ctx().connect();
  std::string t = ctx().unique("counter");
  c->execute_script("CREATE TABLE " + t + " (id INTEGER NOT NULL PRIMARY KEY, v INTEGER NOT NULL)");
  c->execute("INSERT INTO " + t + " (id, v) VALUES (1, 0)");
  const int procs = 8, iters = 20;
  std::vector<std::vector<std::string>> argvs(procs, {sgtest::worker_path(), "lease-counter", ctx().uri, "unused", t,
                                                      std::to_string(iters), "0"});
  auto rcs = sgtest::run_parallel(argvs);
  for (int rc : rcs) CHECK(rc == 0);
  // Proves the test above can fail: read-think-write without mutual
  // exclusion overwrites concurrent increments.
  CHECK(c->execute("SELECT v FROM " + t + " WHERE id = 1").rows[0][0].as_int() < procs * iters);
}

TEST_CASE("sqlguard run from 8 processes never overlaps and exports strictly increasing fences", "[lease][cli][multiprocess]") {
  char dir[] = "/tmp/sgtest-run-XXXXXX";
  REQUIRE(mkdtemp(dir));
  std::string log = std::string(dir) + "/log";
  // Each CMD appends "<fence> start <ns>" and "<fence> end <ns>" lines.
  std::string script =
      "echo \"$SQLGUARD_FENCE start $(date +%s%N)\" >> " + log +
      "; test -n \"$SQLGUARD_OWNER\" || exit 9; sleep 0.05; echo \"$SQLGUARD_FENCE end $(date +%s%N)\" >> " + log;
  auto name = ctx().unique("runlk");
  std::vector<std::vector<std::string>> argvs(
      8, {sgtest::cli_path(), "--db", ctx().uri, "run", "--lock", name, "--ttl", "5s", "--wait", "60s", "--", "/bin/sh",
          "-c", script});
  auto rcs = sgtest::run_parallel(argvs);
  for (int rc : rcs) CHECK(rc == 0);
  std::ifstream in(log);
  struct Span {
    long long fence = 0, start = 0, end = 0;
  };
  std::map<long long, Span> spans;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    long long fence, ns;
    std::string what;
    ss >> fence >> what >> ns;
    spans[fence].fence = fence;
    (what == "start" ? spans[fence].start : spans[fence].end) = ns;
  }
  REQUIRE(spans.size() == 8);
  std::vector<Span> by_start;
  for (auto& [f, s] : spans) by_start.push_back(s);
  std::sort(by_start.begin(), by_start.end(), [](auto& a, auto& b) { return a.start < b.start; });
  for (std::size_t i = 1; i < by_start.size(); ++i) {
    CHECK(by_start[i].start >= by_start[i - 1].end);   // no overlap
    CHECK(by_start[i].fence > by_start[i - 1].fence);  // fences follow acquisition order
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("sqlguard run exits 75 when the lock is not acquired and returns CMD's status otherwise", "[lease][cli]") {
  auto name = ctx().unique("runlk");
  auto c = ctx().connect();
  REQUIRE(acquire_lease(*c, name, "someone-else", 30s).acquired);
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "run", "--lock", name, "--wait", "200ms", "--",
                             "/bin/true"}) == 75);
  auto free_name = ctx().unique("runlk");
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "run", "--lock", free_name, "--", "/bin/sh", "-c",
                             "exit 7"}) == 7);
  auto info = lease_info(*c, free_name);
  REQUIRE(info);
  CHECK_FALSE(info->held());  // released after CMD ended
}

TEST_CASE("sqlguard run terminates CMD and exits non-zero naming the cause when the lease is lost", "[lease][cli]") {
  auto name = ctx().unique("runlk");
  int pid = sgtest::spawn({sgtest::cli_path(), "--db", ctx().uri, "run", "--lock", name, "--ttl", "900ms",
                           "--kill-grace", "1s", "--", "/bin/sleep", "30"});
  auto c = ctx().connect();
  for (int i = 0; i < 200 && !(lease_info(*c, name) && lease_info(*c, name)->held()); ++i)
    std::this_thread::sleep_for(20ms);
  REQUIRE(force_release(*c, name));
  REQUIRE(acquire_lease(*c, name, "intruder", 60s).acquired);
  auto t0 = std::chrono::steady_clock::now();
  int rc = sgtest::wait_pid(pid);
  CHECK(rc == 5);
  CHECK(std::chrono::steady_clock::now() - t0 < 20s);  // CMD (sleep 30) was terminated
}

TEST_CASE("the CLI lock commands acquire, refuse, renew, release and list with documented exit codes", "[lease][cli]") {
  auto name = ctx().unique("clilk");
  std::string out;
  auto cli = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {sgtest::cli_path(), "--db", ctx().uri, "--json"};
    argv.insert(argv.end(), args.begin(), args.end());
    return sgtest::run_process(argv, &out);
  };
  REQUIRE(cli({"lock", "acquire", name, "--ttl", "30s", "--owner", "op-1"}) == 0);
  for (const char* field : {"\"acquired\":true", "\"owner\":\"op-1\"", "\"fence\":", "\"expires_at\":"})
    CHECK_THAT(out, Catch::Matchers::Contains(field));
  CHECK(cli({"lock", "acquire", name, "--owner", "op-2"}) == 75);
  CHECK_THAT(out, Catch::Matchers::Contains("\"holder\":\"op-1\""));
  CHECK(cli({"lock", "renew", name, "--owner", "op-2"}) == 3);
  CHECK(cli({"lock", "renew", name, "--owner", "op-1", "--ttl", "1m"}) == 0);
  CHECK(cli({"lock", "list"}) == 0);
  CHECK_THAT(out, Catch::Matchers::Contains(name));
  CHECK_THAT(out, Catch::Matchers::Contains("\"remaining_ms\":"));
  CHECK(cli({"lock", "release", name, "--owner", "op-2"}) == 3);
  CHECK(cli({"lock", "release", name, "--owner", "op-1"}) == 0);
  CHECK(cli({"lock", "release", name, "--force"}) == 3);  // nothing held any more
  CHECK(cli({"lock", "acquire", "", "--owner", "x"}) == 2);  // bad values: exit 2
  CHECK(cli({"lock", "acquire", std::string(256, 'n')}) == 2);
  CHECK(cli({"lock", "acquire", name, "--ttl", "0s"}) == 2);
  CHECK(cli({"lock", "acquire", name, "--ttl", "banana"}) == 2);
}

TEST_CASE("cleanup removes only released lock rows expired for longer than the grace period, in bounded batches", "[lease][cleanup]") {
  auto c = ctx().connect();
  auto prefix = ctx().unique("cl");
  for (int i = 0; i < 25; ++i)
    c->execute("INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at, beat) "
               "VALUES (?, 'old', ?, 1000, 0, 0, 0, 0)", {prefix + "-old-" + std::to_string(i), 1000 + i});  // released
  REQUIRE(acquire_lease(*c, prefix + "-live", "owner", 30s).acquired);
  REQUIRE(acquire_lease(*c, prefix + "-recent", "owner", 10ms).acquired);
  std::this_thread::sleep_for(50ms);
  CleanupOptions o;
  o.batch_size = 10;
  o.lock_grace = 1h;  // the just-expired row stays
  o.idempotency = o.inbox = o.history = false;
  auto r = cleanup(*c, o);
  CHECK(r.locks_deleted >= 25);
  CHECK(r.batches >= 3);
  CHECK(lease_info(*c, prefix + "-live"));
  CHECK(lease_info(*c, prefix + "-recent"));
  CHECK_FALSE(lease_info(*c, prefix + "-old-0"));
  o.batch_size = 0;
  CHECK(code_of([&] { cleanup(*c, o); }) == ErrorCode::kInvalidArgument);
}

TEST_CASE("sqlguard cleanup --every runs until SIGTERM and exits cleanly", "[lease][cli][cleanup]") {
  std::string out = std::string("/tmp/sgtest-cleanup-") + ctx().run_id;
  int pid = sgtest::spawn({sgtest::cli_path(), "--db", ctx().uri, "cleanup", "--every", "100ms"}, out);
  std::this_thread::sleep_for(600ms);
  kill(pid, SIGTERM);
  CHECK(sgtest::wait_pid(pid) == 0);
  std::ifstream in(out);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_THAT(all, Catch::Matchers::Contains("stopped after"));
  std::remove(out.c_str());
}

TEST_CASE("a release wakes a waiter at once instead of its next poll", "[lease][wait][notify]") {
  // PostgreSQL: NOTIFY sent by the release statement; SQLite: the waiter
  // watches the WAL file; MariaDB: the waiter blocks on the holder's wake-up lock.
  auto c1 = ctx().connect();
  auto name = ctx().unique("lk");
  if (ctx().pooler) {
    // Behind a transaction pooler there is no LISTEN: no wake-ups, the
    // waiter polls with its (default) backoff and still gets the lock.
    CHECK_FALSE(c1->capabilities().wakeups);
    CHECK_FALSE(c1->capabilities().listen_notify);
    LeaseLock a(*c1, name);
    REQUIRE(a.try_acquire());
    auto waiter = std::async(std::launch::async, [&] {
      auto c2 = ctx().connect();
      LeaseLock b(*c2, name);
      return b.acquire(60s);
    });
    std::this_thread::sleep_for(300ms);
    REQUIRE(a.release());
    CHECK(waiter.get());
    return;
  }
  LeaseLock a(*c1, name);
  REQUIRE(a.try_acquire());
  auto waiter = std::async(std::launch::async, [&] {
    auto c2 = ctx().connect();
    LeaseOptions o;
    o.backoff_initial = o.backoff_max = std::chrono::minutes(2);  // polls would sleep for up to 60 s
    LeaseLock b(*c2, name, o);
    auto t0 = std::chrono::steady_clock::now();
    bool got = b.acquire(60s);
    return std::make_pair(got, std::chrono::steady_clock::now() - t0);
  });
  std::this_thread::sleep_for(300ms);
  REQUIRE(a.release());
  auto [got, took] = waiter.get();
  CHECK(got);
  // Functional bound, not a benchmark: without the wake-up the waiter would
  // sleep until its (up to 60 s) poll.
  CHECK(took < 15s);
}

TEST_CASE("lease metrics count attempts, busy answers, releases and losses", "[lease][metrics]") {
  reset_lease_metrics();
  auto c = ctx().connect();
  auto name = ctx().unique("lk");
  LeaseLock a(*c, name), b(*c, name);
  REQUIRE(a.try_acquire());
  CHECK_FALSE(b.try_acquire());
  CHECK(a.release());
  auto m = lease_metrics();
  CHECK(m.attempts == 2);
  CHECK(m.acquired == 1);
  CHECK(m.busy == 1);
  CHECK(m.releases == 1);
}

TEST_CASE("a stale holder reusing the owner string cannot release or renew the newer lease", "[lease][fence]") {
  auto c1 = ctx().connect();
  auto c2 = ctx().connect();
  auto c3 = ctx().connect();
  auto name = ctx().unique("lk");
  // Free functions: the fence tells two acquisitions by one owner string apart.
  auto old = acquire_lease(*c1, name, "host-1", 100ms);
  REQUIRE(old.acquired);
  REQUIRE_FALSE(acquire_lease(*c2, name, "host-1", 30s).acquired);  // the first look starts the watch
  std::this_thread::sleep_for(200ms);  // unrenewed for its whole ttl
  auto now = acquire_lease(*c2, name, "host-1", 30s);
  REQUIRE(now.acquired);
  REQUIRE(now.fence > old.fence);
  auto before = lease_info(*c1, name);
  CHECK_FALSE(release_lease(*c1, name, "host-1", old.fence));
  CHECK_FALSE(renew_lease(*c1, name, "host-1", old.fence, 60s));
  auto after = lease_info(*c1, name);
  REQUIRE(after);
  CHECK(after->fence == now.fence);
  CHECK(after->expire_at_ms == before->expire_at_ms);
  CHECK(after->held());
  CHECK_FALSE(acquire_lease(*c3, name, "intruder", 10s).acquired);
  CHECK(renew_lease(*c2, name, "host-1", now.fence, 30s));
  CHECK(release_lease(*c2, name, "host-1", now.fence));
  CHECK(code_of([&] { release_lease(*c2, name, "host-1", 0); }) == ErrorCode::kInvalidArgument);

  // LeaseLock handles with a fixed owner: the stale one's late release
  // frees nothing, the newer one still owns the lock, a third party waits.
  auto name2 = ctx().unique("lk");
  LeaseOptions o = ttl(100ms);
  o.owner = "host-1";
  LeaseLock stale(*c1, name2, o);
  REQUIRE(stale.try_acquire());
  o.ttl = 30s;
  LeaseLock newer(*c2, name2, o);
  REQUIRE_FALSE(newer.try_acquire());  // the first look starts the watch
  std::this_thread::sleep_for(200ms);
  REQUIRE(newer.try_acquire());
  CHECK_FALSE(stale.release());
  REQUIRE(stale.last_loss());
  CHECK(stale.last_loss()->cause == LossCause::kTakenOver);
  CHECK(newer.owns());
  LeaseLock third(*c3, name2);
  CHECK_FALSE(third.try_acquire());
  CHECK(newer.renew());
  CHECK(newer.release());
}

TEST_CASE("a renew with a ttl shorter than the minimum hold left keeps the lease until the hold ends", "[lease]") {
  auto c = ctx().connect();
  auto other = ctx().connect();
  auto name = ctx().unique("lk");
  auto got = acquire_lease(*c, name, "owner-a", 30s, 30s);
  REQUIRE(got.acquired);
  auto info = lease_info(*c, name);
  REQUIRE(info);
  const std::int64_t hold_until = info->acquired_at_ms + 30000;
  REQUIRE(renew_lease(*c, name, "owner-a", got.fence, 10ms));
  info = lease_info(*c, name);
  REQUIRE(info);
  CHECK(info->expire_at_ms >= hold_until);  // max(now + 10 ms, acquired_at + min hold)
  std::this_thread::sleep_for(100ms);       // well past the 10 ms ttl
  CHECK_FALSE(acquire_lease(*other, name, "owner-b", 10s).acquired);
  // The owner-only form (operators) acts on the lease the owner holds now.
  REQUIRE(renew_lease(*c, name, "owner-a", 10ms));
  CHECK(lease_info(*c, name)->expire_at_ms >= hold_until);
  REQUIRE(release_lease(*c, name, "owner-a", got.fence));
  CHECK(lease_info(*c, name)->expire_at_ms >= hold_until);  // a release keeps the hold too
  CHECK_FALSE(acquire_lease(*other, name, "owner-b", 10s).acquired);
  // force_release() is the documented override of the minimum hold.
  CHECK(force_release(*c, name));
  CHECK(acquire_lease(*other, name, "owner-b", 10s).acquired);
}

TEST_CASE("a take-over consumes exactly one fencing token", "[lease][fence]") {
  auto c = ctx().connect();
  auto name = ctx().unique("lk");
  auto first = acquire_lease(*c, name, "a", 50ms);
  REQUIRE(first.acquired);
  REQUIRE_FALSE(acquire_lease(*c, name, "b", 10s).acquired);  // a busy look draws no token
  std::this_thread::sleep_for(150ms);
  auto second = acquire_lease(*c, name, "b", 10s);  // takes over the unrenewed row
  REQUIRE(second.acquired);
  CHECK(second.fence == first.fence + 1);
  REQUIRE(release_lease(*c, name, "b", second.fence));
  auto third = acquire_lease(*c, name, "c", 10s);  // takes over the released row
  REQUIRE(third.acquired);
  CHECK(third.fence == second.fence + 1);
}

TEST_CASE("an exhausted fencing-token sequence is a resource_exhausted error, never a wrap", "[lease][fence]") {
  auto c = make_connection(ctx().fresh_database());
  migrate(*c);
  std::int64_t last = std::numeric_limits<std::int64_t>::max();
  switch (ctx().kind) {
    case DialectKind::kSqlite: c->execute("UPDATE sqlguard_fence_seq SET value = ? WHERE id = 1", {last - 1}); break;
    case DialectKind::kPostgresql: c->execute("SELECT setval('sqlguard_fence_seq', ?)", {last - 1}); break;
    case DialectKind::kMysql:
      last -= 1;  // a MariaDB sequence's default maximum is 2^63 - 2
      c->execute_script("SELECT SETVAL(sqlguard_fence_seq, " + std::to_string(last - 1) + ")");
      break;
  }
  auto name = ctx().unique("lk");
  auto got = acquire_lease(*c, name, "a", 10ms);
  REQUIRE(got.acquired);
  CHECK(got.fence == last);
  REQUIRE_FALSE(acquire_lease(*c, name, "b", 10s).acquired);  // the first look starts the watch
  std::this_thread::sleep_for(100ms);
  std::string what;
  CHECK(code_of([&] { acquire_lease(*c, name, "b", 10s); }, &what) == ErrorCode::kResourceExhausted);  // take-over
  INFO(what);
  CHECK(code_of([&] { acquire_lease(*c, ctx().unique("lk"), "b", 10s); }) == ErrorCode::kResourceExhausted);  // new name
  auto info = lease_info(*c, name);
  REQUIRE(info);
  CHECK(info->fence == last);  // nothing wrapped, nothing was stored
  CHECK(info->owner == "a");
}

TEST_CASE("release() of a hold that is not the last answers whether the lease was still held", "[lease][reentrant]") {
  auto c = ctx().connect();
  auto op = ctx().connect();
  auto name = ctx().unique("lk");
  LeaseLock a(*c, name, ttl(10s));
  REQUIRE(a.try_acquire());
  REQUIRE(a.try_acquire());  // hold 2
  REQUIRE(a.hold_count() == 2);
  // Negative control: while held, dropping the first hold says true.
  REQUIRE(a.try_acquire());  // hold 3
  CHECK(a.release());
  // An operator ends the lease; the handle learns it at its next renewal.
  REQUIRE(force_release(*op, name));
  CHECK_FALSE(a.renew());
  CHECK(a.hold_count() == 2);
  CHECK_FALSE(a.release());  // not the last hold, and the lease was lost
  CHECK(a.hold_count() == 1);
  CHECK_FALSE(a.release());  // the last one: lost too
  CHECK(a.hold_count() == 0);
}

TEST_CASE("a lease ended by someone else before its expiry is reported taken over, not expired", "[lease]") {
  auto c = ctx().connect();
  auto op = ctx().connect();
  SECTION("force release") {
    auto name = ctx().unique("lk");
    LeaseLock a(*c, name, ttl(30s));
    REQUIRE(a.try_acquire());
    REQUIRE(force_release(*op, name));
    CHECK_FALSE(a.renew());
    REQUIRE(a.last_loss());
    INFO(a.last_loss()->detail);
    CHECK(a.last_loss()->cause == LossCause::kTakenOver);
    CHECK(a.last_loss()->detail.find("before its expiry") != std::string::npos);
  }
  SECTION("its row deleted") {
    auto name = ctx().unique("lk");
    LeaseLock a(*c, name, ttl(30s));
    REQUIRE(a.try_acquire());
    op->execute("DELETE FROM sqlguard_lock WHERE name = ?", {name});
    CHECK_FALSE(a.renew());
    REQUIRE(a.last_loss());
    INFO(a.last_loss()->detail);
    CHECK(a.last_loss()->cause == LossCause::kTakenOver);
    CHECK(a.last_loss()->detail.find("row was deleted") != std::string::npos);
  }
  SECTION("negative control: a lease that ran out on the database clock and that nobody took over is still its "
          "holder's (the database clock alone ends nothing): renewed, no loss") {
    auto name = ctx().unique("lk");
    LeaseLock a(*c, name, ttl(200ms));
    REQUIRE(a.try_acquire());
    std::this_thread::sleep_for(400ms);
    CHECK_FALSE(a.owns());  // its trust window ended...
    CHECK(a.renew());       // ...but nobody took it over: the renewal keeps it
    CHECK(a.owns());
    CHECK_FALSE(a.last_loss());
  }
}

TEST_CASE("a blocking acquire rides out a database restart while it waits", "[lease][restart]") {
  const char* servers = std::getenv("SQLGUARD_DBSERVERS");
  if (ctx().is_sqlite() || ctx().pooler || !servers) {
    SUCCEED("needs a server of its own and SQLGUARD_DBSERVERS (tools/dbservers.sh)");
    return;
  }
  auto holder_conn = ctx().connect();
  auto waiter_conn = ctx().connect();
  auto name = ctx().unique("lk");
  LeaseLock holder(*holder_conn, name, ttl(30s));
  REQUIRE(holder.try_acquire());
  LeaseLock waiter(*waiter_conn, name, ttl(30s));
  auto got = std::async(std::launch::async, [&] { return waiter.acquire(40s); });
  // The waiter is waiting (on MariaDB: blocked in the wake-up lock's GET_LOCK).
  REQUIRE(got.wait_for(700ms) == std::future_status::timeout);
  std::string which = ctx().is(DialectKind::kPostgresql) ? "pg" : "mariadb";
  REQUIRE(sgtest::run_process({"/bin/bash", servers, "restart", which}) == 0);
  // Still waiting, not failed: the lease is still held (its row survived).
  REQUIRE(got.wait_for(300ms) == std::future_status::timeout);
  CHECK(holder.release());
  REQUIRE(got.wait_for(30s) == std::future_status::ready);
  bool acquired = false;
  std::string what;
  try {
    acquired = got.get();
  } catch (const Error& e) {
    what = e.what();
  }
  INFO(what);
  CHECK(acquired);
  CHECK(waiter.owns());
  if (acquired) CHECK(waiter.release());
}

TEST_CASE("the watchdog's bounded call keeps one worker thread, and abandons only a call that hangs",
          "[lease][watchdog]") {
  using Outcome = detail::BoundedCaller::Outcome;
  detail::BoundedCaller caller;
  const auto never = [] { return false; };
  const auto soon = [] { return std::chrono::steady_clock::now() + 10s; };
  std::thread::id first, second, after;
  REQUIRE(caller.call([&] { first = std::this_thread::get_id(); }, soon(), never) == Outcome::kDone);
  REQUIRE(caller.call([&] { second = std::this_thread::get_id(); }, soon(), never) == Outcome::kDone);
  CHECK(first == second);  // not a thread per call
  CHECK(first != std::this_thread::get_id());
  // A call blocked past its deadline is left to its worker; the caller returns on time.
  auto gate = std::make_shared<std::promise<void>>();
  auto opened = gate->get_future().share();
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(caller.call([opened] { opened.wait(); }, std::chrono::steady_clock::now() + 100ms, never) ==
        Outcome::kTimedOut);
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  // The next call runs on a fresh worker (the old one is still blocked).
  REQUIRE(caller.call([&] { after = std::this_thread::get_id(); }, soon(), never) == Outcome::kDone);
  CHECK(after != first);
  gate->set_value();
  // A stop request ends the wait for a call that hangs.
  auto gate2 = std::make_shared<std::promise<void>>();
  auto opened2 = gate2->get_future().share();
  CHECK(caller.call([opened2] { opened2.wait(); }, soon(), [] { return true; }) == Outcome::kStopped);
  gate2->set_value();
}

TEST_CASE("waiters on an in-memory SQLite database poll: a waiting acquire returns false, not an error",
          "[lease][sqlite]") {
  if (!ctx().is_sqlite()) {
    SUCCEED("an SQLite-only case");
    return;
  }
  // One in-memory connection is its own database: two handles share it.
  auto c = make_connection("sqlite::memory:");
  migrate(*c);
  CHECK_FALSE(c->capabilities().wakeups);
  LeaseLock holder(*c, "mem_lock");
  REQUIRE(holder.try_acquire());
  LeaseLock waiter(*c, "mem_lock");
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(waiter.acquire(150ms));  // waited (polling) the whole time, then gave up
  CHECK(std::chrono::steady_clock::now() - t0 >= 150ms);
  REQUIRE(holder.release());
  CHECK(waiter.acquire(150ms));
  CHECK(waiter.release());
}

TEST_CASE("after a backward step of the database clock a released lease is free at once and a renewal pulls its "
          "expiry back (no minimum hold)",
          "[lease][seams]") {
  // Issue 36 item 5. A step of -30 s is staged by moving the row's own times
  // 30 s ahead (the same as the clock going back 30 s under them). The old
  // statements set min_release_at to the acquisition time even with no
  // minimum hold, and release and renewal kept the expiry at least there.
  auto admin = ctx().connect();
  auto c1 = ctx().connect();
  auto c2 = ctx().connect();
  const std::string name = ctx().unique("backstep");
  auto shift = [&] {
    admin->execute("UPDATE sqlguard_lock SET expire_at = expire_at + 30000, acquired_at = acquired_at + 30000, "
                   "renewed_at = renewed_at + 30000, min_release_at = CASE WHEN min_release_at > 0 THEN "
                   "min_release_at + 30000 ELSE 0 END WHERE name = ?",
                   {name});
  };
  LeaseLock a(*c1, name, ttl(5s));
  REQUIRE(a.try_acquire());
  shift();
  SECTION("a renewal after the step ends the lease ttl from the database's now, not 30 s later") {
    REQUIRE(a.renew());
    auto info = lease_info(*admin, name);
    REQUIRE(info);
    CHECK(info->expire_at_ms <= admin->db_now_ms() + 5000);
  }
  SECTION("a release after the step frees the lease at once") {
    REQUIRE(a.release());
    LeaseLock b(*c2, name, ttl(5s));
    CHECK(b.try_acquire());
  }
  SECTION("with a minimum hold the hold still counts (the control)") {
    REQUIRE(a.release());
    LeaseOptions o = ttl(5s);
    o.min_hold = 3s;
    LeaseLock m(*c1, name, o);
    REQUIRE(m.try_acquire());
    REQUIRE(m.release());
    LeaseLock b(*c2, name, ttl(5s));
    CHECK_FALSE(b.try_acquire());  // the minimum hold keeps it until acquisition + 3 s
  }
}
