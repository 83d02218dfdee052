// The one version rule (version_cas.h): on a table declared versioned, every
// sqlguard writer moves the version in the same statement, so a stale
// compare_and_set() after any of them conflicts. Every ordered pair of
// writers, plus the negative control (undeclared: the lost update happens).
#include <catch2/catch.hpp>

#include <functional>
#include <mutex>
#include <thread>

#include "sqlguard/row_lock.h"
#include "sqlguard/transition.h"
#include "sqlguard/version_cas.h"
#include "test_context.h"
#include "test_helpers.h"

using namespace sqlguard;
using sgtest::ctx;

namespace {

std::string make_table(Connection& c, const std::string& base) {
  std::string t = ctx().unique(base);
  c.execute_script("CREATE TABLE " + t +
                   " (id INTEGER NOT NULL PRIMARY KEY, qty INTEGER NOT NULL, status VARCHAR(16) NOT NULL, "
                   "version INTEGER NOT NULL, claimed_by VARCHAR(255), claimed_until BIGINT)");
  c.execute("INSERT INTO " + t + " (id, qty, status, version) VALUES (1, 1000, 'open', 1)");
  return t;
}

std::int64_t version_of(Connection& c, const std::string& t) {
  return c.execute("SELECT version FROM " + t + " WHERE id = 1").rows.at(0)[0].as_int();
}

struct Writer {
  std::string name;
  std::function<void()> write;  // one sqlguard write (or claim + release) on row 1
};

// The four sqlguard writers on `t`, constructed AFTER the declaration.
std::vector<Writer> writers(Connection& c, const std::string& t, std::vector<std::shared_ptr<void>>& keep) {
  auto gu = std::make_shared<GuardedUpdate>(
      c, GuardedUpdateSpec{.table = t, .assignments = {{"qty", AssignOp::kSubtract}}, .guards = {{"qty", Compare::kGe}}});
  auto sm = std::make_shared<StateMachine>(
      c, StateMachineSpec{.table = t,
                          .states = {"open", "held"},
                          .transitions = {{.event = "hold", .from = {"open"}, .to = "held"},
                                          {.event = "reopen", .from = {"held"}, .to = "open"}}});
  auto cas = std::make_shared<VersionCas>(c, VersionCasSpec{.table = t, .columns = {"qty"}});
  auto rl = std::make_shared<RowLocker>(c, RowLockSpec{.table = t, .lease = ClaimLease{}});
  keep = {gu, sm, cas, rl};
  return {
      {"GuardedUpdate", [gu] { REQUIRE(gu->apply(1, {3, 3})); }},
      {"StateMachine",
       [sm] {
         auto st = sm->state_of(1);
         REQUIRE(st);
         REQUIRE(sm->fire(1, *st == "open" ? "hold" : "reopen"));
       }},
      {"VersionCas",
       [cas] {
         REQUIRE(cas->update(1, [](const Versioned& v) -> std::optional<Params> {
           return Params{v.values.at(0).as_int() + 1};
         }));
       }},
      {"RowLocker leased claim",
       [rl] {
         auto rows = rl->claim_leased(1);
         REQUIRE(rows.size() == 1);
         REQUIRE(rl->release_claim(1));
       }},
  };
}

}  // namespace

TEST_CASE("on a declared table every ordered pair of sqlguard writers moves the version and a stale compare_and_set conflicts",
          "[versionrule]") {
  auto conn = ctx().connect();
  auto& c = *conn;
  std::string t = make_table(c, "vr_pairs");
  declare_versioned_table(c, t, "version");
  std::vector<std::shared_ptr<void>> keep;
  auto ws = writers(c, t, keep);
  VersionCas cas(c, {.table = t, .columns = {"qty"}});
  int pairs = 0;
  for (auto& a : ws)
    for (auto& b : ws) {
      INFO(a.name << " then " << b.name);
      auto before = cas.read(1);
      REQUIRE(before);
      a.write();
      auto v1 = version_of(c, t);
      CHECK(v1 > before->version);
      auto mid = cas.read(1);
      b.write();
      CHECK(version_of(c, t) > v1);
      // Both stale versions lose; the write they carry is not applied.
      auto qty = c.execute("SELECT qty FROM " + t + " WHERE id = 1").rows.at(0)[0].as_int();
      auto r0 = cas.compare_and_set(1, before->version, {before->values.at(0)});
      CHECK(r0.status == CasStatus::kConflict);
      CHECK(r0.version == version_of(c, t));
      CHECK(cas.compare_and_set(1, mid->version, {mid->values.at(0)}).status == CasStatus::kConflict);
      CHECK(c.execute("SELECT qty FROM " + t + " WHERE id = 1").rows.at(0)[0].as_int() == qty);
      ++pairs;
    }
  CHECK(pairs == 16);
  // A fresh read still applies.
  auto now = cas.read(1);
  CHECK(cas.compare_and_set(1, now->version, {Value(7)}).status == CasStatus::kApplied);
}

