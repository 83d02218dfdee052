#include "outcome.h"

#include <iostream>
#include <string_view>

#include "common.h"
#include "text.h"

namespace sqlguard::cli {
namespace {

// --json must shape the output of errors CLI11 throws before it reached the
// flag (`lock acquire x --ttl --json`), so it is looked for up front, up to
// the `--` that starts a command's own arguments (`run -- CMD --json`).
bool json_requested(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") break;
    if (a == "--json") return true;
  }
  return false;
}

// "lock acquire": the subcommands parsed so far.
std::string command_path(const CLI::App& app) {
  std::string path;
  for (const CLI::App* a = &app; !a->get_subcommands().empty();) {
    a = a->get_subcommands().front();
    path += (path.empty() ? "" : " ") + a->get_name();
  }
  return path;
}

int help(const CLI::App& app, CLI::AppFormatMode mode) {
  std::string text = app.help("", mode);
  if (global().json) print_json({{"help", text}});
  else std::cout << text;
  return kExitOk;
}

int usage_error(const CLI::App& app, const CLI::ParseError& e) {
  std::cerr << "sqlguard: " << terminal_safe(e.what()) << " (run with --help for usage)" << std::endl;
  if (global().json) {
    nlohmann::json err = {{"code", "usage"}, {"message", e.what()}};
    if (auto* bad = dynamic_cast<const BadValue*>(&e)) err["argument"] = bad->argument();
    if (auto path = command_path(app); !path.empty()) err["command"] = path;
    print_json({{"error", err}});
  }
  return kExitUsage;
}

int error(const Error& e) {
  std::cerr << "sqlguard: error: " << terminal_safe(mask_uri(e.what())) << std::endl;
  if (global().json)
    print_json({{"error", {{"code", std::string(to_string(e.code()))},
                           {"dialect", e.dialect()},
                           {"native_code", e.native_code()},
                           {"message", mask_uri(e.message())}}}});
  return kExitError;
}

int unexpected(const std::string& what) {
  std::cerr << "sqlguard: error: " << terminal_safe(mask_uri(what)) << std::endl;
  if (global().json) print_json({{"error", {{"code", "internal"}, {"message", mask_uri(what)}}}});
  return kExitError;
}

}  // namespace

int parse_and_run(CLI::App& app, int argc, char** argv) {
  global().json = json_requested(argc, argv);
  try {
    try {
      app.parse(argc, argv);
      return exit_code();
    } catch (const CLI::CallForHelp&) {
      return help(app, CLI::AppFormatMode::Normal);
    } catch (const CLI::CallForAllHelp&) {
      return help(app, CLI::AppFormatMode::All);
    } catch (const CLI::ParseError& e) {
      return usage_error(app, e);
    } catch (const Error& e) {
      return error(e);
    } catch (const std::exception& e) {
      return unexpected(e.what());
    } catch (...) {
      return unexpected("unknown exception");
    }
  } catch (...) {
    // Writing the report failed (out of memory): the exit code still
    // tells, and the process still ends normally.
    return kExitError;
  }
}

}  // namespace sqlguard::cli
