// run_exclusive (run_exclusive.h): run if free, else skip; at_most frees a
// dead holder's lock, at_least keeps a fast run's; keep_alive renews. On
// every dialect.
#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <stdexcept>
#include <thread>

#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"
#include "sqlguard/run_exclusive.h"
#include "test_context.h"

using namespace sqlguard;
using namespace std::chrono_literals;
using sgtest::ctx;

TEST_CASE("run_exclusive runs when the lock is free and skips, without calling fn, when it is held",
          "[run-exclusive]") {
  auto client = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("rx");
  int calls = 0;
  std::int64_t seen = 0;
  auto r = run_exclusive(client, name, {.at_most = 10s}, [&](std::int64_t fence) {
    ++calls;
    seen = fence;
  });
  CHECK(r.ran);
  CHECK(r.held_throughout);
  CHECK(calls == 1);
  CHECK(seen == r.fence);
  CHECK(r.fence > 0);
  // Held by someone else: skipped.
  auto other = ctx().connect();
  auto held = acquire_lease(*other, name, "someone-else", 10s);
  REQUIRE(held.acquired);
  auto skipped = run_exclusive(client, name, {.at_most = 10s}, [&](std::int64_t) { ++calls; });
  CHECK_FALSE(skipped);
  CHECK(calls == 1);
  CHECK(skipped.fence == 0);
  // The borrowed-connection form behaves the same.
  auto conn = ctx().connect();
  CHECK_FALSE(run_exclusive(*conn, name, {.at_most = 10s}, [&](std::int64_t) { ++calls; }));
  CHECK(release_lease(*other, name, "someone-else", held.fence));
  CHECK(run_exclusive(*conn, name, {.at_most = 10s}, [&](std::int64_t) { ++calls; }).ran);
  CHECK(calls == 2);
}

TEST_CASE("run_exclusive keeps a fast run's lock for at_least, then frees it; without at_least the next run runs at "
          "once (negative control)",
          "[run-exclusive]") {
  auto client = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("rxleast");
  CHECK(run_exclusive(client, name, {.at_most = 10s, .at_least = 1500ms}, [](std::int64_t) {}).ran);
  // Another instance of the same schedule, a little late: skips.
  CHECK_FALSE(run_exclusive(client, name, {.at_most = 10s}, [](std::int64_t) {}).ran);
  std::this_thread::sleep_for(1700ms);
  CHECK(run_exclusive(client, name, {.at_most = 10s}, [](std::int64_t) {}).ran);
  // Negative control: at_least 0 frees the lock when fn returns.
  CHECK(run_exclusive(client, name, {.at_most = 10s}, [](std::int64_t) {}).ran);
}

TEST_CASE("run_exclusive: a holder that died frees the lock after at_most; an exception from fn is rethrown and "
          "releases it",
          "[run-exclusive]") {
  auto client = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("rxdead");
  auto dead = ctx().connect();
  REQUIRE(acquire_lease(*dead, name, "died-holder", 800ms).acquired);  // never released
  CHECK_FALSE(run_exclusive(client, name, {.at_most = 10s}, [](std::int64_t) {}).ran);
  std::this_thread::sleep_for(1000ms);
  CHECK(run_exclusive(client, name, {.at_most = 10s}, [](std::int64_t) {}).ran);

  CHECK_THROWS_WITH(run_exclusive(client, name, {.at_most = 10s},
                                  [](std::int64_t) { throw std::runtime_error("job failed"); }),
                    "job failed");
  CHECK(run_exclusive(client, name, {.at_most = 10s}, [](std::int64_t) {}).ran);  // released by the throw
}

TEST_CASE("run_exclusive with keep_alive keeps the lock past at_most while fn runs; without it the lease ends and "
          "held_throughout says so",
          "[run-exclusive]") {
  auto client = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("rxalive");
  std::atomic<int> skipped_during{0};
  auto probe = [&] {
    auto c = ctx().connect();
    return acquire_lease(*c, name, "probe", 5s);
  };
  auto r = run_exclusive(client, name, {.at_most = 600ms, .keep_alive = true}, [&](std::int64_t) {
    std::this_thread::sleep_for(1500ms);  // 2.5 x at_most
    if (!probe().acquired) ++skipped_during;
  });
  CHECK(r.ran);
  CHECK(r.held_throughout);
  CHECK(skipped_during.load() == 1);
  // Negative control: no keep_alive, the lease ends at at_most while fn runs.
  const std::string other = ctx().unique("rxnoalive");
  bool taken_during = false;
  auto r2 = run_exclusive(client, other, {.at_most = 600ms}, [&](std::int64_t) {
    auto c = ctx().connect();
    std::this_thread::sleep_for(100ms);
    const bool at_first = acquire_lease(*c, other, "probe", 5s).acquired;  // the first look starts the watch
    std::this_thread::sleep_for(1100ms);  // unrenewed for at_most since that look
    taken_during = !at_first && acquire_lease(*c, other, "probe", 5s).acquired;
  });
  CHECK(r2.ran);
  CHECK(taken_during);
  CHECK_FALSE(r2.held_throughout);
}

TEST_CASE("run_exclusive refuses bad input before sending anything, naming the field", "[run-exclusive][bad-input]") {
  auto client = LockClient::create(ctx().uri);
  auto conn = ctx().connect();
  auto nothing = [](std::int64_t) {};
  CHECK_THROWS_WITH(run_exclusive(client, "x", {.at_most = 0ms}, nothing), Catch::Contains("at_most"));
  CHECK_THROWS_WITH(run_exclusive(client, "x", {.at_most = 1s, .at_least = 2s}, nothing), Catch::Contains("at_least"));
  CHECK_THROWS_WITH(run_exclusive(client, "", {.at_most = 1s}, nothing), Catch::Contains("lock name"));
  CHECK_THROWS_WITH(run_exclusive(*conn, "x", {.at_most = 1s, .keep_alive = true}, nothing),
                    Catch::Contains("keep_alive"));
  CHECK_THROWS_WITH(run_exclusive(client, "x", {.at_most = 1s}, nullptr), Catch::Contains("fn is empty"));
}
