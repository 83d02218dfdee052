#include "sql_audit.h"

#include <map>
#include <mutex>
#include <regex>
#include <set>

#include "sqlguard/catalog.h"
#include "sqlguard/connection.h"

namespace sgtest {
namespace {
std::mutex mu;
std::vector<std::string> failures;
std::size_t checked = 0;
std::set<std::string> seen;
std::map<std::string, std::regex> patterns;  // "dialect/name" -> regex of the template

// The template as a regex: literal text (white space folded), with each
// {slot} / {list*sep} matching only what slots are filled with: quoted
// identifiers (schema-qualified ones too), `?`, operators, commas and the words of the catalog's
// fragments -- never a literal value or another keyword.
std::regex pattern_of(const std::string& text) {
  const std::string slot =
      "(?:\"[^\"]*\"(?:\\.\"[^\"]*\")?|`[^`]*`(?:\\.`[^`]*`)?|\\?|[,=<>+\\-\\s]|AND|FOR|UPDATE|SHARE|NOWAIT|SKIP|LOCKED|LOCK|IN|MODE)*";
  std::string re = "^";
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '{') {
      re += i + 1 < text.size() && text[i + 1] == '#' ? std::string("[0-9]+") : slot;
      i = text.find('}', i);
      continue;
    }
    if (c == ' ' || c == '\n') {
      re += "\\s*";
      continue;
    }
    if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) re += '\\';
    re += c;
  }
  return std::regex(re + "\\s*$");
}
}  // namespace

bool matches_catalog(const std::string& dialect, const std::string& name, const std::string& sql) {
  const auto& e = sqlguard::sql_statement(dialect, name);
  if (!e.available) return false;
  if (e.text.find('{') == std::string::npos) return e.text == sql;
  std::lock_guard<std::mutex> lk(mu);
  auto key = dialect + "/" + name;
  auto it = patterns.find(key);
  if (it == patterns.end()) it = patterns.emplace(key, pattern_of(e.text)).first;
  return std::regex_match(sql, it->second);
}

namespace {
thread_local int t_exempt = 0;
}
SqlAuditExempt::SqlAuditExempt() { ++t_exempt; }
SqlAuditExempt::~SqlAuditExempt() { --t_exempt; }

void install_sql_audit() {
  sqlguard::set_global_statement_observer([](const sqlguard::StatementEvent& ev) {
    if (ev.kind != sqlguard::StatementKind::kStatement || ev.catalog_name.empty() || t_exempt > 0) return;
    std::string d(ev.dialect), n(ev.catalog_name), sql(ev.sql);
    bool ok = false;
    try {
      ok = matches_catalog(d, n, sql);
    } catch (const std::exception& e) {
      sql += std::string("  [") + e.what() + "]";
    }
    std::lock_guard<std::mutex> lk(mu);
    ++checked;
    seen.insert(d + "/" + n);
    if (!ok && failures.size() < 50) failures.push_back(d + "/" + n + ": " + sql);
  });
}

std::vector<std::string> sql_audit_failures() {
  std::lock_guard<std::mutex> lk(mu);
  return failures;
}
std::size_t sql_audit_checked() {
  std::lock_guard<std::mutex> lk(mu);
  return checked;
}
std::size_t sql_audit_entries_seen() {
  std::lock_guard<std::mutex> lk(mu);
  return seen.size();
}
}  // namespace sgtest
