// sqlguard doctor: check_environment() on --db. One line per check
// ("ok    replication  every standby is synchronous: ..."), or with --json one
// object per line {check, status, detail}. Exit 0 unless a check fails (1).
#include <iomanip>
#include <iostream>

#include "common.h"
#include "sqlguard/doctor.h"

namespace sqlguard::cli {

void add_doctor(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "doctor", "Inspect the database --db points at (version, replication, poolers, isolation, timeouts, "
                "sqlguard's tables); exits 1 when a check fails, 0 otherwise (warnings included)");
  cmd->callback([] {
    // Never creates a database: a mistyped SQLite path fails the connect check.
    const auto options = connect_options(existing_only());
    auto results = check_environment(single_db(), options);
    // The library reports every connect failure as a check; a URI it refuses
    // as malformed is a bad command line here (exit 2), like for every command.
    if (!results.empty() && results[0].check == "connect" && results[0].status == CheckStatus::kFail) {
      try {
        with_db_uri([&] { make_connection(single_db(), options); });
      } catch (const Error&) {
        // Not malformed (unreachable, missing file...): the failed check below says it.
      }
    }
    int failed = 0, warned = 0;
    for (const auto& r : results) {
      failed += r.status == CheckStatus::kFail;
      warned += r.status == CheckStatus::kWarn;
      if (global().json)
        print_json({{"check", r.check}, {"status", std::string(to_string(r.status))}, {"detail", r.detail}});
      else
        std::cout << std::left << std::setw(5) << to_string(r.status) << " " << std::setw(15) << r.check << " "
                  << r.detail << "\n";
    }
    if (!global().json)
      std::cout << results.size() << " checks: " << failed << " failed, " << warned << " warnings\n";
    if (failed > 0) {
      if (!global().json) std::cerr << "sqlguard doctor: " << failed << " check(s) failed\n";
      exit_code() = kExitError;
    }
  });
}

}  // namespace sqlguard::cli
