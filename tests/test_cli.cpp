// The command line itself (docs/cli.md): global flags before
// or after the subcommand, one JSON object per line for every outcome with
// --json, exit 2 for a bad command line or value, never an abort on bad
// bytes, and terminal-safe human output. Real processes of the real binary.
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"
#include "sqlguard/read_write_lease.h"
#include "sqlguard/semaphore.h"
#include "test_context.h"

using namespace std::chrono_literals;
using nlohmann::json;
using sgtest::ctx;

namespace {

struct Run {
  int rc = -1;
  std::string out;
};

Run cli(std::vector<std::string> args) {
  Run r;
  args.insert(args.begin(), sgtest::cli_path());
  r.rc = sgtest::run_process(args, &r.out);
  return r;
}

// Every line of `out` parsed as one JSON object (strictly: invalid UTF-8
// fails the parse); FAILs on anything else.
std::vector<json> json_lines(const std::string& out) {
  INFO("stdout: " << out);
  std::vector<json> lines;
  std::size_t start = 0;
  while (start < out.size()) {
    auto nl = out.find('\n', start);
    REQUIRE(nl != std::string::npos);  // every line ends with a newline
    json j;
    REQUIRE_NOTHROW(j = json::parse(out.substr(start, nl - start)));
    REQUIRE(j.is_object());
    lines.push_back(j);
    start = nl + 1;
  }
  return lines;
}

// A --json run that must end with exactly one usage error naming `argument`
// (when given): exit 2, one JSON object {"error": {"code": "usage", ...}}.
void check_usage_error(const Run& r, const std::string& argument = {}) {
  INFO("stdout: " << r.out);
  CHECK(r.rc == 2);
  auto lines = json_lines(r.out);
  REQUIRE(lines.size() == 1);
  const auto& e = lines[0]["error"];
  CHECK(e["code"] == "usage");
  CHECK_FALSE(e["message"].get<std::string>().empty());
  if (!argument.empty()) CHECK(e.value("argument", "") == argument);
}

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

TEST_CASE("global flags work before and after the subcommand, nested subcommands included", "[cli]") {
  const std::string& db = ctx().uri;
  SECTION("migrate") {
    auto fresh = ctx().fresh_database();
    auto after = cli({"migrate", "--db", fresh, "--json"});
    REQUIRE(after.rc == 0);
    CHECK_FALSE(json_lines(after.out).at(0)["applied"].empty());
    auto before = cli({"--json", "--db", fresh, "migrate", "--status"});
    REQUIRE(before.rc == 0);
    CHECK(json_lines(before.out).at(0)["dialect"] == ctx().name);
    auto text = cli({"migrate", "--status", "--connect-timeout", "5s", "--db", fresh});
    CHECK(text.rc == 0);
    // Aligned columns (issue 39): every state starts at the same column.
    std::istringstream rows(text.out);
    std::set<std::size_t> state_columns;
    for (std::string row; std::getline(rows, row);)
      if (row.find("applied") != std::string::npos) state_columns.insert(row.find("applied"));
    CHECK(state_columns.size() == 1);
  }
  SECTION("lock acquire and lock list") {
    auto name = ctx().unique("flags");
    auto acquired = cli({"lock", "acquire", name, "--owner", "op-1", "--json", "--db", db, "--connect-timeout", "5s"});
    REQUIRE(acquired.rc == 0);
    CHECK(json_lines(acquired.out).at(0)["acquired"] == true);
    auto busy = cli({"--db", db, "lock", "acquire", "--json", name, "--owner", "op-2"});
    CHECK(busy.rc == 75);
    CHECK(json_lines(busy.out).at(0)["holder"] == "op-1");
    for (const auto& argv : std::vector<std::vector<std::string>>{{"--json", "--db", db, "lock", "list"},
                                                                  {"lock", "list", "--json", "--db", db},
                                                                  {"lock", "--json", "list", "--db", db},
                                                                  {"--db", db, "lock", "list", "--all", "--json"}}) {
      auto r = cli(argv);
      REQUIRE(r.rc == 0);
      bool found = false;
      for (const auto& row : json_lines(r.out)) found |= row["name"] == name;
      CHECK(found);
    }
    auto text = cli({"lock", "list", "--db", db});
    REQUIRE(text.rc == 0);
    CHECK(text.out.find(name) != std::string::npos);
    CHECK(cli({"lock", "release", name, "--db", db, "--owner", "op-1"}).rc == 0);
  }
  SECTION("bench --emit-sql") {
    auto after = cli({"bench", "--emit-sql", "--ops", "lease-distinct", "--db", db, "--json"});
    REQUIRE(after.rc == 0);
    auto lines = json_lines(after.out);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0]["op"] == "lease-distinct");
    CHECK(lines[0]["dialect"] == ctx().name);
    CHECK_FALSE(lines[0]["statements"].empty());
    auto before = cli({"--db", db, "bench", "--emit-sql", "--ops", "lease-distinct"});
    REQUIRE(before.rc == 0);
    CHECK(before.out.find("-- op: lease-distinct") != std::string::npos);
  }
}

TEST_CASE("with --json every usage error is one JSON object on stdout and exits 2", "[cli]") {
  const std::string& db = ctx().uri;
  check_usage_error(cli({"--json"}));
  check_usage_error(cli({"--json", "no-such-command"}));
  check_usage_error(cli({"lock", "--json"}));
  check_usage_error(cli({"lock", "frobnicate", "--json"}));
  check_usage_error(cli({"--json", "lock", "acquire"}));  // NAME missing
  check_usage_error(cli({"--json", "lock", "acquire", "x", "--frobnicate"}));
  check_usage_error(cli({"--json", "lock", "acquire", "x", "--ttl"}));           // value missing
  check_usage_error(cli({"lock", "acquire", "x", "--ttl", "--json"}), "--ttl");  // --json taken as the value
  check_usage_error(cli({"--json", "lock", "acquire", "x", "y"}));               // one NAME too many
  check_usage_error(cli({"--json", "--db", db, "lock", "release", "x"}), "--owner");
  check_usage_error(cli({"--json", "--db", db, "lock", "renew", "x"}));  // --owner is required
  check_usage_error(cli({"--json", "--db", db, "lock", "acquire", "", "--ttl", "1s"}), "NAME");
  check_usage_error(cli({"--json", "--db", db, "lock", "acquire", std::string(256, 'n')}), "NAME");
  check_usage_error(cli({"--json", "--db", db, "bench", "--ops", "no-such-op"}), "--ops");
  check_usage_error(cli({"--json", "--db", db, "bench", "--scale-clients", "0"}));
  check_usage_error(cli({"--json", "--db", db, "demo", "flash-sale", "--workers", "0"}));
  check_usage_error(cli({"--json", "--db", db, "--db", db, "lock", "list"}));  // --db given twice
  SECTION("--help with --json is one JSON object with the help text, exit 0") {
    for (const auto& argv :
         std::vector<std::vector<std::string>>{{"--json", "--help"}, {"lock", "acquire", "--json", "-h"}}) {
      auto r = cli(argv);
      CHECK(r.rc == 0);
      auto lines = json_lines(r.out);
      REQUIRE(lines.size() == 1);
      CHECK_THAT(lines[0]["help"].get<std::string>(), Catch::Matchers::Contains("--db"));
    }
    auto text = cli({"lock", "acquire", "--help"});
    CHECK(text.rc == 0);
    CHECK_THAT(text.out, Catch::Matchers::Contains("before or after the subcommand"));
  }
}

