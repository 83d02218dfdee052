// The SQL catalog (sql/<dialect>/*.sql) is the one home of every statement
// sqlguard sends. These tests keep it so: every dialect has every entry (or
// says why not), a library operation sends nothing that is not in it, and no
// SQL text hides in src/strategies/ or src/core/.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "core/catalog.h"
#include "sql_audit.h"
#include "sqlguard/catalog.h"
#include "sqlguard/cleanup.h"
#include "sqlguard/idempotency.h"
#include "sqlguard/inbox.h"
#include "sqlguard/fenced_write.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/metrics.h"
#include "sqlguard/migrate.h"
#include "sqlguard/row_lock.h"
#include "sqlguard/transition.h"
#include "sqlguard/version_cas.h"
#include "test_context.h"
#include "test_helpers.h"

using namespace sqlguard;
using sgtest::ctx;

TEST_CASE("every dialect's catalog has an entry for every statement, or says why not", "[catalog]") {
  std::set<std::string> first;
  for (const auto& d : dialect_names()) {
    INFO("dialect " << d);
    const auto& entries = sql_catalog(d);  // parsing checks params against statements.def
    std::set<std::string> names;
    for (const auto& e : entries) {
      names.insert(e.name);
      CHECK(e.file.rfind(d + "/", 0) == 0);
      if (!e.available) CHECK_FALSE(e.note.empty());
      else if (!e.fragment) CHECK_FALSE(e.text.empty());
    }
    CHECK(names.size() == static_cast<std::size_t>(detail::Sql::kCount));
    if (first.empty()) first = names;
    CHECK(names == first);
  }
}

TEST_CASE("an entry a dialect does not support throws not_supported naming dialect and statement", "[catalog]") {
  const auto& e = sql_statement("sqlite", "admin_list_sessions");
  CHECK_FALSE(e.available);
  CHECK(e.not_supported);
  try {
    detail::Catalog::of("sqlite").text(detail::Sql::admin_list_sessions);
    FAIL("no exception");
  } catch (const Error& err) {
    CHECK(err.code() == ErrorCode::kNotSupported);
    CHECK(std::string(err.what()).find("sqlite") != std::string::npos);
    CHECK(std::string(err.what()).find("admin_list_sessions") != std::string::npos);
  }
  CHECK_THROWS_AS(sql_catalog("oracle"), Error);
  CHECK_THROWS_AS(sql_statement("postgresql", "no_such_statement"), Error);
}

TEST_CASE("a dialect's ? order may differ: values are reordered to the order its params line names", "[catalog]") {
  // SQLite's lease_take_expired and MariaDB's lease_update_expired are
  // UPDATEs whose first ? is the owner; statements.def declares name, owner,
  // ttl_ms (bound twice: the row keeps it), min_hold_ms (bound twice:
  // min_release_at is 0 without a minimum hold), the wait's turn_owner twice
  // (a take by the wait with the lease's next turn clears it), then the
  // take-over rule's arguments and turn_owner again (a lease handed to that
  // wait is taken). The public entry says so too (bind_order).
  for (const auto& [d, id] : {std::pair<std::string, detail::Sql>{"sqlite", detail::Sql::lease_take_expired},
                              {"mysql", detail::Sql::lease_update_expired}}) {
    const auto& e = sql_statement(d, std::string(detail::sql_name(id)));
    CHECK(e.params == std::vector<std::string>{"owner", "ttl_ms", "ttl_ms", "min_hold_ms", "min_hold_ms", "turn_owner",
                                               "turn_owner", "name", "watched_fence", "watched_beat", "watched_expire_at",
                                               "db_clock_rule", "turn_owner"});
    CHECK(e.canonical_params == std::vector<std::string>{"name", "owner", "ttl_ms", "min_hold_ms", "watched_fence",
                                                         "watched_beat", "watched_expire_at", "db_clock_rule",
                                                         "turn_owner"});
    CHECK(detail::Catalog::of(d).order(id) == std::vector<int>{1, 2, 2, 3, 3, 8, 8, 0, 4, 5, 6, 7, 8});
    CHECK(e.bind_order == std::vector<int>{1, 2, 2, 3, 3, 8, 8, 0, 4, 5, 6, 7, 8});
  }
  CHECK(sql_statement("postgresql", "lease_acquire").params ==
        std::vector<std::string>{"name", "owner", "ttl_ms", "ttl_ms", "min_hold_ms", "min_hold_ms", "turn_owner",
                                 "turn_owner", "name", "watched_fence", "watched_beat", "watched_expire_at",
                                 "db_clock_rule", "turn_owner", "queue_role", "channel", "queue_role", "channel"});
  CHECK(detail::Catalog::of("postgresql").order(detail::Sql::lease_acquire) ==
        std::vector<int>{0, 1, 2, 2, 3, 3, 10, 10, 0, 6, 7, 8, 9, 10, 4, 5, 4, 5});
  // MariaDB's lease_read_mine also takes the wake-up channel, first (twice:
  // whether this session holds it, else take it).
  CHECK(detail::Catalog::of("mysql").order(detail::Sql::lease_read_mine) == std::vector<int>{2, 2, 0, 1});
  // A value may be bound more than once (lease_take: turn_owner three times, owner
  // and channel again in RETURNING).
  CHECK(detail::Catalog::of("mysql").order(detail::Sql::lease_take) ==
        std::vector<int>{0, 1, 2, 3, 3, 2, 5, 6, 7, 8, 9, 9, 9, 1, 4, 4});
  CHECK(detail::Catalog::of("postgresql").order(detail::Sql::lease_read_mine) == std::vector<int>{0, 1});
  CHECK(detail::Catalog::of("postgresql").order(detail::Sql::lease_info).empty());
}

