// The lock client (lock_client.h): many leases on a few connections and
// threads, batched renewal, waiting without a thread, exhaustion that fails
// new work and never held leases, fork, cancellation. On every dialect;
// the server-limit case on PostgreSQL and MariaDB. The frozen-path case,
// which needs the fault proxy (built with the tools), is in
// test_lock_client_frozen.cpp.
#include <catch2/catch.hpp>
#include <malloc.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "sqlguard/admin.h"
#include "sqlguard/leader.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/read_write_lease.h"
#include "sqlguard/semaphore.h"
#include "sqlguard/lock_client.h"
#include "sqlguard/migrate.h"
#include "process_helpers.h"
#include "test_context.h"
#include "test_helpers.h"

using namespace sqlguard;
using namespace std::chrono_literals;
using sgtest::ctx;
using sgtest::eventually;

namespace {

struct Caught {
  ErrorCode code = ErrorCode::kInternal;
  bool thrown = false;
  std::string what;
};

Caught catch_error(const std::function<void()>& f) {
  Caught c;
  try {
    f();
  } catch (const Error& e) {
    c.code = e.code();
    c.thrown = true;
    c.what = e.what();
  }
  return c;
}

std::size_t process_threads() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// How many of this process's threads carry `name` (/proc/self/task/*/comm).
int threads_named(const std::string& name) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(e.path() / "comm");
    std::string comm;
    if (std::getline(in, comm) && comm == name) ++n;
  }
  return n;
}

LeaseOptions short_lease(std::chrono::milliseconds ttl = 1500ms) {
  LeaseOptions o;
  o.ttl = ttl;
  return o;
}

// Whether `lock`'s lease is the one the database holds now (owner and fence).
bool held_in_db(Connection& c, const LeaseLock& lock) {
  auto info = lease_info(c, lock.name());
  return info && info->held() && info->owner == lock.owner() && info->fence == lock.fence();
}

// Holds the first renewal of `held` (ttl 6 s: margin 0.6 s, period 2 s,
// trust window 5.4 s, slack 3.4 s; acquired at `t0`) back with a real row
// lock of another session (SQLite: the database's write lock): the renewal
// falls due at 2 s, waits for the row and is let go at 4.4 s, answering
// with about 1 s of its window left (under 1.7 s, half the slack).
void hold_back_first_renewal(const LeaseLock& held, std::chrono::steady_clock::time_point t0) {
  auto blocker = ctx().connect();
  blocker->begin();  // SQLite: BEGIN IMMEDIATE
  if (!ctx().is_sqlite())
    REQUIRE(blocker->execute("SELECT name FROM sqlguard_lock WHERE name = ? FOR UPDATE", {held.name()}).rows.size() == 1);
  std::this_thread::sleep_until(t0 + 4400ms);
  blocker->commit();
}


}  // namespace

TEST_CASE("one lock client holds many renewed leases on at most 4 connections and a few threads; one renewal "
          "statement per 1000 leases",
          "[lock-client]") {
  const int n = ctx().is_sqlite() ? 300 : 1200;
  const std::size_t threads_before = process_threads();
  auto client = LockClient::create(ctx().uri);
  std::vector<std::unique_ptr<LeaseLock>> locks;
  const std::string prefix = ctx().unique("many");
  for (int i = 0; i < n; ++i) {
    locks.push_back(std::make_unique<LeaseLock>(client, prefix + "_" + std::to_string(i), short_lease()));
    REQUIRE(locks.back()->try_acquire());
  }
  const std::vector<std::int64_t> fences = [&] {
    std::vector<std::int64_t> f;
    for (auto& l : locks) f.push_back(l->fence());
    return f;
  }();
  // Three ttls: every lease must have been renewed at least twice.
  std::this_thread::sleep_for(4500ms);
  auto s = client->stats();
  INFO("connections " << s.connections_open << ", threads " << s.threads << ", rounds " << s.renewal_rounds
                      << ", statements " << s.renewal_statements << ", renewed " << s.leases_renewed);
  CHECK(s.connections_open <= 4);
  CHECK(s.threads <= 4);
  CHECK(process_threads() - threads_before <= 4);
  CHECK(s.held_leases == static_cast<std::size_t>(n));
  CHECK(s.leases_lost == 0);
  CHECK(s.leases_renewed >= static_cast<std::uint64_t>(2 * n));
  // One statement carries up to 1000 leases. A round is counted when its
  // last statement is done, so the snapshot may hold the first statements
  // of a round not yet counted (seen in CI: 19 statements, 9 rounds, 1200
  // leases): at most one round more.
  CHECK(s.renewal_statements <= (s.renewal_rounds + 1) * static_cast<std::uint64_t>((n + 999) / 1000));
  auto probe = ctx().connect();
  int owned = 0, in_db = 0;
  for (std::size_t i = 0; i < locks.size(); ++i) {
    owned += locks[i]->owns() ? 1 : 0;
    in_db += held_in_db(*probe, *locks[i]) && locks[i]->fence() == fences[i] ? 1 : 0;
  }
  CHECK(owned == n);
  CHECK(in_db == n);
  for (auto& l : locks) CHECK(l->release());
  CHECK(client->stats().held_leases == 0);
}

TEST_CASE("a renewal batch in which one lease was force-released reports exactly that one lost, once", "[lock-client]") {
  auto client = LockClient::create(ctx().uri);
  const std::string prefix = ctx().unique("batchloss");
  std::vector<std::unique_ptr<LeaseLock>> locks;
  std::vector<std::atomic<int>> calls(12);
  std::vector<std::optional<LossCause>> causes(12);
  std::mutex mu;
  for (int i = 0; i < 12; ++i) {
    LeaseOptions o = short_lease(1200ms);
    o.on_lost = [&, i](const LeaseLoss& loss) {
      ++calls[i];
      std::lock_guard<std::mutex> lk(mu);
      causes[i] = loss.cause;
    };
    locks.push_back(std::make_unique<LeaseLock>(client, prefix + "_" + std::to_string(i), o));
    REQUIRE(locks.back()->try_acquire());
  }
  auto admin = ctx().connect();
  REQUIRE(force_release(*admin, locks[5]->name()));
  REQUIRE(eventually([&] { return calls[5].load() > 0; }, 10s));
  std::this_thread::sleep_for(1500ms);  // more rounds: nothing else is lost, nothing reported twice
  for (int i = 0; i < 12; ++i) {
    INFO("lease " << i);
    CHECK(calls[i].load() == (i == 5 ? 1 : 0));
    CHECK(locks[i]->owns() == (i != 5));
  }
  std::lock_guard<std::mutex> lk(mu);
  REQUIRE(causes[5]);
  CHECK(*causes[5] == LossCause::kTakenOver);
  CHECK(client->stats().leases_lost == 1);
}