TEST_CASE("arguments that are not valid UTF-8 exit 2 with valid JSON and never abort", "[cli]") {
  const std::string& db = ctx().uri;
  // Each class of bad bytes: stray bytes, truncated, overlong, a UTF-16
  // surrogate, above U+10FFFF, a 5-byte lead.
  const std::vector<std::string> bad = {"\xff\xfe",       "lk-\xe2\x82",      "\xc0\xaf",
                                        "a\xed\xa0\x80z", "\xf4\x90\x80\x80", "\xf8\x88\x80\x80\x80"};
  for (const auto& b : bad) {
    INFO("bytes: " << Catch::Detail::stringify(b));
    check_usage_error(cli({"--json", "--db", db, "lock", "acquire", b}), "NAME");
    check_usage_error(cli({"--db", db, "lock", "acquire", "x", "--owner", b, "--json"}), "--owner");
    check_usage_error(cli({"--db", db, "lock", "renew", b, "--owner", "o", "--json"}), "NAME");
    check_usage_error(cli({"--db", db, "lock", "release", "x", "--owner", b, "--json"}), "--owner");
    check_usage_error(cli({"--json", b}));  // as a command
    check_usage_error(cli({"--json", "--db", db, "lock", "acquire", "x", "--ttl", b}), "--ttl");
    check_usage_error(cli({"--json", "--db", db, "lock", "list", b}));  // as an extra argument
    CHECK(cli({"--db", db, "lock", "acquire", b}).rc == 2);             // human output: no abort either
  }
  // And lock list --json stays valid JSON afterwards.
  auto list = cli({"--json", "--db", db, "lock", "list", "--all"});
  REQUIRE(list.rc == 0);
  json_lines(list.out);
}