TEST_CASE("slots are filled with quoted identifiers and fragments, values stay bound", "[catalog]") {
  const auto& cat = detail::Catalog::of(ctx().name);
  auto set = cat.render(detail::Sql::assign_subtract, {{"col", std::string("\"qty\"")}});
  CHECK(set == "\"qty\" = \"qty\" - ?");
  auto sql = cat.render(detail::Sql::guarded_update, {{"table", std::string("\"t\"")},
                                                     {"key", std::string("\"k\"")},
                                                     {"assignments", std::vector<std::string>{"\"a\" = ?", "\"b\" = ?"}},
                                                     {"guards", std::vector<std::string>{}}});
  CHECK(sql == "UPDATE \"t\" SET \"a\" = ?, \"b\" = ? WHERE \"k\" = ?");
  CHECK(sgtest::matches_catalog(ctx().name, "guarded_update", sql));
  // A value or a keyword in place of a slot is not what the catalog says.
  CHECK_FALSE(sgtest::matches_catalog(ctx().name, "guarded_update", "UPDATE \"t\" SET \"a\" = 1 WHERE \"k\" = ?"));
  CHECK_FALSE(sgtest::matches_catalog(ctx().name, "guarded_update", "UPDATE \"t\" SET \"a\" = ? WHERE \"k\" = ? OR 1=1"));
  CHECK_THROWS_AS(cat.render(detail::Sql::guarded_update, {{"table", std::string("t")}}), Error);
  // Value slots in DDL (MariaDB's history triggers carry their scopes): {#n}
  // takes digits, {%x} pairs of lowercase hex digits, nothing else.
  const auto& my = detail::Catalog::of("mysql");
  auto scope = [&](std::string len, std::string hex, std::string ms) {
    return my.render(detail::Sql::history_scope_retain_new, {{"len", len}, {"prefix", hex}, {"retain_ms", ms}});
  };
  CHECK(scope("2", "7061", "60000") == "WHEN substr(NEW.name, 1, 2) = X'7061' THEN 60000");
  CHECK(scope("0", "", "60000") == "WHEN substr(NEW.name, 1, 0) = X'' THEN 60000");
  CHECK_THROWS_AS(scope("2", "70'; DROP TABLE t; --", "60000"), Error);
  CHECK_THROWS_AS(scope("2", "706", "60000"), Error);   // half a byte
  CHECK_THROWS_AS(scope("2", "70FF", "60000"), Error);  // upper case: not what the encoder writes
  CHECK_THROWS_AS(scope("2", "7061", "6e4"), Error);
  // The SQL audit takes such a fragment in its own list slot only: a trigger
  // with a scope list matches, a stray clause in that list or the fragment in
  // another statement's slot does not.
  auto trigger = [&](std::vector<std::string> scopes) {
    return my.render(detail::Sql::history_lock_update_trigger, {{"retain_new", scopes}});
  };
  CHECK(sgtest::matches_catalog("mysql", "history_lock_update_trigger", trigger({scope("2", "7061", "60000")})));
  CHECK_FALSE(sgtest::matches_catalog("mysql", "history_lock_update_trigger",
                                      trigger({scope("2", "7061", "60000"), "WHEN 1 = 1 THEN 60000"})));
  CHECK_FALSE(sgtest::matches_catalog(
      "mysql", "guarded_update",
      my.render(detail::Sql::guarded_update, {{"table", std::string("`t`")},
                                              {"key", std::string("`k`")},
                                              {"assignments", std::vector<std::string>{scope("2", "7061", "60000")}},
                                              {"guards", std::vector<std::string>{}}})));
}

