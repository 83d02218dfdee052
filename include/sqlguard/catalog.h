// sqlguard/catalog.h — the SQL catalog: every statement sqlguard sends, per
// dialect, as written in sql/<dialect>/*.sql and embedded at build time.
//
// Each entry is `-- name: <id>` (or `-- fragment: <id>`, a piece spliced into
// other statements), comment lines, `-- params: a, b` naming each `?` in
// order, then the statement. An entry a dialect does not have says why:
// `-- not needed: ...` (another entry covers it) or `-- not supported: ...`
// (the API then throws Error(kNotSupported) naming dialect and feature).
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

struct CatalogEntry {
  std::string name;                 // "lease_acquire"
  std::string file;                 // "postgresql/lease.sql"
  bool fragment = false;            // spliced into other statements, never sent alone
  bool available = true;            // false: `-- not needed:` or `-- not supported:`
  bool not_supported = false;       // absent because the dialect cannot do it
  std::string note;                 // why it is absent
  std::string doc;                  // the entry's comment lines
  std::vector<std::string> params;  // the name of each `?`, in order
  std::string text;                 // the statement as sent (slots unfilled), no final ';'
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