TEST_CASE("lock list escapes control characters in names and holders in human output", "[cli]") {
  const std::string& db = ctx().uri;
  const std::string forged = "FAKE-ROW-" + ctx().run_id;
  const std::string name = ctx().unique("evil") + "\n" + forged + " 1 2\x1b[31m\x7f\xc2\x9b";
  const std::string owner = "own\x1b]0;title\x07\r";
  // Whatever the library lets in today: the CLI takes a lease under the
  // name, or refuses it cleanly (exit 1 or 2, one JSON error).
  auto taken = cli({"--json", "--db", db, "lock", "acquire", name + "-cli", "--owner", owner});
  INFO("acquire stdout: " << taken.out);
  CHECK((taken.rc == 0 || taken.rc == 1 || taken.rc == 2));
  auto taken_lines = json_lines(taken.out);
  REQUIRE(taken_lines.size() == 1);
  if (taken.rc == 0)
    CHECK(taken_lines[0]["name"] == name + "-cli");
  else
    CHECK(taken_lines[0].contains("error"));
  // A row written by anything else (an older version, another client):
  // list must stay safe whatever the table holds.
  sgtest::exec(
      "INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at) "
      "VALUES (?, ?, 1, ?, 0, 0, 0)",
      {name, owner, now_ms() + 600'000});

  auto text = cli({"--db", db, "lock", "list"});
  REQUIRE(text.rc == 0);
  INFO("list: " << text.out);
  CHECK(text.out.find('\x1b') == std::string::npos);
  CHECK(text.out.find('\x07') == std::string::npos);
  CHECK(text.out.find('\r') == std::string::npos);
  CHECK(text.out.find('\x7f') == std::string::npos);
  CHECK(text.out.find("\xc2\x9b") == std::string::npos);     // C1 CSI
  CHECK(text.out.find("\n" + forged) == std::string::npos);  // no forged row
  const std::string escaped = "\\n" + forged + " 1 2\\x1b[31m\\x7f\\u009b";
  CHECK(text.out.find(escaped) != std::string::npos);
  CHECK(text.out.find("own\\x1b]0;title\\x07\\r") != std::string::npos);

  auto js = cli({"--db", db, "lock", "list", "--json"});
  REQUIRE(js.rc == 0);
  bool exact = false;
  for (const auto& row : json_lines(js.out)) exact |= row["name"] == name && row["owner"] == owner;
  CHECK(exact);  // JSON keeps the exact bytes
}

TEST_CASE("every duration flag is range-checked: out of range or malformed exits 2 at once", "[cli]") {
  const std::string& db = ctx().uri;
  auto t0 = std::chrono::steady_clock::now();
  check_usage_error(cli({"--json", "--db", db, "lock", "acquire", "x", "--wait", "200000d"}), "--wait");
  check_usage_error(cli({"--json", "--db", db, "lock", "acquire", "x", "--wait", "soon"}), "--wait");
  check_usage_error(cli({"--json", "--db", db, "lock", "acquire", "x", "--ttl", "0s"}), "--ttl");
  check_usage_error(cli({"--json", "--db", db, "lock", "acquire", "x", "--ttl", "8d"}), "--ttl");
  check_usage_error(cli({"--json", "--db", db, "lock", "acquire", "x", "--ttl", "-1s"}), "--ttl");
  check_usage_error(cli({"--json", "--db", db, "lock", "acquire", "x", "--ttl", "99999999999999999999d"}), "--ttl");
  check_usage_error(cli({"--json", "--db", db, "lock", "acquire", "x", "--ttl", "1s", "--min-hold", "2s"}),
                    "--min-hold");
  check_usage_error(cli({"--json", "--db", db, "lock", "renew", "x", "--owner", "o", "--ttl", "1ms"}), "--ttl");
  check_usage_error(cli({"--json", "--db", db, "--connect-timeout", "2h", "lock", "list"}), "--connect-timeout");
  check_usage_error(cli({"--json", "--db", db, "lock", "list", "--connect-timeout", "-5s"}), "--connect-timeout");
  check_usage_error(cli({"--json", "--db", db, "bench", "--duration", "10ms"}), "--duration");
  check_usage_error(cli({"--json", "--db", db, "bench", "--hold", "2s"}), "--hold");
  check_usage_error(cli({"--json", "--db", db, "chaos", "--ttl", "5ms"}), "--ttl");
  CHECK(cli({"--db", db, "run", "--lock", "x", "--wait", "200000d", "--", "/bin/true"}).rc == 2);
  CHECK(std::chrono::steady_clock::now() - t0 < 60s);  // refused up front, nothing waited
}

TEST_CASE("lock renew and release with --fence act only on that acquisition, even when the owner string is reused",
          "[cli][lease]") {
  const auto name = ctx().unique("fenced_cli");
  const std::string owner = "host-a";  // a reused owner string (a host name): the case --fence exists for
  auto a = cli({"--db", ctx().uri, "--json", "lock", "acquire", name, "--owner", owner, "--ttl", "200ms"});
  REQUIRE(a.rc == 0);
  const auto old_fence = json_lines(a.out).at(0)["fence"].get<std::int64_t>();
  std::this_thread::sleep_for(300ms);  // ran out on the database clock: a later process's first look starts the watch
  REQUIRE(cli({"--db", ctx().uri, "--json", "lock", "acquire", name, "--owner", owner, "--ttl", "30s"}).rc == 75);
  std::this_thread::sleep_for(300ms);  // unrenewed for its ttl since that look: the same owner string acquires again
  auto b = cli({"--db", ctx().uri, "--json", "lock", "acquire", name, "--owner", owner, "--ttl", "30s"});
  REQUIRE(b.rc == 0);
  const auto new_fence = json_lines(b.out).at(0)["fence"].get<std::int64_t>();
  REQUIRE(new_fence > old_fence);
  // The stale holder's late renew / release carries its old fence: refused (exit 3), nothing freed.
  auto stale_renew = cli({"--db", ctx().uri, "lock", "renew", name, "--owner", owner, "--fence",
                          std::to_string(old_fence)});
  CHECK(stale_renew.rc == 3);
  auto stale = cli({"--db", ctx().uri, "lock", "release", name, "--owner", owner, "--fence", std::to_string(old_fence)});
  CHECK(stale.rc == 3);
  auto conn = ctx().connect();
  auto info = lease_info(*conn, name);
  REQUIRE(info);
  CHECK(info->held());
  CHECK(info->fence == new_fence);
  // The current holder's fence works.
  CHECK(cli({"--db", ctx().uri, "lock", "renew", name, "--owner", owner, "--fence", std::to_string(new_fence)}).rc == 0);
  CHECK(cli({"--db", ctx().uri, "lock", "release", name, "--owner", owner, "--fence", std::to_string(new_fence)}).rc ==
        0);
  CHECK_FALSE(lease_info(*conn, name)->held());
  // --fence needs --owner and excludes --force; a non-positive fence is a bad command line.
  CHECK(cli({"--db", ctx().uri, "lock", "release", name, "--fence", "5"}).rc == 2);
  CHECK(cli({"--db", ctx().uri, "lock", "release", name, "--owner", owner, "--fence", "0"}).rc == 2);
}

TEST_CASE("cleanup refuses out-of-range batches and periods as a bad command line", "[cli]") {
  CHECK(cli({"--db", ctx().uri, "cleanup", "--batch", "0"}).rc == 2);
  CHECK(cli({"--db", ctx().uri, "cleanup", "--batch", "100001"}).rc == 2);
  CHECK(cli({"--db", ctx().uri, "cleanup", "--every", "5ms"}).rc == 2);
  CHECK(cli({"--db", ctx().uri, "cleanup", "--pause", "11m"}).rc == 2);
  auto ok = cli({"--db", ctx().uri, "--json", "cleanup", "--batch", "500"});
  CHECK(ok.rc == 0);
  CHECK(json_lines(ok.out).at(0).contains("locks_deleted"));
}

TEST_CASE("lock list escapes bidi controls and zero-width characters, so no name can pass for another", "[cli]") {
  const std::string& db = ctx().uri;
  const std::string base = ctx().unique("bidi");
  // U+202E RIGHT-TO-LEFT OVERRIDE, U+200B ZERO WIDTH SPACE, U+2066 LEFT-TO-RIGHT
  // ISOLATE, U+FEFF ZERO WIDTH NO-BREAK SPACE: each invisible or reordering.
  const std::string rlo = base + "\xe2\x80\xae" "evil";
  const std::string zw = base + "\xe2\x80\x8b" "x\xe2\x81\xa6" "y\xef\xbb\xbf";
  for (const auto& n : {rlo, zw}) REQUIRE(cli({"--db", db, "lock", "acquire", n, "--owner", "o"}).rc == 0);
  auto text = cli({"--db", db, "lock", "list"});
  REQUIRE(text.rc == 0);
  INFO("list: " << text.out);
  for (const char* raw : {"\xe2\x80\xae", "\xe2\x80\x8b", "\xe2\x81\xa6", "\xef\xbb\xbf"})
    CHECK(text.out.find(raw) == std::string::npos);
  CHECK(text.out.find(base + "\\u202eevil") != std::string::npos);
  CHECK(text.out.find(base + "\\u200bx\\u2066y\\ufeff") != std::string::npos);
  // Printable non-ASCII stays as it is (negative control: not everything is escaped).
  const std::string letters = base + "-\xc3\xa9t\xc3\xa9";  // "été"
  REQUIRE(cli({"--db", db, "lock", "acquire", letters, "--owner", "o"}).rc == 0);
  CHECK(cli({"--db", db, "lock", "list"}).out.find(letters) != std::string::npos);
  // --json keeps the exact bytes.
  bool exact = false;
  for (const auto& row : json_lines(cli({"--db", db, "lock", "list", "--json"}).out)) exact |= row["name"] == rlo;
  CHECK(exact);
  for (const auto& n : {rlo, zw, letters}) cli({"--db", db, "lock", "release", n, "--force"});
}

namespace {

// A --json usage error (exit 2, one JSON object) whose message contains each of `parts`.
void check_usage_message(const Run& r, const std::vector<std::string>& parts, const std::string& argument = {}) {
  check_usage_error(r, argument);
  auto lines = json_lines(r.out);
  REQUIRE(lines.size() == 1);
  const auto message = lines[0]["error"].value("message", "");
  for (const auto& p : parts) CHECK_THAT(message, Catch::Matchers::Contains(p));
}

}  // namespace

TEST_CASE("an integer flag that is not a whole number says so, with the flag and its range", "[cli]") {
  const std::string& db = ctx().uri;
  // Issue 39: CLI11's own check said "Value abc not in range".
  check_usage_message(cli({"--json", "--db", db, "cleanup", "--batch", "abc"}),
                      {"--batch", "'abc' is not a whole number (1..100000)"});
  check_usage_message(cli({"--json", "--db", db, "cleanup", "--batch", "100001"}), {"--batch", "100001 is outside 1..100000"});
  check_usage_message(cli({"--json", "--db", db, "cleanup", "--batch", "12abc"}), {"'12abc' is not a whole number"});
  check_usage_message(cli({"--json", "--db", db, "lock", "release", "x", "--owner", "o", "--fence", "1.5"}),
                      {"--fence", "'1.5' is not a whole number"});
  check_usage_message(cli({"--json", "--db", db, "lock", "release", "x", "--owner", "o", "--fence", "99999999999999999999"}),
                      {"--fence", "is outside 1.."});
  // In range: accepted (negative control of the check itself).
  CHECK(cli({"--db", db, "cleanup", "--batch", "100000"}).rc == 0);
}

TEST_CASE("an unknown command or flag is named with the closest valid one", "[cli]") {
  check_usage_message(cli({"--json", "migrat"}), {"unknown command 'migrat'", "did you mean 'migrate'?"}, "migrat");
  check_usage_message(cli({"--json", "lock", "aquire", "x"}),
                      {"unknown command 'lock aquire'", "did you mean 'lock acquire'?"}, "aquire");
  check_usage_message(cli({"--json", "demo", "flash-sal"}), {"did you mean 'demo flash-sale'?"});
  check_usage_message(cli({"--json", "lock", "acquire", "x", "--tll", "5s"}),
                      {"unknown flag '--tll'", "did you mean '--ttl'?"}, "--tll");
  // Nothing close: the valid commands are listed.
  check_usage_message(cli({"--json", "zzzzzzzz"}), {"unknown command 'zzzzzzzz'", "'migrate'", "'lock'"});
  // A command that needs a subcommand lists them (CLI11 said "A subcommand is required").
  check_usage_message(cli({"--json", "lock"}), {"'lock' needs a subcommand", "'acquire'", "'list'"});
  // Human output names it too.
  auto text = cli({"migrat"});
  CHECK(text.rc == 2);
  CHECK(text.out.empty());
}

TEST_CASE("a flag given to the wrong command says which command takes it", "[cli]") {
  check_usage_message(cli({"--json", "migrate", "--ttl", "5s"}),
                      {"'--ttl' is not a flag of 'migrate'", "'lock acquire'", "'run'"}, "--ttl");
  check_usage_message(cli({"--json", "lock", "list", "--status"}), {"it belongs to 'migrate'"}, "--status");
  check_usage_message(cli({"--json", "lock", "acquire", "x", "--every", "5s"}), {"it belongs to 'cleanup'"});
}

TEST_CASE("a misplaced value gets a hint", "[cli]") {
  // The value before its flag: "not expected: 5s --ttl" before.
  check_usage_message(cli({"--json", "lock", "acquire", "x", "5s", "--ttl"}),
                      {"'5s' is not expected here", "'lock acquire' takes 'NAME' once", "'--ttl 5s'"}, "5s");
  // A value after a switch.
  check_usage_message(cli({"--json", "lock", "list", "--all", "5"}), {"'--all' is a switch and takes no value"}, "5");
}

TEST_CASE("a URI typed where a flag belongs is quoted with its password masked, on stderr and in JSON", "[cli][uri]") {
  // Before: "'mysql://u:Sekr1t@h/db' is not expected here" printed the password.
  const std::string typed = "postgresql://app:Sekr1tPw@db.example:5432/app";
  auto json = cli({"--json", "migrate", typed});
  check_usage_message(json, {"is not expected here", "postgresql://***@db.example:5432/app"});
  CHECK_THAT(json.out, !Catch::Matchers::Contains("Sekr1tPw"));
  // stderr, human form (through sh to capture it).
  std::string err;
  const int rc = sgtest::run_process({"/bin/sh", "-c", "\"$0\" migrate \"$1\" 2>&1", sgtest::cli_path(), typed}, &err);
  CHECK(rc == 2);
  CHECK_THAT(err, Catch::Matchers::Contains("postgresql://***@db.example"));
  CHECK_THAT(err, !Catch::Matchers::Contains("Sekr1tPw"));
}

TEST_CASE("--version prints the version and the dialects built in; --help lists the exit codes", "[cli]") {
  auto text = cli({"--version"});
  CHECK(text.rc == 0);
  CHECK_THAT(text.out, Catch::Matchers::StartsWith("sqlguard "));
  CHECK_THAT(text.out, Catch::Matchers::Contains("dialects:"));
  CHECK_THAT(text.out, Catch::Matchers::Contains(ctx().name));  // the dialect under test is built in
  auto js = cli({"--json", "--version"});
  CHECK(js.rc == 0);
  auto lines = json_lines(js.out);
  REQUIRE(lines.size() == 1);
  CHECK_FALSE(lines[0]["version"].get<std::string>().empty());
  bool has = false;
  for (const auto& d : lines[0]["dialects"]) has |= d == ctx().name;
  CHECK(has);
  for (const auto& argv : std::vector<std::vector<std::string>>{{"--help"}, {"lock", "acquire", "--help"}}) {
    auto help = cli(argv);
    CHECK(help.rc == 0);
    CHECK_THAT(help.out, Catch::Matchers::Contains("Exit codes:"));
    for (const char* code : {"  0 ", "  1 ", "  2 ", "  3 ", "  4 ", "  5 ", "  75 "})
      CHECK_THAT(help.out, Catch::Matchers::Contains(code));
  }
}

TEST_CASE("a malformed --db is a bad command line: exit 2, for every command", "[cli]") {
  for (const auto& cmd : std::vector<std::vector<std::string>>{{"lock", "list"},
                                                               {"migrate"},
                                                               {"migrate", "--status"},
                                                               {"doctor"},
                                                               {"lock", "acquire", "x"},
                                                               {"run", "--lock", "x", "--", "/bin/true"}}) {
    for (const std::string bad : {"bogus://x", "sqlite://rel.db?mode=ro"}) {
      std::vector<std::string> argv = {"--json", "--db", bad};  // before: `run` passes what follows -- to CMD
      argv.insert(argv.end(), cmd.begin(), cmd.end());
      INFO("argv: " << Catch::Detail::stringify(argv));
      check_usage_error(cli(argv), "--db");
    }
  }
}

TEST_CASE("only migrate creates a database: every other command fails on a missing one and creates nothing", "[cli]") {
  if (ctx().name != "sqlite") return;  // servers never create a database
  const std::string path = "/tmp/sqlguard-cli-missing-" + ctx().run_id + ".db";
  const std::string uri = "sqlite://" + path;
  // Issue 39: `run` on a mistyped path created the file before failing.
  for (const auto& cmd : std::vector<std::vector<std::string>>{{"doctor"},
                                                               {"lock", "list"},
                                                               {"migrate", "--status"},
                                                               {"lock", "acquire", "x"},
                                                               {"lock", "renew", "x", "--owner", "o"},
                                                               {"lock", "release", "x", "--owner", "o"},
                                                               {"lock", "resize", "x", "--permits", "2"},
                                                               {"cleanup"},
                                                               {"history", "x"},
                                                               {"history", "--enable", "x"},
                                                               {"verify"},
                                                               {"run", "--lock", "x", "--wait", "1s", "--", "/bin/true"},
                                                               {"run", "--lock", "x", "--permits", "2", "--wait", "1s", "--", "/bin/true"},
                                                               {"run", "--lock", "x", "--shared", "--wait", "1s", "--", "/bin/true"},
                                                               {"elect", "x", "--wait", "1s", "--", "/bin/true"}}) {
    auto argv = cmd;
    argv.insert(argv.begin(), {"--json", "--db", uri});  // before the command: after `--` they would be CMD's
    INFO("argv: " << Catch::Detail::stringify(argv));
    auto r = cli(argv);
    CHECK(r.rc == 1);
    CHECK_THAT(r.out, Catch::Matchers::Contains("does not exist"));
    CHECK(::access(path.c_str(), F_OK) != 0);  // not created
  }
  // migrate itself creates it, as before.
  CHECK(cli({"migrate", "--db", uri}).rc == 0);
  CHECK(::access(path.c_str(), F_OK) == 0);
  CHECK(cli({"doctor", "--db", uri}).rc == 0);
  for (const char* suffix : {"", "-wal", "-shm"}) ::unlink((path + suffix).c_str());
}

TEST_CASE("durations accept decimals and compound forms; a bare number is refused with the forms listed", "[cli]") {
  const std::string& db = ctx().uri;
  const auto name = ctx().unique("dur");
  auto a = cli({"--json", "--db", db, "lock", "acquire", name, "--owner", "o", "--ttl", "1h30m", "--wait", "1.5s"});
  REQUIRE(a.rc == 0);
  auto conn = ctx().connect();
  auto info = lease_info(*conn, name);
  REQUIRE(info);
  // 1h30m from the database clock, give or take the run's own time.
  CHECK(info->remaining_ms() > 90 * 60'000 - 60'000);
  CHECK(info->remaining_ms() <= 90 * 60'000);
  CHECK(cli({"--db", db, "lock", "renew", name, "--owner", "o", "--ttl", "2.5s"}).rc == 0);
  CHECK(lease_info(*conn, name)->remaining_ms() <= 2500);
  CHECK(cli({"--db", db, "lock", "release", name, "--owner", "o"}).rc == 0);
  check_usage_message(cli({"--json", "--db", db, "lock", "acquire", name, "--ttl", "5"}),
                      {"has no unit", "500ms", "1.5s", "1h30m"}, "--ttl");
  check_usage_message(cli({"--json", "--db", db, "lock", "acquire", name, "--wait", "0.5ms"}),
                      {"whole number of milliseconds"}, "--wait");
}

TEST_CASE("renew and release that find the lease not held say why, naming the fence when the fence differs", "[cli]") {
  const std::string& db = ctx().uri;
  const auto name = ctx().unique("why");
  auto a = cli({"--json", "--db", db, "lock", "acquire", name, "--owner", "host-a", "--ttl", "30s"});
  REQUIRE(a.rc == 0);
  const auto fence = json_lines(a.out).at(0)["fence"].get<std::int64_t>();
  const auto stale = std::to_string(fence - 1);
  // Same owner string, another fence: the fence is named, both of them.
  auto r = cli({"--json", "--db", db, "lock", "renew", name, "--owner", "host-a", "--fence", stale});
  CHECK(r.rc == 3);
  auto j = json_lines(r.out).at(0);
  CHECK(j["renewed"] == false);
  CHECK_THAT(j["reason"].get<std::string>(), Catch::Matchers::Contains("with fence " + std::to_string(fence) +
                                                                         ", not fence " + stale));
  CHECK(j["holder"]["fence"] == fence);
  auto text = cli({"--db", db, "lock", "renew", name, "--owner", "host-a", "--fence", stale});
  CHECK(text.rc == 3);
  auto rel = cli({"--json", "--db", db, "lock", "release", name, "--owner", "host-a", "--fence", stale});
  CHECK(rel.rc == 3);
  CHECK_THAT(json_lines(rel.out).at(0)["reason"].get<std::string>(), Catch::Matchers::Contains("not fence " + stale));
  // Another owner: the holder is named.
  auto other = cli({"--json", "--db", db, "lock", "renew", name, "--owner", "host-b"});
  CHECK(other.rc == 3);
  CHECK_THAT(json_lines(other.out).at(0)["reason"].get<std::string>(), Catch::Matchers::Contains("held by host-a"));
  CHECK(cli({"--db", db, "lock", "release", name, "--owner", "host-a"}).rc == 0);
  auto gone = cli({"--json", "--db", db, "lock", "renew", name, "--owner", "host-a"});
  CHECK(gone.rc == 3);
  CHECK_THAT(json_lines(gone.out).at(0)["reason"].get<std::string>(), Catch::Matchers::Contains("not held by anyone"));
}

TEST_CASE("run --json prints exactly one JSON object for every outcome, lock not acquired included", "[cli]") {
  const std::string& db = ctx().uri;
  const auto name = ctx().unique("runjson");
  REQUIRE(cli({"--db", db, "lock", "acquire", name, "--owner", "blocker", "--ttl", "30s"}).rc == 0);
  auto busy = cli({"--json", "--db", db, "run", "--lock", name, "--wait", "100ms", "--", "/bin/true"});
  CHECK(busy.rc == 75);
  auto lines = json_lines(busy.out);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["acquired"] == false);
  CHECK(lines[0]["lock"] == name);
  CHECK(lines[0]["exit_code"] == 75);
  // --conflict-exit-code (flock -E): the code of a skip; 0 makes it a success.
  auto skip = cli({"--json", "--db", db, "run", "--lock", name, "--conflict-exit-code", "0", "--", "/bin/false"});
  CHECK(skip.rc == 0);
  CHECK(json_lines(skip.out).at(0)["exit_code"] == 0);
  CHECK(cli({"--db", db, "run", "--lock", name, "--conflict-exit-code", "42", "--", "/bin/true"}).rc == 42);
  CHECK(cli({"--db", db, "run", "--lock", name, "--conflict-exit-code", "256", "--", "/bin/true"}).rc == 2);
  REQUIRE(cli({"--db", db, "lock", "release", name, "--force"}).rc == 0);
  auto ran = cli({"--json", "--db", db, "run", "--lock", name, "--", "/bin/sh", "-c", "exit 7"});
  CHECK(ran.rc == 7);
  lines = json_lines(ran.out);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["acquired"] == true);
  CHECK(lines[0]["exit_code"] == 7);
  CHECK(lines[0]["fence"].get<std::int64_t>() > 0);
}

TEST_CASE("run --lock a --lock b holds both leases all or none and gives CMD each fence", "[cli][lock-set]") {
  const std::string& db = ctx().uri;
  const auto a = ctx().unique("runset_a"), b = ctx().unique("runset_b");
  // Given in any order: held in byte order, each name with its own fence.
  auto ran = cli({"--json", "--db", db, "run", "--lock", b, "--lock", a, "--", "/bin/sh", "-c",
                  "test \"$SQLGUARD_LOCK_COUNT\" = 2 && test \"$SQLGUARD_LOCK_1\" = \"" + a +
                      "\" && test \"$SQLGUARD_LOCK_2\" = \"" + b +
                      "\" && test \"$SQLGUARD_FENCE\" = \"$SQLGUARD_FENCE_1\" && test \"$SQLGUARD_FENCE_1\" != "
                      "\"$SQLGUARD_FENCE_2\""});
  CHECK(ran.rc == 0);
  auto lines = json_lines(ran.out);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["acquired"] == true);
  CHECK(lines[0]["lock"] == a + "," + b);
  CHECK(lines[0]["fences"][a].get<std::int64_t>() > 0);
  CHECK(lines[0]["fences"][b].get<std::int64_t>() > 0);
  CHECK(lines[0]["fences"][a] != lines[0]["fences"][b]);
  // One name busy: CMD does not run and neither name is taken.
  REQUIRE(cli({"--db", db, "lock", "acquire", b, "--owner", "blocker", "--ttl", "30s"}).rc == 0);
  auto busy = cli({"--json", "--db", db, "run", "--lock", a, "--lock", b, "--wait", "100ms", "--", "/bin/false"});
  CHECK(busy.rc == 75);
  lines = json_lines(busy.out);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["acquired"] == false);
  CHECK(lines[0]["busy"] == b);
  CHECK(lines[0]["holder"]["owner"] == "blocker");
  CHECK(cli({"--db", db, "run", "--lock", a, "--", "/bin/true"}).rc == 0);  // a was left free
  REQUIRE(cli({"--db", db, "lock", "release", b, "--force"}).rc == 0);
  // Usage errors: a name twice, a set with another kind's flag.
  check_usage_error(cli({"--json", "--db", db, "run", "--lock", a, "--lock", a, "--", "/bin/true"}), "--lock");
  check_usage_error(cli({"--json", "--db", db, "run", "--lock", a, "--lock", b, "--permits", "2", "--", "/bin/true"}),
                    "--lock");
}

