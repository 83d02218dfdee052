// The metrics registry: strategies count into it, histograms bucket
// latencies, and the Prometheus exporter's text passes `promtool check metrics`.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>

#include "sqlguard/inbox.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/metrics.h"
#include "sqlguard/transition.h"
#include "sqlguard/version_cas.h"
#ifdef SQLGUARD_TEST_PROMETHEUS
#include "sqlguard/prometheus.h"
#endif
#include "test_context.h"

using namespace sqlguard;
using sgtest::ctx;
using namespace std::chrono_literals;

namespace {
std::uint64_t value_of(const std::string& name, const metrics::Labels& labels = {}) {
  for (const auto& c : metrics::snapshot().counters)
    if (c.name == name && c.labels == labels) return c.value;
  return 0;
}
}  // namespace

TEST_CASE("lease attempts, acquisitions, busy attempts and releases are counted in the registry", "[metrics]") {
  auto c = ctx().connect();
  auto c2 = ctx().connect();
  auto name = ctx().unique("mlk");
  auto attempts = value_of("sqlguard_lock_attempts_total");
  auto acquired = value_of("sqlguard_lock_acquired_total");
  auto busy = value_of("sqlguard_lock_busy_total");
  auto releases = value_of("sqlguard_lock_releases_total");
  LeaseLock a(*c, name);
  LeaseLock b(*c2, name);
  REQUIRE(a.try_acquire());
  REQUIRE_FALSE(b.try_acquire());
  REQUIRE(a.release());
  // Other threads of this process may count too: at least ours are there.
  CHECK(value_of("sqlguard_lock_attempts_total") >= attempts + 2);
  CHECK(value_of("sqlguard_lock_acquired_total") >= acquired + 1);
  CHECK(value_of("sqlguard_lock_busy_total") >= busy + 1);
  CHECK(value_of("sqlguard_lock_releases_total") >= releases + 1);
  // lease_metrics() reads the same counters.
  CHECK(lease_metrics().acquired == value_of("sqlguard_lock_acquired_total"));
}

TEST_CASE("inbox deliveries count as processed once and then as duplicates", "[metrics][inbox]") {
  auto c = ctx().connect();
  auto processed = value_of("sqlguard_inbox_processed_total");
  auto dups = value_of("sqlguard_inbox_duplicates_total");
  Inbox inbox(*c);
  auto consumer = ctx().unique("mcons");
  for (int i = 0; i < 3; ++i) inbox.process(consumer, "m-1", [](Transaction&) {});
  CHECK(value_of("sqlguard_inbox_processed_total") == processed + 1);
  CHECK(value_of("sqlguard_inbox_duplicates_total") == dups + 2);
}

TEST_CASE("compare-and-set, guarded updates and state machine moves are counted with their outcome", "[metrics]") {
  auto c = ctx().connect();
  auto t = ctx().unique("mrow");
  c->execute_script("CREATE TABLE " + t +
                    " (id INTEGER NOT NULL PRIMARY KEY, qty INTEGER NOT NULL, status VARCHAR(16) NOT NULL, "
                    "version BIGINT NOT NULL)");
  c->execute("INSERT INTO " + t + " (id, qty, status, version) VALUES (1, 5, 'new', 1)");
  auto applied = value_of("sqlguard_cas_applied_total");
  auto conflicts = value_of("sqlguard_cas_conflicts_total");
  VersionCas cas(*c, {.table = t, .key_column = "id", .version_column = "version", .columns = {"qty"}});
  REQUIRE(cas.compare_and_set(1, 1, {6}).status == CasStatus::kApplied);
  REQUIRE(cas.compare_and_set(1, 1, {7}).status == CasStatus::kConflict);  // version is 2 now
  CHECK(value_of("sqlguard_cas_applied_total") == applied + 1);
  CHECK(value_of("sqlguard_cas_conflicts_total") == conflicts + 1);

  auto g_applied = value_of("sqlguard_guarded_update_applied_total");
  auto g_rejected = value_of("sqlguard_guarded_update_rejected_total");
  GuardedUpdate take(*c, {.table = t, .key_column = "id", .assignments = {{"qty", AssignOp::kSubtract}},
                          .guards = {{"qty", Compare::kGe}}});
  REQUIRE(take.apply(1, {4, 4}));                                          // 6 -> 2
  REQUIRE(take.apply(1, {4, 4}).status == GuardedStatus::kRejected);      // 2 < 4
  REQUIRE(take.apply(99, {1, 1}).status == GuardedStatus::kNotFound);     // not counted as rejected
  CHECK(value_of("sqlguard_guarded_update_applied_total") == g_applied + 1);
  CHECK(value_of("sqlguard_guarded_update_rejected_total") == g_rejected + 1);

  auto moved = value_of("sqlguard_transition_applied_total");
  auto illegal = value_of("sqlguard_transition_rejected_total", {{"reason", "illegal_move"}});
  auto again = value_of("sqlguard_transition_rejected_total", {{"reason", "already_in_target"}});
  StateMachine sm(*c, {.table = t, .states = {"new", "done", "void"}, .terminal_states = {"done", "void"},
                       .transitions = {{"finish", {"new"}, "done", {}, {}}, {"cancel", {"new"}, "void", {}, {}}}});
  REQUIRE(sm.fire(1, "finish"));
  REQUIRE(sm.fire(1, "finish").status == TransitionStatus::kAlreadyInTarget);
  REQUIRE(sm.fire(1, "cancel").status == TransitionStatus::kRejected);
  CHECK(value_of("sqlguard_transition_applied_total") == moved + 1);
  CHECK(value_of("sqlguard_transition_rejected_total", {{"reason", "illegal_move"}}) == illegal + 1);
  CHECK(value_of("sqlguard_transition_rejected_total", {{"reason", "already_in_target"}}) == again + 1);
}

