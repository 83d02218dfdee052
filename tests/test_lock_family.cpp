// The lock family's one interface (include/sqlguard/lock.h): every kind is a
// Lock, written against once; guarded transactions for every kind.
#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>

#include "sqlguard/fenced_write.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock.h"
#include "sqlguard/lock_client.h"
#include "sqlguard/lock_kinds.h"
#include "sqlguard/lock_set.h"
#include "sqlguard/read_write_lease.h"
#include "sqlguard/semaphore.h"
#include "test_context.h"
#include "test_helpers.h"

using namespace sqlguard;
using namespace std::chrono_literals;
using sgtest::ctx;

namespace {

LeaseOptions opts(std::chrono::milliseconds ttl = 3s) {
  LeaseOptions o;
  o.ttl = ttl;
  o.backoff_max = 50ms;
  return o;
}

// What a caller writes once for any kind: a guard, a guarded write that
// records the fence, std::unique_lock, and the answers of a held lock.
void exercise(Lock& lock, const std::string& table, int id) {
  {
    LockGuard held(lock, 2s);
    CHECK(held.owns());
    CHECK(lock.owns());
    CHECK(lock.hold_count() == 1);
    CHECK(lock.fence() > 0);
    CHECK_FALSE(lock.owner().empty());
    CHECK(lock.remaining() > 0ms);
    CHECK(lock.run_guarded([&](Transaction& tx) {
      tx.execute("INSERT INTO " + table + " (id, fence) VALUES (?, ?)", {std::int64_t{id}, held.fence()});
    }));
    CHECK(lock.try_acquire());  // re-entrant: one more hold, nothing sent
    CHECK(lock.hold_count() == 2);
    CHECK(lock.release());
  }
  CHECK_FALSE(lock.owns());
  {
    std::unique_lock<Lock> ul(lock);  // Lockable
    CHECK(lock.owns());
  }
  CHECK_FALSE(lock.owns());
  CHECK(lock.acquire_async(2s).get());  // the future form, the client's waiter thread
  CHECK(lock.owns());
  CHECK(lock.release());
}

}  // namespace

TEST_CASE("every kind is a Lock: one function guards, writes and releases a lease, a fair lease, a semaphore "
          "permit, both sides of a read-write lease and a lock set",
          "[lock-family][guarded]") {
  auto client = LockClient::create(ctx().uri);
  auto c = ctx().connect();
  const std::string t = ctx().unique("family");
  c->execute_script("CREATE TABLE " + t + " (id INTEGER NOT NULL PRIMARY KEY, fence BIGINT NOT NULL)");
  LeaseOptions fair = opts();
  fair.fair = true;
  LeaseLock lease(client, ctx().unique("fam_lease"), opts());
  LeaseLock fair_lease(client, ctx().unique("fam_fair"), fair);
  Semaphore sem(client, ctx().unique("fam_sem"), 2, opts());
  ReadWriteLease rw(client, ctx().unique("fam_rw"), opts());
  LockSet set(client, {{ctx().unique("fam_set_a"), {}}, {ctx().unique("fam_set_s"), parse_lock_spec("semaphore:2")}},
              opts());
  struct Case {
    Lock* lock;
    LockKind kind;
  } cases[] = {{&set, LockKind::kLease},
               {&lease, LockKind::kLease},
               {&fair_lease, LockKind::kFairLease},
               {&sem, LockKind::kSemaphore},
               {&rw.shared(), LockKind::kReadWrite},
               {&rw.exclusive(), LockKind::kReadWrite}};
  int id = 0;
  for (auto& k : cases) {
    INFO(to_string(k.kind) << " " << k.lock->name());
    CHECK(k.lock->kind() == k.kind);
    exercise(*k.lock, t, ++id);
  }
  // Each guarded write committed, with its holder's fence.
  CHECK(sgtest::query_int("SELECT COUNT(*) FROM " + t + " WHERE fence > 0") == 6);
  CHECK(sem.held_permits() == 0);
  CHECK_FALSE(rw.mode());
}