TEST_CASE("an authentication error keeps the user name and masks only the password", "[cli][uri]") {
  if (ctx().name == "sqlite") return;  // no credentials
  const std::string& uri = ctx().uri;
  const auto scheme_end = uri.find("://") + 3;
  const auto at = uri.rfind('@');
  REQUIRE(at != std::string::npos);
  const std::string user = uri.substr(scheme_end, uri.find(':', scheme_end) - scheme_end);
  const std::string wrong = uri.substr(0, scheme_end) + user + ":Wr0ngSecret" + uri.substr(at);
  auto r = cli({"--json", "--db", wrong, "--connect-timeout", "5s", "lock", "list"});
  CHECK(r.rc == 1);
  auto lines = json_lines(r.out);
  REQUIRE(lines.size() == 1);
  const auto e = lines[0]["error"];
  const auto message = e["message"].get<std::string>();
  CHECK_THAT(message, !Catch::Matchers::Contains("Wr0ngSecret"));
  if (ctx().pooler) {
    // PgBouncer 1.18 answers a failed login itself, with SQLSTATE 08P01 and
    // without the user (classified connection_lost; a known gap, see notes).
    CHECK(e["code"] == "connection_lost");
    return;
  }
  CHECK(e["code"] == "unauthenticated");
  // Quoted as the server quotes it: "user" (PostgreSQL), 'user' (MySQL).
  CHECK((message.find("\"" + user + "\"") != std::string::npos || message.find("'" + user + "'") != std::string::npos));
}