TEST_CASE("a histogram puts each observation in the first bucket whose bound is not below it", "[metrics]") {
  auto& h = metrics::histogram("sgtest_latency_seconds", "test histogram", {{"case", ctx().unique("h")}});
  h.observe(0.0004);   // <= 0.0005
  h.observe(0.0005);   // <= 0.0005 (bounds are inclusive, as Prometheus' le)
  h.observe(0.003);    // <= 0.005
  h.observe(100.0);    // +Inf
  auto d = h.data();
  REQUIRE(d.buckets.size() == metrics::Histogram::kBounds.size() + 1);
  CHECK(d.buckets[0] == 2);
  CHECK(d.buckets[3] == 1);
  CHECK(d.buckets.back() == 1);
  CHECK(d.count == 4);
  CHECK(d.sum == Approx(100.0039).epsilon(1e-6));
}

TEST_CASE("a metric name or label outside the Prometheus grammar is refused", "[metrics]") {
  CHECK_THROWS_AS(metrics::counter("bad-name", "x"), Error);
  CHECK_THROWS_AS(metrics::counter("sgtest_ok_total", "x", {{"__reserved", "v"}}), Error);
  metrics::counter("sgtest_kind_total", "x");
  CHECK_THROWS_AS(metrics::histogram("sgtest_kind_total", "x"), Error);
}

#ifdef SQLGUARD_TEST_PROMETHEUS
TEST_CASE("the Prometheus exposition of the registry passes promtool check metrics", "[metrics][prometheus]") {
  {
    // Make sure there is something of each kind to expose.
    auto c = ctx().connect();
    LeaseLock a(*c, ctx().unique("mlk"));
    REQUIRE(a.acquire(10ms));
    REQUIRE(a.release());
    metrics::histogram("sgtest_exposed_seconds", "A test histogram").observe(0.01);
  }
  std::string text = prometheus_text();
  CHECK(text.find("# TYPE sqlguard_lock_attempts_total counter") != std::string::npos);
  CHECK(text.find("# TYPE sqlguard_lock_wait_seconds histogram") != std::string::npos);
  CHECK(text.find("sqlguard_lock_wait_seconds_bucket{le=\"+Inf\"}") != std::string::npos);
  CHECK(text.find("sqlguard_lock_lost_total{cause=\"expired\"}") != std::string::npos);
  std::string path = "/tmp/sgtest_metrics_" + ctx().run_id + ".prom";
  {
    std::ofstream f(path);
    f << text;
  }
  std::string out;
  int rc = sgtest::run_process({"/bin/sh", "-c", "promtool check metrics < " + path + " 2>&1"}, &out);
  std::remove(path.c_str());
  INFO(out);
  CHECK(rc == 0);
}
#endif
