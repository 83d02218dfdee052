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
    auto results = check_environment(global().db, connect_options());
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
      std::cerr << "sqlguard doctor: " << failed << " check(s) failed\n";
      exit_code() = kExitError;
    }
  });
}

}  // namespace sqlguard::cli
