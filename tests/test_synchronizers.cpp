// The synchronizers beyond the mutex (issue 28): Semaphore (semaphore.h),
// ReadWriteLease (read_write_lease.h) and the fair lease (LeaseOptions::fair),
// on every dialect (and through PgBouncer / on Galera in those steps). Each
// invariant has a negative control showing its check can fire.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "sqlguard/admin.h"
#include "sqlguard/cleanup.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"
#include "sqlguard/read_write_lease.h"
#include "sqlguard/semaphore.h"
#include "sql_audit.h"
#include "test_context.h"
#include "test_helpers.h"
#include "strategies/sync/sync_ops.h"

using namespace sqlguard;
using namespace std::chrono_literals;
using sgtest::code_of;
using sgtest::ctx;
using sgtest::eventually;

namespace {

LeaseOptions opts(std::chrono::milliseconds ttl = 3s) {
  LeaseOptions o;
  o.ttl = ttl;
  o.backoff_max = 50ms;
  return o;
}

LeaseOptions fair_opts(std::chrono::milliseconds ttl = 5s) {
  LeaseOptions o = opts(ttl);
  o.fair = true;
  return o;
}

// The name's live queue places (on the database clock). A fair release may
// end its place by expiring it first (MariaDB: in the release statement
// itself) and delete it right after the wake-up.
std::int64_t live_places(const std::string& name) {
  auto c = ctx().connect();
  return sgtest::query_int("SELECT COUNT(*) FROM sqlguard_lock_queue WHERE name = ? AND expire_at > ?",
                           {name, c->db_now_ms()});
}

// The positions of `grants` that came before a grant of a smaller arrival
// number (arrivals are 0, 1, 2, ...): FIFO keeps none.
int out_of_order(const std::vector<int>& grants) {
  int bad = 0;
  for (std::size_t i = 1; i < grants.size(); ++i)
    if (grants[i] < grants[i - 1]) ++bad;
  return bad;
}

// Arrival order against grant order: waiter i (0 .. n-1) calls acquire(i) on
// its own thread once waiter i - 1 has its queue place; then the holder
// releases (release_holder() must say it did) and each waiter granted holds a
// moment and calls release(i). The grants in the order they came; the queue
// is left empty.
std::vector<int> grant_order(const std::string& name, int n, const std::function<bool(int)>& acquire,
                             const std::function<void(int)>& release, const std::function<bool()>& release_holder) {
  std::mutex mu;
  std::vector<int> grants;
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i) {
    ts.emplace_back([&, i] {
      if (acquire(i)) {
        {
          std::lock_guard<std::mutex> lk(mu);
          grants.push_back(i);
        }
        std::this_thread::sleep_for(20ms);
        release(i);
      }
    });
    // Arrival i has its place before arrival i + 1 starts.
    REQUIRE(eventually([&] { return live_places(name) == i + 1; }, 10s));
  }
  CHECK(release_holder());
  for (auto& t : ts) t.join();
  INFO("grant order: " << [&] {
    std::string s;
    for (int g : grants) s += std::to_string(g) + " ";
    return s;
  }());
  CHECK(grants.size() == static_cast<std::size_t>(n));
  CHECK(live_places(name) == 0);
  return grants;
}

// Most holders seen at once by `threads` workers that each take `n` permits of
// `permits` (through two clients) `rounds` times, holding a moment; each
// release must find its holding. `idle`: up to this long (random) between a
// release and the next acquire.
int most_at_once(const std::string& name, std::int64_t permits, int threads, int rounds,
                 std::chrono::milliseconds idle = 0ms) {
  auto a = LockClient::create(ctx().uri);
  auto b = LockClient::create(ctx().uri);
  std::atomic<int> inside{0}, most{0}, failures{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      try {
        Semaphore sem(t % 2 ? a : b, name, permits, opts());
        for (int r = 0; r < rounds; ++r) {
          if (!sem.acquire(1, 20s)) {
            ++failures;
            continue;
          }
          const int now = ++inside;
          int seen = most.load();
          while (now > seen && !most.compare_exchange_weak(seen, now)) {
          }
          // Long enough against an attempt's round trips (through PgBouncer
          // too) that holders do overlap when the permits allow it.
          std::this_thread::sleep_for(25ms);
          --inside;
          if (!sem.release()) ++failures;  // its holding was lost while held
          if (idle.count() > 0) {
            thread_local std::mt19937 rng(static_cast<unsigned>(t + 1));
            std::this_thread::sleep_for(std::chrono::milliseconds(rng() % static_cast<unsigned>(idle.count())));
          }
        }
      } catch (const std::exception& e) {
        ++failures;
        static std::mutex report;  // Catch2's message stack is not thread-safe
        std::lock_guard<std::mutex> lk(report);
        UNSCOPED_INFO("worker " << t << ": " << e.what());
      }
    });
  for (auto& t : ts) t.join();
  REQUIRE(failures == 0);
  return most;
}

}  // namespace

// ---- Semaphore -------------------------------------------------------------------

TEST_CASE("a semaphore of 3 permits admits 3 holders and refuses a fourth until one releases", "[semaphore]") {
  auto client = LockClient::create(ctx().uri);
  auto other = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("sem3");
  std::vector<std::unique_ptr<Semaphore>> sems;
  for (int i = 0; i < 4; ++i) sems.push_back(std::make_unique<Semaphore>(i % 2 ? client : other, name, 3, opts()));
  CHECK(sems[0]->try_acquire());
  CHECK(sems[1]->try_acquire());
  CHECK(sems[2]->try_acquire());
  CHECK_FALSE(sems[3]->try_acquire());
  auto probe = ctx().connect();
  auto info = synchronizer_info(*probe, name);
  CHECK(info.kind == "semaphore");
  CHECK(info.permits == 3);
  CHECK(info.in_use == 3);
  // Each holding has its own owner token and an increasing fence.
  CHECK(sems[0]->owner() != sems[1]->owner());
  CHECK(sems[0]->fence() < sems[1]->fence());
  CHECK(sems[1]->fence() < sems[2]->fence());
  CHECK(sems[1]->release());
  CHECK(sems[3]->try_acquire());
  CHECK(sems[3]->fence() > sems[2]->fence());
  for (int i : {0, 2, 3}) CHECK(sems[i]->release());
  CHECK(synchronizer_info(*probe, name).in_use == 0);
}

TEST_CASE("acquire(n) takes n permits at once or none", "[semaphore]") {
  auto client = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("semn");
  Semaphore a(client, name, 5, opts()), b(client, name, 5, opts());
  REQUIRE(a.try_acquire(3));
  CHECK(a.held_permits() == 3);
  CHECK_FALSE(b.try_acquire(3));  // 3 + 3 > 5: none taken
  auto probe = ctx().connect();
  CHECK(synchronizer_info(*probe, name).in_use == 3);
  CHECK(b.try_acquire(2));
  CHECK(synchronizer_info(*probe, name).in_use == 5);
  CHECK(a.release());
  CHECK(b.release());
}

TEST_CASE("concurrent holders of a semaphore never exceed its permits; with more permits the same check sees more",
          "[semaphore]") {
  const int threads = ctx().is_sqlite() ? 6 : 8;
  const int rounds = ctx().is_sqlite() ? 6 : 10;
  const int most3 = most_at_once(ctx().unique("semmax"), 3, threads, rounds);
  CHECK(most3 <= 3);
  // Negative control: the counter sees more than 3 holders at once when the
  // semaphore allows it, so "<= 3" above could have failed.
  const int most6 = most_at_once(ctx().unique("semmax6"), 6, threads, rounds);
  CHECK(most6 > 3);
}

TEST_CASE("a dead holder's permits come back when its holding expires", "[semaphore]") {
  const std::string name = ctx().unique("semdead");
  const std::string uri = ctx().uri;
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    try {
      // A new process-wide client in the child; it dies holding: _exit runs
      // no destructor, so the holding stays until it expires.
      Semaphore sem(uri, name, 1, opts(1s), Watchdog::kOff);
      ::_exit(sem.try_acquire() ? 0 : 20);
    } catch (...) {
      ::_exit(21);
    }
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  auto client = LockClient::create(ctx().uri);
  Semaphore sem(client, name, 1, opts());
  CHECK_FALSE(sem.try_acquire());  // the dead holder's permit is still live
  CHECK(sem.acquire(1, 10s));      // and comes back at its expiry
  CHECK(sem.release());
}

TEST_CASE("a semaphore's permits change at runtime; shrinking waits for holders to leave", "[semaphore]") {
  auto client = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("semresize");
  std::vector<std::unique_ptr<Semaphore>> s;
  for (int i = 0; i < 3; ++i) s.push_back(std::make_unique<Semaphore>(client, name, 3, opts()));
  for (int i = 0; i < 3; ++i) REQUIRE(s[i]->try_acquire());
  s[0]->set_permits(1);
  auto probe = ctx().connect();
  CHECK(synchronizer_info(*probe, name).permits == 1);
  CHECK(s[1]->owns());  // holders above the new count keep their permits
  // A handle asks with the name's new count (one asking with 3 is refused:
  // test_lock_kinds.cpp).
  Semaphore one(client, name, 1, opts());
  CHECK(s[0]->release());
  CHECK_FALSE(one.try_acquire());  // 2 held, count 1
  CHECK(s[1]->release());
  CHECK_FALSE(one.try_acquire());  // 1 held, count 1
  CHECK(s[2]->release());
  CHECK(one.try_acquire());
  CHECK_FALSE(s[0]->try_acquire());  // set_permits made s[0] ask with 1
  s[0]->set_permits(2);  // growing lets one more in at once
  CHECK(s[0]->try_acquire());
  CHECK(s[0]->release());
  CHECK(one.release());
}