TEST_CASE("elect refuses an empty or 256-byte NAME and a missing CMD with exit 2 naming the argument, before it "
          "campaigns",
          "[cli][elect]") {
  const std::string& db = ctx().uri;
  char dir[] = "/tmp/sgtest-elect-XXXXXX";
  REQUIRE(mkdtemp(dir));
  const std::string marker = std::string(dir) + "/started";
  auto message_of = [](const Run& r) {
    auto lines = json_lines(r.out);
    return lines.empty() ? std::string() : lines[0]["error"].value("message", "");
  };
  auto empty = cli({"--json", "--db", db, "elect", "", "--", "/bin/sh", "-c", "touch " + marker});
  check_usage_error(empty, "NAME");
  CHECK_THAT(message_of(empty), Catch::Matchers::Contains("empty"));
  auto longer = cli({"--json", "--db", db, "elect", std::string(256, 'n'), "--", "/bin/sh", "-c", "touch " + marker});
  check_usage_error(longer, "NAME");
  CHECK_THAT(message_of(longer), Catch::Matchers::Contains("256 bytes"));
  auto no_cmd = cli({"--json", "--db", db, "elect", ctx().unique("elect")});
  check_usage_error(no_cmd);
  CHECK_THAT(message_of(no_cmd), Catch::Matchers::Contains("CMD"));
  check_usage_error(cli({"--json", "--db", db, "elect"}));
  check_usage_error(cli({"--json", "--db", db, "elect", "x", "--wait", "soon", "--", "/bin/true"}), "--wait");
  check_usage_error(cli({"--json", "--db", db, "elect", "x", "--ttl", "5ms", "--", "/bin/true"}), "--ttl");
  check_usage_error(cli({"--json", "--db", db, "elect", "x", "--candidate", std::string(250, 'c'), "--", "/bin/true"}),
                    "--candidate");
  check_usage_error(cli({"--json", "--db", db, "elect", "x", "--conflict-exit-code", "256", "--", "/bin/true"}));
  // run's --lock is checked the same way (it was blamed on --db before).
  check_usage_error(cli({"--json", "--db", db, "run", "--lock", "", "--", "/bin/sh", "-c", "touch " + marker}),
                    "--lock");
  CHECK_FALSE(std::filesystem::exists(marker));  // nothing ran
  std::filesystem::remove_all(dir);
}

