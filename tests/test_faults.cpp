// Faults the lease must survive without breaking its promise: a renewal that
// blocks (a row lock held by another session, SQLite's write lock) must not
// delay the loss signal past the trust window, and a lost lease is released
// without waiting on the database.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "sqlguard/lease_lock.h"
#include "test_context.h"

using namespace sqlguard;
using namespace std::chrono_literals;
using sgtest::ctx;
using Clock = std::chrono::steady_clock;

TEST_CASE("a renewal blocked behind a lock is reported as a loss inside the trust window, not after it",
          "[lease][watchdog][faults]") {
  const auto name = ctx().unique("blocked");
  std::mutex mu;
  std::optional<LeaseLoss> loss;
  Clock::time_point lost_at{};
  LeaseOptions o;
  o.ttl = 1500ms;  // renewals every 500 ms; trust window 1350 ms from each successful start
  o.on_lost = [&](const LeaseLoss& l) {
    std::lock_guard<std::mutex> lk(mu);
    loss = l;
    lost_at = Clock::now();
  };
  // The watchdog connection's busy timeout (SQLite) outlasts the window.
  LeaseLock lock(ctx().uri, name, o, Watchdog::kOn, ConnectOptions{10s, 5s, std::nullopt});
  auto t0 = Clock::now();
  REQUIRE(lock.try_acquire());
  // Another session write-locks the lock row (the whole database on SQLite)
  // right away, before the first renewal.
  auto blocker = ctx().connect();
  blocker->begin();
  if (!ctx().is_sqlite())
    REQUIRE(blocker->execute("SELECT name FROM sqlguard_lock WHERE name = ? FOR UPDATE", {name}).rows.size() == 1);
  for (int i = 0; i < 400; ++i) {
    {
      std::lock_guard<std::mutex> lk(mu);
      if (loss) break;
    }
    std::this_thread::sleep_for(10ms);
  }
  blocker->rollback();
  std::lock_guard<std::mutex> lk(mu);
  REQUIRE(loss.has_value());
  INFO("loss " << to_string(loss->cause) << " after "
               << std::chrono::duration_cast<std::chrono::milliseconds>(lost_at - t0).count() << " ms, window left "
               << loss->window_left.count() << " ms: " << loss->detail);
  // The trust window of the acquire ends at t0 + ttl - margin (150 ms).
  CHECK(lost_at - t0 <= 1350ms + 100ms);  // scheduling slack only
  CHECK(loss->window_left >= 0ms);
  CHECK(loss->cause == LossCause::kOutcomeUnknown);
  CHECK_FALSE(lock.owns());
  // Releasing a lost lease does not wait on the database and says it was not held.
  auto r0 = Clock::now();
  CHECK_FALSE(lock.release());
  CHECK(Clock::now() - r0 < 1s);
}