TEST_CASE("a semaphore holding is renewed by the client and reported lost once when its row is deleted",
          "[semaphore]") {
  auto client = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("semrenew");
  std::atomic<int> lost{0};
  std::optional<LossCause> cause;
  std::mutex mu;
  LeaseOptions o = opts(1200ms);
  o.on_lost = [&](const LeaseLoss& l) {
    ++lost;
    std::lock_guard<std::mutex> lk(mu);
    cause = l.cause;
  };
  Semaphore kept(client, name, 2, opts(1200ms)), doomed(client, name, 2, o);
  REQUIRE(kept.try_acquire());
  REQUIRE(doomed.try_acquire());
  std::this_thread::sleep_for(2500ms);  // two ttls: only renewals keep them
  CHECK(kept.owns());
  CHECK(doomed.owns());
  CHECK(client->stats().held_leases == 2);
  sgtest::exec("DELETE FROM sqlguard_sync_holder WHERE name = ? AND fence = ?", {name, doomed.fence()});
  CHECK(eventually([&] { return lost.load() > 0; }, 10s));
  std::this_thread::sleep_for(1500ms);
  CHECK(lost == 1);
  {
    std::lock_guard<std::mutex> lk(mu);
    CHECK(cause == LossCause::kTakenOver);
  }
  CHECK_FALSE(doomed.owns());
  CHECK(kept.owns());  // lost independently
  CHECK_FALSE(doomed.release());
  CHECK(kept.release());
}

TEST_CASE("a semaphore waiter is woken by a release of the same client and gets the permit", "[semaphore]") {
  auto client = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("semwait");
  LeaseOptions o = opts();
  o.backoff_max = 5s;  // a nap that only the wake-up can cut short
  Semaphore holder(client, name, 1, o), waiter(client, name, 1, o);
  REQUIRE(holder.try_acquire());
  auto got = std::async(std::launch::async, [&] { return waiter.acquire(1, 30s); });
  std::this_thread::sleep_for(300ms);
  CHECK(got.wait_for(0ms) == std::future_status::timeout);
  CHECK(holder.release());
  REQUIRE(got.wait_for(20s) == std::future_status::ready);
  CHECK(got.get());
  CHECK(waiter.release());
}

TEST_CASE("a busy semaphore or read-write attempt is a read: the name's row is not written", "[semaphore][rw-lease]") {
  auto client = LockClient::create(ctx().uri);
  const std::string sem_name = ctx().unique("peeksem"), rw_name = ctx().unique("peekrw");
  auto version = [](const std::string& n) {
    return sgtest::query_int("SELECT version FROM sqlguard_sync WHERE name = ?", {n});
  };
  Semaphore a(client, sem_name, 1, opts()), b(client, sem_name, 1, opts());
  REQUIRE(a.try_acquire());
  const auto v0 = version(sem_name);
  for (int i = 0; i < 5; ++i) CHECK_FALSE(b.try_acquire());
  CHECK(version(sem_name) == v0);
  CHECK(a.release());
  CHECK(b.try_acquire());  // negative control: an acquire does write it
  CHECK(version(sem_name) > v0);
  CHECK(b.release());
  ReadWriteLease w(client, rw_name, opts()), r(client, rw_name, opts());
  REQUIRE(w.try_acquire(LeaseMode::kExclusive));
  const auto v1 = version(rw_name);
  for (int i = 0; i < 5; ++i) CHECK_FALSE(r.try_acquire(LeaseMode::kShared));
  CHECK(version(rw_name) == v1);
  CHECK(w.release());
}

TEST_CASE("asynchronous semaphore acquires wait without a thread each and are all served; cancelling one leaves "
          "nothing behind",
          "[semaphore]") {
  LockClientOptions co;
  co.max_connections = 4;
  auto client = LockClient::create(ctx().uri, co);
  const std::string name = ctx().unique("semasync");
  const int n = ctx().is_sqlite() ? 60 : 120;
  LeaseOptions o = opts();
  Semaphore holder(client, name, 3, o);
  REQUIRE(holder.try_acquire(3));  // everyone waits
  std::vector<std::unique_ptr<Semaphore>> sems;
  std::atomic<int> served{0}, inside{0}, most{0}, failed{0};
  std::vector<std::future<bool>> futs;
  for (int i = 0; i < n; ++i) sems.push_back(std::make_unique<Semaphore>(client, name, 3, o));
  std::mutex mu;
  std::vector<Semaphore*> to_release;
  std::condition_variable cv;
  for (int i = 0; i < n; ++i)
    sems[i]->acquire_async(1, 60s, [&, i](bool ok, std::exception_ptr e) {
      if (!ok || e) {
        ++failed;
        return;
      }
      const int now = ++inside;
      int seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      std::lock_guard<std::mutex> lk(mu);
      to_release.push_back(sems[i].get());  // released by the test thread (callbacks must not block)
      cv.notify_all();
    });
  auto stats = client->stats();
  CHECK(stats.waiters == static_cast<std::size_t>(n));
  CHECK(stats.threads <= 4);
  // A cancelled wait leaves the queue at once and its callback says so.
  Semaphore quitter(client, name, 3, o);
  std::promise<bool> q;
  quitter.acquire_async(1, 60s, [&](bool ok, std::exception_ptr) { q.set_value(ok); });
  CHECK(quitter.cancel_acquire());
  CHECK_FALSE(q.get_future().get());
  CHECK(holder.release());
  const auto end = std::chrono::steady_clock::now() + 60s;
  while (served < n && std::chrono::steady_clock::now() < end) {
    std::vector<Semaphore*> batch;
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait_for(lk, 100ms, [&] { return !to_release.empty(); });
      batch.swap(to_release);
    }
    for (auto* s : batch) {
      --inside;
      CHECK(s->release());
      ++served;
    }
  }
  CHECK(served == n);
  CHECK(failed == 0);
  CHECK(most <= 3);
  CHECK(client->stats().waiters == 0);
  auto probe = ctx().connect();
  CHECK(synchronizer_info(*probe, name).in_use == 0);
}

TEST_CASE("an asynchronous exclusive acquire waits for the shared holders; destroying a waiting handle cancels it",
          "[rw-lease]") {
  auto client = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("rwasync");
  ReadWriteLease reader(client, name, opts()), writer(client, name, opts());
  REQUIRE(reader.try_acquire(LeaseMode::kShared));
  auto w = writer.acquire_async(LeaseMode::kExclusive, 30s);
  auto probe = ctx().connect();
  REQUIRE(eventually([&] { return synchronizer_info(*probe, name).writer_waiting; }, 10s));
  CHECK(w.wait_for(200ms) == std::future_status::timeout);
  CHECK(reader.release());
  REQUIRE(w.wait_for(20s) == std::future_status::ready);
  CHECK(w.get());
  CHECK(writer.mode() == LeaseMode::kExclusive);
  {
    ReadWriteLease doomed(client, name, opts());
    doomed.acquire_async(LeaseMode::kShared, 30s, [](bool, std::exception_ptr) {});
    CHECK(client->stats().waiters == 1);
  }
  // Cancelled: at once, or right after its attempt in flight ends.
  CHECK(eventually([&] { return client->stats().waiters == 0; }, 10s));
  CHECK(writer.release());
  CHECK(synchronizer_info(*probe, name).shared == 0);
}