TEST_CASE("exhausted work connections fail new acquires with resource_exhausted; held leases keep being renewed",
          "[lock-client][exhaustion]") {
  LockClientOptions co;
  co.max_connections = 3;  // renewal, listener, one work connection
  co.borrow_timeout = 300ms;
  auto client = LockClient::create(ctx().uri, co);
  const std::string prefix = ctx().unique("busy");
  std::vector<std::unique_ptr<LeaseLock>> held;
  for (int i = 0; i < 5; ++i) {
    held.push_back(std::make_unique<LeaseLock>(client, prefix + "_" + std::to_string(i), short_lease(1000ms)));
    REQUIRE(held.back()->try_acquire());
  }
  LeaseLock newcomer(client, prefix + "_new", short_lease(1000ms));
  if (ctx().is_sqlite()) {
    // SQLite: a guarded transaction holds the database's write lock, which
    // the renewals need too; keep the work connection busy with short calls
    // from many threads instead, and borrow without waiting.
    LockClientOptions now = co;
    now.borrow_timeout = 0ms;
    auto eager = LockClient::create(ctx().uri, now);
    std::vector<std::unique_ptr<LeaseLock>> held2;
    for (int i = 0; i < 5; ++i) {
      held2.push_back(std::make_unique<LeaseLock>(eager, prefix + "_e" + std::to_string(i), short_lease(1000ms)));
      REQUIRE(held2.back()->try_acquire());
    }
    std::atomic<bool> stop{false};
    std::atomic<int> refusals{0}, other{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 6; ++t)
      ts.emplace_back([&, t] {
        LeaseLock mine(eager, prefix + "_h" + std::to_string(t), short_lease(1000ms));
        while (!stop) {
          try {
            if (mine.try_acquire()) mine.release();
          } catch (const Error& e) {
            (e.code() == ErrorCode::kResourceExhausted ? refusals : other)++;
          }
        }
      });
    const bool refused = eventually([&] { return refusals.load() > 0; }, 10s);
    std::this_thread::sleep_for(3000ms);  // three ttls of contention for the work connection
    stop = true;
    for (auto& t : ts) t.join();
    CHECK(refused);
    CHECK(other.load() == 0);
    for (auto& l : held2) CHECK(l->owns());
    CHECK(eager->stats().leases_lost == 0);
    CHECK(eager->stats().exhausted >= 1);
    return;
  }
  // A guarded transaction (of a lease with a long ttl: its own renewal waits
  // for the transaction) keeps the only work connection busy.
  LeaseLock guard(client, prefix + "_guard", short_lease(30s));
  REQUIRE(guard.try_acquire());
  std::promise<void> inside, leave;
  auto blocker = std::async(std::launch::async, [&] {
    return guard.run_guarded([&](Transaction&) {
      inside.set_value();
      leave.get_future().wait();
    });
  });
  inside.get_future().wait();
  auto refused = catch_error([&] { newcomer.try_acquire(); });
  INFO(refused.what);
  CHECK(refused.code == ErrorCode::kResourceExhausted);
  CHECK_THAT(refused.what, Catch::Matchers::Contains("borrow_timeout"));
  CHECK_FALSE(newcomer.owns());
  // Three ttls with the work connection taken: the renewal connection is reserved.
  std::this_thread::sleep_for(3000ms);
  for (auto& l : held) CHECK(l->owns());
  CHECK(client->stats().leases_lost == 0);
  CHECK(client->stats().exhausted >= 1);
  leave.set_value();
  CHECK(blocker.get());
  CHECK(newcomer.try_acquire());  // the connection is free again
}

