// Worker modes for the lease-lock tests.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"
#include "worker_registry.h"

using namespace sqlguard;

// lease-counter LOCK TABLE ITERATIONS USE_LOCK(1|0)
// Read-then-write increments of one counter row, with a think time between
// the read and the write. Under the lock the total is exact; without it
// (the negative control) updates are lost.
static sgworker::Register counter_mode("lease-counter", [](const std::string& uri, const std::vector<std::string>& a) {
  const std::string& name = a.at(0);
  const std::string& table = a.at(1);
  int iterations = std::stoi(a.at(2));
  bool use_lock = a.at(3) == "1";
  auto conn = make_connection(uri);
  LeaseOptions o;
  o.ttl = std::chrono::seconds(10);
  LeaseLock lock(*conn, name, o);
  std::mt19937 rng{std::random_device{}()};
  for (int i = 0; i < iterations; ++i) {
    if (use_lock && !lock.acquire(std::chrono::seconds(60))) {
      std::fprintf(stderr, "lease-counter: not acquired in 60 s\n");
      return 3;
    }
    auto v = conn->execute("SELECT v FROM " + table + " WHERE id = 1").rows.at(0)[0].as_int();
    std::this_thread::sleep_for(std::chrono::microseconds(200 + rng() % 800));
    conn->execute("UPDATE " + table + " SET v = ? WHERE id = 1", {v + 1});
    if (use_lock && !lock.release()) {
      std::fprintf(stderr, "lease-counter: lease lost during the critical section\n");
      return 4;
    }
  }
  return 0;
});

// lease-loss-cause NAME TTL_MS client|watchdog [KEPT_MS]
// Holds NAME, renewed by a lock client (`client`) or by the LeaseLock's own
// watchdog on a borrowed connection (`watchdog`), prints "held", then waits
// for on_lost and prints "lost CAUSE" (exit 3 when none came in 60 s).
static sgworker::Register loss_cause_mode("lease-loss-cause", [](const std::string& uri,
                                                                 const std::vector<std::string>& a) {
  const std::string& name = a.at(0);
  LeaseOptions o;
  o.ttl = std::chrono::milliseconds(std::stoi(a.at(1)));
  std::mutex mu;
  std::condition_variable cv;
  std::string cause;
  o.on_lost = [&](const LeaseLoss& l) {
    std::lock_guard<std::mutex> lk(mu);
    cause = std::string(to_string(l.cause));
    cv.notify_all();
  };
  std::unique_ptr<Connection> conn;
  std::unique_ptr<LeaseLock> lock;
  if (a.at(2) == "client") {
    lock = std::make_unique<LeaseLock>(LockClient::create(uri), name, o);
  } else {
    conn = make_connection(uri);
    o.watchdog_connection = [uri] { return make_connection(uri); };
    lock = std::make_unique<LeaseLock>(*conn, name, o);
  }
  if (!lock->try_acquire()) return 2;
  std::printf("held\n");
  std::fflush(stdout);
  std::unique_lock<std::mutex> lk(mu);
  // KEPT_MS (optional): how long to wait for a loss before answering "kept"
  // when the lease is still owned.
  const auto wait = a.size() > 3 ? std::chrono::milliseconds(std::stoi(a.at(3))) : std::chrono::milliseconds(60000);
  if (!cv.wait_for(lk, wait, [&] { return !cause.empty(); })) {
    if (a.size() <= 3) return 3;
    lk.unlock();
    std::printf(lock->owns() ? "kept\n" : "not owned, no loss\n");
    std::fflush(stdout);
    return 0;
  }
  std::printf("lost %s\n", cause.c_str());
  std::fflush(stdout);
  return 0;
});
