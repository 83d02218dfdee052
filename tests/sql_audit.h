// The statement audit of the whole suite: every statement sqlguard sends
// that names a catalog entry must match that entry's text as written in
// sql/<dialect>/*.sql (slots filled with identifiers or fragments). Installed
// by main.cpp as the process-wide statement observer; main.cpp fails the run
// when anything mismatched.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace sgtest {
void install_sql_audit();
// While one lives, this thread's statements are not audited: a negative
// control that sends a text other than its entry's on purpose.
struct SqlAuditExempt {
  SqlAuditExempt();
  ~SqlAuditExempt();
  SqlAuditExempt(const SqlAuditExempt&) = delete;
  SqlAuditExempt& operator=(const SqlAuditExempt&) = delete;
};
// Mismatches seen so far ("name: sent text"), and how many statements and
// distinct catalog entries were checked.
std::vector<std::string> sql_audit_failures();
std::size_t sql_audit_checked();
std::size_t sql_audit_entries_seen();
// Statements sent per catalog entry ("dialect/name"): main.cpp prints them
// when SQLGUARD_TEST_AUDIT_COUNTS is set (a statement storm shows there).
std::map<std::string, std::size_t> sql_audit_counts();
// True when `sql` is what catalog entry `name` of `dialect` renders to.
bool matches_catalog(const std::string& dialect, const std::string& name, const std::string& sql);
}  // namespace sgtest