TEST_CASE("every strategy sends only statements of its dialect's catalog", "[catalog]") {
  const std::string t = ctx().unique("cat_stock");
  sgtest::exec("CREATE TABLE " + t +
               " (id BIGINT NOT NULL PRIMARY KEY, qty BIGINT NOT NULL, version BIGINT NOT NULL, status VARCHAR(32) NOT NULL)");
  sgtest::exec("INSERT INTO " + t + " (id, qty, version, status) VALUES (1, 10, 0, 'new')");
  auto conn = ctx().connect();
  std::vector<std::pair<std::string, std::string>> sent;  // (catalog name, sql)
  int begins = 0, commits = 0;
  conn->set_statement_observer([&](const StatementEvent& ev) {
    if (ev.kind == StatementKind::kBegin) ++begins;
    if (ev.kind == StatementKind::kCommit) ++commits;
    if (ev.kind == StatementKind::kStatement) sent.emplace_back(std::string(ev.catalog_name), std::string(ev.sql));
  });

  LeaseOptions lo;
  lo.ttl = std::chrono::seconds(5);
  LeaseLock lock(*conn, ctx().unique("cat_lock"), lo);
  REQUIRE(lock.try_acquire());
  CHECK(lock.renew());
  CHECK(lock.run_guarded([](Transaction&) {}));
  CHECK(fenced_write(*conn, ctx().unique("cat_res"), lock.fence()));
  CHECK(lease_info(*conn, lock.name()).has_value());
  list_leases(*conn, true);
  CHECK(lock.release());

  GuardedUpdate gu(*conn, {t, "id", {{"qty", AssignOp::kSubtract}}, {{"qty", Compare::kGe}}});
  CHECK(gu.apply(1, {1, 1}).status == GuardedStatus::kApplied);
  VersionCasSpec cs;
  cs.table = t;
  cs.columns = {"qty"};
  VersionCas cas(*conn, cs);
  CHECK(cas.update(1, [](const Versioned& v) -> std::optional<Params> { return Params{v.values[0].as_int() - 1}; })
            .status == CasStatus::kApplied);
  RowLockSpec rs;
  rs.table = t;
  rs.columns = {"qty"};
  rs.claim_filter = {"status"};
  RowLocker rl(*conn, rs);
  {
    auto scope = rl.lock(1);
    CHECK(scope);
    scope.commit();
  }
  {
    auto scope = rl.claim(1, {"new"});
    scope.commit();
  }
  StateMachineSpec ss;
  ss.table = t;
  ss.states = {"new", "paid"};
  ss.transitions = {{"pay", {"new"}, "paid", {}, {}}};
  ss.audit = AuditSpec{};
  StateMachine sm(*conn, ss);
  CHECK(sm.fire(1, "pay").status == TransitionStatus::kApplied);

  IdempotencyKeys idem(*conn);
  auto fp = request_fingerprint({"POST", "/x"});
  CHECK(idem.execute("cat", ctx().unique("k"), fp, [](IdempotencyExecution&) { return StoredResponse{201, "ok"}; })
            .outcome == IdempotencyOutcome::kExecuted);
  Inbox inbox(*conn);
  CHECK(inbox.process("cat", ctx().unique("m"), [](Transaction&) {}).outcome == InboxOutcome::kProcessed);
  cleanup(*conn);
  migrate(*conn);
  conn->db_now_ms();

  REQUIRE(sent.size() > 20);
  CHECK(begins >= 4);
  CHECK(begins == commits);
  for (const auto& [name, sql] : sent) {
    INFO(sql);
    CHECK_FALSE(name.empty());  // sent by sqlguard, so it must come from the catalog
    if (!name.empty()) CHECK(sgtest::matches_catalog(ctx().name, name, sql));
  }
}

