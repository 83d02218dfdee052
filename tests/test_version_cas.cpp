// Optimistic version CAS and the bounded retry helper.
#include <catch2/catch.hpp>

#include <chrono>
#include <sstream>

#include "sqlguard/retry.h"
#include "sqlguard/version_cas.h"
#include "test_context.h"

using namespace sqlguard;
using sgtest::ctx;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;

namespace {
std::string make_counter(Connection& c, std::int64_t n = 0) {
  std::string t = ctx().unique("cas_ctr");
  c.execute_script("CREATE TABLE " + t + " (id INTEGER NOT NULL PRIMARY KEY, n BIGINT NOT NULL, note VARCHAR(64), version BIGINT NOT NULL)");
  c.execute("INSERT INTO " + t + " (id, n, note, version) VALUES (1, ?, 'start', 1)", {n});
  return t;
}
RetryPolicy fast_policy(int attempts = 10) {
  RetryPolicy p;
  p.max_attempts = attempts;
  p.initial_backoff = 0ms;
  p.max_backoff = 0ms;
  return p;
}
}  // namespace

TEST_CASE("compare_and_set applies on the expected version and bumps it", "[cas]") {
  auto c = ctx().connect();
  auto t = make_counter(*c, 5);
  VersionCas cas(*c, {.table = t, .columns = {"n", "note"}});
  auto cur = cas.read(1);
  REQUIRE(cur);
  CHECK(cur->version == 1);
  CHECK(cur->values[0].as_int() == 5);
  CHECK(cur->values[1].as_string() == "start");
  auto r = cas.compare_and_set(1, 1, {6, "six"});
  CHECK(r.status == CasStatus::kApplied);
  CHECK(r.version == 2);
  auto after = cas.read(1);
  CHECK(after->version == 2);
  CHECK(after->values[0].as_int() == 6);
  CHECK(after->values[1].as_string() == "six");
  CHECK_FALSE(cas.read(2));
  CHECK(cas.compare_and_set(2, 1, {0, "x"}).status == CasStatus::kNotFound);
}

TEST_CASE("two CAS updates from the same version: exactly one wins, the loser retries and the result reflects both", "[cas]") {
  auto a = ctx().connect();
  auto t = make_counter(*a, 100);
  auto b = ctx().connect();
  VersionCas ca(*a, {.table = t, .columns = {"n"}}), cb(*b, {.table = t, .columns = {"n"}});
  // Both read version 1 before either writes.
  auto ra = ca.read(1), rb = cb.read(1);
  REQUIRE(ra->version == rb->version);
  auto wa = ca.compare_and_set(1, ra->version, {ra->values[0].as_int() + 10});
  auto wb = cb.compare_and_set(1, rb->version, {rb->values[0].as_int() + 1});
  CHECK(wa.status == CasStatus::kApplied);
  CHECK(wb.status == CasStatus::kConflict);
  CHECK(wb.version == wa.version);  // the loser learns the winning version
  // The loser redoes its read-modify-write through the retry helper.
  auto retried = cb.update(1, [](const Versioned& cur) -> std::optional<Params> { return Params{cur.values[0].as_int() + 1}; });
  CHECK(retried.status == CasStatus::kApplied);
  CHECK(retried.stats.attempts >= 1);
  REQUIRE(retried.state);
  CHECK(retried.state->values[0].as_int() == 111);
  CHECK(ca.read(1)->values[0].as_int() == 111);
  CHECK(ca.read(1)->version == 3);
}

TEST_CASE("update() retries a lost CAS, counts the conflict and succeeds on the next attempt", "[cas][retry]") {
  auto a = ctx().connect();
  auto t = make_counter(*a, 0);
  auto b = ctx().connect();
  VersionCas ca(*a, {.table = t, .columns = {"n"}}), cb(*b, {.table = t, .columns = {"n"}});
  int calls = 0;
  auto r = ca.update(1, [&](const Versioned& cur) -> std::optional<Params> {
    // First attempt: a rival commits between our read and our write.
    if (++calls == 1) {
      if (ctx().is_sqlite()) {
        // BEGIN IMMEDIATE serializes writers: simulate the rival with a
        // version bump inside our own transaction instead.
        a->execute("UPDATE " + t + " SET n = n + 100, version = version + 1 WHERE id = 1");
      } else {
        REQUIRE(cb.compare_and_set(1, cur.version, {cur.values[0].as_int() + 100}));
      }
    }
    return Params{cur.values[0].as_int() + 1};
  }, fast_policy());
  CHECK(r.status == CasStatus::kApplied);
  CHECK(calls == 2);
  CHECK(r.stats.attempts == 2);
  CHECK(r.stats.conflicts == 1);
  // The rival's +100 and our +1 (SQLite: the simulated rival ran inside the
  // lost attempt and was rolled back with it).
  CHECK(ca.read(1)->values[0].as_int() == (ctx().is_sqlite() ? 1 : 101));
}

TEST_CASE("update() gives up after max_attempts and reports a conflict as a value, not an exception", "[cas][retry]") {
  auto c = ctx().connect();
  auto t = make_counter(*c, 0);
  VersionCas cas(*c, {.table = t, .columns = {"n"}});
  // Every attempt bumps the version behind its own back, so every CAS loses.
  auto r = cas.update(1, [&](const Versioned& cur) -> std::optional<Params> {
    c->execute("UPDATE " + t + " SET version = version + 1 WHERE id = 1");
    return Params{cur.values[0].as_int() + 1};
  }, fast_policy(3));
  CHECK(r.status == CasStatus::kConflict);
  CHECK(r.stats.attempts == 3);
  CHECK(r.stats.conflicts == 3);
  REQUIRE(r.last_error);
  CHECK(r.last_error->code() == ErrorCode::kConflict);
  CHECK(cas.read(1)->values[0].as_int() == 0);  // every attempt rolled back
  CHECK(cas.read(1)->version == 1);
  auto skipped = cas.update(1, [](const Versioned&) -> std::optional<Params> { return std::nullopt; });
  CHECK(skipped.status == CasStatus::kSkipped);
  CHECK(cas.update(42, [](const Versioned&) -> std::optional<Params> { return Params{1}; }).status == CasStatus::kNotFound);
}