TEST_CASE("a server that refuses new connections: one connection per lease loses held leases (negative control), the "
          "lock client loses none and fails new work with resource_exhausted",
          "[lock-client][exhaustion]") {
  if (ctx().is_sqlite() || ctx().pooler) {
    SUCCEED("needs a server's connection limit (SQLite has none; behind PgBouncer the pooler owns the server sessions)");
    return;
  }
  auto admin = ctx().connect();
  const std::string role = ctx().unique("sgcap");
  std::string limited = ctx().uri;
  const int limit = 6;
  struct Restore {
    std::function<void()> fn;
    ~Restore() {
      try {
        if (fn) fn();
      } catch (const std::exception& e) {
        WARN("could not undo the connection limit: " << e.what());
      }
    }
  } restore;
  if (ctx().is(DialectKind::kPostgresql)) {
    // A role with a CONNECTION LIMIT and the test tables: the server refuses
    // its (limit+1)th session with 53300.
    admin->execute_script("CREATE ROLE " + role + " LOGIN PASSWORD 'cap-Pw-1' CONNECTION LIMIT " +
                          std::to_string(limit) + "; GRANT ALL ON ALL TABLES IN SCHEMA public TO " + role +
                          "; GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO " + role);
    restore.fn = [&] {
      admin->execute_script("DROP OWNED BY " + role + "; DROP ROLE " + role);
    };
    const std::string base = ctx().uri.substr(0, ctx().uri.find("://") + 3);
    limited = base + role + ":cap-Pw-1" + ctx().uri.substr(ctx().uri.find('@'));
  } else {
    // MariaDB: the test account's own connection limit (it cannot grant to a
    // new account). Its sessions already open count against it; the server
    // refuses the next one with 1226.
    const std::string account = admin->execute("SELECT CURRENT_USER()").rows.at(0)[0].as_string();
    const std::string user = account.substr(0, account.find('@'));
    const std::string host = account.substr(account.find('@') + 1);
    const std::string quoted = "'" + user + "'@'" + host + "'";
    const auto mine =
        admin->execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = ?", {user}).rows.at(0)[0].as_int();
    admin->execute_script("ALTER USER " + quoted + " WITH MAX_USER_CONNECTIONS " + std::to_string(mine + limit));
    restore.fn = [&, quoted] { admin->execute_script("ALTER USER " + quoted + " WITH MAX_USER_CONNECTIONS 0"); };
  }
  const std::string prefix = ctx().unique("cap");

  SECTION("negative control: a watchdog connection per lease") {
    auto conn = make_connection(limited);
    std::vector<std::unique_ptr<LeaseLock>> locks;
    std::atomic<int> lost{0};
    for (int i = 0; i < limit + 2; ++i) {
      LeaseOptions o = short_lease(1500ms);
      o.watchdog_connection = [&] { return make_connection(limited); };
      o.on_lost = [&](const LeaseLoss&) { ++lost; };
      locks.push_back(std::make_unique<LeaseLock>(*conn, prefix + "_ctl" + std::to_string(i), o));
      REQUIRE(locks.back()->try_acquire());
    }
    // The watchdogs beyond the limit cannot connect: their leases are lost.
    REQUIRE(eventually([&] { return lost.load() > 0; }, 10s));
    int owned = 0;
    for (auto& l : locks) owned += l->owns() ? 1 : 0;
    CHECK(owned < limit + 2);
  }

  SECTION("the lock client") {
    LockClientOptions co;
    co.max_connections = 4;
    co.borrow_timeout = 300ms;
    auto client = LockClient::create(limited, co);  // renewal + one work connection
    std::vector<std::unique_ptr<LeaseLock>> locks;
    std::atomic<int> lost{0};
    for (int i = 0; i < 50; ++i) {
      LeaseOptions o = short_lease(1500ms);
      o.on_lost = [&](const LeaseLoss&) { ++lost; };
      locks.push_back(std::make_unique<LeaseLock>(client, prefix + "_c" + std::to_string(i), o));
      REQUIRE(locks.back()->try_acquire());
    }
    // Someone else takes every session the server still allows.
    std::vector<std::unique_ptr<Connection>> hog;
    for (int i = 0; i < limit; ++i) {
      try {
        hog.push_back(make_connection(limited));
      } catch (const Error& e) {
        REQUIRE(e.code() == ErrorCode::kResourceExhausted);
        break;
      }
    }
    auto refused = catch_error([&] { make_connection(limited); });
    REQUIRE(refused.code == ErrorCode::kResourceExhausted);
    // New work that needs a new connection fails clearly: a new client, and
    // this client's second work connection (the first is kept busy).
    auto second = catch_error([&] { LockClient::create(limited, co); });
    INFO(second.what);
    CHECK(second.code == ErrorCode::kResourceExhausted);
    std::promise<void> inside, leave;
    auto blocker = std::async(std::launch::async, [&] {
      return locks[0]->run_guarded([&](Transaction&) {
        inside.set_value();
        leave.get_future().wait();
      });
    });
    inside.get_future().wait();
    LeaseLock newcomer(client, prefix + "_new", short_lease(1500ms));
    auto busy = catch_error([&] { newcomer.try_acquire(); });
    INFO(busy.what);
    CHECK(busy.code == ErrorCode::kResourceExhausted);
    leave.set_value();
    CHECK(blocker.get());
    // Three ttls with the server full: no held lease is lost.
    std::this_thread::sleep_for(4500ms);
    CHECK(lost.load() == 0);
    int owned = 0, in_db = 0;
    for (auto& l : locks) {
      owned += l->owns() ? 1 : 0;
      in_db += held_in_db(*admin, *l) ? 1 : 0;
    }
    CHECK(owned == 50);
    CHECK(in_db == 50);
    CHECK(client->stats().leases_lost == 0);
    hog.clear();
    locks.clear();
  }
}

TEST_CASE("the lock client's threads carry names (top -H, perf, gdb) and end with the client", "[lock-client][threads]") {
  const std::vector<std::string> roles = {"sqlguard-renew", "sqlguard-wait", "sqlguard-listen"};
  std::map<std::string, int> before;
  for (const auto& r : roles) before[r] = threads_named(r);
  {
    auto client = LockClient::create(ctx().uri);
    const std::string name = ctx().unique("named");
    LeaseLock holder(client, name, short_lease());
    REQUIRE(holder.try_acquire());  // renewed: the renewer thread
    LeaseLock waiter(client, name, short_lease());
    std::promise<bool> got;
    // A wait on the held name: the waiter and listener threads (started when
    // the wait queues: after a sender thread's first try, where the dialect
    // batches those).
    waiter.acquire_async(10s, [&](bool ok, std::exception_ptr) { got.set_value(ok); });
    const auto all_named = [&] {
      for (const auto& r : roles)
        if (threads_named(r) != before[r] + 1) return false;
      return true;
    };
    (void)sgtest::eventually(all_named, 10s);  // the checks below say which one is missing
    for (const auto& r : roles) {
      INFO(r);
      CHECK(threads_named(r) == before[r] + 1);
    }
    REQUIRE(holder.release());
    auto f = got.get_future();
    REQUIRE(f.wait_for(10s) == std::future_status::ready);
    CHECK(f.get());
    CHECK(waiter.release());
  }
  for (const auto& r : roles) {
    INFO(r << " after the client was destroyed");
    CHECK(threads_named(r) == before[r]);
  }
}

TEST_CASE("1,000 asynchronous waiters on one name are all served, one holder at a time, on the client's threads",
          "[lock-client][async]") {
  auto client = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("hot");
  const int n = 1000;
  const std::size_t threads_before = process_threads();
  std::vector<std::unique_ptr<LeaseLock>> locks;
  for (int i = 0; i < n; ++i) {
    LeaseOptions o = short_lease(10s);
    locks.push_back(std::make_unique<LeaseLock>(client, name, o, Watchdog::kOff));
  }
  // A served waiter hands its lease to this thread, which releases it (a
  // callback must not block the client's waiter thread).
  std::mutex mu;
  std::condition_variable cv;
  std::deque<int> served;
  std::atomic<int> holders{0}, max_holders{0}, errors{0}, not_acquired{0};
  for (int i = 0; i < n; ++i)
    locks[i]->acquire_async(120s, [&, i](bool ok, std::exception_ptr e) {
      if (e) ++errors;
      if (!ok) {
        ++not_acquired;
        return;
      }
      const int h = ++holders;
      int m = max_holders.load();
      while (h > m && !max_holders.compare_exchange_weak(m, h)) {
      }
      std::lock_guard<std::mutex> lk(mu);
      served.push_back(i);
      cv.notify_one();
    });
  std::size_t peak_waiters = client->stats().waiters;
  std::set<int> seen;
  std::size_t peak_threads = 0;
  while (static_cast<int>(seen.size()) + not_acquired.load() < n) {
    int i;
    {
      std::unique_lock<std::mutex> lk(mu);
      if (!cv.wait_for(lk, 30s, [&] { return !served.empty(); })) break;
      i = served.front();
      served.pop_front();
    }
    CHECK(seen.insert(i).second);
    peak_threads = std::max(peak_threads, process_threads() - threads_before);
    --holders;
    REQUIRE(locks[i]->release());
  }
  auto s = client->stats();
  INFO("served " << seen.size() << ", not acquired " << not_acquired.load() << ", attempts " << s.attempts
                 << ", wakeups " << s.wakeups << ", threads " << s.threads);
  CHECK(static_cast<int>(seen.size()) == n);
  CHECK(not_acquired.load() == 0);
  CHECK(errors.load() == 0);
  CHECK(max_holders.load() == 1);
  CHECK(peak_waiters >= static_cast<std::size_t>(n - 1));
  CHECK(s.waiters == 0);
  CHECK(s.connections_open <= 4);
  // renewer (+ its worker), waiter, listener, and up to 2 sender threads
  // (the leases' first tries are batched): bounded, whatever n is.
  CHECK(s.threads <= 6);
  CHECK(peak_threads <= 8);
}

