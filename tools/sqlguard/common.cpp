#include "common.h"

#include <charconv>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <random>

#include "text.h"

namespace sqlguard::cli {

Global& global() {
  static Global g;
  return g;
}

int& exit_code() {
  static int code = kExitOk;
  return code;
}

void add_global_flags(CLI::App& app) {
  auto& g = global();
  app.add_option("--db", g.db, "Database URI: sqlite:///abs.db, sqlite://rel.db, sqlite::memory:, "
                              "postgresql://user:pw@host:port/db, mysql://user:pw@host:port/db; "
                              "`chaos` takes one per cluster node (repeat --db)")
      ->multi_option_policy(CLI::MultiOptionPolicy::Join)  // "uri1\nuri2": see db_uris()
      ->envname("SQLGUARD_DB")
      ->capture_default_str();
  app.add_flag("--json", g.json, "Machine-readable output: one JSON object per line on stdout, for every outcome");
  app.add_option("--connect-timeout", g.connect_timeout, "Bound on connecting, 1ms..1h, e.g. 5s")
      ->capture_default_str();
  // Inherited by every subcommand created from here on (CLI11 copies these
  // settings at add_subcommand): an option a subcommand does not know is
  // offered to its parent, up to the root that owns the global flags.
  app.fallthrough();
  app.set_version_flag("--version", [] { return std::string(); }, "Print the version and the dialects built in");
  app.footer(
      "Global flags (--db, --json, --connect-timeout) may come before or after the subcommand.\n\n"
      "Exit codes:\n"
      "  0   success\n"
      "  1   error (database unreachable, permission, ...): one line on stderr (--json: one object on stdout)\n"
      "  2   bad command line or value, including a malformed --db URI\n"
      "  3   renew/release: the lock is not held by this owner (and fence); versioned drop: no such declaration\n"
      "  4   demo/chaos: an invariant was violated\n"
      "  5   run/elect: the lease (leadership) was lost while CMD ran (CMD's tree was stopped)\n"
      "  75  lock acquire/run/elect: the lock was not acquired (not elected) within --wait (EX_TEMPFAIL)\n"
      "  run and elect pass on CMD's exit status; 128+N when ended by signal N");
}

std::chrono::milliseconds duration_flag(const std::string& flag, const std::string& text, DurationRange range) {
  std::chrono::milliseconds d;
  try {
    d = parse_duration(text);
  } catch (const Error& e) {
    throw BadValue(flag, e.message());
  }
  if (d < range.min || d > range.max)
    throw BadValue(flag, "is " + text + "; it must be between " + format_duration(range.min) + " and " +
                             format_duration(range.max));
  return d;
}

CLI::Validator whole_number(std::int64_t lo, std::int64_t hi) {
  const std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        std::int64_t v = 0;
        const char* end = text.data() + text.size();
        const auto [stop, ec] = std::from_chars(text.data(), end, v);
        if (text.empty() || (ec != std::errc() && ec != std::errc::result_out_of_range) || stop != end)
          return "'" + terminal_safe(text) + "' is not a whole number (" + range + ")";
        if (ec == std::errc::result_out_of_range || v < lo || v > hi) return text + " is outside " + range;
        return {};
      },
      "INT in " + range);
}

void check_name_arg(const std::string& argument, const std::string& value, std::size_t max_bytes) {
  if (auto why = utf8_problem(value)) throw BadValue(argument, "'" + terminal_safe(value) + "' " + *why);
  try {
    validate_name(value, "value", max_bytes);
  } catch (const Error& e) {
    throw BadValue(argument, e.message());
  }
}

ConnectOptions connect_options(ConnectOptions o) {
  o.connect_timeout = duration_flag("--connect-timeout", global().connect_timeout,
                                    {std::chrono::milliseconds(1), std::chrono::hours(1)});
  return o;
}

std::vector<std::string> db_uris() {
  std::vector<std::string> out;
  const std::string& all = global().db;
  for (std::size_t b = 0; b <= all.size();) {
    auto e = std::min(all.find('\n', b), all.size());
    out.push_back(all.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

const std::string& single_db() {
  if (global().db.find('\n') != std::string::npos)
    throw BadValue("--db", "given " + std::to_string(db_uris().size()) +
                               " times; only `sqlguard chaos` takes several (one per cluster node)");
  return global().db;
}

std::unique_ptr<Connection> open_db(ConnectOptions o) {
  return with_db_uri([&] { return make_connection(single_db(), connect_options(o)); });
}

std::string random_hex(std::size_t digits) {
  static const char* hex = "0123456789abcdef";
  std::random_device rd;
  std::string out;
  while (out.size() < digits) {
    auto r = static_cast<std::uint32_t>(rd());
    for (int i = 0; i < 8 && out.size() < digits; ++i, r >>= 4) out += hex[r & 15];
  }
  return out;
}

void print_json(const nlohmann::json& j) {
  std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
}

}  // namespace sqlguard::cli