TEST_CASE("semaphore bad input is refused with a clear error and sends nothing", "[semaphore]") {
  auto client = LockClient::create(ctx().uri);
  std::string what;
  CHECK(code_of([&] { Semaphore s(client, ctx().unique("bad"), 0); }, &what) == ErrorCode::kInvalidArgument);
  CHECK(what.find("permits") != std::string::npos);
  CHECK(code_of([&] { Semaphore s(client, "", 2); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { Semaphore s(client, std::string(256, 'x'), 2); }) == ErrorCode::kInvalidArgument);
  Semaphore ok(client, ctx().unique("badn"), 2, opts());
  CHECK(code_of([&] { ok.try_acquire(0); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { ok.try_acquire(2000000); }) == ErrorCode::kInvalidArgument);
  LeaseOptions fair;
  fair.fair = true;
  CHECK(code_of([&] { ReadWriteLease r(client, ctx().unique("badfair"), fair); }) == ErrorCode::kInvalidArgument);
  LeaseOptions placed;
  placed.place_ttl = 1s;  // without fair
  CHECK(code_of([&] { Semaphore s(client, ctx().unique("badplace"), 2, placed); }) == ErrorCode::kInvalidArgument);
  // One name is one kind of lock.
  const std::string name = ctx().unique("kind");
  ReadWriteLease rw(client, name, opts());
  REQUIRE(rw.try_acquire(LeaseMode::kShared));
  Semaphore same(client, name, 2, opts());
  CHECK(code_of([&] { same.try_acquire(); }, &what) == ErrorCode::kInvalidArgument);
  CHECK(what.find("read-write lease") != std::string::npos);
  CHECK(rw.release());
  // A handle holds one holding at a time.
  REQUIRE(ok.try_acquire(1));
  CHECK(ok.try_acquire(1));  // re-entrant: same n
  CHECK(ok.hold_count() == 2);
  CHECK(code_of([&] { ok.try_acquire(2); }) == ErrorCode::kInvalidArgument);
  CHECK(ok.release());
  CHECK(ok.release());
  CHECK(ok.hold_count() == 0);
}

TEST_CASE("SemaphoreGuard holds permits for its scope and throws kLockBusy when none are free", "[semaphore]") {
  auto client = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("semguard");
  Semaphore a(client, name, 1, opts()), b(client, name, 1, opts());
  {
    SemaphoreGuard g(a);
    CHECK(g.owns());
    CHECK(code_of([&] { SemaphoreGuard g2(b, 1, 50ms); }) == ErrorCode::kLockBusy);
  }
  SemaphoreGuard g3(b);
  CHECK(g3.owns());
}

// ---- ReadWriteLease ------------------------------------------------------------------

TEST_CASE("a fair semaphore serves a waiter asking for many before later ones asking for few; an unfair one lets "
          "them overtake",
          "[semaphore][fair-semaphore]") {
  // 2 permits; A holds 1. B (another client) waits for 2, then C (a third
  // client) asks for 1: one permit is free, but C arrived after B.
  auto overtaken = [](bool fair) {
    LeaseOptions o = opts(5s);
    o.fair = fair;
    o.backoff_max = 20ms;
    const std::string name = ctx().unique(fair ? "fairsem" : "unfairsem");
    auto a = LockClient::create(ctx().uri), b = LockClient::create(ctx().uri), c = LockClient::create(ctx().uri);
    Semaphore holder(a, name, 2, o), big(b, name, 2, o), small(c, name, 2, o), late(c, name, 2, o);
    REQUIRE(holder.try_acquire(1));
    auto big_got = big.acquire_async(2, 20s);
    if (fair) REQUIRE(eventually([&] { return live_places(name) == 1; }, 10s));
    else std::this_thread::sleep_for(200ms);  // B has tried and waits
    // A try for the free permit: only when nobody waits, if fair.
    const bool try_got = late.try_acquire(1);
    if (try_got) late.release();
    auto small_got = small.acquire_async(1, 20s);
    std::this_thread::sleep_for(300ms);
    const bool small_first = small_got.wait_for(0s) == std::future_status::ready;
    CHECK(holder.release());
    if (small_first) {  // C overtook B: B's 2 permits come once C lets go
      CHECK(small_got.get());
      CHECK(small.release());
    }
    CHECK(big_got.get());
    if (!small_first) {
      // Fair: C is served only once B has been (B holds both permits now).
      CHECK(small_got.wait_for(200ms) == std::future_status::timeout);
    }
    CHECK(big.release());
    if (!small_first) {
      CHECK(small_got.get());
      CHECK(small.release());
    }
    return std::make_pair(small_first, try_got);
  };
  const auto fair = overtaken(true);
  CHECK_FALSE(fair.first);   // C did not overtake B
  CHECK_FALSE(fair.second);  // nor did a try while B waited
  const auto unfair = overtaken(false);  // negative control
  CHECK(unfair.first);
  CHECK(unfair.second);
}

TEST_CASE("fair semaphore waiters across clients are served in arrival order and leave no place behind",
          "[semaphore][fair-semaphore]") {
  LeaseOptions o = opts(5s);
  o.fair = true;
  const std::string name = ctx().unique("fairsemorder");
  auto h = LockClient::create(ctx().uri);
  Semaphore holder(h, name, 1, o);
  REQUIRE(holder.try_acquire());
  const int n = 5;
  std::vector<std::shared_ptr<LockClient>> clients;
  std::vector<std::unique_ptr<Semaphore>> ws;
  for (int i = 0; i < n; ++i) {
    clients.push_back(LockClient::create(ctx().uri));
    ws.push_back(std::make_unique<Semaphore>(clients.back(), name, 1, o));
  }
  const auto grants = grant_order(
      name, n,
      [&](int i) { return ws[static_cast<std::size_t>(i)]->acquire(1, 30s); },  // blocking: takes its place like an async one
      [&](int i) { ws[static_cast<std::size_t>(i)]->release(); }, [&] { return holder.release(); });
  CHECK(out_of_order(grants) == 0);
}

TEST_CASE("a read-write lease has many shared holders or one exclusive holder", "[rw-lease]") {
  auto client = LockClient::create(ctx().uri);
  auto other = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("rw");
  ReadWriteLease r1(client, name, opts()), r2(other, name, opts()), w(other, name, opts()), w2(client, name, opts());
  REQUIRE(r1.try_acquire(LeaseMode::kShared));
  REQUIRE(r2.try_acquire(LeaseMode::kShared));
  CHECK(r1.mode() == LeaseMode::kShared);
  CHECK_FALSE(w.try_acquire(LeaseMode::kExclusive));
  auto probe = ctx().connect();
  auto info = synchronizer_info(*probe, name);
  CHECK(info.shared == 2);
  CHECK_FALSE(info.exclusive);
  CHECK(r1.release());
  CHECK(r2.release());
  REQUIRE(w.try_acquire(LeaseMode::kExclusive));
  CHECK_FALSE(r1.try_acquire(LeaseMode::kShared));
  CHECK_FALSE(w2.try_acquire(LeaseMode::kExclusive));
  CHECK(synchronizer_info(*probe, name).exclusive);
  CHECK(w.release());
  CHECK(r1.try_acquire(LeaseMode::kShared));
  CHECK(r1.release());
}

TEST_CASE("the fence increases per exclusive acquisition and shared holders see the last one", "[rw-lease]") {
  auto client = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("rwfence");
  ReadWriteLease a(client, name, opts()), b(client, name, opts());
  REQUIRE(a.try_acquire(LeaseMode::kExclusive));
  const std::int64_t f1 = a.fence();
  CHECK(a.release());
  REQUIRE(b.try_acquire(LeaseMode::kShared));
  CHECK(b.fence() == f1);
  REQUIRE(a.try_acquire(LeaseMode::kShared));
  CHECK(a.fence() == f1);
  CHECK(a.release());
  CHECK(b.release());
  REQUIRE(a.try_acquire(LeaseMode::kExclusive));
  CHECK(a.fence() > f1);
  const std::int64_t f2 = a.fence();
  CHECK(a.release());
  REQUIRE(b.try_acquire(LeaseMode::kShared));
  CHECK(b.fence() == f2);
  CHECK(b.release());
}

TEST_CASE("a waiting writer blocks new readers (writer preference); without one a reader joins", "[rw-lease]") {
  auto client = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("rwpref");
  ReadWriteLease r1(client, name, opts()), r2(client, name, opts()), w(client, name, opts());
  REQUIRE(r1.try_acquire(LeaseMode::kShared));
  // Negative control: with no writer waiting, a second reader joins at once.
  REQUIRE(r2.try_acquire(LeaseMode::kShared));
  CHECK(r2.release());
  auto writer = std::async(std::launch::async, [&] { return w.acquire(LeaseMode::kExclusive, 30s); });
  auto probe = ctx().connect();
  REQUIRE(eventually([&] { return synchronizer_info(*probe, name).writer_waiting; }, 10s));
  CHECK_FALSE(r2.try_acquire(LeaseMode::kShared));  // the waiting writer goes first
  CHECK(r1.release());
  REQUIRE(writer.wait_for(20s) == std::future_status::ready);
  CHECK(writer.get());
  CHECK_FALSE(synchronizer_info(*probe, name).writer_waiting);  // withdrawn by the exclusive acquisition
  CHECK(w.release());
  CHECK(r2.try_acquire(LeaseMode::kShared));
  CHECK(r2.release());
}

TEST_CASE("concurrent shared and exclusive holders never overlap; the checker sees overlaps when they are allowed",
          "[rw-lease]") {
  auto run = [](const std::string& writers_name, const std::string& readers_name) {
    auto a = LockClient::create(ctx().uri);
    auto b = LockClient::create(ctx().uri);
    std::atomic<int> readers{0}, writers{0}, violations{0}, failures{0}, shared_seen{0};
    std::vector<std::thread> ts;
    const int threads = ctx().is_sqlite() ? 6 : 8;
    const int rounds = ctx().is_sqlite() ? 8 : 14;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        try {
          const bool writer = t % 3 == 0;
          ReadWriteLease l(t % 2 ? a : b, writer ? writers_name : readers_name, opts());
          for (int r = 0; r < rounds; ++r) {
            if (!l.acquire(writer ? LeaseMode::kExclusive : LeaseMode::kShared, 20s)) {
              ++failures;
              continue;
            }
            if (writer) {
              if (++writers > 1 || readers.load() > 0) ++violations;
            } else {
              if (++readers > 1) ++shared_seen;
              if (writers.load() > 0) ++violations;
            }
            std::this_thread::sleep_for(2ms);
            --(writer ? writers : readers);
            l.release();
          }
        } catch (const std::exception& e) {
          ++failures;
          UNSCOPED_INFO("worker " << t << ": " << e.what());
        }
      });
    for (auto& t : ts) t.join();
    REQUIRE(failures == 0);
    return std::make_pair(violations.load(), shared_seen.load());
  };
  const std::string name = ctx().unique("rwmix");
  auto [violations, shared_seen] = run(name, name);
  CHECK(violations == 0);
  CHECK(shared_seen > 0);  // readers did share
  // Negative control: writers and readers on different names are not
  // excluded, and the same checker counts the overlaps.
  auto [control, unused] = run(ctx().unique("rwmix_w"), ctx().unique("rwmix_r"));
  CHECK(control > 0);
}

