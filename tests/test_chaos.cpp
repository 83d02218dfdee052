// sqlguard chaos: fault injection with an invariant checker, on every
// dialect. A short fenced run must keep every invariant while faults land;
// each invariant has a negative control (--no-fencing, --control NAME) that
// the same checker must catch.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <optional>
#include <regex>
#include <string>

#include "faked_server_clock.h"
#include "test_context.h"

using sgtest::ctx;

namespace {

// The top-level integer field `key` of the chaos JSON object (-1 if absent).
long long field(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\":(-?[0-9]+)"))) return -1;
  return std::stoll(m[1].str());
}

// What a failure message shows first: the checker's examples of what broke
// and the invariants that did not count 0 (CI's failure digest keeps the
// first lines of a message), then the whole JSON.
std::string shown(const std::string& out) {
  std::string head;
  std::smatch m;
  // (a list of JSON strings; an example's text may hold brackets)
  static const std::regex examples(R"re("violation_examples":(\["(?:[^"\\]|\\.)*"(?:,"(?:[^"\\]|\\.)*")*\]))re");
  if (std::regex_search(out, m, examples)) head += "violation_examples: " + m[1].str() + "\n";
  std::string broken;
  for (const auto& inv : {"fence_order", "overlap", "stock", "inbox_effects", "stale_lock", "lost_commits",
                          "worker_exits", "permit_limit", "rw_exclusion", "fifo_order", "history_overlaps", "violations"}) {
    const long long n = field(out, inv);
    if (n > 0) broken += std::string(broken.empty() ? "" : ", ") + inv + " " + std::to_string(n);
  }
  if (!broken.empty()) head += "nonzero: " + broken + "\n";
  return head + out;
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
  // The URI (with its password) in the environment, as a user would pass
  // it, not on a command line `ps` shows.
  std::vector<std::string> argv = {sgtest::cli_path(), "--json", "chaos"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  Run r;
  r.rc = sgtest::run_process(argv, &r.out, {"SQLGUARD_DB=" + ctx().uri});
  return r;
}

// The invariants of the checker, each with the negative control that trips it.
const std::vector<std::string> kInvariants = {"fence_order", "overlap",      "stock",       "inbox_effects",
                                              "stale_lock",  "lost_commits", "worker_exits"};

// The invariants a run with --lock-kind KIND reports: a semaphore's holders
// overlap by design (permit_limit replaces overlap); the others add theirs.
std::vector<std::string> invariants_of(const std::string& kind) {
  std::vector<std::string> v = kInvariants;
  if (kind.rfind("semaphore:", 0) == 0) {
    v.erase(std::find(v.begin(), v.end(), "overlap"));
    v.push_back("permit_limit");
  } else if (kind == "rw") {
    v.push_back("rw_exclusion");
  } else if (kind == "fair") {
    v.push_back("fifo_order");
  }
  return v;
}

// Every invariant (of `keys`) but those in `except` counted 0.
void check_invariants_hold(const std::string& out, const std::vector<std::string>& except = {},
                           const std::vector<std::string>& keys = kInvariants) {
  for (const auto& inv : keys) {
    if (std::find(except.begin(), except.end(), inv) != except.end()) continue;
    INFO(inv);
    CHECK(field(out, inv) == 0);
  }
}

// A short run with one negative control: the checker must report its
// invariant (exit 4), and only the invariants that control can break.
void control_is_caught(const std::string& control, const std::string& invariant, std::vector<std::string> extra,
                       const std::vector<std::string>& may_also = {}, const std::string& kind = "lease") {
  std::vector<std::string> args = {"--workers", "4", "--ttl", "500ms", "--seed", "21", "--control", control};
  if (kind != "lease") args.insert(args.end(), {"--lock-kind", kind});
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = chaos(args);
  INFO(shown(r.out));
  CHECK(r.rc == 4);
  CHECK(r.out.find("\"control\":\"" + control + "\"") != std::string::npos);
  CHECK(r.out.find("\"lock_kind\":\"" + kind + "\"") != std::string::npos);
  CHECK(field(r.out, invariant) > 0);
  std::vector<std::string> except = may_also;
  except.push_back(invariant);
  check_invariants_hold(r.out, except, invariants_of(kind));
}

// A chaos run on a loaded machine can be thin: kills and pauses past the
// ttl leave the one resource unheld for a second or more each (18 holds in
// 8 s on the CI machine, none of two readers at one instant; once 7
// acquisitions and no accepted write in a crash run). `run(seed)` makes one
// run and its own checks (every run's invariants must hold); the seeds are
// tried in order until `exercised` says a run had what the caller's
// not-vacuous checks need. Returns that run's JSON, else the last one's
// (and the caller's checks on it fail).
std::string first_exercised_run(const std::vector<std::string>& seeds,
                                const std::function<std::string(const std::string&)>& run,
                                const std::function<bool(const std::string&)>& exercised) {
  std::string out;
  for (const auto& seed : seeds) {
    out = run(seed);
    if (exercised(out)) break;
  }
  return out;
}

// Runs of --lock-kind KIND under every fault that applies here except
// server restarts (the first test case restarts the server once per
// dialect; these add none), seeds 42, 43 and 44 until one is exercised.
std::string kind_run_holds(const std::string& kind, const std::function<bool(const std::string&)>& exercised) {
  auto run = [&](const std::string& seed) {
    auto r = chaos({"--lock-kind", kind, "--duration", "8s", "--workers", "6", "--ttl", "500ms", "--seed", seed,
                    "--no-server-restarts"});
    INFO("seed " << seed << "\n" << shown(r.out));
    REQUIRE(r.rc == 0);
    CHECK(r.out.find("\"lock_kind\":\"" + kind + "\"") != std::string::npos);
    CHECK(field(r.out, "violations") == 0);
    check_invariants_hold(r.out, {}, invariants_of(kind));
    CHECK(field(r.out, "unexpected_worker_exits") == 0);
    CHECK(field(r.out, "kills") >= 2);
    CHECK(field(r.out, "pauses") >= 1);
    // (A paused holder's late write may be accepted: under the watched
    // take-over rule a lease nobody watched for its ttl during the pause is
    // still its holder's, and run_guarded checks that in the database. One
    // taken over meanwhile is refused; overlap and fence_order, above, would
    // count any accepted write that followed a newer holder's.)
    if (!ctx().is_sqlite()) CHECK(field(r.out, "connection_kills") >= 1);
    return r.out;
  };
  std::string out = first_exercised_run({"42", "43", "44"}, run, [&](const std::string& o) {
    return field(o, "acquisitions") > 0 && exercised(o);
  });
  CHECK(field(out, "acquisitions") > 0);
  return out;
}

// Whether a SIGKILL of the server process can lose commits it acknowledged:
// PostgreSQL with synchronous_commit=off (the WAL is still in shared memory),
// MariaDB with innodb_flush_log_at_trx_commit=0. The test servers' fast
// settings (tools/dbservers.sh) are off / 2.
bool server_acks_before_the_os_has_it() {
  auto c = ctx().connect();
  if (ctx().is(sqlguard::DialectKind::kPostgresql))
    return c->execute("SHOW synchronous_commit").rows.at(0)[0].as_string() == "off";
  return c->execute("SELECT @@innodb_flush_log_at_trx_commit").rows.at(0)[0].as_int() == 0;
}

}  // namespace

TEST_CASE("a fenced chaos run keeps every invariant under kill -9, pauses past the ttl, killed sessions and restarts",
          "[chaos]") {
  // Every run's invariants must hold; seeds 42, 43, 44 are tried until one
  // is exercised (an accepted write, a paused holder refused, ...): every
  // hold of the one resource can be hit by a fault (CI once: 7 acquisitions,
  // each killed, paused or partitioned, so no accepted write).
  auto run = [](const std::string& seed) {
    std::vector<std::string> args = {"--duration", "8s", "--workers", "4", "--ttl", "500ms", "--seed", seed};
    if (!restarts_available()) args.push_back("--no-server-restarts");
    auto r = chaos(args);
    INFO("seed " << seed << "\n" << shown(r.out));
    REQUIRE(r.rc == 0);
    CHECK(field(r.out, "violations") == 0);
    check_invariants_hold(r.out);
    // The second checker, `verify` over the grant history the database kept:
    // no overlap, and not vacuous (grants were recorded).
    CHECK(field(r.out, "history_overlaps") == 0);
    CHECK(field(r.out, "grants") >= 1);
    CHECK(field(r.out, "unexpected_worker_exits") == 0);
    CHECK(field(r.out, "kills") >= 2);
    if (ctx().is_sqlite()) {
      CHECK(field(r.out, "connection_kills") == 0);
      CHECK(field(r.out, "server_restarts") == 0);
    } else {
      CHECK(field(r.out, "connection_kills") >= 1);
      if (restarts_available()) CHECK(field(r.out, "server_restarts") >= 1);
    }
    return r.out;
  };
  const std::string out = first_exercised_run({"42", "43", "44"}, run, [](const std::string& o) {
    return field(o, "pauses") >= 2 && field(o, "fenced_writes_accepted") > 0 &&
           field(o, "late_writes_rejected") >= 1 && field(o, "stale_writes_rejected") >= 1;
  });
  INFO(shown(out));
  CHECK(field(out, "pauses") >= 2);
  CHECK(field(out, "fenced_writes_accepted") > 0);
  // The paused holders woke up and tried to write: those whose lease was
  // taken over meanwhile were refused (one nobody watched for its ttl is
  // still theirs: its write is accepted, and overlap / fence_order, checked
  // above, would count it if a newer holder had come between).
  CHECK(field(out, "late_writes_rejected") >= 1);
  CHECK(field(out, "stale_writes_rejected") >= 1);
  // Whatever happened, the server is up again for the tests that follow.
  auto c = ctx().connect();
  CHECK(c->execute("SELECT 1").rows.at(0)[0].as_int() == 1);
}

TEST_CASE("chaos --lock-kind semaphore:2: never more than 2 permits held at an instant under kill -9, pauses past the "
          "ttl, killed sessions and partitions; permit holders' writes are fenced",
          "[chaos][lock-kind]") {
  const std::string out = kind_run_holds("semaphore:2", [](const std::string& o) {
    return field(o, "holds_journaled") > 0 && field(o, "max_permits_held") == 2 &&
           field(o, "fenced_writes_accepted") > 0 && field(o, "stale_writes_rejected") >= 1;
  });
  INFO(shown(out));
  CHECK(field(out, "permit_limit") == 0);
  CHECK(field(out, "history_overlaps") == 0);  // the grant history's verify
  CHECK(field(out, "grants") > 0);
  // Not vacuous: the journal has holds and they did fill both permits.
  CHECK(field(out, "holds_journaled") > 0);
  CHECK(field(out, "max_permits_held") == 2);
  CHECK(field(out, "fenced_writes_accepted") > 0);
  // Writes of older holdings after a newer one's (late ones after a pause among them) were refused.
  CHECK(field(out, "stale_writes_rejected") >= 1);
}

TEST_CASE("chaos --lock-kind rw: never a writer with readers or another writer under kill -9, pauses past the ttl, "
          "killed sessions and partitions; writers' writes are fenced",
          "[chaos][lock-kind]") {
  const std::string out = kind_run_holds("rw", [](const std::string& o) {
    return field(o, "exclusive_holds") > 0 && field(o, "shared_overlaps") > 0 && field(o, "fenced_writes_accepted") > 0;
  });
  INFO(shown(out));
  CHECK(field(out, "rw_exclusion") == 0);
  CHECK(field(out, "history_overlaps") == 0);  // the grant history's verify
  CHECK(field(out, "grants") > 0);
  CHECK(field(out, "overlap") == 0);
  CHECK(field(out, "exclusive_holds") > 0);
  CHECK(field(out, "shared_overlaps") > 0);  // not vacuous: readers did share
  CHECK(field(out, "fenced_writes_accepted") > 0);
}

TEST_CASE("chaos --lock-kind fair: grants follow arrival order except past lapsed places, under kill -9, pauses of "
          "holders and waiters, killed sessions and partitions",
          "[chaos][lock-kind]") {
  const std::string out = kind_run_holds("fair", [](const std::string& o) {
    return field(o, "waits_granted") > 0 && field(o, "fifo_pairs_checked") > 0 && field(o, "fenced_writes_accepted") > 0;
  });
  INFO(shown(out));
  CHECK(field(out, "fifo_order") == 0);
  CHECK(field(out, "history_overlaps") == 0);  // the grant history's verify
  CHECK(field(out, "grants") > 0);
  CHECK(field(out, "waits_granted") > 0);
  CHECK(field(out, "fifo_pairs_checked") > 0);  // not vacuous: some arrivals were ordered and checked
  CHECK(field(out, "fenced_writes_accepted") > 0);
}

TEST_CASE("chaos --lock-kind multi:2: lock sets overlapping each other keep every lease invariant per resource under "
          "kill -9, pauses past the ttl, killed sessions and partitions",
          "[chaos][lock-kind][lock-set]") {
  const std::string out = kind_run_holds("multi:2", [](const std::string& o) {
    return field(o, "holds_journaled") >= 2 && field(o, "fenced_writes_accepted") >= 2;
  });
  INFO(shown(out));
  CHECK(field(out, "overlap") == 0);
  CHECK(field(out, "fence_order") == 0);
  CHECK(field(out, "history_overlaps") == 0);  // the grant history's verify
  // Not vacuous: sets were held (two names each, so twice the grants) and wrote.
  // Each set's two names recorded in the set's own commit (a grant, or a
  // take-over of a killed holder's lease).
  CHECK(field(out, "grants") + field(out, "takeovers") >= 2 * field(out, "acquisitions"));
  CHECK(field(out, "holds_journaled") >= 2);
  CHECK(field(out, "fenced_writes_accepted") >= 2);
}

TEST_CASE("negative control: lock-set holders that write without re-checking or fences are caught by the overlap "
          "invariant",
          "[chaos][control][lock-kind][lock-set]") {
  // A paused set holder's late writes land after the sets that took its
  // names over (measured on SQLite: overlap 5, fence_order 4 in a 6 s run).
  control_is_caught("no-fencing", "overlap", {"--duration", "6s", "--faults", "pause"}, {"fence_order"}, "multi:2");
}

TEST_CASE("negative control: a semaphore holder that never asks owns() is caught by the permit-limit invariant",
          "[chaos][control][lock-kind]") {
  // Its hold runs on through a pause that lost it, while others take the
  // permits. Pauses only: with kills too, 1 run in 4 here (and one through
  // PgBouncer in CI) saw no overlap, the other holders of the pause being
  // killed before they journaled; pauses alone gave 18-22 per run.
  control_is_caught("semaphore-ignores-owns", "permit_limit", {"--duration", "5s", "--faults", "pause"}, {},
                    "semaphore:2");
}

TEST_CASE("negative control: semaphore holders that write without the fence are caught by the fence-order invariant",
          "[chaos][control][lock-kind]") {
  // Two holders at once whose writes commit out of fence order. With kills
  // as the fault: 2 to 10 per 6 s run here, none in 3 s once in a loaded CI
  // run. With pauses (a paused holder's write lands after newer holders'):
  // 8 to 12 per run on every dialect.
  control_is_caught("no-fencing", "fence_order", {"--duration", "6s", "--faults", "pause"}, {}, "semaphore:2");
}

TEST_CASE("negative control: a semaphore holding that outlives its killed holder is caught by the stale-lock "
          "invariant",
          "[chaos][control][lock-kind]") {
  control_is_caught("long-lease", "stale_lock", {"--duration", "4s", "--faults", "kill"}, {}, "semaphore:2");
}

TEST_CASE("negative control: writers that take a shared hold are caught by the read-write exclusion invariant",
          "[chaos][control][lock-kind]") {
  // Their writes carry no fence (a shared hold's is the last exclusive one's): fence order and the writers'
  // overlap fire too.
  control_is_caught("rw-writer-shares", "rw_exclusion", {"--duration", "3s", "--faults", "kill"},
                    {"fence_order", "overlap"}, "rw");
}

TEST_CASE("negative control: waiters of a fair lease that jump the queue are caught by the FIFO invariant",
          "[chaos][control][lock-kind]") {
  control_is_caught("fair-queue-jump", "fifo_order", {"--duration", "4s", "--faults", "kill"}, {}, "fair");
}

TEST_CASE("a partition longer than the ttl cuts lease holders off the server and no invariant is violated",
          "[chaos][partition]") {
  auto r = chaos({"--duration", "6s", "--workers", "4", "--ttl", "500ms", "--seed", "11", "--faults", "partition,kill"});
  INFO(shown(r.out));
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
  check_invariants_hold(r.out);
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
  INFO(shown(r.out));
  CHECK(r.rc == 2);
  CHECK(r.out.find("\"argument\":\"--faults\"") != std::string::npos);
  CHECK(r.out.find(ctx().is_sqlite() ? "failover" : "--topology") != std::string::npos);
  // node-kill needs one --db per node of a cluster of three.
  auto n = chaos({"--duration", "3s", "--workers", "2", "--ttl", "500ms", "--faults", "node-kill"});
  INFO(shown(n.out));
  CHECK(n.rc == 2);
  // crash: no server process on SQLite; elsewhere no time to crash and
  // recover in a 2 s run.
  auto c = chaos({"--duration", "2s", "--workers", "2", "--ttl", "500ms", "--faults", "kill,crash"});
  INFO(shown(c.out));
  CHECK(c.rc == 2);
  CHECK(c.out.find("\"argument\":\"--faults\"") != std::string::npos);
  CHECK(c.out.find(ctx().is_sqlite() ? "crash" : "--duration") != std::string::npos);
  // Negative control: the faults that apply run (and the default set, which
  // names none, leaves out what does not apply with a note).
  auto ok = chaos({"--duration", "2s", "--workers", "2", "--ttl", "500ms", "--seed", "3", "--faults", "kill"});
  INFO(shown(ok.out));
  CHECK(ok.rc == 0);
}

TEST_CASE("negative control: chaos without fencing is caught by the checker and exits 4", "[chaos][control]") {
  // Long enough for several pauses past the ttl: a late write needs one to
  // end while another worker holds the lease.
  auto r = chaos({"--duration", "9s", "--workers", "4", "--ttl", "500ms", "--seed", "7", "--no-fencing",
                  "--no-server-restarts"});
  INFO(shown(r.out));
  CHECK(r.rc == 4);
  CHECK(field(r.out, "violations") > 0);
  CHECK(field(r.out, "fence_order") + field(r.out, "overlap") > 0);
  CHECK(field(r.out, "late_writes_accepted") >= 1);
  CHECK(field(r.out, "pauses") >= 2);
  check_invariants_hold(r.out, {"fence_order", "overlap"});
}

TEST_CASE("negative control: a decrement without a guard (read, then write back minus one) is caught by the stock "
          "invariant",
          "[chaos][control]") {
  control_is_caught("unguarded-decrement", "stock", {"--duration", "3s", "--faults", "kill"});
}

TEST_CASE("negative control: an effect committed outside the inbox transaction is caught by the inbox invariant",
          "[chaos][control]") {
  control_is_caught("effects-outside-inbox", "inbox_effects", {"--duration", "2s", "--faults", "kill"});
}

TEST_CASE("negative control: a lease that outlives its killed holder is caught by the stale-lock invariant",
          "[chaos][control]") {
  control_is_caught("long-lease", "stale_lock", {"--duration", "4s", "--faults", "kill"});
}

TEST_CASE("negative control: a worker that dies without being killed is counted and fails the run",
          "[chaos][control]") {
  // worker_exits only: a lease the dying worker held expires within its ttl.
  control_is_caught("worker-crash", "worker_exits", {"--duration", "2s", "--faults", "kill"});
}

TEST_CASE("a server crash (SIGKILL, crash recovery) keeps every lease invariant; acknowledged commits survive "
          "unless the server acknowledges before its log reaches the OS",
          "[chaos][crash]") {
  if (!restarts_available()) {
    // SQLite has no server process; a listed crash is a usage error (above).
    INFO("SQLGUARD_DBSERVERS must be set for a server dialect (tools/test.sh sets it): a missing server is a failure");
    REQUIRE(ctx().is_sqlite());
    return;
  }
  // Every run's invariants hold; seeds 5, 6 and 7 until one had an accepted
  // fenced write (a thin run on the loaded CI machine once had none).
  auto run = [](const std::string& seed) {
    auto r =
        chaos({"--duration", "8s", "--workers", "4", "--ttl", "500ms", "--seed", seed, "--faults", "kill,pause,crash"});
    INFO("seed " << seed << "\n" << shown(r.out));
    CHECK(field(r.out, "server_crashes") >= 1);
    CHECK(field(r.out, "server_crash_failures") == 0);
    CHECK(field(r.out, "server_restarts") == 0);
    // Fences, mutual exclusion, stock, exactly-once effects and lease expiry
    // hold across the crash: whatever survived is a consistent prefix, and a
    // holder whose lease went with it is refused by the lease re-check.
    check_invariants_hold(r.out, {"lost_commits"});
    if (server_acks_before_the_os_has_it()) {
      // The crash may take the last acknowledged commits with it; the checker
      // says so (and the run fails) when it did.
      CHECK(r.rc == (field(r.out, "lost_commits") > 0 ? 4 : 0));
    } else {
      CHECK(field(r.out, "lost_commits") == 0);
      CHECK(r.rc == 0);
    }
    return r.out;
  };
  const std::string out = first_exercised_run({"5", "6", "7"}, run, [](const std::string& o) {
    return field(o, "fenced_writes_accepted") > 0;
  });
  INFO(shown(out));
  CHECK(field(out, "fenced_writes_accepted") > 0);
  // The server is back for the tests that follow.
  auto c = ctx().connect();
  CHECK(c->execute("SELECT 1").rows.at(0)[0].as_int() == 1);
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
      {{"--control", "frobnicate"}, "--control"},
      {{"--control", "long-lease", "--no-fencing"}, "--control"},
      {{"--lock-kind", "frobnicate"}, "--lock-kind"},
      {{"--lock-kind", "semaphore:0"}, "--lock-kind"},
      {{"--lock-kind", "semaphore:"}, "--lock-kind"},
      {{"--lock-kind", "semaphore:1001"}, "--lock-kind"},
      {{"--lock-kind", "multi:1"}, "--lock-kind"},
      {{"--lock-kind", "multi:9"}, "--lock-kind"},
      {{"--control", "fair-queue-jump"}, "--control"},  // needs --lock-kind fair
      {{"--lock-kind", "rw", "--control", "semaphore-ignores-owns"}, "--control"},
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
    if (c.mentions == "--faults" || c.mentions == "--control" || c.mentions == "--lock-kind")
      CHECK(rc == 2);  // a usage error
    CHECK(err.find(c.mentions) != std::string::npos);
    // One line (CLI11 adds a "Run with --help" hint line for parse errors).
    CHECK(std::count(err.begin(), err.end(), '\n') <= 2);
  }
}

