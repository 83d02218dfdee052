#include "sqlguard/version_cas.h"

#include <chrono>
#include <map>
#include <mutex>
#include <set>

#include "core/metric_hooks.h"
#include "core/catalog.h"
#include "dialect/dialect.h"
#include "sqlguard/validate.h"
#include "strategies/version_rule.h"

namespace sqlguard {

using detail::Sql;

std::string_view to_string(CasStatus s) noexcept {
  switch (s) {
    case CasStatus::kApplied: return "applied";
    case CasStatus::kConflict: return "conflict";
    case CasStatus::kNotFound: return "not_found";
    case CasStatus::kSkipped: return "skipped";
  }
  return "unknown";
}

namespace detail {

Params resolve_params(const Connection& conn, std::string_view spelling) {
  const auto dot = spelling.find('.');
  Value schema = dot == std::string_view::npos ? Value() : Value(std::string(spelling.substr(0, dot)));
  std::string table(dot == std::string_view::npos ? spelling : spelling.substr(dot + 1));
  return {conn.dialect().quote(spelling), std::move(schema), std::move(table)};
}

void warn_loose_key_collation(Connection& conn, std::string_view table, std::string_view column,
                              std::string_view who) noexcept {
  try {
    if (!conn.dialect().reports_key_collation()) return;  // SQLite: see its catalog entry
    if (conn.in_transaction()) return;  // never a statement that could abort the caller's transaction
    Params p = resolve_params(conn, table);
    p.emplace_back(std::string(column));
    static constexpr Column kCollation = detail::column(Sql::key_column_collation, "collation_name");
    static constexpr Column kLoose = detail::column(Sql::key_column_collation, "loose");
    Result r = run(conn, Sql::key_column_collation, p);
    if (r.rows.empty() || cell(r.rows[0], kLoose).as_int() == 0) return;
    log(LogLevel::kWarning,
        std::string(who) + ": the key column '" + std::string(column) + "' of table '" + std::string(table) +
            "' has collation " + cell(r.rows[0], kCollation).as_string() +
            ", which compares keys loosely (trailing spaces or letter case ignored): a key 'a ' or 'A' finds the row "
            "'a'. Use a _nopad_bin collation (MariaDB) or a deterministic one (PostgreSQL) for keys that must "
            "differ; see docs/guide.md \"Key columns and collations\"");
  } catch (const std::exception& e) {
    log(LogLevel::kDebug, std::string(who) + ": checking the key column's collation failed: " + e.what());
  }
}

bool same_column(const Connection& conn, std::string_view a, std::string_view b) {
  return conn.dialect().same_identifier(a, b);
}

namespace {
// "Not declared" answers: (database, spelling) -> until when they are kept.
std::mutex g_undeclared_mu;
std::map<std::string, std::chrono::steady_clock::time_point> g_undeclared;
}  // namespace

void forget_undeclared() noexcept {
  std::lock_guard<std::mutex> lk(g_undeclared_mu);
  g_undeclared.clear();
}

const std::optional<std::string>& version_column(Connection& conn, std::string_view spelling,
                                                 std::optional<std::string>& known, bool recheck_now) {
  if (known) return known;
  const std::string key = conn.description() + '\n' + std::string(spelling);
  const auto now = std::chrono::steady_clock::now();
  if (!recheck_now) {
    std::lock_guard<std::mutex> lk(g_undeclared_mu);
    auto it = g_undeclared.find(key);
    if (it != g_undeclared.end() && now < it->second) return known;
  }
  Params p = resolve_params(conn, spelling);
  p.emplace_back(std::string(spelling));
  Result r = run(conn, Sql::versioned_lookup, p);
  std::lock_guard<std::mutex> lk(g_undeclared_mu);
  if (!r.rows.empty()) {
    static constexpr Column kVersionColumn = column(Sql::versioned_lookup, "version_column");
    known = cell(r.rows[0], kVersionColumn).as_string();
    g_undeclared.erase(key);
  } else {
    if (g_undeclared.size() > 10000) g_undeclared.clear();  // bounded whatever the spellings
    g_undeclared[key] = now + kUndeclaredRecheck;
  }
  return known;
}

}  // namespace detail

std::optional<std::string> versioned_table_column(Connection& conn, std::string_view table) {
  validate_identifier(table, "versioned table");
  std::optional<std::string> known;
  return detail::version_column(conn, table, known, /*recheck_now=*/true);
}

namespace {

// The canonical name (versioned_resolve) of the table the validated spelling
// `table` names, or std::nullopt when no such table exists.
std::optional<std::string> canonical_name(Connection& conn, std::string_view table) {
  Result r = detail::run(conn, Sql::versioned_resolve, detail::resolve_params(conn, table));
  if (r.rows.empty()) return std::nullopt;
  static constexpr auto kCanonical = detail::column(Sql::versioned_resolve, "canonical_name");
  return detail::cell(r.rows[0], kCanonical).as_string();
}

// Refuses a version column the table does not have, before anything is
// stored: a declaration naming it would make every sqlguard writer of the
// table fail (issue 36 item 4). `canonical` is schema.table; the table part
// is a validated identifier, so it is what follows the last dot.
void require_version_column(Connection& conn, std::string_view table, const std::string& canonical,
                            std::string_view version_column, std::string_view who) {
  const auto dot = canonical.rfind('.');
  const Value schema = dot == std::string::npos ? Value() : Value(canonical.substr(0, dot));
  const std::string tbl = dot == std::string::npos ? canonical : canonical.substr(dot + 1);
  if (!detail::run(conn, Sql::table_has_column, {schema, tbl, std::string(version_column)}).rows.empty()) return;
  throw Error(ErrorCode::kNotFound, std::string(who) + ": table '" + std::string(table) + "' (" + canonical +
                                        ") has no column '" + std::string(version_column) +
                                        "' to use as its version column (add an integer column, e.g. `" +
                                        std::string(version_column) +
                                        " BIGINT NOT NULL DEFAULT 0`, or name the one it has); nothing was declared");
}

}  // namespace

void declare_versioned_table(Connection& conn, std::string_view table, std::string_view version_column) {
  validate_identifier(table, "versioned table");
  validate_identifier(version_column, "versioned table's version column");
  // Stored under the name the database resolves the spelling to, so every
  // spelling of the table finds it (version_rule.h).
  const auto canonical = canonical_name(conn, table);
  if (!canonical)
    throw Error(ErrorCode::kNotFound, "cannot declare table '" + std::string(table) +
                                          "' versioned: no such table (as this connection resolves the name)");
  require_version_column(conn, table, *canonical, version_column, "cannot declare it versioned");
  const bool inserted = detail::insert_if_absent(conn, Sql::versioned_declare, {*canonical, std::string(version_column)});
  detail::forget_undeclared();  // writers in this process see it at their next write
  if (inserted) return;
  auto declared = versioned_table_column(conn, table);
  if (declared && !detail::same_column(conn, *declared, version_column))
    throw Error(ErrorCode::kInvalidArgument, "table '" + std::string(table) + "' (" + *canonical +
                                                 ") is already declared versioned by column '" + *declared + "', not '" +
                                                 std::string(version_column) + "' (a table has one version column)");
}

bool undeclare_versioned_table(Connection& conn, std::string_view table) {
  validate_identifier(table, "versioned table");
  // A dropped table no longer resolves: then only the name as stored matches.
  const std::string spelling(table);
  const std::string stored = canonical_name(conn, table).value_or(spelling);
  return detail::run(conn, Sql::versioned_undeclare, {stored, spelling}).affected > 0;
}

std::vector<VersionedTable> versioned_tables(Connection& conn) {
  static constexpr auto kTable = detail::column(Sql::versioned_list, "table_name");
  static constexpr auto kColumn = detail::column(Sql::versioned_list, "version_column");
  static constexpr auto kAt = detail::column(Sql::versioned_list, "declared_at");
  std::vector<VersionedTable> out;
  for (const auto& row : detail::run(conn, Sql::versioned_list).rows)
    out.push_back({detail::cell(row, kTable).as_string(), detail::cell(row, kColumn).as_string(),
                   detail::cell(row, kAt).as_int()});
  return out;
}

VersionCas::VersionCas(Connection& conn, VersionCasSpec spec) : conn_(conn) {
  const Dialect& d = conn.dialect();
  validate_identifier(spec.table, "VersionCasSpec::table");
  validate_identifier(spec.key_column, "VersionCasSpec::key_column");
  validate_identifier(spec.version_column, "VersionCasSpec::version_column");
  detail::warn_loose_key_collation(conn, spec.table, spec.key_column, "VersionCas");
  if (spec.columns.empty())
    throw Error(ErrorCode::kInvalidArgument, "VersionCasSpec::columns must name at least one column to write");
  if (spec.key_column == spec.version_column)
    throw Error(ErrorCode::kInvalidArgument, "VersionCasSpec: key_column and version_column are both '" +
                                                 spec.key_column + "'");
  std::set<std::string> seen{spec.key_column, spec.version_column};
  const auto& cat = detail::catalog(conn);
  const std::string t = d.quote(spec.table), k = d.quote(spec.key_column), v = d.quote(spec.version_column);
  std::vector<std::string> cols{v}, sets;
  for (const auto& c : spec.columns) {
    validate_identifier(c, "VersionCasSpec::columns");
    if (!seen.insert(c).second)
      throw Error(ErrorCode::kInvalidArgument,
                  "VersionCasSpec::columns: '" + c + "' is repeated or is the key/version column");
    cols.push_back(d.quote(c));
    sets.push_back(cat.render(Sql::assign_set, {{"col", d.quote(c)}}));
  }
  ncols_ = spec.columns.size();
  for (const auto& c : spec.columns) update_names_.push_back("VersionCas value for '" + c + "'");
  update_names_.push_back("VersionCas key");
  update_names_.push_back("expected version");
  select_sql_ = cat.render(Sql::cas_select, {{"table", t}, {"key", k}, {"columns", cols}});
  update_sql_ = cat.render(Sql::cas_update, {{"table", t}, {"key", k}, {"version", v}, {"assignments", sets}});
  version_sql_ = cat.render(Sql::cas_version, {{"table", t}, {"key", k}, {"version", v}});
  // The spec is checked first: the database is touched only for a valid one.
  if (spec.declare_versioned) {
    declare_versioned_table(conn, spec.table, spec.version_column);  // refuses a missing version column
    return;
  }
  // Not declaring: a VersionCas on a table without its version column could
  // never write either, so it is refused the same way.
  if (const auto canonical = canonical_name(conn, spec.table))
    require_version_column(conn, spec.table, *canonical, spec.version_column, "VersionCas");
  if (auto declared = versioned_table_column(conn, spec.table)) {
    if (!detail::same_column(conn, *declared, spec.version_column))
      throw Error(ErrorCode::kInvalidArgument, "VersionCasSpec: table '" + spec.table + "' is declared versioned by '" +
                                                   *declared + "', not '" + spec.version_column + "'");
  } else {
    log(LogLevel::kWarning, "VersionCas on table '" + spec.table +
                                "' without declaring it versioned: GuardedUpdate, StateMachine and leased claims on it "
                                "will not move '" + spec.version_column +
                                "', so a stale compare_and_set() can overwrite their writes (see version_cas.h)");
  }
}

std::optional<Versioned> VersionCas::read(const Value& key) {
  static const std::vector<std::string> kKey{"VersionCas key"};
  Result r = detail::run_rendered(conn_, Sql::cas_select, select_sql_, {key}, &kKey);
  if (r.rows.empty()) return std::nullopt;
  Versioned out;
  // cas_select returns the columns this object listed: the version, then spec.columns.
  out.version = r.rows[0][0].as_int();
  out.values.assign(r.rows[0].cells.begin() + 1, r.rows[0].cells.end());
  return out;
}

CasResult VersionCas::compare_and_set(const Value& key, std::int64_t expected_version, const Params& values) {
  if (values.size() != ncols_)
    throw Error(ErrorCode::kInvalidArgument, "compare_and_set(): " + std::to_string(values.size()) +
                                                 " values for " + std::to_string(ncols_) + " columns");
  Params p = values;
  p.push_back(key);
  p.emplace_back(expected_version);
  if (detail::run_rendered(conn_, Sql::cas_update, update_sql_, p, &update_names_).affected == 1) {
    detail::metric::cas_applied().inc();
    return {CasStatus::kApplied, expected_version + 1};
  }
  // Lost or missing: one read tells which (and what version won).
  Result r = detail::run_rendered(conn_, Sql::cas_version, version_sql_, {key});
  if (r.rows.empty()) return {CasStatus::kNotFound, 0};
  detail::metric::cas_conflicts().inc();
  static constexpr auto kVersion = detail::column(Sql::cas_version, "version");
  return {CasStatus::kConflict, detail::cell(r.rows[0], kVersion).as_int()};
}

CasUpdateResult VersionCas::update(const Value& key, const Modify& modify, const RetryPolicy& policy) {
  CasUpdateResult out;
  auto r = with_retry(conn_, policy, [&](Transaction&) -> CasUpdateResult {
    auto cur = read(key);
    if (!cur) return {CasStatus::kNotFound, std::nullopt, {}, std::nullopt};
    auto next = modify(*cur);
    if (!next) return {CasStatus::kSkipped, std::move(cur), {}, std::nullopt};
    CasResult c = compare_and_set(key, cur->version, *next);
    // A lost CAS is retried like any other conflict: the attempt's
    // transaction rolls back and with_retry() backs off.
    if (c.status == CasStatus::kConflict)
      throw Error(ErrorCode::kConflict, "version changed from " + std::to_string(cur->version) + " to " +
                                            std::to_string(c.version) + " since it was read");
    if (c.status == CasStatus::kNotFound) return {CasStatus::kNotFound, std::nullopt, {}, std::nullopt};
    return {CasStatus::kApplied, Versioned{c.version, std::move(*next)}, {}, std::nullopt};
  });
  if (r.value) out = std::move(*r.value);
  else {
    out.status = CasStatus::kConflict;
    out.last_error = std::move(r.last_error);
  }
  out.stats = r.stats;
  if (out.stats.attempts > 1) detail::metric::cas_retries().inc(static_cast<std::uint64_t>(out.stats.attempts - 1));
  return out;
}

}  // namespace sqlguard
