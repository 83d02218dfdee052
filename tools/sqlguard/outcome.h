// How every run of the CLI ends: parses the command line, runs the chosen
// subcommand's callback, and turns each outcome — success, help, a usage
// error, a sqlguard::Error, any other exception — into an exit code, one
// line on stderr and, with --json, exactly one JSON object on stdout.
#pragma once

#include <CLI/CLI.hpp>

namespace sqlguard::cli {

// Returns the process's exit code (docs/cli.md). Never lets an
// exception escape.
int parse_and_run(CLI::App& app, int argc, char** argv);

}  // namespace sqlguard::cli
