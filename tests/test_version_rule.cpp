// The one version rule (version_cas.h): on a table declared versioned, every
// sqlguard writer moves the version in the same statement, so a stale
// compare_and_set() after any of them conflicts. Every ordered pair of
// writers, plus the negative control (undeclared: the lost update happens).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <functional>
#include <mutex>
#include <thread>

#include "sqlguard/migrate.h"
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

// ---- issue 23, item 3: the rule does not depend on how the table is spelled,
// on when a writer was built, and a zero "bump" is not a bump.

namespace {

// The schema (PostgreSQL), database (MariaDB) or attached name (SQLite) an
// unqualified name resolves to on `c`.
std::string current_qualifier(Connection& c) {
  if (ctx().is(DialectKind::kPostgresql)) return c.execute("SELECT current_schema()").rows.at(0)[0].as_string();
  if (ctx().is(DialectKind::kMysql)) return c.execute("SELECT DATABASE()").rows.at(0)[0].as_string();
  return "main";
}

std::string upper(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

// The three writers that consult the declaration (VersionCas always bumps its
// own column), on `spelling`, and a check that each one moves the version
// of row 1 of `t` and makes a stale compare_and_set lose.
void check_writers_bump(Connection& c, const std::string& t, const std::string& spelling, VersionCas& cas) {
  GuardedUpdate gu(c, {.table = spelling, .assignments = {{"qty", AssignOp::kSubtract}}, .guards = {{"qty", Compare::kGe}}});
  StateMachine sm(c, {.table = spelling,
                      .states = {"open", "held"},
                      .transitions = {{.event = "hold", .from = {"open"}, .to = "held"},
                                      {.event = "reopen", .from = {"held"}, .to = "open"}}});
  RowLocker rl(c, {.table = spelling, .lease = ClaimLease{}});
  std::vector<std::pair<std::string, std::function<void()>>> ws{
      {"GuardedUpdate", [&] { REQUIRE(gu.apply(1, {1, 1})); }},
      {"StateMachine",
       [&] {
         auto st = sm.state_of(1);
         REQUIRE(st);
         REQUIRE(sm.fire(1, *st == "open" ? "hold" : "reopen"));
       }},
      {"RowLocker leased claim",
       [&] {
         REQUIRE(rl.claim_leased(1).size() == 1);
         REQUIRE(rl.release_claim(1));
       }},
  };
  for (auto& [name, write] : ws) {
    INFO(name << " on '" << spelling << "'");
    auto before = cas.read(1);
    REQUIRE(before);
    write();
    CHECK(version_of(c, t) > before->version);
    CHECK(cas.compare_and_set(1, before->version, {before->values.at(0)}).status == CasStatus::kConflict);
  }
}

}  // namespace

TEST_CASE("a writer on another spelling of a declared table moves the version", "[versionrule][spelling]") {
  auto conn = ctx().connect();
  auto& c = *conn;
  const std::string q = current_qualifier(c);
  using Spell = std::function<std::string(const std::string&)>;
  struct Case {
    std::string label;
    Spell declared, written;
  };
  // The schema/database-qualified name and the plain one both ways; on
  // SQLite (names ignore case) also other letter cases.
  std::vector<Case> cases{
      {"declared plain, written qualified", [](auto& t) { return t; }, [&](auto& t) { return q + "." + t; }},
      {"declared qualified, written plain", [&](auto& t) { return q + "." + t; }, [](auto& t) { return t; }},
  };
  if (ctx().is_sqlite()) {
    cases.push_back({"declared plain, written MAIN.UPPER", [](auto& t) { return t; },
                     [](auto& t) { return "MAIN." + upper(t); }});
    cases.push_back({"declared UPPER, written main.plain", [](auto& t) { return upper(t); },
                     [](auto& t) { return "main." + t; }});
  }
  for (const auto& k : cases) {
    DYNAMIC_SECTION(k.label) {
      std::string t = make_table(c, "vr_spell");
      const std::string declared = k.declared(t), written = k.written(t);
      INFO("declared as '" << declared << "', written through '" << written << "'");
      declare_versioned_table(c, declared, "version");
      // The declaration is found through every spelling, and it is one declaration.
      CHECK(versioned_table_column(c, written) == std::optional<std::string>("version"));
      CHECK(sgtest::code_of([&] { declare_versioned_table(c, written, "qty"); }) == ErrorCode::kInvalidArgument);
      VersionCas cas(c, {.table = t, .columns = {"qty"}, .declare_versioned = false});
      check_writers_bump(c, t, written, cas);
    }
  }
}

TEST_CASE("PostgreSQL: a table declared through the search_path is the same table when written schema-qualified",
          "[versionrule][spelling][postgres]") {
  if (!ctx().is(DialectKind::kPostgresql) || ctx().pooler) return;  // a session search_path needs a session
  auto conn = ctx().connect();
  auto& c = *conn;
  const std::string schema = ctx().unique("p3");
  c.execute_script("CREATE SCHEMA " + schema);
  const std::string base = ctx().unique("vr_p3");
  c.execute_script("CREATE TABLE " + schema + "." + base +
                   " (id INTEGER NOT NULL PRIMARY KEY, qty INTEGER NOT NULL, status VARCHAR(16) NOT NULL, "
                   "version INTEGER NOT NULL, claimed_by VARCHAR(255), claimed_until BIGINT)");
  c.execute("INSERT INTO " + schema + "." + base + " (id, qty, status, version) VALUES (1, 1000, 'open', 1)");
  // Another session resolves the plain name to p3.<table> and declares it so.
  auto other = ctx().connect();
  const std::string path = other->execute("SHOW search_path").rows.at(0)[0].as_string();
  other->execute_script("SET search_path TO " + schema + ", " + path);
  declare_versioned_table(*other, base, "version");
  CHECK(versioned_table_column(c, schema + "." + base) == std::optional<std::string>("version"));
  CHECK_FALSE(versioned_table_column(c, base));  // here the plain name names no table
  VersionCas cas(c, {.table = schema + "." + base, .columns = {"qty"}, .declare_versioned = false});
  check_writers_bump(c, schema + "." + base, schema + "." + base, cas);
}

TEST_CASE("a writer built before the table is declared bumps the version once it is", "[versionrule][order]") {
  auto conn = ctx().connect();
  auto& c = *conn;
  std::string t = make_table(c, "vr_order");
  GuardedUpdate gu(c, {.table = t, .assignments = {{"qty", AssignOp::kSubtract}}, .guards = {{"qty", Compare::kGe}}});
  StateMachine sm(c, {.table = t,
                      .states = {"open", "held"},
                      .transitions = {{.event = "hold", .from = {"open"}, .to = "held"},
                                      {.event = "reopen", .from = {"held"}, .to = "open"}}});
  RowLocker rl(c, {.table = t, .lease = ClaimLease{}});
  // Undeclared: the writers do not touch the version.
  auto v0 = version_of(c, t);
  REQUIRE(gu.apply(1, {1, 1}));
  REQUIRE(sm.fire(1, "hold"));
  REQUIRE(rl.claim_leased(1).size() == 1);
  REQUIRE(rl.release_claim(1));
  CHECK(version_of(c, t) == v0);
  // The first VersionCas declares the table; the writers built before it follow the rule.
  VersionCas cas(c, {.table = t, .columns = {"qty"}});
  auto before = cas.read(1);
  REQUIRE(gu.apply(1, {1, 1}));
  CHECK(version_of(c, t) == before->version + 1);
  CHECK(cas.compare_and_set(1, before->version, {before->values.at(0)}).status == CasStatus::kConflict);
  before = cas.read(1);
  REQUIRE(sm.fire(1, "reopen"));
  CHECK(version_of(c, t) == before->version + 1);
  CHECK(cas.compare_and_set(1, before->version, {before->values.at(0)}).status == CasStatus::kConflict);
  before = cas.read(1);
  REQUIRE(rl.claim_leased(1).size() == 1);
  REQUIRE(rl.release_claim(1));
  CHECK(version_of(c, t) == before->version + 2);
  CHECK(cas.compare_and_set(1, before->version, {before->values.at(0)}).status == CasStatus::kConflict);
  // A writer built before the declaration that writes the version column
  // itself is refused at the write, not silently allowed to break the rule.
  std::string t2 = make_table(c, "vr_order_set");
  GuardedUpdate setter(c, {.table = t2, .assignments = {{"version", AssignOp::kSet}}});
  REQUIRE(setter.apply(1, {5}));  // undeclared: an ordinary column
  declare_versioned_table(c, t2, "version");
  CHECK(sgtest::code_of([&] { setter.apply(1, {1}); }) == ErrorCode::kInvalidArgument);
  CHECK(version_of(c, t2) == 5);
}

TEST_CASE("a zero or negative bump of the version column is refused, not counted as the bump", "[versionrule][zerobump]") {
  auto conn = ctx().connect();
  auto& c = *conn;
  std::string t = make_table(c, "vr_zero");
  declare_versioned_table(c, t, "version");
  // A hand-made bump (code written before the rule) counts only when it moves the version forward.
  std::vector<std::string> columns{"version"};
  if (!ctx().is(DialectKind::kPostgresql)) columns.push_back("VERSION");  // column names ignore case there
  for (const auto& col : columns) {
    INFO("assignment to '" << col << "'");
    GuardedUpdate g(c, {.table = t, .assignments = {{"qty", AssignOp::kSubtract}, {col, AssignOp::kAdd}}});
    auto v = version_of(c, t);
    std::string what;
    CHECK(sgtest::code_of([&] { g.apply(1, {1, 0}); }, &what) == ErrorCode::kInvalidArgument);
    CHECK(what.find("version") != std::string::npos);
    CHECK(sgtest::code_of([&] { g.apply(1, {1, -3}); }) == ErrorCode::kInvalidArgument);
    CHECK(sgtest::code_of([&] { g.apply(1, {1, Value()}); }) == ErrorCode::kInvalidArgument);
    CHECK(version_of(c, t) == v);
    REQUIRE(g.apply(1, {1, 2}));
    CHECK(version_of(c, t) == v + 2);
  }
  if (!ctx().is(DialectKind::kPostgresql)) {
    // Setting the version column spelled in other letters is setting it.
    CHECK(sgtest::code_of([&] {
            GuardedUpdate g(c, {.table = t, .assignments = {{"Version", AssignOp::kSet}}});
          }) == ErrorCode::kInvalidArgument);
  }
}

TEST_CASE("declaring a table that does not exist is refused naming the table", "[versionrule]") {
  auto conn = ctx().connect();
  auto& c = *conn;
  const std::string missing = ctx().unique("vr_missing");
  std::string what;
  CHECK(sgtest::code_of([&] { declare_versioned_table(c, missing, "version"); }, &what) == ErrorCode::kNotFound);
  CHECK(what.find(missing) != std::string::npos);
  CHECK(sgtest::code_of([&] { VersionCas x(c, {.table = missing, .columns = {"qty"}}); }) == ErrorCode::kNotFound);
  CHECK(c.execute("SELECT COUNT(*) FROM sqlguard_versioned_table WHERE table_name LIKE ?", {"%" + missing})
            .rows.at(0)[0]
            .as_int() == 0);
}

TEST_CASE("a declaration an older build stored under a raw spelling is still honoured", "[versionrule][legacy]") {
  auto conn = ctx().connect();
  auto& c = *conn;
  const std::string q = current_qualifier(c);
  std::string t = make_table(c, "vr_legacy");
  std::string ghost = ctx().unique("vr_ghost");  // declared before it existed, as older builds allowed
  const std::string insert =
      "INSERT INTO sqlguard_versioned_table (table_name, version_column, declared_at) VALUES (?, 'version', 0)";
  c.execute(insert, {t});
  c.execute(insert, {ghost});
  std::string t2;
  if (ctx().is_sqlite()) {  // names ignore case there: any spelling is rewritten
    t2 = make_table(c, "vr_legacy_case");
    c.execute(insert, {"MAIN." + upper(t2)});
  }
  // Migration 0006 rewrites what resolves to the canonical name.
  auto ms = embedded_migrations(c.kind());
  auto m6 = std::find_if(ms.begin(), ms.end(), [](const Migration& m) { return m.version == 6; });
  REQUIRE(m6 != ms.end());
  c.execute_script(m6->sql);
  CHECK(c.execute("SELECT COUNT(*) FROM sqlguard_versioned_table WHERE table_name = ?", {q + "." + t}).rows.at(0)[0].as_int() == 1);
  CHECK(c.execute("SELECT COUNT(*) FROM sqlguard_versioned_table WHERE table_name = ?", {t}).rows.at(0)[0].as_int() == 0);
  if (!t2.empty()) {
    CHECK(c.execute("SELECT COUNT(*) FROM sqlguard_versioned_table WHERE table_name = ?", {"main." + t2}).rows.at(0)[0].as_int() == 1);
    CHECK(versioned_table_column(c, t2) == std::optional<std::string>("version"));
  }
  VersionCas cas(c, {.table = t, .columns = {"qty"}, .declare_versioned = false});
  check_writers_bump(c, t, q + "." + t, cas);
  // What did not resolve stays as written and still counts for that spelling.
  c.execute_script("CREATE TABLE " + ghost +
                   " (id INTEGER NOT NULL PRIMARY KEY, qty INTEGER NOT NULL, status VARCHAR(16) NOT NULL, "
                   "version INTEGER NOT NULL, claimed_by VARCHAR(255), claimed_until BIGINT)");
  c.execute("INSERT INTO " + ghost + " (id, qty, status, version) VALUES (1, 1000, 'open', 1)");
  CHECK(versioned_table_column(c, ghost) == std::optional<std::string>("version"));
  VersionCas gcas(c, {.table = ghost, .columns = {"qty"}, .declare_versioned = false});
  check_writers_bump(c, ghost, ghost, gcas);
}

TEST_CASE("SQLite: an unqualified name resolves to a temp table before the main one", "[versionrule][spelling]") {
  if (!ctx().is_sqlite()) return;
  auto conn = ctx().connect();
  auto& c = *conn;
  std::string t = make_table(c, "vr_temp");
  declare_versioned_table(c, "main." + t, "version");
  CHECK(versioned_table_column(c, t) == std::optional<std::string>("version"));
  c.execute_script("CREATE TEMP TABLE " + t + " (id INTEGER PRIMARY KEY, qty INTEGER NOT NULL, version INTEGER NOT NULL)");
  // `t` now names temp.<t>, which is not declared; main.<t> still is.
  CHECK_FALSE(versioned_table_column(c, t));
  CHECK(versioned_table_column(c, "MAIN." + upper(t)) == std::optional<std::string>("version"));
  // A write through `t` writes the temp table: no version to move there.
  c.execute("INSERT INTO temp." + t + " (id, qty, version) VALUES (1, 5, 1)");
  GuardedUpdate g(c, {.table = t, .assignments = {{"qty", AssignOp::kSubtract}}});
  REQUIRE(g.apply(1, {1}));
  CHECK(c.execute("SELECT version FROM temp." + t + " WHERE id = 1").rows.at(0)[0].as_int() == 1);
}

TEST_CASE("writes on a table nobody declares cost no lookup each; a declaration from elsewhere reaches them within "
          "a second",
          "[versionrule][order]") {
  auto conn = ctx().connect();
  auto& c = *conn;
  std::string t = make_table(c, "vr_undeclared");
  int lookups = 0;
  c.set_statement_observer([&](const StatementEvent& e) {
    if (e.catalog_name == "versioned_lookup") ++lookups;
  });
  GuardedUpdate dec(c, {.table = t, .assignments = {{"qty", AssignOp::kSubtract}}});
  for (int i = 0; i < 20; ++i) REQUIRE(dec.apply(1, {1}).status == GuardedStatus::kApplied);
  INFO("versioned_lookup sent " << lookups << " times for 20 writes");
  CHECK(lookups >= 1);  // negative control: the rule is asked at all
  CHECK(lookups <= 2);  // not once per write (the answer is kept for a second)
  // Declared by "another process" (a row this process did not write through
  // declare_versioned_table()): running writers bump within the second.
  const std::string q = current_qualifier(c);
  c.set_statement_observer(nullptr);
  c.execute("INSERT INTO sqlguard_versioned_table (table_name, version_column, declared_at) VALUES (?, 'version', 0)",
            {q + "." + t});
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  const auto v0 = c.execute("SELECT version FROM " + t + " WHERE id = 1").rows.at(0)[0].as_int();
  REQUIRE(dec.apply(1, {1}).status == GuardedStatus::kApplied);
  CHECK(c.execute("SELECT version FROM " + t + " WHERE id = 1").rows.at(0)[0].as_int() == v0 + 1);
}

namespace {
// The README's sample table: no version column.
std::string make_unversioned(Connection& c, const std::string& base) {
  std::string t = ctx().unique(base);
  c.execute_script("CREATE TABLE " + t + " (id INTEGER NOT NULL PRIMARY KEY, balance INTEGER NOT NULL)");
  c.execute("INSERT INTO " + t + " (id, balance) VALUES (1, 100)");
  return t;
}
std::int64_t declarations_of(Connection& c, const std::string& t) {
  return c.execute("SELECT COUNT(*) FROM sqlguard_versioned_table WHERE table_name LIKE ?", {"%" + t})
      .rows.at(0)[0]
      .as_int();
}
// How a call ended: "ok", or the error's code and message.
std::string outcome_of(const std::function<void()>& f) {
  try {
    f();
    return "ok";
  } catch (const Error& e) {
    return std::string(to_string(e.code())) + ": " + e.what();
  }
}
// A GuardedUpdate built now (it looks the declaration up at its write).
GuardedResult withdraw(Connection& c, const std::string& t, std::int64_t amount) {
  GuardedUpdate gu(c, {.table = t, .assignments = {{"balance", AssignOp::kSubtract}}});
  return gu.apply(1, {amount});
}
}  // namespace

TEST_CASE("a VersionCas on a table without its version column is refused naming the column and stores nothing, so "
          "other writers of the table keep working",
          "[versionrule][missingcolumn]") {
  auto conn = ctx().connect();
  auto& c = *conn;
  const std::string t = make_unversioned(c, "vr_nover");
  for (bool declare : {true, false}) {
    INFO("declare_versioned = " << declare);
    const std::string got =
        outcome_of([&] { VersionCas x(c, {.table = t, .columns = {"balance"}, .declare_versioned = declare}); });
    INFO(got);
    CHECK(got.rfind("not_found: ", 0) == 0);  // not `internal`, and not a success
    CHECK(got.find(t) != std::string::npos);
    CHECK(got.find("no column 'version'") != std::string::npos);
  }
  const std::string declared = outcome_of([&] { declare_versioned_table(c, t, "version"); });
  INFO(declared);
  CHECK(declared.rfind("not_found: ", 0) == 0);
  CHECK(declared.find("no column 'version'") != std::string::npos);
  // Nothing stored: a writer of the table is not made to bump a column that does not exist.
  CHECK(declarations_of(c, t) == 0);
  CHECK_FALSE(versioned_table_column(c, t));
  std::string withdrawn = outcome_of([&] { REQUIRE(withdraw(c, t, 30)); });
  CHECK(withdrawn == "ok");
  CHECK(c.execute("SELECT balance FROM " + t + " WHERE id = 1").rows.at(0)[0].as_int() == 70);
  // The column named by the spec decides: with it, construction declares as before.
  c.execute_script("ALTER TABLE " + t + " ADD COLUMN version INTEGER NOT NULL DEFAULT 0");
  VersionCas ok(c, {.table = t, .columns = {"balance"}});
  CHECK(versioned_table_column(c, t) == std::optional<std::string>("version"));
}

TEST_CASE("removing a declaration whose column is gone makes the table's writers work again, through the API and "
          "the CLI",
          "[versionrule][missingcolumn][cli]") {
  auto conn = ctx().connect();
  auto& c = *conn;
  const std::string q = current_qualifier(c);
  for (bool via_cli : {false, true}) {
    INFO((via_cli ? "sqlguard versioned drop" : "undeclare_versioned_table()"));
    const std::string t = make_unversioned(c, via_cli ? "vr_drop_cli" : "vr_drop_api");
    c.execute_script("ALTER TABLE " + t + " ADD COLUMN version INTEGER NOT NULL DEFAULT 0");
    declare_versioned_table(c, t, "version");
    REQUIRE(withdraw(c, t, 1));
    // The column goes after the declaration (or an older build stored it
    // without the check): every write of the table fails from then on.
    c.execute_script("ALTER TABLE " + t + " DROP COLUMN version");
    CHECK(outcome_of([&] { withdraw(c, t, 1); }) != "ok");
    auto listed = versioned_tables(c);
    CHECK(std::any_of(listed.begin(), listed.end(), [&](const VersionedTable& v) {
      return v.version_column == "version" && v.table.size() > t.size() &&
             v.table.compare(v.table.size() - t.size(), t.size(), t) == 0;
    }));
    if (via_cli) {
      std::string out;
      REQUIRE(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "--json", "versioned", "list"}, &out) == 0);
      CHECK(out.find("\"table\":\"" + q + "." + t + "\"") != std::string::npos);
      REQUIRE(sgtest::run_process({sgtest::cli_path(), "versioned", "drop", t, "--db", ctx().uri}, &out) == 0);
      CHECK(sgtest::run_process({sgtest::cli_path(), "versioned", "drop", t, "--db", ctx().uri, "--json"}, &out) == 3);
      CHECK(out.find("\"dropped\":false") != std::string::npos);
    } else {
      CHECK(undeclare_versioned_table(c, t));
      CHECK_FALSE(undeclare_versioned_table(c, t));  // nothing left to remove
    }
    CHECK(declarations_of(c, t) == 0);
    CHECK(outcome_of([&] { REQUIRE(withdraw(c, t, 1)); }) == "ok");
    CHECK(c.execute("SELECT balance FROM " + t + " WHERE id = 1").rows.at(0)[0].as_int() == 98);
  }
}
