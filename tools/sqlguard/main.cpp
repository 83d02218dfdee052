// sqlguard — command-line front end. Thin: parses arguments (CLI11), calls
// the public API, prints text or JSON. See README.md "CLI reference".
#include <iostream>

#include "common.h"

using namespace sqlguard;
using namespace sqlguard::cli;

int main(int argc, char** argv) {
  CLI::App app{"sqlguard: cross-process locks and idempotency on the SQL database you already run"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every command");
  auto& g = global();
  app.add_option("--db", g.db, "Database URI: sqlite:///abs.db, sqlite://rel.db, sqlite::memory:, "
                              "postgresql://user:pw@host:port/db, mysql://user:pw@host:port/db")
      ->envname("SQLGUARD_DB")
      ->capture_default_str();
  app.add_flag("--json", g.json, "Machine-readable output: one JSON object per line");
  app.add_option("--connect-timeout", g.connect_timeout, "Bound on connecting, e.g. 5s")->capture_default_str();
  add_migrate(app);
  add_lock(app);
  add_run(app);
  add_cleanup(app);
  add_chaos(app);
  add_demo(app);
  add_bench(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  } catch (const Error& e) {
    std::string msg = mask_uri(e.what());
    for (auto& ch : msg)
      if (ch == '\n' || ch == '\t') ch = ' ';  // one line, always
    std::cerr << "sqlguard: error: " << msg << std::endl;
    if (g.json)
      print_json({{"error", {{"code", std::string(to_string(e.code()))},
                             {"dialect", e.dialect()},
                             {"native_code", e.native_code()},
                             {"message", mask_uri(e.message())}}}});
    return kExitError;
  } catch (const std::exception& e) {
    std::cerr << "sqlguard: error: " << mask_uri(e.what()) << std::endl;
    return kExitError;
  }
  return exit_code();
}
