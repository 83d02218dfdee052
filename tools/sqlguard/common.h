// Shared plumbing of the sqlguard CLI: global options, output, exit codes.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "sqlguard/connection.h"
#include "sqlguard/validate.h"

namespace sqlguard::cli {

// Exit codes (documented in docs/cli.md; besides these, only
// `run` and `elect` pass on CMD's status — the CLI never aborts).
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;       // an error; one line on stderr
inline constexpr int kExitUsage = 2;       // bad command line or bad value (BadValue, CLI11 parse errors)
inline constexpr int kExitNotHeld = 3;     // renew/release: the caller does not hold the lock
inline constexpr int kExitInvariant = 4;   // demo/chaos/verify: an invariant was violated
inline constexpr int kExitLeaseLost = 5;   // run/elect: the lease (leadership) was lost while CMD ran
inline constexpr int kExitTempFail = 75;   // EX_TEMPFAIL: lock not acquired (not elected) within --wait

struct Global {
  std::string db = "sqlite://sqlguard.db";
  bool json = false;
  std::string connect_timeout = "10s";
};

Global& global();

// Registers the global flags --db, --json and --connect-timeout on the root
// app and makes every subcommand added afterwards fall through to it, so the
// flags are accepted before or after any (nested) subcommand. Call it before
// adding the subcommands.
void add_global_flags(CLI::App& app);

// `o` with the global --connect-timeout applied; the rest of `o` is kept.
ConnectOptions connect_options(ConnectOptions o = {});

// ConnectOptions for every command but `migrate` (and demo, bench and chaos,
// which set up databases of their own): they never create a database, so a
// mistyped SQLite path is an error (kNotFound), not a new empty file.
inline ConnectOptions existing_only(ConnectOptions o = {}) {
  o.create_if_missing = false;
  return o;
}

// Opens --db with connect_options(o), e.g. a longer SQLite busy_timeout.
// A URI the library refuses as malformed is BadValue("--db") (exit 2).
// BadValue (exit 2) when --db was given more than once.
std::unique_ptr<Connection> open_db(ConnectOptions o = {});
// Every --db in order (repeated --db: `sqlguard chaos` on a cluster, one URI
// per node), and the one --db of every other command (BadValue if several).
std::vector<std::string> db_uris();
const std::string& single_db();

// A bad command line or value, found by the CLI before it does anything:
// exit 2, and the JSON error names `argument` ("--wait", "NAME").
class BadValue : public CLI::ValidationError {
 public:
  BadValue(const std::string& argument, const std::string& message)
      : CLI::ValidationError(argument, message), argument_(argument) {}
  const std::string& argument() const { return argument_; }

 private:
  std::string argument_;
};

// Runs `connect` (which opens --db: make_connection, a LeaseLock from the
// URI) and turns the library's kInvalidArgument — a malformed URI, an unknown
// scheme, a bad option such as ?sslmode=bogus — into BadValue("--db"): a bad
// command line, exit 2. Other errors pass unchanged.
template <class F>
auto with_db_uri(F&& connect) -> decltype(connect()) {
  try {
    return connect();
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kInvalidArgument) throw;
    throw BadValue("--db", mask_uri(e.message()));
  }
}

// The values a duration flag accepts (bounds inclusive).
struct DurationRange {
  std::chrono::milliseconds min, max;
};
// The widest range: 0 up to 365 days (also the library's bound on a wait).
inline constexpr DurationRange kAnyDuration{std::chrono::milliseconds(0), std::chrono::hours(24 * 365)};
// A lease ttl: the library's bounds.
inline constexpr DurationRange kLeaseTtl{std::chrono::milliseconds(10), std::chrono::hours(24 * 7)};

// The one parser of duration flags ("500ms", "30s", "5m", "2h", "1d"):
// malformed text or a value outside `range` throws BadValue(flag).
std::chrono::milliseconds duration_flag(const std::string& flag, const std::string& text,
                                        DurationRange range = kAnyDuration);

// The check of every integer option, run on its text before CLI11 converts
// it: a whole number within lo..hi, else one line naming the option, e.g.
// "--batch: 'abc' is not a whole number (1..100000)" (CLI11's own Range said
// "Value abc not in range").
CLI::Validator whole_number(std::int64_t lo, std::int64_t hi);

// Checks a name argument (lock name, owner) before it goes anywhere: well-
// formed UTF-8 (no overlong forms, surrogates or code points above
// U+10FFFF), no NUL, 1..max_bytes bytes. Otherwise throws BadValue(argument).
void check_name_arg(const std::string& argument, const std::string& value,
                    std::size_t max_bytes = kMaxNameBytes);

// `digits` random lower-case hex digits (std::random_device): run ids and
// tags that keep one run's names apart from another's. Not a secret.
std::string random_hex(std::size_t digits);

// Prints JSON (one object per line) to stdout. Bytes that are not valid
// UTF-8 in a string (a library message quoting raw input) become U+FFFD:
// the output is always valid JSON, never an exception.
void print_json(const nlohmann::json& j);


// Each subcommand registers itself: add_X(app) returns nothing and sets a
// callback that stores the exit code in exit_code().
int& exit_code();
void add_migrate(CLI::App& app);
void add_doctor(CLI::App& app);
void add_lock(CLI::App& app);
void add_run(CLI::App& app);
void add_elect(CLI::App& app);
void add_cleanup(CLI::App& app);
void add_history(CLI::App& app);
void add_verify(CLI::App& app);
void add_versioned(CLI::App& app);
void add_chaos(CLI::App& app);  // also registers the hidden chaos-worker
void add_demo(CLI::App& app);
void add_bench(CLI::App& app);

}  // namespace sqlguard::cli