TEST_CASE("chaos --faults clock-step: steps of the server's and the workers' wall clocks (+-30 s, +-1 h) break no "
          "invariant of any lock kind, under kill -9 and pauses past the ttl",
          "[chaos][clock]") {
  // Server dialects: the server restarted under libfaketime (and back after);
  // SQLite: the workers' clocks, which are its database clock.
  std::optional<sgtest::FakedServerClock> server;
  if (!ctx().is_sqlite()) server.emplace();
  for (const std::string kind : {"lease", "fair", "semaphore:2", "rw"}) {
    // Not vacuous: holds were journaled and checked (the lease kind once had
    // 3 acquisitions and none journaled in 6 s in CI): seeds 17, 18 and 19.
    auto run = [&](const std::string& seed) {
      auto r = chaos({"--lock-kind", kind, "--duration", "6s", "--workers", "6", "--ttl", "500ms", "--seed", seed,
                      "--faults", "clock-step,kill,pause"});
      INFO(kind << " seed " << seed << "\n" << shown(r.out));
      CHECK(r.rc == 0);
      CHECK(field(r.out, "violations") == 0);
      // stale_lock reads expiries on the stepped database clock: not judged (a note says so).
      std::vector<std::string> keys = invariants_of(kind);
      keys.erase(std::find(keys.begin(), keys.end(), "stale_lock"));
      check_invariants_hold(r.out, {}, keys);
      CHECK(r.out.find("stale_lock is not judged") != std::string::npos);
      // The grant history is kept in the database clock's time: not verified.
      CHECK(r.out.find("history check skipped") != std::string::npos);
      CHECK(field(r.out, "clock_steps") >= 8);  // both clocks through +-30 s and +-1 h (SQLite: its one clock)
      CHECK(field(r.out, "clock_step_failures") == 0);
      CHECK(field(r.out, "kills") >= 1);
      return r.out;
    };
    const std::string out =
        first_exercised_run({"17", "18", "19"}, run, [](const std::string& o) { return field(o, "holds_journaled") > 0; });
    INFO(kind << "\n" << shown(out));
    CHECK(field(out, "acquisitions") > 0);
    CHECK(field(out, "holds_journaled") > 0);
  }
}