TEST_CASE("each read-write holder is renewed and lost independently", "[rw-lease]") {
  auto client = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("rwlost");
  std::atomic<int> lost_a{0}, lost_b{0};
  LeaseOptions oa = opts(1200ms), ob = opts(1200ms);
  oa.on_lost = [&](const LeaseLoss&) { ++lost_a; };
  ob.on_lost = [&](const LeaseLoss&) { ++lost_b; };
  ReadWriteLease a(client, name, oa), b(client, name, ob);
  REQUIRE(a.try_acquire(LeaseMode::kShared));
  REQUIRE(b.try_acquire(LeaseMode::kShared));
  std::this_thread::sleep_for(2500ms);
  CHECK(a.owns());
  CHECK(b.owns());
  sgtest::exec("DELETE FROM sqlguard_sync_holder WHERE name = ? AND owner = ?", {name, a.owner()});
  CHECK(eventually([&] { return lost_a.load() > 0; }, 10s));
  std::this_thread::sleep_for(1000ms);
  CHECK(lost_a == 1);
  CHECK(lost_b == 0);
  CHECK(b.owns());
  CHECK(b.release());
}

TEST_CASE("a read-write handle is re-entrant in its mode and never changes mode while holding", "[rw-lease]") {
  auto client = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("rwreent");
  ReadWriteLease a(client, name, opts());
  {
    ReadWriteGuard g(a, LeaseMode::kShared);
    CHECK(a.try_acquire(LeaseMode::kShared));
    CHECK(a.hold_count() == 2);
    CHECK(code_of([&] { a.try_acquire(LeaseMode::kExclusive); }) == ErrorCode::kInvalidArgument);
    CHECK(a.release());
  }
  CHECK(a.hold_count() == 0);
  ReadWriteGuard w(a, LeaseMode::kExclusive);
  CHECK(w.owns());
}

// ---- fair lease ---------------------------------------------------------------------------


TEST_CASE("the FIFO checker counts a grant that overtook an earlier arrival", "[fair-lease]") {
  CHECK(out_of_order({0, 1, 2, 3}) == 0);
  CHECK(out_of_order({0, 2, 1, 3}) == 1);
}

TEST_CASE("a fair lease serves waiters in arrival order, across clients, and leaves no queue row behind",
          "[fair-lease][cleanup]") {
  auto a = LockClient::create(ctx().uri);
  auto b = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("fairorder");
  LeaseLock holder(a, name, fair_opts());
  REQUIRE(holder.try_acquire());
  const int n = 6;
  std::vector<std::unique_ptr<LeaseLock>> waiters;
  for (int i = 0; i < n; ++i) waiters.push_back(std::make_unique<LeaseLock>(i % 2 ? a : b, name, fair_opts()));
  const auto grants = grant_order(
      name, n, [&](int i) { return waiters[static_cast<std::size_t>(i)]->acquire(30s); },
      [&](int i) { waiters[static_cast<std::size_t>(i)]->release(); }, [&] { return holder.release(); });
  CHECK(out_of_order(grants) == 0);
  // Each release removed its place, not only expired it: no row waits for
  // cleanup (MariaDB's release statement can only expire it).
  CHECK(sgtest::query_int("SELECT COUNT(*) FROM sqlguard_lock_queue WHERE name = ?", {name}) == 0);
}

TEST_CASE("a fair hand-off ends the holder's place with its release and wakes the next waiters only; on PostgreSQL "
          "the waiter the release names takes it without reading the queue",
          "[fair-lease]") {
  // Holder H (no place: it took the free lease), then waiters W0..W4, each on
  // a client of its own, queued in that order. Two hand-offs: H -> W0 -> W1.
  auto h = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("fairhandoff");
  LeaseLock holder(h, name, fair_opts(10s));
  REQUIRE(holder.try_acquire());
  const int n = 5;
  std::vector<std::shared_ptr<LockClient>> clients;
  std::vector<std::unique_ptr<LeaseLock>> ws;
  std::vector<std::future<bool>> got;
  // Where wake-ups name the next place (PostgreSQL), the waiters' own timers
  // are slow: their attempts are the wake-ups' (a timer's attempt racing a
  // release would take the lease the old way, reading the queue).
  const bool names_places = ctx().is(sqlguard::DialectKind::kPostgresql) && !ctx().pooler;
  LeaseOptions wo = fair_opts(10s);
  if (names_places) {
    wo.backoff_initial = 3s;
    wo.backoff_max = 6s;
  }
  for (int i = 0; i < n; ++i) {
    clients.push_back(LockClient::create(ctx().uri));
    ws.push_back(std::make_unique<LeaseLock>(clients.back(), name, wo));
    got.push_back(ws.back()->acquire_async(30s));
    REQUIRE(eventually([&] { return live_places(name) == i + 1; }, 10s));
  }
  std::this_thread::sleep_for(300ms);  // every waiter has read its turn once
  auto wakeups = [&](int i) { return clients[static_cast<std::size_t>(i)]->stats().wakeups; };
  const auto w1_before = wakeups(1), w3_before = wakeups(3), w4_before = wakeups(4);
  auto named = [&](int i) { return clients[static_cast<std::size_t>(i)]->stats().named_handoffs; };
  REQUIRE(named(1) == 0);  // nobody released yet: no wake-up named a ticket
  auto stray = [&](int i) { return clients[static_cast<std::size_t>(i)]->stats().stray_wakeups; };
  const auto s3_before = stray(3), s4_before = stray(4);

  CHECK(holder.release());
  REQUIRE(got[0].wait_for(10s) == std::future_status::ready);
  REQUIRE(got[0].get());
  // W0 keeps its place while it holds (W1 is still behind it) ...
  CHECK(live_places(name) == n);
  CHECK(ws[0]->release());
  // ... and its release ended it: no separate commit after the acquire.
  REQUIRE(got[1].wait_for(10s) == std::future_status::ready);
  REQUIRE(got[1].get());
  CHECK(live_places(name) == n - 1);
  std::this_thread::sleep_for(100ms);
  if (!ctx().pooler) {  // behind a transaction pooler nothing wakes: the waiters poll
    // Control: W1's client counted the wake-up that served it (the counter
    // fires) ...
    CHECK(wakeups(1) > w1_before);
    if (!ctx().is_sqlite()) {
      // ... and the waiters three and four places back were not woken by
      // either release (SQLite wakes every waiter of the host: a futex word).
      CHECK(wakeups(3) == w3_before);
      CHECK(wakeups(4) == w4_before);
    }
  }
  if (names_places) {
    // Each release's NOTIFY named the next place: W0 and W1 went straight to
    // the take (no queue read; an attempt of a waiter's slow timer racing the
    // release could still take it the old way, hence the sum); the waiters
    // further back were named by none.
    CHECK(named(0) <= 1);
    CHECK(named(1) <= 1);
    CHECK(named(0) + named(1) >= 1);
    CHECK(named(3) == 0);
    CHECK(named(4) == 0);
    // Each waiter listens on its own ticket's channel: the releases naming
    // W0 and W1 did not even reach the listeners of W3 and W4 (on the name's
    // one channel each of them would have heard both and dropped them).
    CHECK(stray(3) == s3_before);
    CHECK(stray(4) == s4_before);
  } else {
    // Wake-ups that name no ticket (SQLite's futex word, MariaDB's wake-up
    // lock, a pooler's polling): every waiter reads the queue.
    for (int i = 0; i < n; ++i) CHECK(named(i) == 0);
  }
  CHECK(ws[1]->release());
  for (int i = 2; i < n; ++i) {
    REQUIRE(got[static_cast<std::size_t>(i)].wait_for(10s) == std::future_status::ready);
    CHECK(got[static_cast<std::size_t>(i)].get());
    CHECK(ws[static_cast<std::size_t>(i)]->release());
  }
  CHECK(live_places(name) == 0);
}

