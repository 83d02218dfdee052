// `sqlguard demo`: the README's first command, run as users would.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <sstream>

#include "test_context.h"

using sgtest::ctx;

namespace {
std::vector<std::map<std::string, std::string>> json_lines(const std::string& out) {
  // Flat one-line objects: "key":value pairs are enough for these checks.
  std::vector<std::map<std::string, std::string>> rows;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] != '{') continue;
    std::map<std::string, std::string> m;
    std::size_t pos = 0;
    while ((pos = line.find('"', pos)) != std::string::npos) {
      auto end = line.find('"', pos + 1);
      std::string key = line.substr(pos + 1, end - pos - 1);
      if (end + 1 >= line.size() || line[end + 1] != ':') {
        pos = end + 1;
        continue;
      }
      auto vstart = end + 2;
      auto vend = line[vstart] == '"' ? line.find('"', vstart + 1) + 1 : line.find_first_of(",}", vstart);
      std::string v = line.substr(vstart, vend - vstart);
      if (!v.empty() && v.front() == '"') v = v.substr(1, v.size() - 2);
      m[key] = v;
      pos = vend;
    }
    rows.push_back(m);
  }
  return rows;
}

long long num(const std::map<std::string, std::string>& m, const std::string& k) {
  auto it = m.find(k);
  if (it == m.end()) FAIL("missing JSON field " << k);
  return std::stoll(it->second);
}
}  // namespace

TEST_CASE("the flash-sale demo sells exactly the stock with every strategy, and the naive control oversells", "[demo]") {
  std::string out;
  int rc = sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "--json", "demo", "flash-sale", "--workers", "6",
                                "--stock", "20", "--orders", "60", "--think-ms", "4"},
                               &out);
  CHECK(rc == 0);
  auto rows = json_lines(out);
  REQUIRE(rows.size() == 5);
  std::set<std::string> seen;
  for (auto& r : rows) {
    INFO(r["strategy"]);
    seen.insert(r["strategy"]);
    for (const char* f : {"scenario", "dialect", "strategy", "workers", "stock", "orders", "sold", "stock_left",
                          "oversold", "elapsed_s", "orders_per_s"})
      CHECK(r.count(f) == 1);
    CHECK(r["scenario"] == "flash-sale");
    CHECK(r["dialect"] == ctx().name);
    if (r["strategy"] == "naive") {
      CHECK(num(r, "oversold") > 0);  // the negative control really races
    } else {
      CHECK(num(r, "sold") == 20);
      CHECK(num(r, "oversold") == 0);
      CHECK(num(r, "stock_left") == 0);
    }
  }
  CHECK(seen == std::set<std::string>{"naive", "lease-lock", "row-lock", "cas", "guarded-update"});
}

TEST_CASE("the duplicate-submit demo executes each key once and the consumer-dedup demo applies each message once", "[demo]") {
  std::string out;
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "--json", "demo", "duplicate-submit", "--workers",
                             "4", "--requests", "120", "--keys", "15"},
                            &out) == 0);
  auto dup = json_lines(out);
  REQUIRE(dup.size() == 1);
  CHECK(num(dup[0], "executions") == num(dup[0], "distinct_keys"));
  CHECK(num(dup[0], "requests") == 120);
  for (const char* f : {"replays", "in_progress", "mismatches", "elapsed_s"}) CHECK(dup[0].count(f) == 1);

  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "--json", "demo", "consumer-dedup", "--workers",
                             "4", "--messages", "80", "--redeliver", "0.3"},
                            &out) == 0);
  auto dd = json_lines(out);
  REQUIRE(dd.size() == 1);
  CHECK(num(dd[0], "effects") == 80);
  CHECK(num(dd[0], "distinct") == 80);
  CHECK(num(dd[0], "deliveries") == 80 + num(dd[0], "duplicates_skipped"));
}

TEST_CASE("the demo refuses bad options with a clear error", "[demo][cli]") {
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "demo", "flash-sale", "--workers", "0"}) == 2);
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "demo", "flash-sale", "--strategy", "yolo"}) == 2);
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "demo", "consumer-dedup", "--redeliver", "2"}) ==
        2);
}