TEST_CASE("a read-write lease's side owns only its own mode, and releases nothing of the other", "[lock-family]") {
  auto client = LockClient::create(ctx().uri);
  ReadWriteLease rw(client, ctx().unique("side"), opts());
  Lock& shared = rw.shared();
  Lock& exclusive = rw.exclusive();
  REQUIRE(exclusive.try_acquire());
  CHECK(exclusive.owns());
  CHECK_FALSE(shared.owns());
  CHECK(shared.hold_count() == 0);
  CHECK(shared.remaining() == 0ms);
  bool ran = false;
  CHECK_FALSE(shared.run_guarded([&](Transaction&) { ran = true; }));  // not held in this mode
  CHECK_FALSE(ran);
  CHECK_FALSE(shared.release());  // the exclusive holding stays
  CHECK(exclusive.owns());
  CHECK(exclusive.release());
}

TEST_CASE("a guarded transaction of a holding whose row was ended by someone else commits nothing",
          "[lock-family][guarded][semaphore]") {
  auto client = LockClient::create(ctx().uri);
  auto c = ctx().connect();
  const std::string name = ctx().unique("gsem");
  const std::string t = ctx().unique("gsem_t");
  c->execute_script("CREATE TABLE " + t + " (id INTEGER NOT NULL PRIMARY KEY)");
  Semaphore sem(client, name, 1, opts(5s));
  REQUIRE(sem.try_acquire());
  CHECK(sem.run_guarded([&](Transaction& tx) { tx.execute("INSERT INTO " + t + " (id) VALUES (1)"); }));
  // An operator ends the holding; another holder takes the permit.
  c->execute("DELETE FROM sqlguard_sync_holder WHERE name = ?", {name});
  Semaphore next(LockClient::create(ctx().uri), name, 1, opts(5s));
  REQUIRE(next.try_acquire());
  bool ran = false;
  CHECK_FALSE(sem.run_guarded([&](Transaction& tx) {
    ran = true;
    tx.execute("INSERT INTO " + t + " (id) VALUES (2)");
  }));
  CHECK_FALSE(ran);
  CHECK(sgtest::query_int("SELECT COUNT(*) FROM " + t) == 1);
  REQUIRE(sem.last_loss());
  CHECK(sem.last_loss()->cause == LossCause::kTakenOver);
  CHECK_FALSE(sem.owns());
  CHECK(next.release());
}

namespace {
// A holding of `lock` (Watchdog::kOff: never renewed, so a taker that
// watches it from the start of the work may take it over 400 ms later, its
// ttl) runs 900 ms of work; another client asks for what the holding has,
// every 20 ms from the start of the work. Answers whether that other client
// got it only after the work had committed.
bool taker_waits_for(const std::function<bool(const std::function<void()>&)>& run_work,
                     const std::function<bool()>& take) {
  std::atomic<bool> in_work{false}, committed{false};
  auto taker = std::async(std::launch::async, [&] {
    while (!in_work) std::this_thread::sleep_for(5ms);
    for (;;) {
      if (take()) return committed.load();
      std::this_thread::sleep_for(20ms);
    }
  });
  CHECK(run_work([&] {
    in_work = true;
    std::this_thread::sleep_for(900ms);
    committed = true;
  }));
  return taker.get();
}
}  // namespace

