// sqlguard/doctor.h — inspect the database sqlguard is pointed at.
//
// check_environment() connects to a URI and runs the checks that apply to
// its dialect and deployment (server version and support, replication and
// synchronous commit, a transaction pooler in the path, Galera settings,
// SQLite journal mode, sqlguard's tables and migration level, ...). Each
// check yields one CheckResult; nothing is changed on the server.
// `sqlguard doctor` prints them (one line each, or JSON objects with --json)
// and exits non-zero only when a check fails.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sqlguard/connection.h"

namespace sqlguard {

enum class CheckStatus { kOk, kWarn, kFail };
// "ok", "warn", "fail".
std::string_view to_string(CheckStatus status) noexcept;

struct CheckResult {
  std::string check{}; // stable id, e.g. "server_version", "replication"
  CheckStatus status = CheckStatus::kOk;
  std::string detail{};  // one human-readable line (secrets masked)
};

// Runs every check for `uri`'s dialect. A failure to connect is itself a
// check result ("connect", fail), not an exception.
std::vector<CheckResult> check_environment(const std::string& uri,
                                           const ConnectOptions& options = {});

// The same on an open connection (the URI is used only for the checks that
// compare against it, e.g. the port a pooler listens on; it may be empty).
std::vector<CheckResult> check_environment(Connection& conn, const std::string& uri = {});

}  // namespace sqlguard