TEST_CASE("with_retry never retries CommitInDoubt or non-retryable errors, and retries LockBusy", "[cas][retry]") {
  auto c = ctx().connect();
  int calls = 0;
  try {
    with_retry(*c, fast_policy(), [&](Transaction&) {
      ++calls;
      throw Error(ErrorCode::kCommitInDoubt, "simulated");
    });
    FAIL("expected CommitInDoubt to propagate");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kCommitInDoubt);
  }
  CHECK(calls == 1);
  calls = 0;
  CHECK_THROWS_WITH(with_retry(*c, fast_policy(), [&](Transaction&) {
                      ++calls;
                      throw Error(ErrorCode::kInvalidArgument, "bad");
                    }),
                    Contains("bad"));
  CHECK(calls == 1);
  calls = 0;
  auto r = with_retry(*c, fast_policy(), [&](Transaction&) {
    if (++calls < 3) throw Error(ErrorCode::kLockBusy, "busy");
    return 7;
  });
  REQUIRE(r);
  CHECK(*r.value == 7);
  CHECK(r.stats.attempts == 3);
  CHECK(r.stats.busy == 2);
  CHECK_FALSE(c->in_transaction());
}

TEST_CASE("retry policies are validated and backoff is full jitter under an exponential cap", "[cas][retry]") {
  auto bad = [](auto mutate) {
    RetryPolicy p;
    mutate(p);
    try {
      p.validate();
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK_THAT(bad([](RetryPolicy& p) { p.max_attempts = 0; }), Contains("max_attempts"));
  CHECK_THAT(bad([](RetryPolicy& p) { p.initial_backoff = 2s; p.max_backoff = 1s; }), Contains("initial_backoff"));
  CHECK_THAT(bad([](RetryPolicy& p) { p.multiplier = 0.5; }), Contains("multiplier"));
  CHECK_THAT(bad([](RetryPolicy& p) { p.max_backoff = 2h; }), Contains("max_backoff"));
  RetryPolicy p;  // 5ms, x2, cap 1s
  std::int64_t max_seen_1 = 0, max_seen_8 = 0;
  for (int i = 0; i < 300; ++i) {
    auto d1 = detail::backoff_delay(p, 1).count();
    auto d8 = detail::backoff_delay(p, 8).count();
    CHECK((d1 >= 0 && d1 <= 5));
    CHECK((d8 >= 0 && d8 <= 640));
    max_seen_1 = std::max(max_seen_1, d1);
    max_seen_8 = std::max(max_seen_8, d8);
  }
  CHECK(max_seen_8 > max_seen_1);  // the cap grows
  CHECK(detail::backoff_delay(p, 60).count() <= 1000);  // and saturates at max_backoff
  auto c = ctx().connect();
  Transaction tx(*c);
  CHECK_THROWS_WITH(with_retry(*c, p, [](Transaction&) {}), Contains("already in a transaction"));
}

TEST_CASE("version CAS refuses bad identifiers and wrong value counts clearly", "[cas]") {
  auto c = ctx().connect();
  CHECK_THROWS_WITH(VersionCas(*c, {.table = "t; DROP TABLE x", .columns = {"n"}}), Contains("VersionCasSpec::table"));
  CHECK_THROWS_WITH(VersionCas(*c, {.table = "t", .version_column = "v-1", .columns = {"n"}}), Contains("version_column"));
  CHECK_THROWS_WITH(VersionCas(*c, {.table = "t", .columns = {}}), Contains("at least one"));
  CHECK_THROWS_WITH(VersionCas(*c, {.table = "t", .columns = {"version"}}), Contains("repeated or is the key/version"));
  auto t = make_counter(*c);
  VersionCas cas(*c, {.table = t, .columns = {"n"}});
  CHECK_THROWS_WITH(cas.compare_and_set(1, 1, {1, 2}), Contains("2 values for 1 columns"));
}

TEST_CASE("four processes x 25 CAS increments end with the exact total", "[cas][multiprocess]") {
  auto c = ctx().connect();
  auto t = make_counter(*c, 0);
  const int kWorkers = 4, kEach = 25;
  auto start = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count() + 300;
  std::vector<std::vector<std::string>> argv;
  for (int w = 0; w < kWorkers; ++w)
    argv.push_back({sgtest::worker_path(), "cas-increment", ctx().uri, t, "1", std::to_string(kEach), std::to_string(start)});
  std::vector<std::string> outs;
  auto rcs = sgtest::run_parallel(argv, &outs);
  int attempts = 0, conflicts = 0;
  for (int w = 0; w < kWorkers; ++w) {
    CHECK(rcs[w] == 0);
    std::istringstream in(outs[w]);
    int a = 0, k = 0;
    in >> a >> k;
    attempts += a;
    conflicts += k;
  }
  CHECK(sgtest::query_int("SELECT n FROM " + t + " WHERE id = 1") == kWorkers * kEach);
  CHECK(sgtest::query_int("SELECT version FROM " + t + " WHERE id = 1") == 1 + kWorkers * kEach);
  // Every attempt that did not apply was counted as a conflict.
  CHECK(attempts == kWorkers * kEach + conflicts);
}