TEST_CASE("a fair release NOTIFYs the next place's own channel, and with nobody waiting the channel of the ticket the "
          "next waiter will draw",
          "[fair-lease]") {
  if (!ctx().is(sqlguard::DialectKind::kPostgresql) || ctx().pooler) {
    SUCCEED("wake-ups name places only on PostgreSQL without a transaction pooler");
    return;
  }
  const std::string name = ctx().unique("ticketchannel");
  const std::string ch = lease_wakeup_channel(name);
  auto h = LockClient::create(ctx().uri);
  auto wc = LockClient::create(ctx().uri);
  // The waiter's own timer slow (as in the test before): an attempt of it
  // racing the release would find the grant first and confirm it by a take.
  LeaseOptions wo = fair_opts(10s);
  wo.backoff_initial = 3s;
  wo.backoff_max = 6s;
  LeaseLock holder(h, name, fair_opts(10s)), waiter(wc, name, wo);
  REQUIRE(holder.try_acquire());
  auto got = waiter.acquire_async(20s);
  REQUIRE(eventually([&] { return live_places(name) == 1; }, 10s));
  auto c = ctx().connect();
  auto place = c->execute("SELECT ticket, owner FROM sqlguard_lock_queue WHERE name = ?", {name});
  REQUIRE(place.rows.size() == 1);
  const std::int64_t t = place.rows[0][0].as_int();
  const std::string owner = place.rows[0][1].as_string();
  // An outside session listens on the waiter's channel and the one behind it.
  auto l = ctx().connect();
  const std::string mine = ch + "_" + std::to_string(t), behind = ch + "_" + std::to_string(t + 1);
  REQUIRE(l->wait_for_any_wakeup({mine, behind}, 0ms).empty());
  CHECK(holder.release());
  REQUIRE(got.wait_for(10s) == std::future_status::ready);
  REQUIRE(got.get());
  auto heard = l->wait_for_any_wakeup({mine, behind}, 5s);
  REQUIRE(heard.size() == 1);
  CHECK(heard[0].channel == mine);
  // The release granted the lease to that place in its own commit: the
  // payload carries the fence, the expiry and the ttl it wrote, and the
  // waiter holds it as written, without a take of its own (the row's owner
  // is still the place's token: a take writes a fresh one).
  auto row = c->execute("SELECT owner, fence, expire_at, ttl_ms FROM sqlguard_lock WHERE name = ?", {name});
  REQUIRE(row.rows.size() == 1);
  CHECK(row.rows[0][0].as_string() == owner);
  CHECK(row.rows[0][1].as_int() == waiter.fence());
  CHECK(heard[0].payloads == std::vector<std::string>{std::to_string(t) + ":" + owner + "|" +
                                                      std::to_string(waiter.fence()) + "|" +
                                                      std::to_string(row.rows[0][2].as_int()) + "|10000"});
  CHECK(wc->stats().granted_handoffs == 1);
  CHECK(wc->stats().named_handoffs == 1);
  // Nobody waits now: the release wakes the channel of the ticket the next
  // join draws (a waiter joining while the release runs, whose place the
  // release cannot see, is woken all the same), naming nobody.
  const std::int64_t next = sgtest::query_int("SELECT version + 1 FROM sqlguard_sync WHERE name = ?", {name});
  const std::string drawn = ch + "_" + std::to_string(next);
  REQUIRE(l->wait_for_any_wakeup({drawn}, 0ms).empty());
  CHECK(waiter.release());
  heard = l->wait_for_any_wakeup({drawn}, 5s);
  REQUIRE(heard.size() == 1);
  CHECK(heard[0].payloads == std::vector<std::string>{""});
}

TEST_CASE("a MariaDB fair waiter next in line, woken by a release that granted it the lease, holds it from one read "
          "of the lease's row, without a queue read",
          "[fair-lease]") {
  if (!ctx().is(sqlguard::DialectKind::kMysql)) {
    SUCCEED("wake-ups name the granted place on PostgreSQL, and SQLite's release grants nothing");
    return;
  }
  // The statement audit counts what the woken waiter sent between the
  // release and its acquisition: the granted hand-off is one fair_grant_read
  // and no fair_gate. The control: a holder with a minimum hold, whose
  // release grants nothing (lease_release_fair), so the same read finds no
  // grant and the waiter reads the queue and takes the lease itself.
  const std::string d = ctx().name + "/";
  auto hand_off = [&](bool granted) {
    const std::string name = ctx().unique(granted ? "grantread" : "grantread_ctl");
    auto h = LockClient::create(ctx().uri);
    auto wc = LockClient::create(ctx().uri);
    LeaseOptions ho = fair_opts(10s);
    if (!granted) ho.min_hold = 1ms;
    // The waiter's own timer slow: only the release's wake-up makes it try.
    LeaseOptions wo = fair_opts(10s);
    wo.backoff_initial = 3s;
    wo.backoff_max = 6s;
    LeaseLock holder(h, name, ho), waiter(wc, name, wo);
    REQUIRE(holder.try_acquire());
    auto before = sgtest::sql_audit_counts();
    auto got = waiter.acquire_async(20s);
    REQUIRE(eventually([&] { return live_places(name) == 1; }, 10s));
    // Its first queue read (next in line, the lease held) is done.
    REQUIRE(eventually([&] { return sgtest::sql_audit_counts()[d + "fair_gate"] > before[d + "fair_gate"]; }, 10s));
    std::this_thread::sleep_for(100ms);
    auto mark = sgtest::sql_audit_counts();
    CHECK(holder.release());
    REQUIRE(got.wait_for(10s) == std::future_status::ready);
    REQUIRE(got.get());
    auto now = sgtest::sql_audit_counts();
    const auto sent = [&](const char* e) { return now[d + e] - mark[d + e]; };
    CHECK(sent("fair_grant_read") == 1);
    if (granted) {
      CHECK(sent("fair_gate") == 0);
      CHECK(wc->stats().granted_handoffs == 1);
    } else {
      CHECK(sent("fair_gate") >= 1);
      CHECK(wc->stats().granted_handoffs == 0);
    }
    CHECK(waiter.release());
  };
  hand_off(true);
  hand_off(false);
}

TEST_CASE("a fair waiter that waited more than half a ttl before the hand-off confirms it by a take of its own",
          "[fair-lease]") {
  // A grant's trust window starts at the waiter's join (take_up_grant): a
  // wait of 700 ms of a 1 s ttl leaves too little of it. On every dialect the
  // waiter's own take then writes the row (a fresh owner token, not the
  // place's). The control is the granted case of the test before (the row
  // keeps the place's token when the wait was short).
  const std::string name = ctx().unique("longgrant");
  auto h = LockClient::create(ctx().uri);
  auto wc = LockClient::create(ctx().uri);
  LeaseLock holder(h, name, fair_opts(1s)), waiter(wc, name, fair_opts(1s));
  REQUIRE(holder.try_acquire());
  auto got = waiter.acquire_async(20s);
  REQUIRE(eventually([&] { return live_places(name) == 1; }, 10s));
  auto c = ctx().connect();
  const std::string place_owner =
      c->execute("SELECT owner FROM sqlguard_lock_queue WHERE name = ?", {name}).rows.at(0)[0].as_string();
  std::this_thread::sleep_for(700ms);
  CHECK(holder.release());
  REQUIRE(got.wait_for(10s) == std::future_status::ready);
  REQUIRE(got.get());
  auto row = c->execute("SELECT owner, fence FROM sqlguard_lock WHERE name = ?", {name});
  REQUIRE(row.rows.size() == 1);
  CHECK(row.rows[0][0].as_string() != place_owner);
  CHECK(row.rows[0][1].as_int() == waiter.fence());
  CHECK(wc->stats().granted_handoffs == 0);
  CHECK(waiter.release());
}

TEST_CASE("a lease granted to a fair waiter that left at that moment is released by its leaving, and the next waiter "
          "takes it at once",
          "[fair-lease]") {
  // A place whose waiter is gone (a "ghost": it timed out or was cancelled
  // as the release granted it the lease) is made by hand ahead of a real
  // waiter. The release grants to the ghost where releases grant
  // (PostgreSQL); its leave (fair_leave) must release the grant, or the
  // lease is held by nobody for its ttl. Control (PostgreSQL): a place
  // deleted by hand, without fair_leave, leaves the grant in place.
  const bool grants = ctx().is(sqlguard::DialectKind::kPostgresql);
  auto run = [&](bool by_fair_leave) {
    const std::string name = ctx().unique(by_fair_leave ? "ghostleave" : "ghostdelete");
    auto h = LockClient::create(ctx().uri);
    auto wc = LockClient::create(ctx().uri);
    LeaseLock holder(h, name, fair_opts(10s)), waiter(wc, name, fair_opts(10s));
    REQUIRE(holder.try_acquire());
    auto c = ctx().connect();
    const std::string ghost = "ghost-waiter-" + name;
    const std::int64_t ticket = sqlguard::detail::fair_enqueue(*c, name, ghost, 10s);
    auto got = waiter.acquire_async(30s);
    REQUIRE(eventually([&] { return live_places(name) == 2; }, 10s));
    CHECK(holder.release());
    auto owner = [&] {
      return c->execute("SELECT owner FROM sqlguard_lock WHERE name = ? AND beat <> 0", {name});
    };
    if (grants) {
      auto r = owner();
      REQUIRE(r.rows.size() == 1);
      CHECK(r.rows[0][0].as_string() == ghost);
    }
    if (by_fair_leave)
      sqlguard::detail::fair_leave(*c, name, ticket, ghost, true);
    else
      c->execute("DELETE FROM sqlguard_lock_queue WHERE name = ? AND ticket = ?", {name, ticket});
    const bool served = got.wait_for(by_fair_leave ? 5s : 2s) == std::future_status::ready;
    if (by_fair_leave) {
      REQUIRE(served);
      CHECK(got.get());
      CHECK(waiter.release());
    } else {
      // The control: the grant outlives its place; the waiter still waits.
      CHECK_FALSE(served);
      auto r = owner();
      REQUIRE(r.rows.size() == 1);
      CHECK(r.rows[0][0].as_string() == ghost);
      sqlguard::force_release(*c, name);
      REQUIRE(got.wait_for(10s) == std::future_status::ready);
      CHECK(got.get());
      CHECK(waiter.release());
    }
  };
  run(true);
  if (grants && !ctx().pooler) run(false);
}