TEST_CASE("a blocking acquire() of a client handle waits on the client's path and is served at a release",
          "[lock-client][async]") {
  auto client = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("blk");
  LeaseLock holder(client, name, short_lease(10s));
  REQUIRE(holder.try_acquire());
  LeaseLock waiter(client, name, short_lease(10s));
  auto got = std::async(std::launch::async, [&] { return waiter.acquire(30s); });
  REQUIRE(eventually([&] { return client->stats().waiters == 1; }));
  CHECK(got.wait_for(200ms) == std::future_status::timeout);  // still held: not served
  CHECK(holder.release());
  CHECK(got.get());
  CHECK(waiter.owns());
  CHECK(waiter.fence() > holder.fence());
  // Negative control: a wait that ends while the lease is held answers false.
  LeaseLock third(client, name, short_lease(10s));
  CHECK_FALSE(third.acquire(300ms));
  CHECK(client->stats().waiters == 0);
}

TEST_CASE("a waiter woken by a release from another client (another process's) is served without waiting for its "
          "backoff",
          "[lock-client][async]") {
  auto a = LockClient::create(ctx().uri);
  auto b = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("xcl");
  LeaseLock holder(a, name, short_lease(30s));
  REQUIRE(holder.try_acquire());
  LeaseOptions wo = short_lease(30s);
  wo.backoff_initial = 5s;  // only a wake-up can serve it quickly
  wo.backoff_max = 5s;
  LeaseLock waiter(b, name, wo);
  auto got = waiter.acquire_async(60s);
  // Let it settle as a waiter (its listener set up) before the release.
  REQUIRE(eventually([&] { return b->stats().waiters == 1; }));
  std::this_thread::sleep_for(ctx().pooler ? 100ms : 500ms);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(holder.release());
  REQUIRE(got.wait_for(30s) == std::future_status::ready);
  CHECK(got.get());
  const auto waited = std::chrono::steady_clock::now() - t0;
  if (!ctx().pooler) {
    // Woken, not polled: served well inside its 5 s backoff.
    CHECK(waited < 4s);
    CHECK(b->stats().wakeups >= 1);
  }
}

TEST_CASE("a handle destroyed while its acquire is pending cancels it: no queue place, listener or session lock is "
          "left behind",
          "[lock-client][async]") {
  auto client = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("cancel");
  LeaseLock holder(client, name, short_lease(30s));
  REQUIRE(holder.try_acquire());
  std::promise<std::pair<bool, bool>> result;  // (acquired, error)
  {
    LeaseLock waiter(client, name, short_lease(30s));
    waiter.acquire_async(60s, [&](bool ok, std::exception_ptr e) { result.set_value({ok, e != nullptr}); });
    REQUIRE(eventually([&] { return client->stats().waiters == 1; }));
    if (!ctx().pooler) REQUIRE(eventually([&] { return client->stats().listening == 1; }));
  }
  auto r = result.get_future();
  REQUIRE(r.wait_for(5s) == std::future_status::ready);
  CHECK(r.get() == std::make_pair(false, false));
  CHECK(client->stats().waiters == 0);
  CHECK(eventually([&] { return client->stats().listening == 0; }));
  CHECK(holder.release());
  auto other = ctx().connect();
  if (ctx().is(DialectKind::kMysql)) {
    // No wake-up lock (GET_LOCK) is left on any session of the client.
    auto used = other->execute("SELECT IS_USED_LOCK(?)", {lease_wakeup_channel(name)});
    CHECK(used.rows.at(0)[0].is_null());
  }
  // The name is free for anyone: nothing of the cancelled waiter holds it.
  auto r2 = acquire_lease(*other, name, "someone-else", 5s);
  CHECK(r2.acquired);
  // cancel_acquire() with nothing pending is false; a second cancel too.
  LeaseLock idle(client, name, short_lease(30s));
  CHECK_FALSE(idle.cancel_acquire());
}

TEST_CASE("a forked child cannot use its parent's lock client (clear error), leaves the parent's lease alone, and makes "
          "its own",
          "[lock-client][fork]") {
  const std::string name = ctx().unique("fork");
  auto client = LockClient::create(ctx().uri);
  LeaseLock lock(client, name, short_lease(10s));
  REQUIRE(lock.try_acquire());
  const std::int64_t fence = lock.fence();
  const std::string uri = ctx().uri;
  const std::string other = ctx().unique("forkchild");
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 0;
    try {
      lock.try_acquire();
      code = 10;  // must have thrown
    } catch (const Error& e) {
      const std::string what = e.what();
      if (e.code() != ErrorCode::kInvalidArgument || what.find("forked child") == std::string::npos) code = 11;
    } catch (...) {
      code = 12;
    }
    if (code == 0) {
      try {
        LeaseLock own(uri, other, short_lease(10s), Watchdog::kOn);  // a new process-wide client
        if (!own.try_acquire()) code = 13;
        else if (!own.release()) code = 14;
      } catch (...) {
        code = 15;
      }
    }
    ::_exit(code);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // The child neither released nor renewed the parent's lease from its copy.
  CHECK(lock.owns());
  auto probe = ctx().connect();
  CHECK(held_in_db(*probe, lock));
  CHECK(lock.fence() == fence);
  CHECK(lock.release());
}

