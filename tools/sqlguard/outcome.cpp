#include "outcome.h"

#include <iostream>
#include <string_view>

#include "common.h"
#include "diagnose.h"
#include "sqlguard/catalog.h"
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

// The dialects this build has compiled in ("sqlite", "postgresql", ...).
std::vector<std::string> built_in_dialects() {
  std::vector<std::string> out;
  for (const auto& name : dialect_names())
    for (auto kind : {DialectKind::kSqlite, DialectKind::kPostgresql, DialectKind::kMysql})
      if (to_string(kind) == name && dialect_available(kind)) out.push_back(name);
  return out;
}

int version() {
  auto dialects = built_in_dialects();
  if (global().json) {
    print_json({{"version", SQLGUARD_CLI_VERSION}, {"dialects", dialects}});
  } else {
    std::cout << "sqlguard " << SQLGUARD_CLI_VERSION << "\ndialects:";
    for (const auto& d : dialects) std::cout << " " << d;
    std::cout << (dialects.empty() ? " none\n" : "\n");
  }
  return kExitOk;
}

int usage_error(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  // A value a flag's own check refused (BadValue) names itself; for the
  // rest, CLI11's message says that something is wrong, diagnose() what.
  std::string message = e.what(), argument;
  if (auto* bad = dynamic_cast<const BadValue*>(&e)) argument = bad->argument();
  else if (auto d = diagnose(app, argc, argv)) message = d->message, argument = d->argument;
  // The message may quote what was typed: a URI with its password, put
  // where a flag should be ("'mysql://u:pw@h/db' is not expected here").
  message = mask_uri(message);
  argument = mask_uri(argument);
  // --json: the JSON object on stdout is the whole report (nothing on stderr).
  if (!global().json) std::cerr << "sqlguard: " << terminal_safe(message) << " (run with --help for usage)" << std::endl;
  if (global().json) {
    nlohmann::json err = {{"code", "usage"}, {"message", message}};
    if (!argument.empty()) err["argument"] = argument;
    if (auto path = command_path(app); !path.empty()) err["command"] = path;
    print_json({{"error", err}});
  }
  return kExitUsage;
}

int error(const Error& e) {
  if (!global().json) std::cerr << "sqlguard: error: " << terminal_safe(mask_uri(e.what())) << std::endl;
  else
    print_json({{"error", {{"code", std::string(to_string(e.code()))},
                           {"dialect", e.dialect()},
                           {"native_code", e.native_code()},
                           {"message", mask_uri(e.message())}}}});
  return kExitError;
}

int unexpected(const std::string& what) {
  if (!global().json) std::cerr << "sqlguard: error: " << terminal_safe(mask_uri(what)) << std::endl;
  else print_json({{"error", {{"code", "internal"}, {"message", mask_uri(what)}}}});
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
    } catch (const CLI::CallForVersion&) {
      return version();
    } catch (const CLI::ParseError& e) {
      return usage_error(app, e, argc, argv);
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
