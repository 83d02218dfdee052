// The SQL catalog: parses the embedded sql/<dialect>/*.sql files once per
// dialect, checks them against statements.def, and runs their statements.
#include "core/catalog.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "core/embedded_sql.h"
#include "core/text.h"
#include "dialect/dialect.h"
#include "dialect/registry.h"

namespace sqlguard {
namespace detail {
namespace {

[[noreturn]] void bad_file(const std::string& file, const std::string& what) {
  throw Error(ErrorCode::kInternal, "SQL catalog " + file + ": " + what);
}

std::string trim(std::string_view s);

// "a, b c, d" -> {"a", "b c", "d"}; "" -> {}.
std::vector<std::string> split_names(std::string_view s) {
  std::vector<std::string> out;
  if (trim(s).empty()) return out;
  std::size_t start = 0;
  for (;;) {
    auto comma = s.find(',', start);
    out.push_back(trim(s.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

// `?` outside quoted text.
std::size_t count_placeholders(std::string_view sql) {
  std::size_t n = 0;
  char quote = 0;
  for (char c : sql) {
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"' || c == '`') {
      quote = c;
    } else if (c == '?') {
      ++n;
    }
  }
  return n;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string trim(std::string_view s) {
  auto b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  auto e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

// `-- returns: :one fence, expire_at`: the kind, then the columns.
void returns_line(const std::string& file, CatalogEntry& e, const std::string& spec) {
  auto space = spec.find(' ');
  std::string kind = spec.substr(0, space);
  static constexpr ResultKind kinds[] = {ResultKind::k_one, ResultKind::k_many, ResultKind::k_exec, ResultKind::k_execrows};
  auto k = std::find_if(std::begin(kinds), std::end(kinds), [&](ResultKind r) { return to_string(r) == kind; });
  if (k == std::end(kinds))
    bad_file(file, "entry '" + e.name + "': `-- returns:` starts with '" + kind + "', not :one, :many, :exec or :execrows");
  e.returns = *k;
  e.columns = split_names(space == std::string::npos ? std::string_view() : std::string_view(spec).substr(space + 1));
}

// Parses one file into entries (file order).
void parse_file(const std::string& file, std::string_view text, std::vector<CatalogEntry>& out) {
  CatalogEntry* cur = nullptr;
  bool in_text = false;
  bool has_params = false;
  bool has_returns = false;
  auto finish = [&] {
    if (!cur) return;
    while (!cur->text.empty() && (cur->text.back() == '\n' || cur->text.back() == ' ')) cur->text.pop_back();
    if (!cur->text.empty() && cur->text.back() == ';') cur->text.pop_back();
    if (cur->available && cur->text.empty() && cur->note.empty())
      bad_file(file, "entry '" + cur->name + "' has no statement (write `-- empty: why` for an empty fragment)");
    if (cur->available && !cur->fragment && !has_params && count_placeholders(cur->text) > 0)
      bad_file(file, "entry '" + cur->name + "' has ? placeholders but no `-- params:` line");
    if (cur->available && !cur->fragment && !has_returns)
      bad_file(file, "entry '" + cur->name + "' has no `-- returns:` line (:one, :many, :exec or :execrows, then the columns)");
    cur = nullptr;
    in_text = false;
    has_params = false;
    has_returns = false;
  };
  std::istringstream lines{std::string(text)};
  for (std::string line; std::getline(lines, line);) {
    std::string t = trim(line);
    bool named = starts_with(t, "-- name:"), frag = starts_with(t, "-- fragment:");
    if (named || frag) {
      finish();
      out.emplace_back();
      cur = &out.back();
      cur->name = trim(std::string_view(t).substr(named ? 8 : 12));
      cur->file = file;
      cur->fragment = frag;
      continue;
    }
    if (!cur) continue;  // file header comments
    if (!in_text && starts_with(t, "--")) {
      std::string_view body = std::string_view(t).substr(2);
      if (!body.empty() && body[0] == ' ') body.remove_prefix(1);
      if (starts_with(body, "returns:")) {
        returns_line(file, *cur, trim(body.substr(8)));
        has_returns = true;
      } else if (starts_with(body, "params:")) {
        cur->params = split_names(trim(body.substr(7)));
        has_params = true;
      } else if (starts_with(body, "not needed:") || starts_with(body, "not supported:") || starts_with(body, "empty:")) {
        bool empty = starts_with(body, "empty:");
        cur->not_supported = starts_with(body, "not supported:");
        cur->available = empty;
        cur->note = trim(body.substr(body.find(':') + 1));
      } else {
        cur->doc += (cur->doc.empty() ? "" : "\n") + std::string(body);
      }
      continue;
    }
    if (t.empty()) {
      if (in_text) finish();
      continue;
    }
    if (!cur->available) bad_file(file, "entry '" + cur->name + "' is marked absent but has a statement");
    in_text = true;
    if (!cur->text.empty()) cur->text += '\n';
    cur->text += line;
  }
  finish();
}

// Checks one parsed entry against statements.def (name, fragment or not,
// result kind and columns, parameter names) and fills what the declaration
// adds (canonical parameters, bind order). Returns its index.
std::size_t check_declared(CatalogEntry& e) {
    auto it = std::find_if(std::begin(kDeclared), std::end(kDeclared), [&](const Declared& d) { return d.name == e.name; });
    if (it == std::end(kDeclared))
      bad_file(e.file, "entry '" + e.name + "' is not declared in src/core/statements.def");
    auto i = static_cast<std::size_t>(it - std::begin(kDeclared));
    if (it->fragment != e.fragment)
      bad_file(e.file, "entry '" + e.name + "' must be a " + (it->fragment ? "fragment" : "name") + " entry");
    e.canonical_params = split_names(it->args);
    if (!e.fragment && e.available) {
      // The entry says what statements.def declares: kind and columns.
      if (e.returns != it->kind || e.columns != split_names(it->columns)) {
        std::string declared = std::string(to_string(it->kind)) + (it->columns.empty() ? "" : " ") + std::string(it->columns);
        std::string says = std::string(to_string(e.returns));
        for (std::size_t c = 0; c < e.columns.size(); ++c) says += (c ? ", " : " ") + e.columns[c];
        bad_file(e.file, "entry '" + e.name + "' says `-- returns: " + says + "` but src/core/statements.def declares `" +
                             declared + "`");
      }
    } else {
      e.returns = it->kind;
      e.columns = split_names(it->columns);
    }
    bool positional = it->args.find("...") != std::string_view::npos;
    if (e.available && !e.fragment && !positional) {
      auto canonical = split_names(it->args);
      if (count_placeholders(e.text) != e.params.size())
        bad_file(e.file, "entry '" + e.name + "' has " + std::to_string(count_placeholders(e.text)) +
                             " placeholders but `-- params:` names " + std::to_string(e.params.size()));
      std::vector<int> order;
      bool identity = e.params.size() == canonical.size();
      for (std::size_t p = 0; p < e.params.size(); ++p) {
        auto c = std::find(canonical.begin(), canonical.end(), e.params[p]);
        if (c == canonical.end())
          bad_file(e.file, "entry '" + e.name + "' names parameter '" + e.params[p] +
                               "', which statements.def does not declare (" + std::string(it->args) + ")");
        order.push_back(static_cast<int>(c - canonical.begin()));
        identity = identity && order.back() == static_cast<int>(p);
      }
      if (!identity) e.bind_order = std::move(order);
    }
    return i;
}

}  // namespace

std::vector<CatalogEntry> parse_catalog_text(const std::string& file, std::string_view text) {
  std::vector<CatalogEntry> out;
  parse_file(file, text, out);
  for (auto& e : out) check_declared(e);
  return out;
}

std::string_view sql_name(Sql id) noexcept { return kDeclared[static_cast<std::size_t>(id)].name; }

bool returns_rows(ResultKind k) noexcept { return k == ResultKind::k_one || k == ResultKind::k_many; }

Catalog::Catalog(std::string_view name) : dialect_(name) {
  std::vector<CatalogEntry> parsed;
  for (std::size_t i = 0; i < kEmbeddedSqlFileCount; ++i) {
    const auto& f = kEmbeddedSqlFiles[i];
    if (dialect_ == f.dialect) parse_file(f.path, f.text, parsed);
  }
  if (parsed.empty())
    throw Error(ErrorCode::kInternal, "no SQL catalog is embedded for dialect '" + dialect_ + "' (sql/" + dialect_ + "/)");
  entries_.resize(std::size(kDeclared));
  std::vector<bool> seen(std::size(kDeclared), false);
  for (auto& e : parsed) {
    const std::size_t i = check_declared(e);
    if (seen[i]) bad_file(e.file, "entry '" + e.name + "' is defined twice");
    seen[i] = true;
    entries_[i] = std::move(e);
  }
  for (std::size_t i = 0; i < seen.size(); ++i)
    if (!seen[i])
      throw Error(ErrorCode::kInternal, "SQL catalog sql/" + dialect_ + "/ has no entry '" + std::string(kDeclared[i].name) +
                                            "' (write `-- not needed:` or `-- not supported:` with the reason)");
}

const Catalog& Catalog::of(std::string_view dialect) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Catalog>, std::less<>> all;
  std::lock_guard<std::mutex> lk(mu);
  auto it = all.find(dialect);
  if (it == all.end()) it = all.emplace(std::string(dialect), std::unique_ptr<Catalog>(new Catalog(dialect))).first;
  return *it->second;
}

const std::string& Catalog::text(Sql id) const {
  const auto& e = entries_[index(id)];
  if (!e.available)
    throw Error(ErrorCode::kNotSupported,
                "'" + e.name + "' is not supported on " + dialect_ + ": " + e.note + " (see sql/" + e.file +
                    " and the support matrix, docs/support-matrix.md)",
                dialect_);
  return e.text;
}

std::string Catalog::render(Sql id, const Slots& slots) const {
  const std::string& t = text(id);
  std::string out;
  out.reserve(t.size() + 32);
  for (std::size_t i = 0; i < t.size();) {
    if (t[i] != '{') {
      out += t[i++];
      continue;
    }
    auto close = t.find('}', i);
    if (close == std::string::npos) bad_file(entries_[index(id)].file, "unclosed slot in '" + entries_[index(id)].name + "'");
    std::string_view spec(t.data() + i + 1, close - i - 1);
    const bool numeric = !spec.empty() && spec[0] == '#';  // {#n}: digits only (KILL, SET STATEMENT)
    const bool hex = !spec.empty() && spec[0] == '%';      // {%x}: lowercase hex digits only (X'{%x}' in DDL)
    if (numeric || hex) spec.remove_prefix(1);
    auto star = spec.find('*');
    std::string_view slot = spec.substr(0, star);
    auto it = std::find_if(slots.begin(), slots.end(), [&](const auto& s) { return s.first == slot; });
    if (it == slots.end())
      throw Error(ErrorCode::kInternal, "catalog entry '" + entries_[index(id)].name + "' needs slot {" + std::string(slot) + "}");
    if (star == std::string_view::npos) {
      const auto* one = std::get_if<std::string>(&it->second);
      if (!one) throw Error(ErrorCode::kInternal, "slot {" + std::string(slot) + "} takes one value, not a list");
      if (numeric && (one->empty() || one->find_first_not_of("0123456789") != std::string::npos))
        throw Error(ErrorCode::kInternal, "slot {#" + std::string(slot) + "} takes digits only, got '" + *one + "'");
      if (hex && (one->size() % 2 != 0 || one->find_first_not_of("0123456789abcdef") != std::string::npos))
        throw Error(ErrorCode::kInternal, "slot {%" + std::string(slot) + "} takes pairs of hex digits only, got '" + *one + "'");
      out += *one;
    } else {
      const auto* list = std::get_if<std::vector<std::string>>(&it->second);
      if (!list) throw Error(ErrorCode::kInternal, "slot {" + std::string(spec) + "} takes a list");
      std::string_view sep = spec.substr(star + 1);
      for (std::size_t k = 0; k < list->size(); ++k) {
        if (k) out += sep;
        out += (*list)[k];
      }
    }
    i = close + 1;
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == '\n')) out.pop_back();  // an empty trailing slot
  return out;
}

const Catalog& catalog(const Connection& conn) { return conn.dialect().catalog(); }

// The answer in the declared shape (statements.def): the same on every
// dialect, or Error(kInternal) naming what the dialect's statement sent.
Result declared_shape(const Catalog& c, Sql id, Result r) {
  const Declared& d = kDeclared[static_cast<std::size_t>(id)];
  switch (d.kind) {
    case ResultKind::k_exec:
      r.rows.clear();
      return r;
    case ResultKind::k_execrows:
      // One row per changed row (PostgreSQL: a SELECT over an UPDATE ...
      // RETURNING that also sends a NOTIFY; a locking read): count them.
      if (!r.rows.empty()) {
        r.affected = static_cast<std::int64_t>(r.rows.size());
        r.rows.clear();
      }
      return r;
    case ResultKind::k_one:
    case ResultKind::k_many: break;
  }
  const auto& columns = c.entry(id).columns;
  const bool callers = columns.size() == 1 && columns[0] == "columns...";
  if (d.kind == ResultKind::k_one && r.rows.size() > 1)
    throw Error(ErrorCode::kInternal, "catalog statement '" + std::string(d.name) + "' on " + std::string(c.dialect()) +
                                          " answered " + std::to_string(r.rows.size()) + " rows; it is declared :one");
  for (const auto& row : r.rows)
    if (!callers && row.size() != columns.size())
      throw Error(ErrorCode::kInternal, "catalog statement '" + std::string(d.name) + "' on " + std::string(c.dialect()) +
                                            " answered " + std::to_string(row.size()) + " columns; it declares " +
                                            std::to_string(columns.size()) + " (src/core/statements.def)");
  return r;
}

// Every value a catalog statement binds passes the text rule here, once,
// named by the entry's `-- params:` line (or the caller's names).
Result run(Connection& conn, Sql id, const Params& params) {
  const Catalog& c = catalog(conn);
  const std::string& text = c.text(id);
  const auto& order = c.order(id);
  const auto& declared = c.entry(id).params;
  const auto* names = declared.size() == params.size() ? &declared : nullptr;
  if (order.empty()) {
    check_text_params(params, sql_name(id), names);
    return declared_shape(c, id, ConnectionAccess::execute_named(conn, sql_name(id), text, params));
  }
  Params p;
  p.reserve(order.size());
  for (int i : order) p.push_back(params.at(static_cast<std::size_t>(i)));
  check_text_params(p, sql_name(id), names);
  return declared_shape(c, id, ConnectionAccess::execute_named(conn, sql_name(id), text, p));
}

Result run_rendered(Connection& conn, Sql id, const std::string& text, const Params& params,
                    const std::vector<std::string>* names) {
  if (!names) {
    const auto& declared = catalog(conn).entry(id).params;
    if (declared.size() == params.size()) names = &declared;
  }
  check_text_params(params, sql_name(id), names);
  return declared_shape(catalog(conn), id, ConnectionAccess::execute_named(conn, sql_name(id), text, params));
}

std::optional<Result> try_insert(Connection& conn, Sql id, const Params& params) {
  try {
    Result r = run(conn, id, params);
    const bool inserted = returns_rows(kDeclared[static_cast<std::size_t>(id)].kind) ? !r.rows.empty() : r.affected == 1;
    if (inserted) return r;
    return std::nullopt;  // ON CONFLICT DO NOTHING: the key was there
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kAlreadyExists) return std::nullopt;  // MySQL: duplicate key (1062)
    throw;
  }
}

bool insert_if_absent(Connection& conn, Sql id, const Params& params) { return try_insert(conn, id, params).has_value(); }

}  // namespace detail

std::string_view to_string(ResultKind kind) noexcept {
  switch (kind) {
    case ResultKind::k_one: return ":one";
    case ResultKind::k_many: return ":many";
    case ResultKind::k_exec: return ":exec";
    case ResultKind::k_execrows: return ":execrows";
  }
  return "?";
}

std::vector<std::string> dialect_names() {
  std::vector<std::string> out;
  for (const auto* d : detail::registered_dialects()) out.emplace_back(d->name);
  return out;
}

const std::vector<CatalogEntry>& sql_catalog(std::string_view dialect) {
  if (!detail::find_dialect_by_name(dialect)) {
    std::string known;
    for (const auto& name : dialect_names()) known += (known.empty() ? "" : ", ") + name;
    throw Error(ErrorCode::kInvalidArgument, "unknown dialect '" + std::string(dialect) + "' (known: " + known + ")");
  }
  return detail::Catalog::of(dialect).entries();
}

const CatalogEntry& sql_statement(std::string_view dialect, std::string_view name) {
  for (const auto& e : sql_catalog(dialect))
    if (e.name == name) return e;
  throw Error(ErrorCode::kInvalidArgument, "the " + std::string(dialect) + " SQL catalog has no entry '" + std::string(name) + "'");
}

}  // namespace sqlguard