TEST_CASE("on MariaDB a fair release grants the lease to the next place: its waiter holds it from the read that saw "
          "the grant and holds the wake-up lock the waiter behind it blocks on",
          "[fair-lease]") {
  if (!ctx().is(sqlguard::DialectKind::kMysql)) {
    SUCCEED("the wake-up lock is MariaDB's (PostgreSQL's grant comes in the NOTIFY: the ticket-channel test)");
    return;
  }
  // One round; true when both hand-offs took the path under test. A paced
  // check of the waiter thread that lands between a release's commit and its
  // wake-up takes the granted lease with a fresh token instead (correct, but
  // not this path: seen once in a loaded CI run, 2026-12-06), so a round that
  // went that way is played again, up to 3 rounds; the last one must take the
  // grant path. Every round checks what must always hold.
  auto round = [](int n, bool last) -> bool {
    const std::string name = ctx().unique("mariagrant" + std::to_string(n));
    const std::string ch = lease_wakeup_channel(name);
    auto h = LockClient::create(ctx().uri);
    auto wc = LockClient::create(ctx().uri);
    auto bc = LockClient::create(ctx().uri);
    LeaseLock holder(h, name, fair_opts(10s)), waiter(wc, name, fair_opts(10s)), behind(bc, name, fair_opts(10s));
    REQUIRE(holder.try_acquire());
    auto got = waiter.acquire_async(20s);
    REQUIRE(eventually([&] { return live_places(name) == 1; }, 10s));
    auto got_behind = behind.acquire_async(20s);
    REQUIRE(eventually([&] { return live_places(name) == 2; }, 10s));
    auto c = ctx().connect();
    const std::string place_owner =
        c->execute("SELECT owner FROM sqlguard_lock_queue WHERE name = ? ORDER BY ticket", {name}).rows.at(0)[0].as_string();
    auto wake_lock_held = [&] {
      return !c->execute("SELECT IS_USED_LOCK(?)", {ch}).rows.at(0)[0].is_null();
    };
    CHECK(holder.release());
    REQUIRE(got.wait_for(10s) == std::future_status::ready);
    REQUIRE(got.get());
    // Held as the release wrote it: the row's owner is still the place's token
    // (a take writes a fresh one) and the waiter's fence is the grant's.
    auto row = c->execute("SELECT owner, fence, handed FROM sqlguard_lock WHERE name = ?", {name});
    REQUIRE(row.rows.size() == 1);
    CHECK(row.rows[0][1].as_int() == waiter.fence());
    CHECK(wc->stats().named_handoffs == 0);  // the wake-up lock names nobody: a read saw the grant
    bool path = row.rows[0][0].as_string() == place_owner && wc->stats().granted_handoffs == 1;
    if (last) {
      CHECK(row.rows[0][0].as_string() == place_owner);
      CHECK(wc->stats().granted_handoffs == 1);
    }
    // The new holder's session holds the wake-up lock (the read that saw the
    // grant took it: fair_grant_read, or fair_gate),
    // so the waiter behind blocks on it instead of polling, and is served by
    // the release.
    CHECK(eventually([&] { return wake_lock_held(); }, 2s));
    CHECK(got_behind.wait_for(300ms) == std::future_status::timeout);
    CHECK(waiter.release());
    REQUIRE(got_behind.wait_for(10s) == std::future_status::ready);
    REQUIRE(got_behind.get());
    path = path && bc->stats().granted_handoffs == 1;
    if (last) CHECK(bc->stats().granted_handoffs == 1);
    CHECK(behind.release());
    // Control: with the last holder gone nobody holds the wake-up lock (the
    // check above can fail).
    CHECK(eventually([&] { return !wake_lock_held(); }, 2s));
    CHECK(live_places(name) == 0);
    return path;
  };
  for (int n = 1; n <= 3; ++n)
    if (round(n, n == 3)) break;
}

TEST_CASE("a fair holder that releases cannot re-take while others wait; an unfair one can", "[fair-lease]") {
  // Each round: a waiter of another client waits, the holder releases and
  // at once tries again. Counted over rounds: the unfair lease's re-take
  // races the woken waiter, so the negative control asks for one re-take in
  // up to 10 rounds; the fair lease must never re-take.
  auto retakes = [](bool fair, int rounds) {
    auto a = LockClient::create(ctx().uri);
    auto b = LockClient::create(ctx().uri);
    const std::string name = ctx().unique(fair ? "fairretake" : "unfairretake");
    LeaseOptions o = fair ? fair_opts() : opts(5s);
    o.backoff_max = 2s;
    LeaseLock holder(a, name, o), waiter(b, name, o);
    int n = 0;
    for (int r = 0; r < rounds; ++r) {
      REQUIRE(holder.acquire(20s));
      // The waiter keeps what it gets until the holder has tried again (a
      // waiter that took it and let it go before that try would leave
      // nobody waiting, and the holder may then take it, fairly).
      std::promise<void> tried;
      auto tried_f = tried.get_future();
      auto w = std::async(std::launch::async, [&] {
        const bool ok = waiter.acquire(30s);
        tried_f.wait();
        if (ok) waiter.release();
        return ok;
      });
      if (fair) {
        REQUIRE(eventually(
            [&] { return live_places(name) == 1; },
            10s));
      } else {
        std::this_thread::sleep_for(200ms);  // the waiter has tried and naps
      }
      REQUIRE(holder.release());
      const bool retook = holder.try_acquire();
      tried.set_value();
      if (retook) {
        ++n;
        holder.release();
      }
      REQUIRE(w.wait_for(20s) == std::future_status::ready);
      CHECK(w.get());
      if (!fair && n > 0) break;
    }
    return n;
  };
  CHECK(retakes(true, 3) == 0);
  CHECK(retakes(false, 10) > 0);  // negative control
}

TEST_CASE("a fair waiter that gives up leaves the queue; the next one is served at once", "[fair-lease]") {
  auto a = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("fairgiveup");
  LeaseOptions o = fair_opts();
  o.place_ttl = 20s;  // a place left behind would block the queue this long
  LeaseLock holder(a, name, o), quitter(a, name, o), patient(a, name, o);
  REQUIRE(holder.try_acquire());
  auto q = std::async(std::launch::async, [&] { return quitter.acquire(400ms); });
  REQUIRE(eventually(
      [&] { return live_places(name) == 1; }, 10s));
  auto p = std::async(std::launch::async, [&] { return patient.acquire(30s); });
  CHECK_FALSE(q.get());
  REQUIRE(eventually(
      [&] { return live_places(name) == 1; }, 10s));
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(holder.release());
  REQUIRE(p.wait_for(15s) == std::future_status::ready);
  CHECK(p.get());
  // Served without waiting for the quitter's place to expire (20 s).
  CHECK(std::chrono::steady_clock::now() - t0 < 15s);
  CHECK(patient.release());
}

TEST_CASE("a dead fair waiter's place expires on the database clock and the queue moves on", "[fair-lease]") {
  const std::string name = ctx().unique("fairdead");
  const std::string uri = ctx().uri;
  auto a = LockClient::create(ctx().uri);
  LeaseOptions o = fair_opts();
  o.place_ttl = 600ms;
  LeaseLock holder(a, name, o), next(a, name, o);
  REQUIRE(holder.try_acquire());
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    try {
      LeaseLock w(uri, name, o, Watchdog::kOn);
      w.acquire(60s);  // waits in the queue until killed
    } catch (...) {
    }
    ::_exit(3);
  }
  REQUIRE(eventually(
      [&] { return live_places(name) == 1; }, 10s));
  auto n = std::async(std::launch::async, [&] { return next.acquire(30s); });
  REQUIRE(eventually(
      [&] { return live_places(name) == 2; }, 10s));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(holder.release());
  REQUIRE(n.wait_for(20s) == std::future_status::ready);
  CHECK(n.get());
  CHECK(next.release());
}

TEST_CASE("a fair lease keeps fencing, re-entrancy and try_acquire when nobody waits", "[fair-lease]") {
  auto a = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("fairbasic");
  LeaseLock l(a, name, fair_opts()), m(a, name, fair_opts());
  REQUIRE(l.try_acquire());
  const std::int64_t f1 = l.fence();
  CHECK(l.try_acquire());
  CHECK(l.hold_count() == 2);
  CHECK(l.release());
  CHECK(l.release());
  REQUIRE(m.try_acquire());
  CHECK(m.fence() > f1);
  CHECK(m.release());
  auto conn = ctx().connect();
  CHECK(code_of([&] { LeaseLock borrowed(*conn, name, fair_opts()); }) == ErrorCode::kNotSupported);
  LeaseOptions bad;
  bad.place_ttl = 1s;  // without fair
  CHECK(code_of([&] { LeaseLock x(a, name, bad); }) == ErrorCode::kInvalidArgument);
}

TEST_CASE("a fair waiter whose place lapsed queues again at the tail and its followers are served first",
          "[fair-lease]") {
  auto a = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("fairlapse");
  LeaseLock holder(a, name, fair_opts()), first(a, name, fair_opts()), second(a, name, fair_opts());
  REQUIRE(holder.try_acquire());
  std::mutex mu;
  std::vector<int> grants;
  auto waiter = [&](LeaseLock& l, int id) {
    return std::async(std::launch::async, [&, id] {
      const bool ok = l.acquire(30s);
      if (ok) {
        {
          std::lock_guard<std::mutex> lk(mu);
          grants.push_back(id);
        }
        std::this_thread::sleep_for(20ms);
        l.release();
      }
      return ok;
    });
  };
  auto f1 = waiter(first, 1);
  REQUIRE(eventually(
      [&] { return live_places(name) == 1; }, 10s));
  const std::int64_t first_ticket =
      sgtest::query_int("SELECT MIN(ticket) FROM sqlguard_lock_queue WHERE name = ?", {name});
  auto f2 = waiter(second, 2);
  REQUIRE(eventually(
      [&] { return live_places(name) == 2; }, 10s));
  const std::int64_t second_ticket =
      sgtest::query_int("SELECT MAX(ticket) FROM sqlguard_lock_queue WHERE name = ?", {name});
  // The first waiter's place is gone (as if its process had been stopped
  // past place_ttl): it must queue again behind the second. The holder lets
  // go once it has (the first waiter's next look at the queue, within a ttl:
  // a release while that look was on its way to the take could still hand
  // it this one turn — a pooler's slower round trips made that happen once).
  sgtest::exec("DELETE FROM sqlguard_lock_queue WHERE name = ? AND ticket = ?", {name, first_ticket});
  REQUIRE(eventually(
      [&] {
        return sgtest::query_int("SELECT COUNT(*) FROM sqlguard_lock_queue WHERE name = ? AND ticket > ?",
                                 {name, second_ticket}) == 1;
      },
      20s));
  CHECK(holder.release());
  REQUIRE(f1.wait_for(20s) == std::future_status::ready);
  REQUIRE(f2.wait_for(20s) == std::future_status::ready);
  CHECK(f1.get());
  CHECK(f2.get());
  CHECK(grants == std::vector<int>{2, 1});
}

