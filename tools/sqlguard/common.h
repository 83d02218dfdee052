// Shared plumbing of the sqlguard CLI: global options, output, exit codes.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "sqlguard/connection.h"

namespace sqlguard::cli {

// Exit codes (documented in README.md "CLI reference").
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;       // an error; one line on stderr
inline constexpr int kExitUsage = 2;       // bad command line
inline constexpr int kExitNotHeld = 3;     // renew/release: the caller does not hold the lock
inline constexpr int kExitInvariant = 4;   // demo/chaos: an invariant was violated
inline constexpr int kExitLeaseLost = 5;   // run: the lease was lost while CMD ran
inline constexpr int kExitTempFail = 75;   // EX_TEMPFAIL: lock not acquired within --wait

struct Global {
  std::string db = "sqlite://sqlguard.db";
  bool json = false;
  std::string connect_timeout = "10s";
};

Global& global();

// `o` with the global --connect-timeout applied; the rest of `o` is kept.
ConnectOptions connect_options(ConnectOptions o = {});

// Opens --db with connect_options(o), e.g. a longer SQLite busy_timeout.
std::unique_ptr<Connection> open_db(ConnectOptions o = {});

// Parses a duration flag, naming the flag in the error (exit 1).
std::chrono::milliseconds duration_flag(const std::string& flag, const std::string& text);

// Parses a duration flag that must lie in [min, max]; anything else is a
// usage error (CLI::ValidationError: exit 2).
std::chrono::milliseconds bounded_duration_flag(const std::string& flag, const std::string& text,
                                                std::chrono::milliseconds min, std::chrono::milliseconds max);

// `digits` random lower-case hex digits (std::random_device): run ids and
// tags that keep one run's names apart from another's. Not a secret.
std::string random_hex(std::size_t digits);

// Prints JSON (one object per line) to stdout.
void print_json(const nlohmann::json& j);

// Formats ms-since-epoch as ISO-8601 UTC with milliseconds.
std::string iso8601(std::int64_t epoch_ms);

// Each subcommand registers itself: add_X(app) returns nothing and sets a
// callback that stores the exit code in exit_code().
int& exit_code();
void add_migrate(CLI::App& app);
void add_lock(CLI::App& app);
void add_run(CLI::App& app);
void add_cleanup(CLI::App& app);
void add_chaos(CLI::App& app);  // also registers the hidden chaos-worker
void add_demo(CLI::App& app);
void add_bench(CLI::App& app);

}  // namespace sqlguard::cli
