// sqlguard chaos: fault injection with an invariant checker, on every
// dialect. A short fenced run must keep every invariant while faults land;
// the --no-fencing negative control must be caught by the same checker.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <regex>
#include <string>

#include "test_context.h"

using sgtest::ctx;

namespace {

// The top-level integer field `key` of the chaos JSON object (-1 if absent).
long long field(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\":(-?[0-9]+)"))) return -1;
  return std::stoll(m[1].str());
}

bool restarts_available() {
  const char* s = std::getenv("SQLGUARD_DBSERVERS");
  return s && *s && !ctx().is_sqlite();
}

struct Run {
  int rc = -1;
  std::string out;
};

Run chaos(std::vector<std::string> extra) {
  std::vector<std::string> argv = {sgtest::cli_path(), "--db", ctx().uri, "--json", "chaos"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  Run r;
  r.rc = sgtest::run_process(argv, &r.out);
  return r;
}

}  // namespace

TEST_CASE("a fenced chaos run keeps every invariant under kill -9, pauses past the ttl, killed sessions and restarts",
          "[chaos]") {
  std::vector<std::string> args = {"--duration", "8s", "--workers", "4", "--ttl", "500ms", "--seed", "42"};
  if (!restarts_available()) args.push_back("--no-server-restarts");
  auto r = chaos(args);
  INFO(r.out);
  REQUIRE(r.rc == 0);
  CHECK(field(r.out, "violations") == 0);
  CHECK(field(r.out, "fence_order") == 0);
  CHECK(field(r.out, "overlap") == 0);
  CHECK(field(r.out, "stock") == 0);
  CHECK(field(r.out, "inbox_effects") == 0);
  CHECK(field(r.out, "stale_lock") == 0);
  CHECK(field(r.out, "kills") >= 2);
  CHECK(field(r.out, "pauses") >= 2);
  CHECK(field(r.out, "fenced_writes_accepted") > 0);
  // The paused holders woke up and tried to write: every such write was refused.
  CHECK(field(r.out, "late_writes_rejected") >= 1);
  CHECK(field(r.out, "late_writes_accepted") == 0);
  CHECK(field(r.out, "stale_writes_rejected") >= 1);
  if (ctx().is_sqlite()) {
    CHECK(field(r.out, "connection_kills") == 0);
    CHECK(field(r.out, "server_restarts") == 0);
  } else {
    CHECK(field(r.out, "connection_kills") >= 1);
    if (restarts_available()) CHECK(field(r.out, "server_restarts") >= 1);
  }
  // Whatever happened, the server is up again for the tests that follow.
  auto c = ctx().connect();
  CHECK(c->execute("SELECT 1").rows.at(0)[0].as_int() == 1);
}

TEST_CASE("a partition longer than the ttl cuts lease holders off the server and no invariant is violated",
          "[chaos][partition]") {
  auto r = chaos({"--duration", "6s", "--workers", "4", "--ttl", "500ms", "--seed", "11", "--faults", "partition,kill"});
  INFO(r.out);
  if (ctx().is_sqlite()) {
    // No network path to the database: a listed partition cannot be
    // injected, and asking for it is a usage error before any run.
    CHECK(r.rc == 2);
    CHECK(r.out.find("partition") != std::string::npos);
    CHECK(r.out.find("\"argument\":\"--faults\"") != std::string::npos);
    return;
  }
  REQUIRE(r.rc == 0);
  CHECK(field(r.out, "violations") == 0);
  CHECK(field(r.out, "pauses") == 0);  // left out by --faults
  CHECK(field(r.out, "connection_kills") == 0);
  CHECK(field(r.out, "server_restarts") == 0);
  CHECK(field(r.out, "partitions") >= 1);
  CHECK(field(r.out, "kills") >= 1);
  CHECK(field(r.out, "fenced_writes_accepted") > 0);
  // A cut-off holder's lease ran out; when the path healed, its write was refused.
  CHECK(field(r.out, "stale_writes_rejected") >= 1);
  CHECK(field(r.out, "stragglers_killed") == 0);
}

TEST_CASE("a listed fault that cannot be injected is a usage error, never a silent run without it",
          "[chaos][cli]") {
  // failover needs --topology pg-ha|pg-async: without it the run would have
  // been a run without failovers that exits 0.
  auto r = chaos({"--duration", "3s", "--workers", "2", "--ttl", "500ms", "--faults", "kill,failover"});
  INFO(r.out);
  CHECK(r.rc == 2);
  CHECK(r.out.find("\"argument\":\"--faults\"") != std::string::npos);
  CHECK(r.out.find(ctx().is_sqlite() ? "failover" : "--topology") != std::string::npos);
  // node-kill needs one --db per node of a cluster of three.
  auto n = chaos({"--duration", "3s", "--workers", "2", "--ttl", "500ms", "--faults", "node-kill"});
  INFO(n.out);
  CHECK(n.rc == 2);
  // Negative control: the faults that apply run (and the default set, which
  // names none, leaves out what does not apply with a note).
  auto ok = chaos({"--duration", "2s", "--workers", "2", "--ttl", "500ms", "--seed", "3", "--faults", "kill"});
  INFO(ok.out);
  CHECK(ok.rc == 0);
}

TEST_CASE("negative control: chaos without fencing is caught by the checker and exits 4", "[chaos][control]") {
  // Long enough for several pauses past the ttl: a late write needs one to
  // end while another worker holds the lease.
  auto r = chaos({"--duration", "9s", "--workers", "4", "--ttl", "500ms", "--seed", "7", "--no-fencing",
                  "--no-server-restarts"});
  INFO(r.out);
  CHECK(r.rc == 4);
  CHECK(field(r.out, "violations") > 0);
  CHECK(field(r.out, "fence_order") + field(r.out, "overlap") > 0);
  CHECK(field(r.out, "late_writes_accepted") >= 1);
  CHECK(field(r.out, "pauses") >= 2);
}

TEST_CASE("chaos refuses bad input with a one-line error and a non-zero exit", "[chaos][validate]") {
  struct Case {
    std::vector<std::string> args;
    std::string mentions;
  };
  std::vector<Case> cases = {
      {{"--workers", "0"}, "--workers"},
      {{"--workers", "-3"}, "--workers"},
      {{"--workers", "1000"}, "--workers"},
      {{"--duration", "0s"}, "--duration"},
      {{"--duration", "-5s"}, "--duration"},
      {{"--duration", "soon"}, "--duration"},
      {{"--ttl", "1ms"}, "--ttl"},
      {{"--frobnicate"}, "--frobnicate"},
      {{"--faults", "kill,frobnicate"}, "--faults"},
      {{"--faults", ""}, "--faults"},
  };
  for (const auto& c : cases) {
    // Validation happens before any connection: no database is touched.
    std::string cmd = "'" + sgtest::cli_path() + "' --db sqlite::memory: chaos";
    for (const auto& a : c.args) cmd += " '" + a + "'";
    cmd += " 2>&1 >/dev/null";
    std::string err;
    int rc = sgtest::run_process({"/bin/sh", "-c", cmd}, &err);
    INFO(cmd << "\n-> rc " << rc << ": " << err);
    CHECK(rc != 0);
    if (c.mentions == "--faults") CHECK(rc == 2);  // a usage error
    CHECK(err.find(c.mentions) != std::string::npos);
    // One line (CLI11 adds a "Run with --help" hint line for parse errors).
    CHECK(std::count(err.begin(), err.end(), '\n') <= 2);
  }
}