TEST_CASE("no SQL text is written in src/strategies or src/core: it lives in sql/<dialect>/", "[catalog]") {
  namespace fs = std::filesystem;
  // A string literal that reads like a statement.
  const std::regex sql_literal(R"re("[^"\n]*\b(SELECT|INSERT INTO|UPDATE [A-Za-z_"]+ SET|DELETE FROM|CREATE TABLE|PRAGMA|FOR UPDATE)\b[^"\n]*")re");
  int files = 0;
  for (const char* dir : {"src/strategies", "src/core"}) {
    for (const auto& f : fs::directory_iterator(fs::path(SQLGUARD_SOURCE_DIR) / dir)) {
      if (f.path().extension() != ".cpp" && f.path().extension() != ".h") continue;
      ++files;
      std::ifstream in(f.path());
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::smatch m;
      INFO(f.path().string());
      CHECK_FALSE(std::regex_search(text, m, sql_literal));
      if (std::regex_search(text, m, sql_literal)) WARN(m.str());
    }
  }
  CHECK(files > 10);
}

TEST_CASE("every statement answers in its declared shape on every dialect, and a different shape is refused",
          "[catalog]") {
  // Each entry's `-- returns:` line is the one statements.def declares (the
  // parse refuses another), so an id has one shape everywhere.
  for (std::size_t i = 0; i < static_cast<std::size_t>(detail::Sql::kCount); ++i) {
    const std::string name(detail::kDeclared[i].name);
    std::optional<CatalogEntry> seen;
    for (const auto& d : dialect_names()) {
      const auto& e = sql_statement(d, name);
      if (!e.available || e.fragment) continue;
      INFO(d << " " << name);
      CHECK(e.returns == detail::kDeclared[i].kind);
      if (seen) CHECK((e.returns == seen->returns && e.columns == seen->columns));
      else seen = e;
    }
  }
  CHECK(to_string(sql_statement("postgresql", "lease_info").returns) == ":one");
  CHECK(sql_statement("mysql", "lease_info").columns ==
        std::vector<std::string>{"name", "owner", "fence", "expire_at", "acquired_at", "renewed_at", "db_now_ms"});
  // Negative controls: a file whose entry says another shape than statements.def
  // is refused when parsed, naming both; so is an entry with no `-- returns:`.
  const std::string good = "-- name: db_now\n-- returns: :one db_now_ms\nSELECT 1;\n";
  CHECK_NOTHROW(detail::parse_catalog_text("test/good.sql", good));
  for (const std::string bad : {"-- name: db_now\n-- returns: :one now_ms\nSELECT 1;\n",
                                "-- name: db_now\n-- returns: :many db_now_ms\nSELECT 1;\n",
                                "-- name: db_now\nSELECT 1;\n"}) {
    INFO(bad);
    try {
      detail::parse_catalog_text("test/bad.sql", bad);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::kInternal);
      CHECK(std::string(e.what()).find("db_now") != std::string::npos);
    }
  }
  // At run time: an answer with other columns than declared is refused, naming
  // the statement and dialect (here db_now, declared :one db_now_ms).
  auto c = ctx().connect();
  {
    sgtest::SqlAuditExempt exempt;  // these texts are not db_now's on purpose
    CHECK(detail::run_rendered(*c, detail::Sql::db_now, "SELECT 1", {}).rows.at(0).size() == 1);
    try {
      detail::run_rendered(*c, detail::Sql::db_now, "SELECT 1, 2", {});
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::kInternal);
      CHECK(std::string(e.what()).find("db_now") != std::string::npos);
      CHECK(std::string(e.what()).find(ctx().name) != std::string::npos);
    }
  }
  // :execrows answers only in `affected`, whether the dialect's statement
  // changed rows or returned one per changed row (PostgreSQL's release).
  const auto name = ctx().unique("shape");
  auto r = acquire_lease(*c, name, "o1", std::chrono::seconds(5));
  REQUIRE(r.acquired);
  auto rel = detail::run(*c, detail::Sql::lease_release, {name, "o1", r.fence, lease_wakeup_channel(name)});
  CHECK(rel.affected == 1);
  CHECK(rel.rows.empty());
}