TEST_CASE("negative control: take-overs by the database clock overlap a holder under a forward step of that clock "
          "(chaos --faults clock-step --control database-clock-takeover)",
          "[chaos][clock][control]") {
  std::optional<sgtest::FakedServerClock> server;
  if (!ctx().is_sqlite()) server.emplace();
  // A forward step must land while one worker holds and another asks (the
  // control's workers do lock ops only): most 6 s runs have one (under two
  // busy loops here 2 of 3 first seeds on PostgreSQL); the control stands if
  // any of five seeds catches it (later seeds run only after a miss), and no
  // run may break another invariant.
  long long overlaps = 0;
  for (const std::string seed : {"21", "22", "23", "24", "25"}) {
    auto r = chaos({"--duration", "6s", "--workers", "6", "--ttl", "500ms", "--seed", seed, "--faults", "clock-step",
                    "--control", "database-clock-takeover"});
    INFO(shown(r.out));
    CHECK(r.out.find("\"control\":\"database-clock-takeover\"") != std::string::npos);
    CHECK(field(r.out, "clock_steps") >= 8);
    CHECK(r.rc == (field(r.out, "overlap") > 0 ? 4 : 0));
    std::vector<std::string> keys = kInvariants;
    keys.erase(std::find(keys.begin(), keys.end(), "stale_lock"));
    check_invariants_hold(r.out, {"overlap"}, keys);
    overlaps += field(r.out, "overlap");
    if (overlaps > 0) break;
  }
  CHECK(overlaps > 0);
}
