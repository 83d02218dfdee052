// LeaderElector behind the fault proxy: a partitioned leader steps down
// before its lease ends in the database.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "fault_proxy.h"
#include "sqlguard/leader.h"
#include "test_context.h"

using namespace sqlguard;
using sgtest::ctx;
using namespace std::chrono_literals;

TEST_CASE("a partitioned leader is revoked while its lease is still live in the database, then a rival is elected",
          "[leader][faultproxy]") {
  if (ctx().is_sqlite()) {
    SUCCEED("SQLite is embedded: no network path to partition");
    return;
  }
  faultproxy::ProxyOptions po;
  std::tie(po.target_host, po.target_port) = faultproxy::uri_endpoint(ctx().uri);
  po.lifetime = std::chrono::minutes(5);
  faultproxy::FaultProxy proxy(po);
  auto name = ctx().unique("elect");
  std::atomic<int> revoked{0};
  std::atomic<int> cause{-1};
  ElectionOptions o;
  o.ttl = 4s;
  o.safety_margin = 1s;
  o.connect.connect_timeout = 2s;
  o.on_revoked = [&](const Revocation& r) {
    cause = static_cast<int>(r.cause);
    ++revoked;
  };
  LeaderElector a(faultproxy::uri_via(ctx().uri, proxy.port()), name, o);
  a.campaign();
  auto until = std::chrono::steady_clock::now() + 10s;
  while (!a.is_leader() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
  REQUIRE(a.is_leader());
  std::int64_t term_a = a.term();
  proxy.freeze();  // a silent partition: nothing answers, nothing is refused
  until = std::chrono::steady_clock::now() + 10s;
  while (revoked == 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(2ms);
  REQUIRE(revoked == 1);
  CHECK_FALSE(a.is_leader());
  // The database still holds a's lease: the leader stepped down first.
  auto info = lease_info(sgtest::probe(), name);
  REQUIRE(info.has_value());
  CHECK(info->fence == term_a);
  CHECK(info->held());
  CHECK((cause == static_cast<int>(RevokeCause::kUnreachable) ||
         cause == static_cast<int>(RevokeCause::kOutcomeUnknown)));
  // A rival on a healthy path is elected once the lease ends, with a higher term.
  ElectionOptions ob;
  ob.ttl = 4s;
  LeaderElector b(ctx().uri, name, ob);
  b.campaign();
  until = std::chrono::steady_clock::now() + 15s;
  while (!b.is_leader() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
  REQUIRE(b.is_leader());
  CHECK(b.term() > term_a);
  CHECK_FALSE(a.is_leader());
  b.resign();
  proxy.pass();
  a.resign();
}