TEST_CASE("a fair waiter that gives up right after its sessions were killed still leaves the queue", "[fair-lease]") {
  if (ctx().is_sqlite() || ctx().pooler) {
    SUCCEED("needs server sessions of its own to kill");
    return;
  }
  const std::string name = ctx().unique("fairkilled");
  LeaseOptions o = fair_opts(30s);
  o.place_ttl = 20s;  // a place left behind would hold up the next waiter this long
  o.backoff_initial = o.backoff_max = 1s;
  auto a = LockClient::create(ctx().uri);
  auto b = LockClient::create(ctx().uri);
  LeaseLock holder(a, name, o), quitter(b, name, o);
  REQUIRE(holder.try_acquire());
  auto gave_up = quitter.acquire_async(1500ms);  // takes its place, waits behind the holder
  std::this_thread::sleep_for(1300ms);           // after its last attempt, before it gives up
  auto admin = ctx().connect();
  CHECK(admin::terminate_sessions(*admin) > 0);
  CHECK_FALSE(gave_up.get());
  CHECK(holder.release());
  auto c = LockClient::create(ctx().uri);
  LeaseLock next(c, name, o);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(next.acquire(30s));
  // Served at once, not after the quitter's place expired (20 s).
  CHECK(std::chrono::steady_clock::now() - t0 < 10s);
  next.release();
}

TEST_CASE("an acquire that finds its slot or queue ticket taken by a concurrent acquire is not acquired (or queues "
          "again), never an error",
          "[semaphore][fair-lease]") {
  // A holding's slot and a queue place's ticket are the name's version after
  // the acquire's own write of the name's row. Measured on Galera (CI, and
  // 1 run in 6 of the [galera-sync] test here): the loser of two first
  // acquires of a name on two nodes can fail with a duplicate key on that
  // slot instead of a certification failure. Staged here on one server: a
  // row at the slot (ticket) the next acquire takes, as the winner's commit
  // would leave it.
  auto client = LockClient::create(ctx().uri);
  auto c = ctx().connect();
  auto head_version = [&](const std::string& name) {
    return sgtest::query_int("SELECT version FROM sqlguard_sync WHERE name = ?", {name});
  };
  {
    const std::string name = ctx().unique("semslot");
    Semaphore sem(client, name, 3, opts());
    REQUIRE(sem.try_acquire());
    REQUIRE(sem.release());
    const std::int64_t now = c->db_now_ms();
    const std::int64_t v = head_version(name);
    // A holding of no permits: it leaves room, so the attempt goes on to
    // insert its slot and finds it taken.
    c->execute("INSERT INTO sqlguard_sync_holder (name, slot, mode, permits, owner, fence, expire_at, acquired_at, "
               "renewed_at, min_release_at) VALUES (?, ?, 'P', 0, 'racer', 1, ?, ?, ?, ?)",
               {name, v + 1, now + 60000, now, now, now});
    bool got = true;
    CHECK_NOTHROW(got = sem.try_acquire());
    // Refused although 3 permits are free: the staged row was in the way
    // (so the check above was reached).
    CHECK_FALSE(got);
    // The winner's commit of its version; the next attempt takes the next slot.
    c->execute("UPDATE sqlguard_sync SET version = version + 1 WHERE name = ?", {name});
    CHECK(sem.try_acquire());
    CHECK(sgtest::query_int("SELECT slot FROM sqlguard_sync_holder WHERE name = ? AND owner = ?", {name, sem.owner()}) ==
          v + 2);
    CHECK(sem.release());
  }
  {
    const std::string name = ctx().unique("fairticket");
    auto other = LockClient::create(ctx().uri);
    LeaseLock holder(client, name, fair_opts()), waiter(other, name, fair_opts());
    // One hand-off through the queue (the name's row is made then).
    REQUIRE(holder.try_acquire());
    auto first = waiter.acquire_async(10s);
    REQUIRE(eventually([&] { return live_places(name) == 1; }, 5s));
    REQUIRE(holder.release());
    REQUIRE(first.get());
    // A place at the ticket the next enqueue takes (another node's waiter
    // that committed first): the enqueue tries again until the racer's
    // commit of its version is seen and the racer has left, then takes the
    // next ticket.
    // (The enqueue runs inside acquire_async(): the racer commits and
    // leaves from another thread, 150 ms into its retries.)
    const std::int64_t now = c->db_now_ms();
    c->execute("INSERT INTO sqlguard_lock_queue (name, ticket, owner, expire_at) VALUES (?, ?, 'racer', ?)",
               {name, head_version(name) + 1, now + 60000});
    std::thread racer([&] {
      auto rc = ctx().connect();
      std::this_thread::sleep_for(150ms);
      rc->execute("UPDATE sqlguard_sync SET version = version + 1 WHERE name = ?", {name});
      rc->execute("DELETE FROM sqlguard_lock_queue WHERE name = ? AND owner = 'racer'", {name});
    });
    auto second = holder.acquire_async(20s);
    racer.join();
    CHECK(waiter.release());
    bool got = false;
    CHECK_NOTHROW(got = second.get());
    CHECK(got);
    if (got) CHECK(holder.release());
  }
}

TEST_CASE("after a backward step of the database clock a released semaphore permit is free at once (no minimum hold)",
          "[semaphore][seams]") {
  // Issue 36 item 5, for holdings: the step is staged by moving the holding's
  // own times 30 s ahead; its release must not keep it until its
  // acquisition time.
  auto client = LockClient::create(ctx().uri);
  auto admin = ctx().connect();
  const std::string name = ctx().unique("backstep_sem");
  LeaseOptions o;
  o.ttl = 5s;
  Semaphore a(client, name, 1, o);
  Semaphore b(client, name, 1, o);
  REQUIRE(a.try_acquire());
  admin->execute("UPDATE sqlguard_sync_holder SET expire_at = expire_at + 30000, acquired_at = acquired_at + 30000, "
                 "renewed_at = renewed_at + 30000, min_release_at = CASE WHEN min_release_at > 0 THEN "
                 "min_release_at + 30000 ELSE 0 END WHERE name = ?",
                 {name});
  REQUIRE(a.release());
  CHECK(b.try_acquire());
}

// ---- Retention: queue places and idle heads (issue 36 item 17) ---------------------
namespace {
std::int64_t rows_of(const char* table, const std::string& name) {
  return sgtest::query_int(std::string("SELECT COUNT(*) FROM ") + table + " WHERE name = ?", {name});
}
CleanupOptions locks_only(std::chrono::milliseconds grace = 0ms) {
  CleanupOptions o;
  o.lock_grace = grace;
  o.idempotency = false;
  o.inbox = false;
  o.history = false;
  return o;
}
}  // namespace