TEST_CASE("elect --json prints exactly one JSON object with the term, and returns CMD's status", "[cli][elect]") {
  const std::string& db = ctx().uri;
  const auto election = ctx().unique("electjson");
  auto r = cli({"--json", "--db", db, "elect", election, "--", "/bin/sh", "-c", "echo $SQLGUARD_TERM >&2; exit 7"});
  CHECK(r.rc == 7);
  auto lines = json_lines(r.out);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["election"] == election);
  CHECK(lines[0]["elected"] == true);
  CHECK(lines[0]["lost"] == false);
  CHECK(lines[0]["exit_code"] == 7);
  const auto term = lines[0]["term"].get<std::int64_t>();
  CHECK(term > 0);
  CHECK_FALSE(lines[0]["owner"].get<std::string>().empty());
  // Resigned: the lease is free, and the next leader's term is larger.
  auto again = cli({"--json", "--db", db, "elect", election, "--wait", "0s", "--", "/bin/true"});
  CHECK(again.rc == 0);
  CHECK(json_lines(again.out).at(0)["term"].get<std::int64_t>() > term);
}

TEST_CASE("lock list shows semaphore and read-write lease holdings beside leases", "[cli][semaphore]") {
  using namespace sqlguard;
  auto client = LockClient::create(ctx().uri);
  const std::string sem = ctx().unique("listsem"), rw = ctx().unique("listrw");
  Semaphore s(client, sem, 3);
  ReadWriteLease r(client, rw);
  REQUIRE(s.try_acquire(2));
  REQUIRE(r.try_acquire(LeaseMode::kShared));
  std::string out;
  REQUIRE(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "--json", "lock", "list"}, &out) == 0);
  bool saw_sem = false, saw_rw = false;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j["name"] == sem) {
      saw_sem = true;
      CHECK(j["kind"] == "semaphore");
      CHECK(j["mode"] == "permits");
      CHECK(j["permits"] == 2);
      CHECK(j["fence"] == s.fence());
      CHECK(j["owner"] == s.owner());
    }
    if (j["name"] == rw) {
      saw_rw = true;
      CHECK(j["kind"] == "rw");
      CHECK(j["mode"] == "shared");
    }
  }
  CHECK(saw_sem);
  CHECK(saw_rw);
  CHECK(s.release());
  CHECK(r.release());
  // Released holdings are not listed (negative control for the two above).
  out.clear();
  REQUIRE(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "--json", "lock", "list"}, &out) == 0);
  CHECK(out.find(sem) == std::string::npos);
}

