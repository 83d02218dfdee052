// Internal: typed access to the SQL catalog (sql/<dialect>/*.sql). Strategies
// name statements by `Sql::id` and pass values in the canonical order of
// src/core/statements.def; the catalog holds the text, reorders values where a
// dialect's `?` order differs, and fills identifier slots once at construction.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "sqlguard/catalog.h"
#include "sqlguard/connection.h"

namespace sqlguard::detail {

enum class Sql : std::uint16_t {
#define SQLGUARD_SQL(id, args, kind, columns) id,
#define SQLGUARD_FRAGMENT(id) id,
#include "core/statements.def"
#undef SQLGUARD_SQL
#undef SQLGUARD_FRAGMENT
  kCount
};

std::string_view sql_name(Sql id) noexcept;

// What each statement id declares in statements.def (the catalog checks every
// dialect's `-- returns:` line against it, and every answer at run time).
struct Declared {
  std::string_view name;
  std::string_view args;     // canonical argument names, ", "-separated
  ResultKind kind;
  std::string_view columns;  // canonical result columns, ", "-separated
  bool fragment;
};
inline constexpr Declared kDeclared[] = {
#define SQLGUARD_SQL(id, args, kind, columns) {#id, args, ResultKind::k_##kind, columns, false},
#define SQLGUARD_FRAGMENT(id) {#id, "", ResultKind::k_exec, "", true},
#include "core/statements.def"
#undef SQLGUARD_SQL
#undef SQLGUARD_FRAGMENT
};
static_assert(std::size(kDeclared) == static_cast<std::size_t>(Sql::kCount));

// A result column of a statement, by its canonical name: column(Sql::lease_info,
// "fence") is checked at compile time against statements.def (an undeclared
// name does not compile) and reads cell `index` of a row the catalog already
// checked has exactly the declared columns.
struct Column {
  Sql id;
  std::size_t index;
};
void undeclared_result_column();  // never defined: reached only at compile time, as an error
consteval Column column(Sql id, std::string_view name) {
  std::string_view cols = kDeclared[static_cast<std::size_t>(id)].columns;
  std::size_t index = 0;
  while (!cols.empty()) {
    auto comma = cols.find(',');
    std::string_view c = cols.substr(0, comma);
    while (!c.empty() && c.front() == ' ') c.remove_prefix(1);
    if (c == name) return Column{id, index};
    if (comma == std::string_view::npos) break;
    cols.remove_prefix(comma + 1);
    ++index;
  }
  undeclared_result_column();
  return Column{id, 0};
}
inline const Value& cell(const Row& row, Column c) { return row[c.index]; }

// A slot value: one rendered piece (a quoted identifier or a fragment) or a
// list of them (joined by the separator the template names).
using SlotValue = std::variant<std::string, std::vector<std::string>>;
using Slots = std::vector<std::pair<std::string_view, SlotValue>>;

class Catalog {
 public:
  // The parsed catalog of one dialect (thread-safe, parsed once).
  static const Catalog& of(std::string_view dialect);

  std::string_view dialect() const noexcept { return dialect_; }
  // False for `-- not needed:` / `-- not supported:` entries. For audits and
  // tests: code never picks a protocol from it (the dialect names its plans,
  // dialect/dialect.h).
  bool has(Sql id) const noexcept { return entries_[index(id)].available; }
  const CatalogEntry& entry(Sql id) const noexcept { return entries_[index(id)]; }
  // The text of an available statement; throws Error(kNotSupported) naming
  // the dialect and the statement (with the file's reason) otherwise.
  const std::string& text(Sql id) const;
  // Fills the slots of a statement or fragment; every slot in the text must
  // be given (Error(kInternal) otherwise). Values stay `?`.
  std::string render(Sql id, const Slots& slots) const;
  // Canonical values -> the dialect's `?` order (empty = the same order).
  const std::vector<int>& order(Sql id) const noexcept { return entries_[index(id)].bind_order; }

  const std::vector<CatalogEntry>& entries() const noexcept { return entries_; }

 private:
  explicit Catalog(std::string_view dialect);
  static std::size_t index(Sql id) noexcept { return static_cast<std::size_t>(id); }
  std::string dialect_;
  std::vector<CatalogEntry> entries_;  // indexed by Sql
};

const Catalog& catalog(const Connection& conn);

// Parses one catalog file's text and checks every entry against
// statements.def as the catalog does (tests: a wrong `-- returns:` line is
// refused with Error(kInternal) naming the entry and both shapes).
std::vector<CatalogEntry> parse_catalog_text(const std::string& file, std::string_view text);

// Runs catalog statement `id` with values in canonical order and checks the
// answer against the declared result (statements.def): Error(kInternal) naming
// the statement and dialect when a row has other columns than declared or a
// `one` statement answers with several rows; `exec` answers are emptied and
// `execrows` answers counted into Result::affected. Text values
// must pass the text rule (validate.h): Error(kInvalidArgument) naming the
// parameter otherwise, before anything is sent.
Result run(Connection& conn, Sql id, const Params& params = {});
// Runs `text`, rendered earlier from catalog statement `id`; values positional.
// The answer is checked like run()'s (`columns...` results: any width).
// `names[i]`, when given, names params[i] in errors (the entry's `-- params:`
// line cannot name the values of a rendered list).
Result run_rendered(Connection& conn, Sql id, const std::string& text, const Params& params,
                    const std::vector<std::string>* names = nullptr);
// Runs an insert-if-absent catalog statement and reports the outcome one way
// on every dialect: true = inserted, false = the key was already there (no
// row / 0 affected by its declared kind on ON CONFLICT DO NOTHING dialects, a
// duplicate-key error on MySQL).
bool insert_if_absent(Connection& conn, Sql id, const Params& params);
// The same, keeping what the statement returned (RETURNING rows, affected).
std::optional<Result> try_insert(Connection& conn, Sql id, const Params& params);

}  // namespace sqlguard::detail