TEST_CASE("LeaseLock(uri) handles of one URI share one process-wide client", "[lock-client]") {
  const std::string prefix = ctx().unique("shared");
  std::vector<std::unique_ptr<LeaseLock>> locks;
  for (int i = 0; i < 40; ++i) {
    locks.push_back(std::make_unique<LeaseLock>(ctx().uri, prefix + std::to_string(i), short_lease(3s), Watchdog::kOn));
    REQUIRE(locks.back()->try_acquire());
  }
  ConnectOptions co;
  co.io_timeout = 1000ms;  // what the URI constructor derives from a 3 s ttl
  co.connect_timeout = 1000ms;
  auto client = LockClient::shared(ctx().uri, co);
  auto s = client->stats();
  CHECK(s.held_leases == 40);
  CHECK(s.connections_open <= 4);
  for (auto& l : locks) CHECK(l->release());
}

TEST_CASE("a lease its handle released is never reported lost afterwards, though another client takes it at once "
          "(8 clients contend for 200 names)",
          "[lock-client][seams]") {
  // Issue 36 item 1: a renewal round that had copied a lease into its batch
  // ran after the handle released it and another client took the row, and
  // reported the finished acquisition lost (taken_over). Each (name, fence)
  // whose release() returned true must never reach on_lost.
  const int clients = 8, names = 200;
  const std::string prefix = ctx().unique("relloss");
  std::mutex mu;
  std::set<std::pair<std::string, std::int64_t>> released;          // release() returned true
  std::vector<std::pair<std::string, std::int64_t>> reported;       // on_lost calls
  std::atomic<long> acquisitions{0}, refused{0};
  const auto until = std::chrono::steady_clock::now() + (ctx().is_sqlite() ? 4s : 6s);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto client = LockClient::create(ctx().uri);
      std::vector<std::unique_ptr<LeaseLock>> handles;
      for (int n = 0; n < names; ++n) {
        LeaseOptions o = short_lease(300ms);  // renewed every 100 ms: rounds all the time
        const std::string name = prefix + "_" + std::to_string(n);
        o.on_lost = [&, name](const LeaseLoss& loss) {
          std::lock_guard<std::mutex> lk(mu);
          reported.emplace_back(name, loss.fence);
        };
        handles.push_back(std::make_unique<LeaseLock>(client, name, o));
      }
      std::deque<int> held;
      unsigned seed = static_cast<unsigned>(c) * 7919u + 17u;
      while (std::chrono::steady_clock::now() < until) {
        seed = seed * 1103515245u + 12345u;
        const int n = static_cast<int>((seed >> 8) % static_cast<unsigned>(names));
        bool got = false;
        try {
          got = handles[n]->hold_count() == 0 && handles[n]->try_acquire();
        } catch (const Error& e) {
          // 300 ms leases on a busy machine: a renewal answered with less
          // than half its 170 ms slack left makes the client refuse new
          // leases for a while (held leases first). Not this test's concern.
          if (e.code() != ErrorCode::kResourceExhausted) throw;
          ++refused;
        }
        if (got) {
          ++acquisitions;
          held.push_back(n);
        }
        // Hold up to 20 at once, so every renewal round carries many, and
        // release the oldest: another client is often waiting to take it.
        while (held.size() > 20 || (!held.empty() && ((seed >> 4) & 3) == 0)) {
          const int r = held.front();
          held.pop_front();
          const std::string name = handles[r]->name();
          const std::int64_t fence = handles[r]->fence();
          // The documented pattern: the work in a guarded transaction, then
          // the release (a guarded transaction's end asks for a renewal).
          (void)handles[r]->run_guarded([](Transaction&) {});
          const bool lost_before = handles[r]->last_loss().has_value();
          if (handles[r]->release() && !lost_before) {
            std::lock_guard<std::mutex> lk(mu);
            released.emplace(name, fence);
          }
          seed = seed * 1103515245u + 12345u;
        }
      }
      for (int r : held) handles[r]->release();
      std::this_thread::sleep_for(700ms);  // the rounds in flight report what they will
    });
  }
  for (auto& t : threads) t.join();
  INFO(acquisitions.load() << " acquisitions, " << refused.load() << " refused (renewer behind), " << released.size()
                           << " released, " << reported.size() << " loss reports");
  REQUIRE(acquisitions.load() > 200);
  std::vector<std::pair<std::string, std::int64_t>> after_release;
  std::set<std::pair<std::string, std::int64_t>> seen;
  int twice = 0;
  for (const auto& r : reported) {
    if (released.count(r)) after_release.push_back(r);
    if (!seen.insert(r).second) ++twice;
  }
  CHECK(after_release.empty());
  CHECK(twice == 0);
}

