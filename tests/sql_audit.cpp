#include "sql_audit.h"

#include <algorithm>
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
std::map<std::string, std::size_t> counts;  // per entry, for sql_audit_counts()
std::map<std::string, std::regex> patterns;  // "dialect/name" -> regex of the template

// Literal text as a regex, white space folded.
std::string literal_regex(const std::string& text) {
  std::string re;
  for (char c : text) {
    if (c == ' ' || c == '\n') {
      re += "\\s*";
      continue;
    }
    if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) re += '\\';
    re += c;
  }
  return re;
}

// A fragment whose only slots are {#n} (digits) and {%x} (hex digits) as a
// regex (MariaDB's history_scope_retain_*); empty for a fragment with other slots.
std::string value_slot_fragment_regex(const std::string& text) {
  std::string re;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '{') {
      re += literal_regex(std::string(1, text[i]));
      continue;
    }
    const std::size_t close = text.find('}', i);
    if (close == std::string::npos || i + 1 >= close) return {};
    if (text[i + 1] == '#')
      re += "[0-9]+";
    else if (text[i + 1] == '%')
      re += "(?:[0-9a-f]{2})*";
    else
      return {};
    i = close;
  }
  return re;
}

// The template as a regex: literal text (white space folded), with each
// {slot} / {list*sep} matching only what slots are filled with: quoted
// identifiers (schema-qualified ones too), `?`, operators, commas, the words
// of the catalog's fragments, whole slot-free fragments of this dialect
// (e.g. lease_ref's value tuple), and the list's own separator -- never a
// literal value or another keyword. A fragment whose only slots are digits and
// hex digits (history_scope_retain_new) is accepted only in a list slot its
// name ends with ({retain_new*...}): nowhere else may digits stand.
std::regex pattern_of(const std::string& dialect, const std::string& text) {
  std::string fragments;
  std::vector<std::pair<std::string, std::string>> value_fragments;  // (fragment name, regex)
  for (const auto& e : sqlguard::sql_catalog(dialect)) {
    if (!e.fragment || !e.available || e.text.empty()) continue;
    if (e.text.find('{') == std::string::npos) {
      fragments += "|" + literal_regex(e.text);
    } else if (auto re = value_slot_fragment_regex(e.text); !re.empty()) {
      value_fragments.emplace_back(e.name, re);
    }
  }
  auto value_fragments_for = [&](const std::string& slot) {
    std::string out;
    for (const auto& [name, re] : value_fragments)
      if (name.size() > slot.size() && name.compare(name.size() - slot.size() - 1, std::string::npos, "_" + slot) == 0)
        out += "|(?:" + re + ")";
    return out;
  };
  const std::string tokens =
      "\"[^\"]*\"(?:\\.\"[^\"]*\")?|`[^`]*`(?:\\.`[^`]*`)?|\\?|[,=<>+\\-\\s]|AND|FOR|UPDATE|SHARE|NOWAIT|SKIP|LOCKED|LOCK|IN|MODE|"
      "CASE|WHEN|THEN|ELSE|END" +
      fragments;
  std::string re = "^";
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '{') {
      const std::size_t close = text.find('}', i), star = text.find('*', i);
      if (i + 1 < text.size() && text[i + 1] == '#') {
        re += "[0-9]+";
      } else if (i + 1 < text.size() && text[i + 1] == '%') {
        re += "(?:[0-9a-f]{2})*";
      } else {
        std::string sep = star < close ? text.substr(star + 1, close - star - 1) : std::string();
        const std::string slot = text.substr(i + 1, std::min(star, close) - i - 1);
        re += "(?:" + tokens + (star < close ? value_fragments_for(slot) : std::string()) +
              (sep.empty() ? "" : "|" + literal_regex(sep)) + ")*";
      }
      i = close;
      continue;
    }
    re += literal_regex(std::string(1, c));
  }
  return std::regex(re + "\\s*$");
}
// A list of one slot-free fragment rendered N times (lease_ref x 1000) is
// folded to one copy before matching: std::regex recurses per repetition and
// overflows the stack on statements of that size.
std::string fold_repeated_fragments(const std::string& dialect, const std::string& templ, std::string sql) {
  for (std::size_t at = templ.find('{'); at != std::string::npos; at = templ.find('{', at + 1)) {
    const std::size_t close = templ.find('}', at), star = templ.find('*', at);
    if (star > close) continue;
    const std::string sep = templ.substr(star + 1, close - star - 1);
    // The longest fragment present is the list's element; shorter ones (a
    // lone `?`) may occur inside it and are left alone.
    std::vector<std::string> texts;
    for (const auto& e : sqlguard::sql_catalog(dialect))
      if (e.fragment && e.available && !e.text.empty() && e.text.find('{') == std::string::npos) texts.push_back(e.text);
    std::sort(texts.begin(), texts.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
    for (const auto& text : texts) {
      // Only a fragment the template's own text never contains: folding
      // cannot then touch what the template writes itself.
      if (templ.find(text) != std::string::npos || sql.find(text) == std::string::npos) continue;
      const std::string pair = text + sep + text;
      for (std::size_t p = sql.find(pair); p != std::string::npos; p = sql.find(pair, p))
        sql.erase(p + text.size(), sep.size() + text.size());
      break;
    }
  }
  return sql;
}
}  // namespace

bool matches_catalog(const std::string& dialect, const std::string& name, const std::string& sql) {
  const auto& e = sqlguard::sql_statement(dialect, name);
  if (!e.available) return false;
  if (e.text.find('{') == std::string::npos) return e.text == sql;
  std::lock_guard<std::mutex> lk(mu);
  auto key = dialect + "/" + name;
  auto it = patterns.find(key);
  if (it == patterns.end()) it = patterns.emplace(key, pattern_of(dialect, e.text)).first;
  return std::regex_match(fold_repeated_fragments(dialect, e.text, sql), it->second);
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
    ++counts[d + "/" + n];
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
std::map<std::string, std::size_t> sql_audit_counts() {
  std::lock_guard<std::mutex> lk(mu);
  return counts;
}
std::size_t sql_audit_entries_seen() {
  std::lock_guard<std::mutex> lk(mu);
  return seen.size();
}
}  // namespace sgtest
