// The lock client on a frozen database path (the fault proxy, built with the
// tools): every held lease is reported lost before its trust window ends.
// PostgreSQL and MariaDB (SQLite has no network path).
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "fault_proxy.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"
#include "test_context.h"
#include "test_helpers.h"

using namespace sqlguard;
using namespace std::chrono_literals;
using sgtest::ctx;
using sgtest::eventually;

namespace {
LeaseOptions short_lease(std::chrono::milliseconds ttl) {
  LeaseOptions o;
  o.ttl = ttl;
  return o;
}
}  // namespace

TEST_CASE("a frozen database path: the lock client reports every held lease lost before its trust window ends",
          "[lock-client][faultproxy]") {
  if (ctx().is_sqlite()) {
    SUCCEED("SQLite is embedded: no network path to freeze");
    return;
  }
  faultproxy::ProxyOptions po;
  std::tie(po.target_host, po.target_port) = faultproxy::uri_endpoint(ctx().uri);
  po.lifetime = std::chrono::minutes(5);
  faultproxy::FaultProxy proxy(po);
  LockClientOptions co;
  co.connect.io_timeout = 1000ms;
  co.connect.connect_timeout = 1000ms;
  auto client = LockClient::create(faultproxy::uri_via(ctx().uri, proxy.port()), co);
  const std::string prefix = ctx().unique("frozen");
  const int n = 20;
  std::vector<std::unique_ptr<LeaseLock>> locks;
  std::mutex mu;
  std::vector<std::optional<LeaseLoss>> losses(n);
  std::vector<std::chrono::steady_clock::time_point> lost_at(n);
  for (int i = 0; i < n; ++i) {
    LeaseOptions o = short_lease(2000ms);
    o.on_lost = [&, i](const LeaseLoss& l) {
      std::lock_guard<std::mutex> lk(mu);
      losses[i] = l;
      lost_at[i] = std::chrono::steady_clock::now();
    };
    locks.push_back(std::make_unique<LeaseLock>(client, prefix + std::to_string(i), o));
    REQUIRE(locks.back()->try_acquire());
  }
  proxy.freeze();
  const auto frozen_at = std::chrono::steady_clock::now();
  REQUIRE(eventually(
      [&] {
        std::lock_guard<std::mutex> lk(mu);
        return std::all_of(losses.begin(), losses.end(), [](const auto& l) { return l.has_value(); });
      },
      10s));
  std::lock_guard<std::mutex> lk(mu);
  for (int i = 0; i < n; ++i) {
    INFO("lease " << i);
    // Reported while some of its trust window was left (the window is at
    // most ttl - margin after the last renewal, which came before the freeze).
    CHECK(losses[i]->window_left > 0ms);
    CHECK(lost_at[i] - frozen_at < 2000ms);
    CHECK((losses[i]->cause == LossCause::kOutcomeUnknown || losses[i]->cause == LossCause::kUnreachable));
    CHECK_FALSE(locks[i]->owns());
  }
  proxy.pass();
}

namespace {
// This process's threads (/proc/self/task).
std::size_t thread_count() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}
}  // namespace

TEST_CASE("a lock client's shutdown waits for a renewal still in its call on a frozen path: no thread of it "
          "outlives the client",
          "[lock-client][faultproxy]") {
  // A renewal the renewer gave up on (no answer within the lease's trust
  // window) goes on in its worker until the statement's own deadline
  // (io_timeout). A worker left running past ~LockClient ran on into the
  // process's exit: chaos workers died of SIGSEGV in OpenSSL's atexit
  // cleanup under its connect. Negative control: without the drain the
  // worker is still there seconds after the client is gone.
  if (ctx().is_sqlite()) {
    SUCCEED("SQLite is embedded: no network path to freeze");
    return;
  }
  LockClientOptions co;
  co.connect.io_timeout = 6000ms;  // the given-up renewal stays in its call ~4 s past the loss
  co.connect.connect_timeout = 1000ms;
  {
    // Whatever threads a client leaves for the process (the I/O deadline
    // timer) exist before the count.
    auto warm = LockClient::create(ctx().uri, co);
    LeaseLock l(warm, ctx().unique("frozen_warm"), short_lease(2000ms));
    REQUIRE(l.try_acquire());
  }
  const std::size_t before = thread_count();
  faultproxy::ProxyOptions po;
  std::tie(po.target_host, po.target_port) = faultproxy::uri_endpoint(ctx().uri);
  po.lifetime = std::chrono::minutes(5);
  std::optional<faultproxy::FaultProxy> proxy(po);
  const std::size_t with_proxy = thread_count();
  auto client = LockClient::create(faultproxy::uri_via(ctx().uri, proxy->port()), co);
  std::atomic<bool> lost{false};
  LeaseOptions o = short_lease(2000ms);
  o.on_lost = [&](const LeaseLoss&) { lost = true; };
  auto lock = std::make_unique<LeaseLock>(client, ctx().unique("frozen_drain"), o);
  REQUIRE(lock->try_acquire());
  proxy->freeze();
  const auto frozen_at = std::chrono::steady_clock::now();
  REQUIRE(eventually([&] { return lost.load(); }, 5s));
  // Gone before its io_timeout: the renewal sent into the freeze is still
  // waiting for its answer.
  REQUIRE(std::chrono::steady_clock::now() - frozen_at < 3500ms);
  lock.reset();  // lost: its release sends nothing
  client.reset();
  const auto gone_at = std::chrono::steady_clock::now();
  INFO("threads before the client " << with_proxy << ", after it " << thread_count() << ", client gone "
                                    << std::chrono::duration_cast<std::chrono::milliseconds>(gone_at - frozen_at).count()
                                    << " ms after the freeze");
  // The worker's thread ends right after its call returns (drain() waits
  // for the return): a moment, not the seconds left of its deadline.
  CHECK(eventually([&] { return thread_count() <= with_proxy; }, 300ms));
  proxy->pass();
  proxy.reset();
  CHECK(eventually([&] { return thread_count() <= before; }, 2s));
}
