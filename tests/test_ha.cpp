// PostgreSQL HA (hidden tag [.ha], run by tools/test.sh with the pg-ha and
// pg-async topologies started): `sqlguard chaos` with the failover fault on
// the Patroni cluster with a synchronous standby keeps every invariant and
// its fences increase across promotions; on pg-async, the negative control,
// whose failover promotes a standby held back a few seconds (tools/
// topologies.sh), the checker catches the acknowledged commits it lost.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "test_context.h"
#include "test_helpers.h"

namespace {

using sgtest::required_env;

nlohmann::json last_json_line(const std::string& out) {
  auto end = out.find_last_not_of('\n');
  auto start = out.rfind('\n', end);
  return nlohmann::json::parse(out.substr(start == std::string::npos ? 0 : start + 1, end + 1));
}

struct ChaosRun {
  int rc = -1;
  nlohmann::json j;
};

// `sqlguard chaos` with failovers of `topology` (pg-ha | pg-async) on `uri`.
ChaosRun chaos_with_failovers(const std::string& uri, const std::string& topology, const std::string& duration) {
  std::string out;
  ChaosRun r;
  r.rc = sgtest::run_process({sgtest::cli_path(), "--db", uri, "--json", "chaos", "--duration", duration, "--workers",
                              "4", "--ttl", "1s", "--seed", "14", "--topology", topology, "--faults",
                              "kill,pause,session-kill,failover"},
                             &out);
  INFO(out);
  REQUIRE_FALSE(out.empty());
  r.j = last_json_line(out);
  return r;
}

}  // namespace

TEST_CASE("chaos with failovers on pg-ha (synchronous standby): clients follow the new primary, no invariant is "
          "violated and fences keep increasing",
          "[.ha][pg-ha][failover]") {
  const std::string uri = required_env("SQLGUARD_TEST_PG_HA_URI");
  required_env("SQLGUARD_DBSERVERS");
  const char* d = std::getenv("SQLGUARD_HA_CHAOS_DURATION");
  auto [rc, j] = chaos_with_failovers(uri, "pg-ha", d && *d ? d : "45s");
  INFO(j.dump());
  CHECK(rc == 0);
  CHECK(j["violations"] == 0);
  CHECK(j["failovers"].get<int>() >= 1);
  CHECK(j["failover_failures"] == 0);
  CHECK(j["invariants"]["failover_fences"] == 0);
  CHECK(j["invariants"]["fence_order"] == 0);
  CHECK(j["invariants"]["overlap"] == 0);
  // The synchronous standby had every commit the primary acknowledged.
  CHECK(j["invariants"]["lost_commits"] == 0);
  CHECK(j["invariants"]["worker_exits"] == 0);
  CHECK(j["max_unavailable_ms"].is_number());
  CHECK(j["probe_writes"].get<long long>() > 0);
  CHECK(j["fenced_writes_accepted"].get<long long>() > 0);
  CHECK(j["unexpected_worker_exits"] == 0);
}

TEST_CASE("negative control: a failover to an asynchronous standby that lags loses acknowledged commits, and the "
          "checker catches it",
          "[.ha][pg-async][failover][control]") {
  const std::string uri = required_env("SQLGUARD_TEST_PG_ASYNC_URI");
  required_env("SQLGUARD_DBSERVERS");
  // One failover: it starts after 3 s and needs ~25 s of the run.
  auto [rc, j] = chaos_with_failovers(uri, "pg-async", "32s");
  INFO(j.dump());
  CHECK(j["failovers"].get<int>() >= 1);
  CHECK(j["failover_failures"] == 0);
  // The promoted standby lacks the seconds it was held back: fenced writes,
  // sales and inbox effects the workers saw commit are gone (and with them,
  // when a sequence record was among the lost WAL, fences the probe got).
  CHECK(j["invariants"]["lost_commits"].get<int>() > 0);
  CHECK(j["violations"].get<int>() > 0);
  CHECK(rc == 4);
  CHECK(j["invariants"]["worker_exits"] == 0);
}
