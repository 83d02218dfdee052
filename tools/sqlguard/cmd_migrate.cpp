// sqlguard migrate [--status]
#include <algorithm>
#include <cstdio>
#include <iostream>

#include "common.h"
#include "sqlguard/migrate.h"

namespace sqlguard::cli {
namespace {
std::string label(const MigrationState& s) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04d_", s.version);
  return buf + s.name;
}

nlohmann::json to_json(const MigrationState& s) {
  nlohmann::json j = {{"version", s.version}, {"name", s.name}, {"applied", s.applied},
                      {"checksum", s.checksum}, {"checksum_mismatch", s.checksum_mismatch}};
  j["applied_at"] = s.applied_at_ms ? nlohmann::json(format_db_time(*s.applied_at_ms)) : nlohmann::json(nullptr);
  return j;
}
}  // namespace

void add_migrate(CLI::App& app) {
  auto* cmd = app.add_subcommand("migrate", "Create or update the sqlguard tables (idempotent, safe to run concurrently)");
  auto status = std::make_shared<bool>(false);
  cmd->add_flag("--status", *status, "List migrations and whether each is applied; change nothing");
  cmd->callback([status] {
    auto conn = open_db(*status ? existing_only() : ConnectOptions{});  // --status changes nothing
    if (*status) {
      auto states = migration_status(*conn);
      bool mismatch = false;
      nlohmann::json arr = nlohmann::json::array();
      // Columns: the widest migration name sets the first (issue 39: they were ragged).
      std::size_t width = 0;
      for (const auto& s : states) width = std::max(width, label(s).size());
      for (const auto& s : states) {
        mismatch |= s.checksum_mismatch;
        if (global().json) {
          arr.push_back(to_json(s));
          continue;
        }
        const char* state = s.checksum_mismatch ? "CHECKSUM MISMATCH" : s.applied ? "applied" : "pending";
        std::string line = label(s);
        line.resize(width + 2, ' ');
        line += state;
        if (s.applied_at_ms) {
          line.resize(width + 2 + 19, ' ');  // "CHECKSUM MISMATCH" + 2
          line += format_db_time(*s.applied_at_ms);
        }
        std::cout << line << "\n";
      }
      if (global().json) print_json({{"dialect", std::string(to_string(conn->kind()))}, {"migrations", arr}});
      if (mismatch) exit_code() = kExitError;
      return;
    }
    auto report = migrate(*conn);
    if (global().json) {
      nlohmann::json applied = nlohmann::json::array(), already = nlohmann::json::array();
      for (const auto& s : report.applied_now) applied.push_back(to_json(s));
      for (const auto& s : report.already) already.push_back(to_json(s));
      print_json({{"dialect", std::string(to_string(conn->kind()))}, {"applied", applied}, {"already_applied", already}});
      return;
    }
    for (const auto& s : report.applied_now) std::cout << "applied " << label(s) << "\n";
    std::cout << conn->description() << ": " << report.applied_now.size() << " migration(s) applied, "
              << report.already.size() << " already applied\n";
  });
}

}  // namespace sqlguard::cli