TEST_CASE("one lease in back-to-back guarded transactions does not make the client renew its other leases more "
          "often, and stays held",
          "[lock-client][seams]") {
  // Issue 36 item 6: the end of every guarded transaction made the lease
  // due, and its round took every lease of the client along: 100 leases
  // were renewed 69-363 times a second each instead of about 3.
  auto client = LockClient::create(ctx().uri);
  const std::string prefix = ctx().unique("storm");
  const int n = 100;
  std::vector<std::unique_ptr<LeaseLock>> locks;
  for (int i = 0; i < n; ++i) {
    locks.push_back(std::make_unique<LeaseLock>(client, prefix + "_" + std::to_string(i), short_lease(1500ms)));
    REQUIRE(locks.back()->try_acquire());
  }
  const auto before = client->stats();
  const auto t0 = std::chrono::steady_clock::now();
  long transactions = 0;
  while (std::chrono::steady_clock::now() - t0 < 4s) {
    REQUIRE(locks[0]->run_guarded([](Transaction&) {}));
    ++transactions;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto after = client->stats();
  const auto renewed = after.leases_renewed - before.leases_renewed;
  // A period is 500 ms: about 2 renewals a second per lease. Allow twice
  // that and a round's worth more; the old code renewed thousands.
  const double bound = n * (secs / 0.5 * 2 + 2);
  INFO(transactions << " guarded transactions, " << renewed << " leases renewed in " << secs << " s; bound " << bound);
  REQUIRE(transactions > 20);
  CHECK(static_cast<double>(renewed) <= bound);
  CHECK(renewed >= static_cast<std::uint64_t>(n));  // the control: the renewer did renew them
  for (int i = 0; i < n; ++i) {
    INFO("lease " << i);
    CHECK(locks[i]->owns());
  }
  CHECK(client->stats().leases_lost == 0);
}

namespace {
// Heap in use (every arena): what the process holds, not what the
// allocator keeps free.
std::size_t heap_in_use() { return mallinfo2().uordblks; }

// What a lock client keeps about names and acquisitions now.
struct ClientCounts {
  std::size_t held, places, waiters, listening, names;
  bool operator==(const ClientCounts&) const = default;
};
std::ostream& operator<<(std::ostream& os, const ClientCounts& c) {
  return os << "{held " << c.held << ", places " << c.places << ", waiters " << c.waiters << ", listening "
            << c.listening << ", names " << c.names << "}";
}
ClientCounts counts_of(const LockClient& client) {
  const auto s = client.stats();
  return {s.held_leases, s.queue_places, s.waiters, s.listening, s.names_tracked};
}
}  // namespace

TEST_CASE("a lock client keeps nothing of names it no longer holds or waits for: many acquisitions of new names of "
          "every kind leave its counts and its heap where they were",
          "[lock-client][memory]") {
  // Issue 43: a service that locks by order or message id takes a new name
  // every time, for months. Every kind, and waits that are served, cancelled
  // or time out, on new names; rows are deleted batch by batch (as cleanup
  // would) so the database's own page cache does not grow with the table.
  // The lease-lost kind ends hundreds of leases on purpose: their loss
  // warnings would bury the log; everything else still reaches stderr.
  struct QuietLosses {
    QuietLosses() {
      set_log_hook([](LogLevel, std::string_view m) {
        if (m.find("lease lost (taken_over)") == std::string_view::npos) std::cerr << "sqlguard: " << m << "\n";
      });
    }
    ~QuietLosses() { set_log_hook(nullptr); }
  } quiet;
  auto client = LockClient::create(ctx().uri);
  auto admin = ctx().connect();
  const std::string prefix = ctx().unique("churnmem");
  const bool sqlite = ctx().is_sqlite();
  LeaseOptions o;
  o.ttl = 30s;  // no renewal falls due during the test: nothing but the churn allocates
  LeaseOptions fair = o;
  fair.fair = true;
  auto wait_until_waiting = [&](std::size_t n) {
    REQUIRE(eventually([&] { return client->stats().waiters >= n; }, 10s));
  };
  // `h` holds the name and `w` waits for it on the client's waiter thread.
  auto held_and_waited = [&](LeaseLock& h, LeaseLock& w) {
    REQUIRE(h.try_acquire());
    auto f = w.acquire_async(10s);
    wait_until_waiting(1);
    return f;
  };
  auto served_wait = [&](const LeaseOptions& opts) {
    return [&, opts](const std::string& n) {
      LeaseLock h(client, n, opts), w(client, n, opts);
      auto f = held_and_waited(h, w);
      REQUIRE(h.release());
      REQUIRE(f.get());
      REQUIRE(w.release());
    };
  };
  using Kind = std::pair<std::string, std::function<void(const std::string&)>>;
  const std::vector<Kind> kinds = {
      {"lease", [&](const std::string& n) {
         LeaseLock l(client, n, o);
         REQUIRE(l.try_acquire());
         REQUIRE(l.release());
       }},
      {"lease-lost", [&](const std::string& n) {
         // A holding that ends lost: an operator ends it, the handle finds
         // out at its renew() and is destroyed without a release.
         LeaseLock l(client, n, o);
         REQUIRE(l.try_acquire());
         REQUIRE(force_release(*admin, n));
         REQUIRE_FALSE(l.renew());
         REQUIRE(l.last_loss().has_value());
       }},
      {"lease-served-wait", served_wait(o)},
      {"lease-cancelled-wait", [&](const std::string& n) {
         LeaseLock h(client, n, o), w(client, n, o);
         auto f = held_and_waited(h, w);
         REQUIRE(w.cancel_acquire());
         REQUIRE_FALSE(f.get());
         REQUIRE(h.release());
       }},
      {"lease-timed-out-wait", [&](const std::string& n) {
         LeaseLock h(client, n, o), w(client, n, o);
         REQUIRE(h.try_acquire());
         REQUIRE_FALSE(w.acquire(20ms));
         REQUIRE(h.release());
       }},
      {"fair-lease-served-wait", served_wait(fair)},
      {"semaphore-served-wait", [&](const std::string& n) {
         Semaphore h(client, n, 1, o), w(client, n, 1, o);
         REQUIRE(h.try_acquire());
         auto f = w.acquire_async(1, 10s);
         wait_until_waiting(1);
         REQUIRE(h.release());
         REQUIRE(f.get());
         REQUIRE(w.release());
       }},
      {"semaphore-blocking-wait", [&](const std::string& n) {
         Semaphore h(client, n, 1, o), w(client, n, 1, o);
         REQUIRE(h.try_acquire());
         REQUIRE_FALSE(w.acquire(1, 20ms));  // the caller's thread naps (sync_wait)
         REQUIRE(h.release());
       }},
      {"leader-term", [&](const std::string& n) {
         // An elector campaigns through the process-wide client of its URI
         // (not `client`): its terms count in the heap only.
         LeaderElector e(ctx().uri, n, ElectionOptions{});
         e.campaign();
         REQUIRE(eventually([&] { return e.is_leader(); }, 10s));
         e.resign();
       }},
      {"read-write", [&](const std::string& n) {
         ReadWriteLease r(client, n, o), x(client, n, o);
         REQUIRE(r.try_acquire(LeaseMode::kShared));
         auto f = x.acquire_async(LeaseMode::kExclusive, 10s);
         wait_until_waiting(1);
         REQUIRE(r.release());
         REQUIRE(f.get());
         REQUIRE(x.release());
       }},
  };
  // Names per batch: a wait costs a wake-up (milliseconds), a plain
  // acquisition a statement.
  auto batch_of = [](const std::string& kind) { return kind == "lease" ? 100 : 50; };
  // Cycles per kind after the warm-up: the plain lease the most (the
  // common case), each waiting kind fewer (a wait costs a wake-up).
  auto batches_of = [&](const std::string& kind) {
    if (kind == "lease") return sqlite ? 200 : 30;
    if (kind == "leader-term") return 1;
    return sqlite ? 8 : 3;
  };
  auto run_batch = [&](const Kind& k, int b) {
    const std::string p = prefix + "_" + k.first + "_" + std::to_string(b) + "_";
    for (int i = 0; i < batch_of(k.first); ++i) k.second(p + std::to_string(i));
    admin::delete_by_prefix(*admin, p);
  };
  for (const auto& k : kinds) run_batch(k, -1);  // warm-up: statement caches, listener, threads
  for (const auto& k : kinds) run_batch(k, -2);
  const ClientCounts before = counts_of(*client);
  // Each kind in two rounds, and the smaller growth counts: state kept per
  // name grows the heap in every round, while what another thread of this
  // test process allocates meanwhile (a client left by an earlier test
  // case) shows in one round, not both.
  std::ostringstream per_kind;
  for (const auto& k : kinds) {
    const int rounds = batches_of(k.first) >= 2 ? 2 : 1;
    const int per_round = batches_of(k.first) / rounds;
    const long round_cycles = static_cast<long>(per_round) * batch_of(k.first);
    long grown = std::numeric_limits<long>::max();
    for (int r = 0; r < rounds; ++r) {
      const std::size_t h0 = heap_in_use();
      for (int b = 0; b < per_round; ++b) run_batch(k, r * per_round + b);
      grown = std::min(grown, static_cast<long>(heap_in_use()) - static_cast<long>(h0));
    }
    per_kind << k.first << " " << grown << " B; ";
    INFO(k.first << ": heap grew at least " << grown << " B per round of " << round_cycles
                 << " acquisitions; counts " << counts_of(*client) << " (before " << before << ")");
    // The listener's count is of its last wait: it catches up at its next.
    CHECK(eventually([&] { return counts_of(*client) == before; }, 5s));
    // 16 KB (allocator per-thread caches, a grown container's capacity;
    // seen here -16 KB .. +9 KB per kind) and 2 B per acquisition. State
    // kept per name costs 100 B or more each: a listened channel's counter
    // was 115 B, 23 KB over a round of 200 of SQLite's waits; issue 43
    // measured 190-610 B.
    CHECK(grown <= 16 * 1024 + 2 * round_cycles);
  }
  INFO("heap growth per kind and round: " << per_kind.str());
  CHECK(counts_of(*client) == before);
}

namespace {
// The first line of the file at `path` that starts with `word`, waiting for
// it up to 30 s ("" if none came).
std::string line_starting(const std::string& path, const std::string& word) {
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < until) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
      if (line.rfind(word, 0) == 0) return line;
    std::this_thread::sleep_for(10ms);
  }
  return "";
}
}  // namespace

