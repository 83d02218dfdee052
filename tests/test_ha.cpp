// PostgreSQL HA (hidden tag [.ha], run by tools/test.sh with the pg-ha
// topology started): `sqlguard chaos` with the failover fault on the Patroni
// cluster with a synchronous standby keeps every invariant and its fences
// increase across promotions. The pg-async negative control is a longer run
// recorded in docs/ha.md (it needs several failovers to say anything).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "test_context.h"

namespace {

std::string required_env(const char* name) {
  const char* v = std::getenv(name);
  INFO(name << " must be set (tools/dbservers.sh env pg-ha / tools/test.sh); a missing server is a failure");
  REQUIRE(v);
  REQUIRE(*v);
  return v;
}

nlohmann::json last_json_line(const std::string& out) {
  auto end = out.find_last_not_of('\n');
  auto start = out.rfind('\n', end);
  return nlohmann::json::parse(out.substr(start == std::string::npos ? 0 : start + 1, end + 1));
}

}  // namespace

TEST_CASE("chaos with failovers on pg-ha (synchronous standby): clients follow the new primary, no invariant is "
          "violated and fences keep increasing",
          "[.ha][pg-ha][failover]") {
  const std::string uri = required_env("SQLGUARD_TEST_PG_HA_URI");
  required_env("SQLGUARD_DBSERVERS");
  const char* d = std::getenv("SQLGUARD_HA_CHAOS_DURATION");
  const std::string duration = d && *d ? d : "45s";
  std::string out;
  int rc = sgtest::run_process({sgtest::cli_path(), "--db", uri, "--json", "chaos", "--duration", duration,
                                "--workers", "4", "--ttl", "1s", "--seed", "14", "--topology", "pg-ha", "--faults",
                                "kill,pause,session-kill,failover"},
                               &out);
  INFO(out);
  REQUIRE_FALSE(out.empty());
  auto j = last_json_line(out);
  CHECK(rc == 0);
  CHECK(j["violations"] == 0);
  CHECK(j["failovers"].get<int>() >= 1);
  CHECK(j["failover_failures"] == 0);
  CHECK(j["invariants"]["failover_fences"] == 0);
  CHECK(j["invariants"]["fence_order"] == 0);
  CHECK(j["invariants"]["overlap"] == 0);
  CHECK(j["max_unavailable_ms"].is_number());
  CHECK(j["probe_writes"].get<long long>() > 0);
  CHECK(j["fenced_writes_accepted"].get<long long>() > 0);
  CHECK(j["unexpected_worker_exits"] == 0);
}
