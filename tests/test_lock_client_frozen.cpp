// The lock client on a frozen database path (the fault proxy, built with the
// tools): every held lease is reported lost before its trust window ends.
// PostgreSQL and MariaDB (SQLite has no network path).
#include <catch2/catch.hpp>

#include <algorithm>
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