TEST_CASE("a holder paused (SIGSTOP) past its ttl reports the diagnosed cause when it resumes while the database "
          "answers: taken_over when another owner took the lease; when nobody did, it keeps it (the database clock "
          "alone ends nothing)",
          "[lock-client][lease][multiprocess]") {
  for (const std::string how : {"client", "watchdog"}) {
    for (const bool take : {true, false}) {
      DYNAMIC_SECTION(how << (take ? ": taken over" : ": kept")) {
        const std::string name = ctx().unique("paused");
        sgtest::tree::TempDir dir;
        const std::string out = dir.file("out");
        std::vector<std::string> argv{sgtest::worker_path(), "lease-loss-cause", ctx().uri, name, "1000", how};
        if (!take) argv.push_back("3000");
        const int pid = sgtest::spawn(argv, out);
        REQUIRE(line_starting(out, "held") == "held");
        REQUIRE(::kill(pid, SIGSTOP) == 0);
        auto client = LockClient::create(ctx().uri);
        LeaseLock taker(client, name, short_lease(10s));
        auto probe = ctx().connect();
        if (take) {
          REQUIRE(taker.acquire(20s));  // once the paused holder's lease ran out
        } else {
          REQUIRE(eventually([&] {
            auto info = lease_info(*probe, name);
            return info && !info->held();
          }, 20s));
        }
        REQUIRE(::kill(pid, SIGCONT) == 0);
        CHECK(sgtest::wait_pid(pid) == 0);
        if (take) CHECK(line_starting(out, "lost") == "lost taken_over");
        else CHECK(line_starting(out, "kept") == "kept");
        if (take) CHECK(taker.release());
      }
    }
  }
}

TEST_CASE("in a forked child every call on an inherited lock-client lease handle throws, its observers included",
          "[lock-client][fork]") {
  auto client = LockClient::create(ctx().uri);
  LeaseLock lock(client, ctx().unique("forkobs"), short_lease(10s));
  REQUIRE(lock.try_acquire());
  REQUIRE(lock.owns());
  // The number of the first call that answered in the child (0: none).
  const int first = sgtest::first_answered_in_child([&](sgtest::MustRefuse& must) {
    sgtest::must_refuse_handle_calls(must, lock);             // 1..8
    must([&] { (void)lock.expires_at_ms(); });                // 9
    must([&] { (void)lock.renew(); });                        // 10
    if (!must.first_answered && lock.name().empty()) must.first_answered = 50;  // name() answers
  });
  CHECK(first == 0);
  CHECK(lock.owns());  // the parent's lease is untouched
  CHECK(lock.hold_count() == 1);
  CHECK(lock.release());
}

TEST_CASE("LockClient::shared() gives one client for every spelling of one URI", "[lock-client][uri]") {
  const std::string uri = ctx().uri;
  auto a = LockClient::shared(uri);
  const auto colon = uri.find(':');
  const std::string scheme = uri.substr(0, colon), rest = uri.substr(colon);
  const std::string alias = scheme == "postgresql" ? "postgres" : scheme == "postgres" ? "postgresql"
                            : scheme == "mysql"    ? "mariadb"
                            : scheme == "sqlite"   ? "sqlite3"
                                                   : scheme;
  REQUIRE(alias != scheme);
  CHECK(LockClient::shared(alias + rest) == a);
  if (!ctx().is_sqlite()) {
    const bool has_query = uri.find('?') != std::string::npos;
    if (!has_query) CHECK(LockClient::shared(uri + "?") == a);  // a trailing '?'
    const std::string sep = has_query ? "&" : "?";
    auto b = LockClient::shared(uri + sep + "connect_timeout=30&statement_cache_size=100");
    CHECK(LockClient::shared(uri + sep + "statement_cache_size=100&connect_timeout=30") == b);  // parameter order
    CHECK(b != a);  // other parameters: another client
  }
}