namespace {
// A CLI run with its stderr apart from its stdout.
struct RunErr {
  int rc = -1;
  std::string out, err;
};
RunErr cli_apart(const std::vector<std::string>& args) {
  const std::string err_file = "/tmp/sgtest-cli-stderr-" + ctx().unique("e");
  std::vector<std::string> argv = {"/bin/sh", "-c", "f=$1; shift; exec \"$@\" 2>\"$f\"", "sh", err_file,
                                   sgtest::cli_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  RunErr r;
  r.rc = sgtest::run_process(argv, &r.out);
  std::ifstream in(err_file);
  std::stringstream s;
  s << in.rdbuf();
  r.err = s.str();
  std::remove(err_file.c_str());
  return r;
}
}  // namespace

TEST_CASE("a run that does not get its lock names who holds it, and lock list shows time left for people", "[cli]") {
  const std::string& db = ctx().uri;
  const auto name = ctx().unique("holder");
  REQUIRE(cli({"--db", db, "lock", "acquire", name, "--owner", "blocker", "--ttl", "30s"}).rc == 0);
  // Issue 39: cli.md promised `holder`; the run said only "not acquired".
  auto text = cli_apart({"--db", db, "run", "--lock", name, "--wait", "50ms", "--", "/bin/true"});
  CHECK(text.rc == 75);
  CHECK_THAT(text.err, Catch::Matchers::Contains("held by blocker (fence "));
  CHECK_THAT(text.err, Catch::Matchers::Contains("for another "));
  // ...and how long until a take-over (issue 38): the rest of the watch its try started.
  CHECK_THAT(text.err, Catch::Matchers::Matches("(.|\n)*for another [0-9]+\\.[0-9]s; a take-over needs its row "
                                                "unchanged (.|\n)* a try in [0-9]+\\.[0-9]s takes it over(.|\n)*"));
  auto js = cli_apart({"--json", "--db", db, "run", "--lock", name, "--wait", "50ms", "--", "/bin/true"});
  CHECK(js.rc == 75);
  auto lines = json_lines(js.out);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["holder"]["owner"] == "blocker");
  CHECK(lines[0]["holder"]["fence"].get<std::int64_t>() > 0);
  CHECK(lines[0]["holders"].size() == 1);
  // REMAINING in seconds with a tenth, not "29873ms".
  auto list = cli({"--db", db, "lock", "list"});
  bool seen = false;
  std::istringstream rows(list.out);
  for (std::string row; std::getline(rows, row);)
    if (row.rfind(name, 0) == 0) {
      seen = true;
      CHECK_THAT(row, Catch::Matchers::Matches(".* [0-9]+\\.[0-9]s"));
    }
  CHECK(seen);
  REQUIRE(cli({"--db", db, "lock", "release", name, "--force"}).rc == 0);
  // Nobody holds it: no holder (negative control), and the run goes ahead.
  auto free_run = cli({"--json", "--db", db, "run", "--lock", name, "--", "/bin/true"});
  CHECK(free_run.rc == 0);
  // A semaphore's holders are its holdings.
  const auto sem = ctx().unique("holder-sem");
  auto client = sqlguard::LockClient::create(db);
  sqlguard::Semaphore held(client, sem, 1);
  REQUIRE(held.try_acquire());
  auto busy = cli_apart({"--json", "--db", db, "run", "--lock", sem, "--permits", "1", "--wait", "50ms", "--", "/bin/true"});
  CHECK(busy.rc == 75);
  auto sl = json_lines(busy.out);
  REQUIRE(sl.size() == 1);
  REQUIRE(sl[0]["holders"].size() == 1);
  CHECK(sl[0]["holders"][0]["owner"] == held.owner());
  CHECK(sl[0]["holders"][0]["mode"] == "permits");
  held.release();
}

TEST_CASE("lock list --json with nothing to list prints one object with an empty list", "[cli]") {
  const std::string fresh = ctx().fresh_database();
  REQUIRE(cli({"migrate", "--db", fresh}).rc == 0);
  for (const auto& argv : std::vector<std::vector<std::string>>{{"--json", "--db", fresh, "lock", "list"},
                                                                {"--json", "--db", fresh, "lock", "list", "--all"}}) {
    INFO("argv: " << Catch::Detail::stringify(argv));
    auto r = cli(argv);
    CHECK(r.rc == 0);
    auto lines = json_lines(r.out);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0] == json::parse(R"({"locks":[]})"));
  }
}

