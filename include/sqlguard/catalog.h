// sqlguard/catalog.h — the SQL catalog: every statement sqlguard sends, per
// dialect, as written in sql/<dialect>/*.sql and embedded at build time.
//
// Each entry is `-- name: <id>` (or `-- fragment: <id>`, a piece spliced into
// other statements), comment lines, `-- returns: :kind columns` (what it
// answers, the same on every dialect: see ResultKind), `-- params: a, b`
// naming each `?` in order, then the statement. An entry a dialect does not have says why:
// `-- not needed: ...` (another entry covers it) or `-- not supported: ...`
// (the API then throws Error(kNotSupported) naming dialect and feature; a
// `-- not needed:` entry is one the dialect's protocol plans never send).
// Statements on the caller's own tables (row locks, CAS, state machines) hold
// slots: `{table}` is a validated, quoted identifier or a fragment,
// `{columns*, }` a list of them joined by ", ", and `{#timeout_s}` a
// non-negative integer the library computed (digits only, checked).
//
// This header is for tools, docs and audits (`sqlguard bench --emit-sql`
// prints from it). Thread safety: the catalog is immutable after first use;
// all functions are thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sqlguard {

// What a statement answers (its `-- returns:` line, sqlc's spelling).
enum class ResultKind {
  k_one,       // `:one`: at most one row, with the declared columns
  k_many,      // `:many`: any number of rows, with the declared columns
  k_exec,      // `:exec`: nothing
  k_execrows,  // `:execrows`: how many rows it changed (or matched), as Result::affected
};
std::string_view to_string(ResultKind kind) noexcept;  // ":one", ...

struct CatalogEntry {
  std::string name{};               // "lease_acquire"
  std::string file{};               // "postgresql/lease.sql"
  bool fragment = false;            // spliced into other statements, never sent alone
  bool available = true;            // false: `-- not needed:` or `-- not supported:`
  bool not_supported = false;       // absent because the dialect cannot do it
  std::string note{};               // why it is absent
  std::string doc{};                // the entry's comment lines
  std::vector<std::string> params{};  // the name of each `?`, in order
  ResultKind returns = ResultKind::k_exec;
  std::vector<std::string> columns{};  // canonical result columns ("columns..." = the caller's)
  // The statement's canonical arguments (the order the library passes values
  // in, the same on every dialect), and for each `?` the index of the
  // canonical argument it binds: bind values[bind_order[i]] to `?` i. Empty
  // bind_order: one `?` per canonical argument, in that order. Positional
  // statements ("values...") have no canonical order.
  std::vector<std::string> canonical_params{};
  std::vector<int> bind_order{};
  std::string text{};               // the statement as sent (slots unfilled), no final ';'
};

// The dialects this library knows, in registry order ("sqlite",
// "postgresql", "mysql"), whether or not their driver was compiled in.
std::vector<std::string> dialect_names();

// Every entry of `dialect`'s catalog, in file order. Throws
// Error(kInvalidArgument) for an unknown dialect.
const std::vector<CatalogEntry>& sql_catalog(std::string_view dialect);

// One entry. Throws Error(kInvalidArgument) when `dialect` or `name` is unknown.
const CatalogEntry& sql_statement(std::string_view dialect, std::string_view name);

}  // namespace sqlguard