TEST_CASE("cleanup deletes the idle heads of semaphores, read-write leases and fair queues, and a name used again "
          "works with fences that only grow",
          "[semaphore][rw-lease][fair-lease][cleanup]") {
  auto client = LockClient::create(ctx().uri);
  auto conn = ctx().connect();
  const std::string sem_name = ctx().unique("idlesem"), rw_name = ctx().unique("idlerw"),
                    fair_name = ctx().unique("idlefair");
  std::int64_t sem_fence = 0, x_fence = 0;
  {
    Semaphore sem(client, sem_name, 2, opts());
    for (int i = 0; i < 3; ++i) {
      REQUIRE(sem.try_acquire());
      sem_fence = sem.fence();
      CHECK(sem.release());
    }
    ReadWriteLease rw(client, rw_name, opts());
    REQUIRE(rw.try_acquire(LeaseMode::kExclusive));
    x_fence = rw.fence();
    CHECK(rw.release());
    // A fair queue's head: one waiter queued behind a holder.
    LeaseLock holder(client, fair_name, fair_opts());
    LeaseLock waiter(client, fair_name, fair_opts());
    REQUIRE(holder.try_acquire());
    auto got = waiter.acquire_async(10s);
    REQUIRE(eventually([&] { return live_places(fair_name) == 1; }, 10s));
    CHECK(holder.release());
    REQUIRE(got.get());
    CHECK(waiter.release());
  }
  for (const auto& n : {sem_name, rw_name, fair_name}) REQUIRE(rows_of("sqlguard_sync", n) == 1);
  // Holdings that ended less than the grace ago keep their name's head (the
  // fair queue's places went with their releases: nothing keeps its head).
  cleanup(*conn, locks_only(std::chrono::hours(1)));
  for (const auto& n : {sem_name, rw_name}) CHECK(rows_of("sqlguard_sync", n) == 1);

  std::this_thread::sleep_for(20ms);  // the last release's expiry is in the past on the database clock
  const auto r = cleanup(*conn, locks_only());
  CHECK(r.sync_heads_deleted >= 2);
  for (const auto& n : {sem_name, rw_name, fair_name}) {
    INFO(n);
    CHECK(rows_of("sqlguard_sync", n) == 0);
    CHECK(rows_of("sqlguard_sync_holder", n) == 0);
    CHECK(rows_of("sqlguard_lock_queue", n) == 0);
  }
  // The semaphore's and read-write lease's name reservations went with their
  // heads: the names are free for any kind again.
  for (const auto& n : {sem_name, rw_name}) {
    INFO(n);
    CHECK(rows_of("sqlguard_lock", n) == 0);
  }

  // Used again: new heads, and no fence below one granted before cleanup.
  Semaphore sem(client, sem_name, 2, opts());
  REQUIRE(sem.try_acquire());
  CHECK(sem.fence() > sem_fence);
  CHECK(sem.release());
  ReadWriteLease reader(client, rw_name, opts());
  REQUIRE(reader.try_acquire(LeaseMode::kShared));
  // A shared holder sees the name's last exclusive fence: a new head starts
  // at the fence sequence, never below what was granted before.
  CHECK(reader.fence() >= x_fence);
  CHECK(reader.release());
  REQUIRE(reader.try_acquire(LeaseMode::kExclusive));
  CHECK(reader.fence() > x_fence);
  CHECK(reader.release());
  LeaseLock again(client, fair_name, fair_opts());
  REQUIRE(again.try_acquire());
  CHECK(again.release());

  // Negative control: a head recreated WITHOUT the floor (fence 0, as sync_open
  // made it before) hands a shared holder a fence below the last exclusive one.
  const std::string bare = ctx().unique("idlerw_nofloor");
  {
    ReadWriteLease w(client, bare, opts());
    REQUIRE(w.try_acquire(LeaseMode::kExclusive));
    x_fence = w.fence();
    CHECK(w.release());
  }
  std::this_thread::sleep_for(20ms);
  REQUIRE(cleanup(*conn, locks_only()).sync_heads_deleted >= 1);
  REQUIRE(rows_of("sqlguard_sync", bare) == 0);
  sgtest::exec("INSERT INTO sqlguard_sync (name, kind, permits) VALUES (?, 'rw', 0)", {bare});
  ReadWriteLease late(client, bare, opts());
  REQUIRE(late.try_acquire(LeaseMode::kShared));
  CHECK(late.fence() == 0);
  CHECK(late.fence() < x_fence);
  CHECK(late.release());
}

TEST_CASE("cleanup racing acquires of a one-permit semaphore never loses a live holder", "[semaphore][cleanup]") {
  const std::string name = ctx().unique("cleanrace");
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::atomic<std::int64_t> heads_deleted{0};
  std::thread cleaner([&] {
    try {
      auto c = ctx().connect();
      while (!stop) heads_deleted += cleanup(*c, locks_only()).sync_heads_deleted;
    } catch (const std::exception& e) {
      ++failures;
      UNSCOPED_INFO("cleanup: " << e.what());
    }
  });
  // Idle moments between holdings let the cleaner delete the head while the
  // next acquire comes; each release must still find its holding.
  const int most = most_at_once(name, 1, 2, 30, 10ms);
  stop = true;
  cleaner.join();
  INFO("heads deleted while the workers ran: " << heads_deleted.load());
  CHECK(failures == 0);
  CHECK(most == 1);          // a deleted head never let a second holder in beside a live one
  CHECK(heads_deleted > 0);  // the race was run: the head went while the name was in use
}

TEST_CASE("in a forked child every call on an inherited semaphore or read-write handle throws, its observers included",
          "[semaphore][rw-lease][fork]") {
  auto client = LockClient::create(ctx().uri);
  Semaphore sem(client, ctx().unique("forksem"), 2, opts(10s));
  ReadWriteLease rw(client, ctx().unique("forkrw"), opts(10s));
  REQUIRE(sem.try_acquire(1));
  REQUIRE(rw.try_acquire(LeaseMode::kShared));
  // The number of the first call that answered in the child (0: none).
  const int first = sgtest::first_answered_in_child([&](sgtest::MustRefuse& must) {
    sgtest::must_refuse_handle_calls(must, sem);     // 1..8
    must([&] { (void)sem.held_permits(); });         // 9
    sgtest::must_refuse_handle_calls(must, rw);      // 10..17
    must([&] { (void)rw.mode(); });                  // 18
  });
  CHECK(first == 0);
  CHECK(sem.owns());  // the parent's holdings are untouched
  CHECK(rw.owns());
  CHECK(sem.release());
  CHECK(rw.release());
}

TEST_CASE("asking a semaphore for more permits than it has is refused naming both, on every path", "[semaphore]") {
  auto client = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("semtoomany");
  Semaphore sem(client, name, 2, opts());
  std::string what;
  CHECK(code_of([&] { sem.try_acquire(3); }, &what) == ErrorCode::kInvalidArgument);
  CHECK(what.find("3") != std::string::npos);
  CHECK(what.find("2 permit") != std::string::npos);
  CHECK(code_of([&] { sem.acquire(3, 5s); }, &what) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { sem.acquire_async(3, 5s).get(); }, &what) == ErrorCode::kInvalidArgument);
  CHECK(sem.hold_count() == 0);
  // The count stored for the name is the one that holds: shrunk to 1 by
  // another handle, asking for 2 is refused (naming the stored count).
  Semaphore other(client, name, 2, opts());
  other.set_permits(1);
  CHECK(code_of([&] { sem.try_acquire(2); }, &what) == ErrorCode::kInvalidArgument);
  CHECK(what.find("1 permit") != std::string::npos);
  CHECK(code_of([&] { sem.acquire(2, 5s); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { sem.acquire_async(2, 5s).get(); }) == ErrorCode::kInvalidArgument);
  // Within the count, by a handle that asks with the stored count (a name
  // is one lock of one count: synchronizers.md), acquired as before.
  Semaphore fits(client, name, 1, opts());
  CHECK(fits.try_acquire(1));
  CHECK(fits.release());
}

TEST_CASE("a fair lease taken from its queue place with place_ttl above ttl ends that place no later than the lease: "
          "a dead holder holds up the queue for ttl, not place_ttl",
          "[fair-lease][seams]") {
  // Issue 36 item 7: ttl 1 s, place_ttl 5 s, kill -9 of the holder: the next
  // waiter got the lease after 4.8-5.0 s. The place a fair lease was taken
  // from stays until the release ends it, unrenewed; its expiry was its last
  // renewal + place_ttl.
  auto client = LockClient::create(ctx().uri);
  auto admin = ctx().connect();
  const std::string name = ctx().unique("fairdead");
  LeaseOptions o;
  o.ttl = 1s;
  o.fair = true;
  o.place_ttl = 5s;
  LeaseLock holder(client, name, o), next(client, name, o);
  REQUIRE(holder.try_acquire());
  auto got = next.acquire_async(10s);
  REQUIRE(eventually([&] { return live_places(name) == 1; }, 10s));
  REQUIRE(holder.release());
  REQUIRE(got.get());  // taken from its place, which it keeps until its release
  const auto info = lease_info(*admin, name);
  REQUIRE(info);
  const std::int64_t place_expiry =
      sgtest::query_int("SELECT MAX(expire_at) FROM sqlguard_lock_queue WHERE name = ?", {name});
  INFO("lease expires at " << info->expire_at_ms << ", its held place at " << place_expiry);
  CHECK(place_expiry > 0);  // the control: the held place is there while the lease is held
  CHECK(place_expiry <= info->expire_at_ms + 250);
  // And a waiter behind it passes it after a watch of the lease's ttl, not place_ttl.
  CHECK(sgtest::query_int("SELECT MAX(ttl_ms) FROM sqlguard_lock_queue WHERE name = ?", {name}) == 1000);
  CHECK(next.release());
  CHECK(live_places(name) == 0);
}

TEST_CASE("a fair semaphore's first waiter in another process looks at its turn again within 20 ms, not after its "
          "backoff, while only permits are missing",
          "[fair-semaphore][seams]") {
  // Issue 36 item 8: semaphores have no wake-up channel, so a waiter of
  // another process (here: another lock client) learns of a freed permit
  // only by looking; its looks were paced by its backoff (grown to
  // backoff_max), and grants came 25-738 ms after a permit freed. Counted,
  // not timed: its client's attempts while the permit stays held.
  auto holder_client = LockClient::create(ctx().uri);
  auto waiter_client = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("fairsemlook");
  LeaseOptions o;
  o.fair = true;
  o.backoff_initial = 2s;  // without the bound, one look in the whole hold below
  o.backoff_max = 5s;
  Semaphore holder(holder_client, name, 1, o), waiter(waiter_client, name, 1, o);
  REQUIRE(holder.try_acquire());
  auto got = waiter.acquire_async(1, 30s);
  REQUIRE(eventually([&] { return live_places(name) == 1; }, 10s));
  const auto before = waiter_client->stats().attempts;
  std::this_thread::sleep_for(1500ms);
  const auto looks = waiter_client->stats().attempts - before;
  INFO(looks << " attempts in 1.5 s while the permit was held");
  CHECK(looks >= 15);  // at most 20 ms apart would be 75; the backoff's pace is 1
  REQUIRE(holder.release());
  CHECK(got.get());
  CHECK(waiter.release());
}
