// sqlguard — command-line front end. Thin: parses arguments (CLI11), calls
// the public API, prints text or JSON. See docs/cli.md.
#include "common.h"
#include "outcome.h"

using namespace sqlguard::cli;

int main(int argc, char** argv) {
  CLI::App app{"sqlguard: cross-process locks and idempotency on the SQL database you already run"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every command");
  add_global_flags(app);  // before the subcommands: they inherit the fall-through to it
  add_migrate(app);
  add_doctor(app);
  add_lock(app);
  add_run(app);
  add_elect(app);
  add_cleanup(app);
  add_history(app);
  add_verify(app);
  add_versioned(app);
  add_chaos(app);
  add_demo(app);
  add_bench(app);
  return parse_and_run(app, argc, argv);
}
