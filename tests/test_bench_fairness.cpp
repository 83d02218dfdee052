// The bench's statistics (tools/sqlguard/bench_stats.h): what every contended
// cell reports about fairness. Behaviour of the math only; no timing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "bench_stats.h"

using sqlguard::bench::jain_index;
using sqlguard::bench::percentile;
using sqlguard::bench::percentile_ms;
using sqlguard::bench::Stats;

TEST_CASE("Jain's index is 1 when every client got the same share", "[bench]") {
  CHECK(*jain_index({250, 250, 250, 250}) == Approx(1.0));
  CHECK(*jain_index({7}) == Approx(1.0));
}

TEST_CASE("Jain's index of a starved client is below 1", "[bench]") {
  // Negative control: three clients served, one never.
  CHECK(*jain_index({100, 100, 100, 0}) == Approx(0.75));
  // One client got everything: 1/n, the lowest the index goes.
  CHECK(*jain_index({400, 0, 0, 0}) == Approx(0.25));
  // Unequal but nobody starved: between the two.
  const double uneven = *jain_index({300, 100, 100, 100});
  CHECK(uneven < 1.0);
  CHECK(uneven > 0.25);
  CHECK(uneven == Approx(36.0 / 48.0));  // (600)^2 / (4 * 120000)
}

TEST_CASE("Jain's index is undefined when nobody got anything", "[bench]") {
  CHECK_FALSE(jain_index({}).has_value());
  CHECK_FALSE(jain_index({0, 0, 0}).has_value());
}

TEST_CASE("percentiles are nearest-rank samples in milliseconds", "[bench]") {
  std::vector<std::int64_t> ns;
  for (int i = 1; i <= 100; ++i) ns.push_back(i * 1000000LL);  // 1..100 ms
  std::shuffle(ns.begin(), ns.end(), std::mt19937(42));     // any order in
  CHECK(percentile_ms(ns, 0.5) == Approx(50.0));
  CHECK(percentile_ms(ns, 0.99) == Approx(99.0));
  CHECK(percentile_ms(ns, 1.0) == Approx(100.0));  // the maximum
  CHECK(percentile_ms(ns, 0.001) == Approx(1.0));  // never below the first sample
  std::vector<std::int64_t> one{2500000};
  CHECK(percentile_ms(one, 0.5) == Approx(2.5));
  CHECK(percentile_ms(one, 0.99) == Approx(2.5));
  std::vector<std::int64_t> none;
  CHECK(percentile_ms(none, 0.5) == 0);
}

TEST_CASE("waits in lock cycles are nearest-rank counts: a FIFO queue's worst is about N, a starved one's far more",
          "[bench]") {
  // 16 clients served in turn: every wait is 15 grants to the others.
  std::vector<std::int64_t> fifo(160, 15);
  CHECK(percentile(fifo, 0.99) == 15);
  CHECK(percentile(fifo, 1.0) == 15);
  // Negative control: one client overtaken 300 times shows in the maximum only.
  std::vector<std::int64_t> unfair(159, 1);
  unfair.push_back(300);
  CHECK(percentile(unfair, 0.5) == 1);
  CHECK(percentile(unfair, 0.99) == 1);
  CHECK(percentile(unfair, 1.0) == 300);
  std::vector<std::int64_t> none;
  CHECK(percentile(none, 1.0) == 0);
}

TEST_CASE("a tail the median hides shows in p99 and max", "[bench]") {
  // 98 fast acquires and two that waited 2 s (the timeouts of a starved waiter).
  std::vector<std::int64_t> wait(98, 1000000);
  wait.push_back(2000000000);
  wait.push_back(2000000000);
  CHECK(percentile_ms(wait, 0.5) == Approx(1.0));
  CHECK(percentile_ms(wait, 0.99) == Approx(2000.0));
  CHECK(percentile_ms(wait, 1.0) == Approx(2000.0));
}

TEST_CASE("merging clients keeps each client's share, in client order", "[bench]") {
  Stats a, b, c, total;
  a.ops = 10;
  a.wait_ns = {1, 2};
  b.ops = 0;
  b.timeouts = 3;
  b.wait_ns = {7, 7, 7};
  b.first_error = "b failed";
  c.ops = 5;
  c.lat_ns = {4};
  c.wait_cycles = {3, 15};
  for (const auto* s : {&a, &b, &c}) total.merge_client(*s);
  CHECK(total.per_client == std::vector<std::uint64_t>{10, 0, 5});
  CHECK(total.ops == 15);
  CHECK(total.timeouts == 3);
  CHECK(total.wait_ns.size() == 5);
  CHECK(total.lat_ns.size() == 1);
  CHECK(total.wait_cycles == std::vector<std::int64_t>{3, 15});
  CHECK(total.first_error == "b failed");
  CHECK(*jain_index(total.per_client) < 1.0);  // the client with no success drags it down
}