TEST_CASE("a renewer that falls behind refuses new leases (resource_exhausted) and keeps every held one; a blocking "
          "acquire waits it out and is served once renewals are back in time",
          "[lock-client][seams][exhaustion]") {
  // Issue 36 item 10: a bulk acquire beside 10,000 renewed leases on a busy
  // server slowed the renewals until whole batches came back after their
  // trust windows (1,003 healthy leases lost). Here one renewal is held up
  // by a real row lock (SQLite: the database's write lock) of another
  // session until less than half of its lease's slack is left: the client
  // must then take no new lease until a renewal round is back in time.
  // ttl 6 s: margin 0.6 s, period 2 s, trust window 5.4 s, slack 3.4 s.
  auto client = LockClient::create(ctx().uri);
  const std::string prefix = ctx().unique("behind");
  std::atomic<int> lost{0};
  LeaseOptions o = short_lease(6s);
  o.on_lost = [&](const LeaseLoss&) { ++lost; };
  LeaseLock held(client, prefix + "_held", o);
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(held.try_acquire());
  CHECK_FALSE(client->stats().renewal_behind);
  hold_back_first_renewal(held, t0);
  const bool behind = eventually([&] { return client->stats().renewal_behind; }, 3s);
  {
    const auto st = client->stats();
    INFO("renewal statements " << st.renewal_statements << ", renewed " << st.leases_renewed << ", lag max "
                               << st.renewal_lag_max_ms << " ms, lost " << st.leases_lost);
    REQUIRE(behind);
  }
  CHECK(held.owns());
  LeaseLock newcomer(client, prefix + "_new", short_lease(6s));
  auto refused = catch_error([&] { newcomer.try_acquire(); });
  INFO(refused.what);
  CHECK(refused.code == ErrorCode::kResourceExhausted);
  CHECK_THAT(refused.what, Catch::Matchers::Contains("falling behind") && Catch::Matchers::Contains(newcomer.name()));
  CHECK_FALSE(newcomer.owns());
  auto admin = ctx().connect();
  CHECK_FALSE(lease_info(*admin, newcomer.name()).has_value());  // refused before anything was sent
  // A blocking acquire is held back, not failed: the next round (2 s after
  // the late one, the row free) is in time again.
  const auto attempts_before = client->stats().attempts;
  CHECK(newcomer.acquire(10s));
  CHECK_FALSE(client->stats().renewal_behind);
  // Its waits were paced while refused, not retried at once: on MariaDB the
  // never-held name's wake-up lock is free, and each pass of it woke the
  // head again (thousands of refused attempts in 2 s before the fix).
  CHECK(client->stats().attempts - attempts_before < 100);
  CHECK(held.owns());
  CHECK(held_in_db(*admin, held));
  CHECK(lost.load() == 0);
  CHECK(client->stats().leases_lost == 0);
  CHECK(client->stats().exhausted >= 1);
}

TEST_CASE("behind PgBouncer, a lock client on the application's pool loses its leases while other clients' "
          "transactions take every server connection (negative control); on a pool of its own it keeps them all",
          "[.topology][pgbouncer][lock-client]") {
  // Issue 36 item 10's PgBouncer half: all 2,000 held leases lost
  // (outcome_unknown), the renewal connection silent for periods. Through a
  // transaction pooler a renewal waits for a server connection like any
  // transaction: with the pool (default_pool_size 20) taken by others for
  // longer than the leases' slack, its answer comes too late. The
  // documented deployment gives lock clients a pool of their own (a
  // [databases] alias of the same database: sqlguard_locks, pool_size 2).
  const std::string shared_pool = sgtest::with_query(sgtest::required_env("SQLGUARD_TEST_PGBOUNCER_URI"),
                                                     "pooler=transaction");
  const std::string own_pool = sgtest::with_query(sgtest::required_env("SQLGUARD_TEST_PGBOUNCER_LOCKS_URI"),
                                                  "pooler=transaction");
  // Both pools reach the topology's base database, which outlives test runs
  // (its data is kept between starts): bring it to this build's schema.
  sqlguard::migrate(*make_connection(shared_pool));
  constexpr int kPool = 20, kLeases = 50;
  auto run = [&](const std::string& uri) {
    auto client = LockClient::create(uri);
    const std::string prefix = ctx().unique("pool");
    std::vector<std::unique_ptr<LeaseLock>> held;
    for (int i = 0; i < kLeases; ++i) {
      held.push_back(std::make_unique<LeaseLock>(client, prefix + "_" + std::to_string(i), short_lease(2s)));
      REQUIRE(held.back()->try_acquire());
    }
    // Other clients of the application's pool, each in a transaction: they
    // hold every server connection of that pool for 3 s (the leases' trust
    // window is 1.8 s; renewed every 0.67 s).
    std::vector<std::unique_ptr<Connection>> others;
    for (int i = 0; i < kPool; ++i) others.push_back(make_connection(shared_pool));
    for (auto& c : others) {
      c->begin();
      c->execute("SELECT 1");
    }
    std::this_thread::sleep_for(3s);
    for (auto& c : others) c->commit();
    std::this_thread::sleep_for(1s);  // a round after the pool is free again
    std::size_t owned = 0;
    for (auto& l : held) owned += l->owns() ? 1 : 0;
    return std::make_pair(owned, client->stats().leases_lost);
  };
  const auto [shared_owned, shared_lost] = run(shared_pool);
  INFO("the application's pool: " << shared_owned << " of " << kLeases << " still owned, " << shared_lost << " lost");
  CHECK(shared_lost > 0);  // the negative control: the starvation is real
  const auto [own_owned, own_lost] = run(own_pool);
  INFO("a pool of its own: " << own_owned << " of " << kLeases << " still owned, " << own_lost << " lost");
  CHECK(own_owned == kLeases);
  CHECK(own_lost == 0);
}

TEST_CASE("a lock client that was behind and then holds nothing takes new leases at once", "[lock-client][seams]") {
  // No renewal round runs with nothing held: the refusal must not outlive
  // the last holding (it once would have, with no round left to clear it).
  auto client = LockClient::create(ctx().uri);
  const std::string prefix = ctx().unique("behindnone");
  LeaseLock held(client, prefix + "_held", short_lease(6s));
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(held.try_acquire());
  hold_back_first_renewal(held, t0);
  REQUIRE(eventually([&] { return client->stats().renewal_behind; }, 3s));
  REQUIRE(held.release());
  CHECK(eventually([&] { return !client->stats().renewal_behind; }, 1s));
  LeaseLock next(client, prefix + "_next", short_lease(6s));
  CHECK(next.try_acquire());
  CHECK(next.release());
}