TEST_CASE("a guarded transaction of a semaphore permit or a read-write holding keeps an acquire that would take it "
          "waiting until it commits",
          "[lock-family][guarded][semaphore][rw-lease]") {
  auto mine = LockClient::create(ctx().uri);
  auto theirs = LockClient::create(ctx().uri);
  SECTION("a semaphore's one permit") {
    const std::string name = ctx().unique("gblock");
    Semaphore sem(mine, name, 1, opts(400ms), Watchdog::kOff);
    Semaphore other(theirs, name, 1, opts(10s));
    REQUIRE(sem.try_acquire());
    CHECK(taker_waits_for([&](const std::function<void()>& w) { return sem.run_guarded([&](Transaction&) { w(); }); },
                          [&] { return other.try_acquire(); }));
    CHECK(other.release());
  }
  SECTION("a read-write lease's exclusive holding, against a shared acquire") {
    const std::string name = ctx().unique("gblock_rw");
    ReadWriteLease rw(mine, name, opts(400ms), Watchdog::kOff);
    ReadWriteLease other(theirs, name, opts(10s));
    REQUIRE(rw.exclusive().try_acquire());
    CHECK(taker_waits_for(
        [&](const std::function<void()>& w) { return rw.exclusive().run_guarded([&](Transaction&) { w(); }); },
        [&] { return other.shared().try_acquire(); }));
    CHECK(other.release());
  }
  SECTION("negative control: the same work outside run_guarded does not keep the acquire waiting") {
    const std::string name = ctx().unique("gblock_ctl");
    Semaphore sem(mine, name, 1, opts(400ms), Watchdog::kOff);
    Semaphore other(theirs, name, 1, opts(10s));
    REQUIRE(sem.try_acquire());
    CHECK_FALSE(taker_waits_for(
        [&](const std::function<void()>& w) {
          w();
          return true;
        },
        [&] { return other.try_acquire(); }));
    CHECK(other.release());
  }
}

namespace {
// Runs `take` on another thread while `guarded`'s guarded transaction is
// open (after `before` inside it), and says whether it answered within
// `within`; *answer is what it answered (after the commit if not within).
bool answered_inside(Lock& guarded, const std::function<bool()>& take, std::chrono::milliseconds within,
                     bool* answer, std::chrono::milliseconds before = 0ms) {
  std::future<bool> f;
  bool ready = false;
  CHECK(guarded.run_guarded([&](Transaction&) {
    std::this_thread::sleep_for(before);
    f = std::async(std::launch::async, take);
    ready = f.wait_for(within) == std::future_status::ready;
  }));
  *answer = f.get();
  return ready;
}
}  // namespace

TEST_CASE("a guarded transaction of a live holding holds up no acquire of a free permit or another shared hold of "
          "its name; an expired one does (control)",
          "[lock-family][guarded][semaphore][rw-lease]") {
  auto mine = LockClient::create(ctx().uri);
  auto theirs = LockClient::create(ctx().uri);
  bool got = false;
  // SQLite has one writer: a guarded transaction holds the database's write
  // lock, so every acquire waits for its commit (docs/synchronizers.md).
  const bool one_writer = ctx().is_sqlite();
  SECTION("a semaphore of 2 permits: the free one") {
    const std::string name = ctx().unique("glive");
    Semaphore sem(mine, name, 2, opts(10s));
    Semaphore other(theirs, name, 2, opts(10s));
    REQUIRE(sem.try_acquire());
    CHECK(answered_inside(sem, [&] { return other.try_acquire(); }, one_writer ? 300ms : 5s, &got) != one_writer);
    CHECK(got);
    CHECK(other.release());
    CHECK(sem.release());
  }
  SECTION("a read-write lease: another shared hold") {
    const std::string name = ctx().unique("glive_rw");
    ReadWriteLease rw(mine, name, opts(10s));
    ReadWriteLease other(theirs, name, opts(10s));
    REQUIRE(rw.shared().try_acquire());
    CHECK(answered_inside(rw.shared(), [&] { return other.shared().try_acquire(); }, one_writer ? 300ms : 5s, &got) !=
          one_writer);
    CHECK(got);
    CHECK(other.release());
    CHECK(rw.release());
  }
  SECTION("control: a holding that expired inside its guarded transaction holds the acquire up until it commits") {
    const std::string name = ctx().unique("glive_ctl");
    Semaphore sem(mine, name, 1, opts(400ms), Watchdog::kOff);
    Semaphore other(theirs, name, 1, opts(10s));
    REQUIRE(sem.try_acquire());
    REQUIRE_FALSE(other.try_acquire());  // its first sighting: 600 ms later the holding is ripe for it
    CHECK_FALSE(answered_inside(sem, [&] { return other.try_acquire(); }, 1s, &got, 600ms));
    CHECK(got);  // after the commit: the holding had expired
    CHECK(other.release());
  }
}