TEST_CASE("under --json an error or a refusal is one JSON object on stdout and nothing on stderr", "[cli]") {
  const std::string& db = ctx().uri;
  const std::string name = ctx().unique("jsonerr");
  REQUIRE(cli({"--db", db, "lock", "acquire", name, "--owner", "holder", "--ttl", "1m"}).rc == 0);
  const std::string missing = "sqlite:///tmp/sqlguard-cli-missing-" + ctx().unique("m") + ".db";
  struct Case {
    std::vector<std::string> argv;
    int rc;
  };
  const std::vector<Case> cases = {
      {{"--json", "--db", db, "lock", "acquire", name, "--ttl", "nonsense"}, 2},            // usage error
      {{"--json", "--db", db, "lock", "frobnicate"}, 2},                                    // unknown command
      {{"--json", "--db", missing, "lock", "list"}, 1},                                     // error
      {{"--json", "--db", missing, "doctor"}, 1},                                           // failed checks
      {{"--json", "--db", db, "lock", "acquire", name, "--owner", "other"}, 75},             // not acquired
      {{"--json", "--db", db, "lock", "release", name, "--owner", "other"}, 3},              // not held
      {{"--json", "--db", db, "run", "--lock", name, "--wait", "0s", "--", "true"}, 75},     // run: not acquired
  };
  for (const auto& c : cases) {
    INFO("argv: " << Catch::Detail::stringify(c.argv));
    auto r = cli_apart(c.argv);
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.rc == c.rc);
    CHECK(r.err.empty());
    CHECK_FALSE(json_lines(r.out).empty());
    // An error is an {"error": ...} object (doctor's failed check is its own line).
    if ((c.rc == 1 || c.rc == 2) && c.argv.back() != "doctor") CHECK(json_lines(r.out).at(0).contains("error"));
  }
  // Without --json the same error is text on stderr, as before.
  auto text = cli_apart({"--db", missing, "lock", "list"});
  CHECK(text.rc == 1);
  CHECK_THAT(text.err, Catch::Matchers::Contains("sqlguard: error:"));
  CHECK(cli({"--db", db, "lock", "release", name, "--force"}).rc == 0);
}

TEST_CASE("history and verify: a name's record, a clean verify (exit 0), a forged overlap (exit 4), bad usage (exit 2)",
          "[cli][history]") {
  const std::string prefix = ctx().unique("clihist") + ":", name = prefix + "job";
  const std::string db = ctx().uri;
  REQUIRE(cli({"--db", db, "history", "--enable", prefix, "--retain", "1h"}).rc == 0);
  REQUIRE(cli({"--db", db, "lock", "acquire", name, "--owner", "a", "--ttl", "5s"}).rc == 0);
  {
    // Held: the record has its grant, and the name's row says it is held now.
    auto held = cli({"--json", "--db", db, "history", name});
    auto hl = json_lines(held.out);
    REQUIRE(hl.size() == 2);
    CHECK(hl[0]["event"] == "grant");
    CHECK(hl[1]["now"]["held"] == true);
    CHECK(hl[1]["now"]["owner"] == "a");
  }
  REQUIRE(cli({"--db", db, "lock", "release", name, "--owner", "a"}).rc == 0);
  {
    // Released, not yet recorded (its row is not written again yet): the now line says so.
    auto released = cli({"--db", db, "history", name});
    CHECK_THAT(released.out, Catch::Matchers::Contains("now: released (fence") &&
                                 Catch::Matchers::Contains("recorded with the next grant or cleanup's purge"));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(cli({"--db", db, "cleanup", "--grace", "0ms"}).rc == 0);  // the release goes in with its row's purge
  auto h = cli({"--json", "--db", db, "history", name});
  REQUIRE(h.rc == 0);
  auto lines = json_lines(h.out);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0]["event"] == "grant");
  CHECK(lines[0]["owner"] == "a");
  CHECK(lines[1]["event"] == "release");
  CHECK(lines[0]["fence"] == lines[1]["fence"]);
  auto scopes = cli({"--json", "--db", db, "history", "--scopes"});
  CHECK(scopes.out.find("\"prefix\":\"" + prefix + "\"") != std::string::npos);
  auto v = cli({"--json", "--db", db, "verify", "--name", prefix});
  CHECK(v.rc == 0);
  auto vj = json_lines(v.out);
  REQUIRE(vj.size() == 1);
  CHECK(vj[0]["ok"] == true);
  CHECK(vj[0]["grants"] == 1);
  // A take-over forged a second into the holder's lease: verify names it and exits 4.
  auto c = ctx().connect();
  const auto now = c->db_now_ms();
  c->execute("INSERT INTO sqlguard_history (name, at_ms, event, kind, mode, slot, owner, fence, permits, capacity, until_ms, "
             "prev_owner, prev_fence, prev_until_ms, prev_ttl_ms, keep_until) VALUES (?, ?, 'grant', 'lease', 'X', 0, 'b', ?, "
             "1, 1, ?, '', 0, 0, 0, ?), (?, ?, 'takeover', 'lease', 'X', 0, 'forged', ?, 1, 1, ?, 'b', ?, ?, 5000, ?)",
             {name, now, lines[0]["fence"].get<std::int64_t>() + 1, now + 5000, now + 3600000, name, now + 1000,
              lines[0]["fence"].get<std::int64_t>() + 2, now + 6000, lines[0]["fence"].get<std::int64_t>() + 1, now + 5000,
              now + 3600000});
  auto bad = cli({"--db", db, "verify", "--name", prefix});
  CHECK(bad.rc == 4);
  CHECK_THAT(bad.out, Catch::Matchers::Contains("VIOLATION overlap") && Catch::Matchers::Contains("forged"));
  // Usage: exactly one of NAME and the scope flags.
  check_usage_error(cli({"--json", "--db", db, "history"}));
  check_usage_error(cli({"--json", "--db", db, "history", name, "--enable", prefix}));
  check_usage_error(cli({"--json", "--db", db, "history", "--enable", prefix, "--retain", "5s"}), "--retain");
  check_usage_error(cli({"--json", "--db", db, "verify", "--max", "0"}));
  check_usage_error(cli({"--json", "--db", db, "verify", "--since", "2026-13-01T00:00:00Z"}), "--since");
  // --since a time after every event: nothing to check, the forged overlap included.
  auto later = cli({"--json", "--db", db, "verify", "--name", prefix, "--since", "2999-01-01T00:00:00Z"});
  CHECK(later.rc == 0);
  CHECK(json_lines(later.out).at(0)["events"] == 0);
  CHECK(cli({"--db", db, "history", "--disable", prefix}).rc == 0);
  CHECK(cli({"--db", db, "history", "--disable", prefix}).rc == 1);  // no such scope any more
}