TEST_CASE("negative control: without the declaration a guarded decrement between read and compare_and_set is lost",
          "[versionrule]") {
  auto conn = ctx().connect();
  auto& c = *conn;
  std::vector<std::string> warnings;
  std::mutex mu;
  set_log_hook([&](LogLevel, std::string_view m) {
    std::lock_guard<std::mutex> lk(mu);
    warnings.emplace_back(m);
  });
  std::string loose = make_table(c, "vr_loose");
  c.execute("UPDATE " + loose + " SET qty = 10");
  VersionCas cas(c, {.table = loose, .columns = {"qty"}, .declare_versioned = false});
  set_log_hook(nullptr);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("without declaring it versioned") != std::string::npos);
  CHECK_FALSE(versioned_table_column(c, loose));

  GuardedUpdate dec(c, {.table = loose, .assignments = {{"qty", AssignOp::kSubtract}}, .guards = {{"qty", Compare::kGe}}});
  auto v = cas.read(1);
  REQUIRE(dec.apply(1, {3, 3}));  // 10 -> 7, version untouched
  CHECK(cas.compare_and_set(1, v->version, {v->values.at(0)}).status == CasStatus::kApplied);
  CHECK(c.execute("SELECT qty FROM " + loose + " WHERE id = 1").rows.at(0)[0].as_int() == 10);  // the decrement is lost

  // The same sequence on a declared table (the default) keeps it.
  std::string strict = make_table(c, "vr_strict");
  c.execute("UPDATE " + strict + " SET qty = 10");
  VersionCas cas2(c, {.table = strict, .columns = {"qty"}});
  CHECK(versioned_table_column(c, strict) == std::optional<std::string>("version"));
  GuardedUpdate dec2(c, {.table = strict, .assignments = {{"qty", AssignOp::kSubtract}}, .guards = {{"qty", Compare::kGe}}});
  auto v2 = cas2.read(1);
  REQUIRE(dec2.apply(1, {3, 3}));
  CHECK(cas2.compare_and_set(1, v2->version, {v2->values.at(0)}).status == CasStatus::kConflict);
  CHECK(c.execute("SELECT qty FROM " + strict + " WHERE id = 1").rows.at(0)[0].as_int() == 7);
}

TEST_CASE("a table has one version column: conflicting declarations and writers of the version column are refused",
          "[versionrule]") {
  auto conn = ctx().connect();
  auto& c = *conn;
  std::string t = make_table(c, "vr_rules");
  declare_versioned_table(c, t, "version");
  declare_versioned_table(c, t, "version");  // idempotent
  CHECK(sgtest::code_of([&] { declare_versioned_table(c, t, "qty"); }) == ErrorCode::kInvalidArgument);
  CHECK(sgtest::code_of([&] { VersionCas x(c, {.table = t, .version_column = "qty", .columns = {"status"}}); }) ==
        ErrorCode::kInvalidArgument);
  CHECK(sgtest::code_of([&] {
          VersionCas x(c, {.table = t, .version_column = "qty", .columns = {"status"}, .declare_versioned = false});
        }) == ErrorCode::kInvalidArgument);
  CHECK(sgtest::code_of([&] {
          GuardedUpdate g(c, {.table = t, .assignments = {{"version", AssignOp::kSet}}});
        }) == ErrorCode::kInvalidArgument);
  {
    // A spec that bumps the version itself (code written before the rule) is
    // accepted, and the version moves exactly by its own increment.
    GuardedUpdate g(c, {.table = t, .assignments = {{"qty", AssignOp::kSubtract}, {"version", AssignOp::kAdd}}});
    auto before = version_of(c, t);
    REQUIRE(g.apply(1, {1, 1}));
    CHECK(version_of(c, t) == before + 1);
  }
  CHECK(sgtest::code_of([&] {
          StateMachine sm(c, {.table = t,
                              .states = {"open", "held"},
                              .transitions = {{.event = "hold", .from = {"open"}, .to = "held",
                                               .assignments = {{"version", AssignOp::kSet}}}}});
        }) == ErrorCode::kInvalidArgument);
  CHECK(sgtest::code_of([&] { declare_versioned_table(c, "bad name;", "version"); }) == ErrorCode::kInvalidArgument);
  CHECK(sgtest::code_of([&] {
          RowLocker r(c, {.table = t, .lease = ClaimLease{.complete_columns = {"version"}}});
        }) == ErrorCode::kInvalidArgument);
}
