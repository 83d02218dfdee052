// `sqlguard bench`: behaviour only. Benchmarks are not tests, so no timing
// is ever asserted here — only that the command runs and reports its fields.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "test_context.h"

using sgtest::ctx;

namespace {
// The raw text of a top-level field of a one-line JSON object ("" if absent).
std::string field(const std::string& line, const std::string& key) {
  auto p = line.find("\"" + key + "\":");
  if (p == std::string::npos) return "";
  auto v = p + key.size() + 3;
  auto e = line[v] == '"' ? line.find('"', v + 1) + 1 : line.find_first_of(",}", v);
  return line.substr(v, e - v);
}

// The JSON lines of a run's stdout.
std::vector<std::string> json_lines(const std::string& out) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (auto nl = out.find('\n'); nl != std::string::npos; start = nl + 1, nl = out.find('\n', start))
    if (nl > start && out[start] == '{') lines.push_back(out.substr(start, nl - start));
  return lines;
}

double number(const std::string& line, const std::string& key) {
  const std::string v = field(line, key);
  INFO(key << " in " << line);
  REQUIRE(!v.empty());
  REQUIRE(v != "null");
  return std::stod(v);
}
}  // namespace

TEST_CASE("bench reports one JSON cell with throughput, latency and the raw baseline", "[bench][cli]") {
  std::string out;
  int rc = sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "--json", "bench", "--ops", "lease-distinct",
                                "--clients", "1", "--duration", "300ms", "--warmup", "50ms"},
                               &out);
  REQUIRE(rc == 0);
  auto nl = out.find('\n');
  REQUIRE(nl != std::string::npos);
  std::string line = out.substr(0, nl);
  INFO(line);
  for (const char* k : {"dialect", "op", "clients", "ops_per_s", "p50_ms", "p99_ms", "raw_ops_per_s",
                        "overhead_ratio", "errors", "duration_s"})
    CHECK(!field(line, k).empty());
  CHECK(field(line, "op") == "\"lease-distinct\"");
  CHECK(field(line, "dialect") == "\"" + ctx().name + "\"");
  CHECK(field(line, "clients") == "1");
  CHECK(std::stod(field(line, "ops_per_s")) > 0);
  CHECK(std::stod(field(line, "raw_ops_per_s")) > 0);
  CHECK(field(line, "errors") == "0");
}

TEST_CASE("every bench op runs on both paths without an error", "[bench][cli]") {
  // The raw path replays the catalog's statements through the driver: a
  // statement the catalog no longer has, or one it now sends differently,
  // shows up here as raw_errors (it broke MariaDB's rowlock-decrement once).
  // Behind a transaction pooler only the sqlguard path: the raw baseline
  // prepares named statements, which such a pooler cannot keep per client.
  // The op x clients matrix; the lock-client ops have tests of their own.
  std::vector<std::string> argv = {sgtest::cli_path(), "--db", ctx().uri, "--json", "bench", "--clients", "2",
                                   "--duration", "300ms", "--warmup", "50ms", "--ops",
                                   "lease-distinct,lease-hot,handoff,guarded-decrement,rowlock-decrement,"
                                   "cas-decrement,idem-first,idem-replay,inbox"};
  if (ctx().pooler) argv.push_back("--no-raw");
  std::string out;
  int rc = sgtest::run_process(argv, &out);
  INFO(out);
  REQUIRE(rc == 0);
  int cells = 0, commit_cells = 0;
  std::size_t start = 0;
  const std::string server = ctx().is(sqlguard::DialectKind::kMysql)        ? "MariaDB"
                             : ctx().is(sqlguard::DialectKind::kPostgresql) ? "PostgreSQL"
                                                                           : "SQLite";
  for (auto nl = out.find('\n'); nl != std::string::npos; start = nl + 1, nl = out.find('\n', start)) {
    const std::string line = out.substr(start, nl - start);
    if (line.empty() || line[0] != '{') continue;
    ++cells;
    INFO(line);
    CHECK(field(line, "errors") == "0");
    CHECK(field(line, "cpu_load").empty());  // no --cpu-load: no tag
    if (field(line, "op") == "\"commit-rate\"") {
      // The database's own one-client commit rate, measured before the
      // matrix because lease-hot is in it, with what a commit waits for.
      ++commit_cells;
      CHECK(field(line, "clients") == "1");
      CHECK(std::stod(field(line, "ops_per_s")) > 0);
      CHECK(field(line, "durability").rfind("\"" + server + " ", 0) == 0);
      CHECK(!field(line, "flushes_per_commit").empty());
      continue;
    }
    const auto raw_errors = field(line, "raw_errors");
    CHECK((raw_errors.empty() || raw_errors == "0"));
    const auto op = field(line, "op");
    // A hand-off needs a waiter to win within the short window (behind a
    // pooler waiters poll): its count may be 0; every other op must run.
    if (op != "\"handoff\"") {
      CHECK(std::stod(field(line, "ops_per_s")) > 0);
    } else {
      // The ceiling's parts, measured by one client alone in the hand-off
      // rhythm just before the cell; the efficiency comes from their sum.
      // A part may round to 0.000 ms (SQLite's wake-up ping is in-process:
      // a CI run printed 0.0), their sum may not.
      double parts = 0;
      for (const char* k : {"ceiling_release_ms", "ceiling_wakeup_ms", "ceiling_acquire_ms"}) {
        CHECK(std::stod(field(line, k)) >= 0);
        parts += std::stod(field(line, k));
      }
      CHECK(parts > 0);
      CHECK(std::stod(field(line, "ceiling_per_s")) > 0);
      CHECK(!field(line, "handoff_efficiency").empty());
    }
    // Contended cells say how the acquisitions were shared and how long they waited.
    if (op == "\"lease-hot\"" || op == "\"handoff\"") {
      for (const char* k : {"per_client_min", "per_client_max", "jain_index", "wait_p50_ms", "wait_p99_ms",
                            "wait_max_ms", "timeouts"})
        CHECK(!field(line, k).empty());
      CHECK(std::stod(field(line, "wait_max_ms")) >= std::stod(field(line, "wait_p99_ms")));
    }
    // Lease cells state what a cycle waits for on this server.
    if (op == "\"lease-hot\"") CHECK(field(line, "vs_commit_rate").empty() == ctx().pooler);
    if (op == "\"lease-distinct\"" || op == "\"lease-hot\"" || op == "\"handoff\"") {
      CHECK(field(line, "durability").rfind("\"" + server + " ", 0) == 0);
      CHECK(!field(line, "flushes_per_cycle").empty());
    }
  }
  // Every op once at 2 clients (handoff included), and the commit rate
  // (through the native driver: not with --no-raw, i.e. behind a pooler).
  CHECK(commit_cells == (ctx().pooler ? 0 : 1));
  CHECK(cells == 9 + commit_cells);
}

TEST_CASE("bench cart-decrement and cart-per-row take orders of several SKUs and account for every unit",
          "[bench][cli][cart]") {
  // Issue 41: apply_all() against one apply() per SKU in a transaction, the same orders on both.
  std::vector<std::string> argv = {sgtest::cli_path(), "--db", ctx().uri, "--json", "bench", "--clients", "4",
                                   "--duration", "400ms", "--warmup", "50ms", "--ops", "cart-decrement,cart-per-row"};
  std::string out;
  int rc = sgtest::run_process(argv, &out);
  INFO(out);
  REQUIRE(rc == 0);
  std::map<std::string, std::string> by_op;
  std::size_t start = 0;
  for (auto nl = out.find('\n'); nl != std::string::npos; start = nl + 1, nl = out.find('\n', start)) {
    const std::string line = out.substr(start, nl - start);
    if (line.rfind("{", 0) == 0) by_op[field(line, "op")] = line;
  }
  REQUIRE(by_op.count("\"cart-decrement\""));
  REQUIRE(by_op.count("\"cart-per-row\""));
  // (The per-row path may complete no order in a short cell: on PostgreSQL its deadlocks wait out
  // deadlock_timeout, 1 s, before one transaction of the cycle is aborted.)
  CHECK(std::stod(field(by_op["\"cart-decrement\""], "ops_per_s")) > 0);
  CHECK(std::stoll(field(by_op["\"cart-decrement\""], "units_taken")) > 0);
  for (const auto& [op, line] : by_op) {
    INFO(line);
    CHECK(field(line, "cart_skus") == "5");
    CHECK(field(line, "units_unaccounted") == "0");  // what the rows lost = what applied orders took
    CHECK(field(line, "oversold_rows") == "0");
    CHECK(field(line, "raw_ops_per_s") == "null");    // no raw path: the comparison is the other op
    CHECK(!field(line, "durability").empty());
  }
  // apply_all() never deadlocks with itself; one statement on PostgreSQL, a locking read and the
  // write in a transaction elsewhere; the per-row path sends a statement per SKU.
  CHECK(field(by_op["\"cart-decrement\""], "errors") == "0");
  CHECK(field(by_op["\"cart-decrement\""], "statements_per_op") == (ctx().is(sqlguard::DialectKind::kPostgresql) ? "1" : "4"));
  CHECK(field(by_op["\"cart-per-row\""], "statements_per_op") == "7");
}

TEST_CASE("bench --cpu-load runs its cells beside spinning processes, tags them, and stops the load with the run",
          "[bench][cli]") {
  std::vector<std::string> argv = {sgtest::cli_path(), "--db", ctx().uri, "--json", "bench", "--ops",
                                   "handoff,waiters", "--clients", "2", "--waiters", "20", "--duration", "300ms",
                                   "--warmup", "50ms", "--cpu-load", "2"};
  std::string out;
  // A load that outlived the cells would keep the run from ending (it waits
  // for the processes it killed): the run returning is part of the check.
  REQUIRE(sgtest::run_process(argv, &out) == 0);
  INFO(out);
  const auto lines = json_lines(out);
  REQUIRE(lines.size() == 2);
  for (const auto& line : lines) {
    INFO(line);
    CHECK(field(line, "cpu_load") == "2");
    CHECK(field(line, "errors") == "0");
  }
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "bench", "--cpu-load", "-1"}) == 2);
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "bench", "--cpu-load", "257"}) == 2);
}

TEST_CASE("bench refuses bad input with one line and exit 2", "[bench][cli]") {
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "bench", "--ops", "no-such-op"}) == 2);
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "bench", "--clients", "0"}) == 2);
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "bench", "--duration", "soon"}) == 2);
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "bench", "--scale-rows", "0"}) == 2);
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "bench", "--ops", "held-leases", "--held", "0"}) ==
        2);
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "bench", "--ops", "waiters", "--waiters", "x"}) ==
        2);
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "bench", "--held-ttl", "10ms"}) == 2);
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "bench", "--per-lease", "-1"}) == 2);
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "bench", "--ops", "semaphore-hot", "--permits",
                             "0"}) == 2);
  // churn-soak: a churn it cannot take from what it holds, an unknown kind,
  // samples too often; only the soak runs longer than an hour.
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "bench", "--ops", "churn-soak", "--held", "50",
                             "--churn", "51"}) == 2);
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "bench", "--ops", "churn-soak", "--churn", "0"}) ==
        2);
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "bench", "--ops", "churn-soak", "--churn-kinds",
                             "leases"}) == 2);
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "bench", "--ops", "churn-soak", "--sample-every",
                             "10ms"}) == 2);
  CHECK(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "bench", "--ops", "lease-distinct,churn-soak",
                             "--duration", "2h"}) == 2);
}

TEST_CASE("bench churn-soak holds its leases while every kind churns on new names and samples memory as it goes",
          "[bench][cli]") {
  std::string out;
  int rc = sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "--json", "bench", "--ops", "churn-soak",
                                "--held", "40", "--churn", "16", "--churn-kinds", "all", "--duration", "3s",
                                "--cycle-every", "100ms", "--sample-every", "1s"},
                               &out);
  INFO(out);
  REQUIRE(rc == 0);
  const auto lines = json_lines(out);
  REQUIRE(lines.size() == 1);  // one cell; the samples' progress lines go to stderr
  const auto j = nlohmann::json::parse(lines[0]);
  CHECK(j["op"] == "churn-soak");
  CHECK(j["dialect"] == ctx().name);
  CHECK(j["held"] == 40);
  CHECK(j["churn"] == 16);
  CHECK(j["churn_kinds"] == "all");
  CHECK(j["errors"] == 0);
  CHECK(j["losses"] == 0);
  // The first full set, then at least one cycle of new names.
  CHECK(j["fill_acquisitions"] == 40);
  CHECK(j["acquisitions"].get<std::int64_t>() > 40);
  CHECK(j["churn_acquisitions"].get<std::int64_t>() > 0);
  CHECK(j["cycles"].get<std::int64_t>() >= 1);
  // Each cycle's 16 new names take every kind twice: the waits ended without the lock.
  CHECK(j["waits_timed_out"].get<std::int64_t>() >= 1);
  CHECK(j["waits_cancelled"].get<std::int64_t>() >= 1);
  // Samples: the start, the baseline (half of a run this short), the end;
  // their counts never go back.
  const auto& samples = j["samples"];
  REQUIRE(samples.size() >= 2);
  int baselines = 0;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const auto& s = samples[i];
    INFO(s.dump());
    for (const char* k : {"t_s", "acquisitions", "losses", "rss_bytes", "heap_bytes", "held_leases", "queue_places",
                          "waiters", "listening", "renewal_statements"})
      CHECK(s[k].is_number());
    CHECK(s["rss_bytes"].get<std::int64_t>() > 0);
    CHECK(s["heap_bytes"].get<std::int64_t>() > 0);
    CHECK(s["held"] == 40);  // the churn takes as many as it releases
    baselines += s.value("baseline", false) ? 1 : 0;
    if (i > 0) {
      CHECK(s["t_s"].get<double>() >= samples[i - 1]["t_s"].get<double>());
      CHECK(s["acquisitions"].get<std::int64_t>() >= samples[i - 1]["acquisitions"].get<std::int64_t>());
    }
  }
  CHECK(baselines == 1);
  CHECK(samples.back()["acquisitions"] == j["acquisitions"]);
  // The report: from the baseline to the end.
  CHECK(j["baseline_s"].get<double>() > 0);
  CHECK(j["rss_baseline_bytes"].get<std::int64_t>() > 0);
  CHECK(j["rss_growth_pct"].is_number());
  CHECK(j["heap_retained_per_acquisition_bytes"].is_number());
  CHECK(j["acquisitions_after_baseline"].get<std::int64_t>() > 0);
  CHECK(j["churn_per_s"].get<double>() > 0);
  CHECK(j["target_met"].is_boolean());
  // Everything released at the end: the client renews nothing any more.
  CHECK(j["released"]["held_leases"] == 0);
}

TEST_CASE("bench held-leases reports what one lock client's held leases cost beside the per-lease model",
          "[bench][cli]") {
  std::string out;
  int rc = sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "--json", "bench", "--ops", "held-leases",
                                "--held", "20", "--held-ttl", "1s", "--per-lease", "5"},
                               &out);
  INFO(out);
  REQUIRE(rc == 0);
  const auto lines = json_lines(out);
  REQUIRE(lines.size() == 2);  // the lock client at 20, then today's model at 5
  const bool server_counts = !ctx().is_sqlite() && !ctx().pooler;
  for (const auto& line : lines) {
    INFO(line);
    CHECK(field(line, "op") == "\"held-leases\"");
    CHECK(field(line, "dialect") == "\"" + ctx().name + "\"");
    CHECK(field(line, "errors") == "0");
    const double held = number(line, "held");
    CHECK(number(line, "acquired") == held);
    for (const char* k : {"acquire_s", "threads", "connections", "renewal_statements_per_period",
                          "renew_sql_observed_per_period", "rss_per_lease_bytes", "rss_per_lease_held_bytes",
                          "periods", "release_s"})
      number(line, k);
    // Still owned, by the handles and by the lock table: counts of this cell's leases.
    CHECK(number(line, "owned_after") <= held);
    CHECK(number(line, "db_owned_after") <= held);
    CHECK(!field(line, "server_sessions_source").empty());
    CHECK((field(line, "server_sessions") == "null") == !server_counts);
  }
  const auto& client = lines[0];
  const auto& per_lease = lines[1];
  CHECK(field(client, "model") == "\"lock-client\"");
  CHECK(field(client, "held") == "20");
  // The client's own account, within what its options allow.
  CHECK(number(client, "connections") <= 4);
  CHECK(number(client, "client_threads") <= 4);
  number(client, "renewal_lag_p99_ms");
  number(client, "renewal_rounds_per_period");
  number(client, "renewal_statements_per_cycle");
  number(client, "rss_fixed_bytes");
  CHECK(field(per_lease, "model") == "\"per-lease\"");
  CHECK(field(per_lease, "held") == "5");
  CHECK(field(per_lease, "renewal_lag_p99_ms") == "null");
  // The negative control of the outside counts: today's model runs a
  // watchdog thread per held lease, and /proc/self/task sees each one.
  CHECK(number(per_lease, "threads") >= 5);
  if (ctx().is(sqlguard::DialectKind::kPostgresql) && !ctx().pooler) {
    // PostgreSQL tells the cell's sessions apart by application_name: the
    // lock client's stay within its limit; today's model has one per lease
    // (the watchdogs') plus the shared one.
    CHECK(number(client, "server_sessions") >= 1);
    CHECK(number(client, "server_sessions") <= 4);
    CHECK(number(per_lease, "server_sessions") >= 5);
  }
}

TEST_CASE("bench waiters serves every waiting handle of one lock client in turn and reports hand-off and fairness",
          "[bench][cli]") {
  std::string out;
  int rc = sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "--json", "bench", "--ops", "waiters",
                                "--waiters", "50", "--duration", "300ms", "--warmup", "50ms"},
                               &out);
  INFO(out);
  REQUIRE(rc == 0);
  const auto lines = json_lines(out);
  REQUIRE(lines.size() == 1);
  const auto& line = lines[0];
  CHECK(field(line, "op") == "\"waiters\"");
  CHECK(field(line, "waiters") == "50");
  CHECK(field(line, "clients") == "51");
  CHECK(field(line, "errors") == "0");
  // The hand-off fields and fairness fields, as the handoff op reports them.
  for (const char* k : {"ops_per_s", "p50_ms", "p99_ms", "handoffs", "self_reacquired", "ceiling_release_ms",
                        "ceiling_wakeup_ms", "ceiling_acquire_ms", "ceiling_per_s", "handoff_efficiency",
                        "per_client_min", "per_client_max", "jain_index", "wait_p50_ms", "wait_p99_ms",
                        "wait_max_ms", "timeouts", "timeouts_total", "threads", "client_threads", "connections",
                        "attempts", "wakeups", "polls"})
    number(line, k);
  CHECK(!field(line, "server_sessions").empty());
  CHECK(number(line, "wait_max_ms") >= number(line, "wait_p99_ms"));
  // Measured in whole rounds, each handle once per round (first come, first
  // served inside the client): every handle got its turns.
  CHECK(number(line, "rounds") >= 2);
  CHECK(number(line, "per_client_min") >= 1);
  CHECK(number(line, "handoffs") + number(line, "self_reacquired") == Approx(number(line, "rounds") * 51));
  CHECK(number(line, "timeouts_total") == 0);  // 60 s waits for rounds of 51 hand-offs
  CHECK(number(line, "connections") <= 4);
  CHECK(number(line, "client_threads") <= 4);  // renewal (+ its worker), waiter, listener
}

TEST_CASE("bench --emit-sql prints the statements of each op", "[bench][cli]") {
  std::string out;
  REQUIRE(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "bench", "--emit-sql", "--ops",
                               "lease-distinct,guarded-decrement"},
                              &out) == 0);
  CHECK(out.find("-- op: lease-distinct") != std::string::npos);
  CHECK(out.find("sqlguard_lock") != std::string::npos);
  CHECK(out.find("-- op: guarded-decrement") != std::string::npos);
  // Every statement is named by its catalog entry and file.
  // The take-over, by the dialect's acquire plan: lease_acquire (one statement),
  // MariaDB's lease_take (read first, then upsert returning), SQLite's
  // lease_take_expired (read first, then update returning).
  const std::string take = ctx().is(sqlguard::DialectKind::kMysql)      ? "lease_take"
                           : ctx().is(sqlguard::DialectKind::kPostgresql) ? "lease_acquire"
                                                                         : "lease_take_expired";
  CHECK(out.find("-- " + take + " (sql/" + ctx().name + "/lease.sql)") != std::string::npos);
  // guarded_update, or its _versioned variant once a VersionCas declared the bench's stock
  // table versioned (the one version rule, version_cas.h).
  CHECK((out.find("-- guarded_update (sql/" + ctx().name + "/strategies.sql)") != std::string::npos ||
         out.find("-- guarded_update_versioned (sql/" + ctx().name + "/strategies.sql)") != std::string::npos));
}

TEST_CASE("bench --durable-release releases with the flushed statement where the dialect has one", "[bench][cli]") {
  std::string out;
  REQUIRE(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "bench", "--emit-sql", "--durable-release",
                               "--ops", "lease-distinct"},
                              &out) == 0);
  INFO(out);
  // PostgreSQL's plain release skips the WAL flush; the durable one is its own
  // catalog entry. The other dialects' release is durable as it is.
  const bool pg = ctx().is(sqlguard::DialectKind::kPostgresql);
  CHECK((out.find("-- lease_release_flushed (sql/") != std::string::npos) == pg);
  CHECK((out.find("-- lease_release (sql/") != std::string::npos) == !pg);
}

// ---- the synchronizer ops (issue 28): a LockClient per client thread ----------------------

namespace {
// The one JSON cell of a synchronizer run, checked for what every such cell has.
std::string sync_cell(const std::vector<std::string>& extra, const std::string& op, int clients) {
  std::vector<std::string> argv = {sgtest::cli_path(), "--db", ctx().uri, "--json", "bench", "--ops", op,
                                   "--duration", "500ms", "--warmup", "50ms"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  std::string out;
  const int rc = sgtest::run_process(argv, &out);
  INFO(out);
  REQUIRE(rc == 0);
  const auto lines = json_lines(out);
  REQUIRE(lines.size() == 1);
  const auto& line = lines[0];
  INFO(line);
  CHECK(field(line, "op") == "\"" + op + "\"");
  CHECK(field(line, "dialect") == "\"" + ctx().name + "\"");
  CHECK(field(line, "clients") == std::to_string(clients));
  CHECK(field(line, "mode") == "\"threads\"");
  CHECK(field(line, "client_model") == "\"a LockClient per client thread\"");
  CHECK(field(line, "errors") == "0");
  CHECK(field(line, "raw_ops_per_s") == "null");
  // The bench's own count of holders never saw the invariant broken.
  CHECK(field(line, "overlaps") == "0");
  for (const char* k : {"ops_per_s", "p50_ms", "p99_ms", "ops", "per_client_min", "per_client_max", "wait_p50_ms",
                        "wait_p99_ms", "wait_max_ms", "wait_p99_cycles", "wait_max_cycles", "timeouts", "hold_ms",
                        "pause_ms", "acquire_wait_ms", "statements_per_op", "duration_s"})
    number(line, k);
  CHECK(!field(line, "jain_index").empty());  // null only when no cycle completed
  CHECK(number(line, "wait_max_ms") >= number(line, "wait_p99_ms"));
  CHECK(number(line, "wait_max_cycles") >= number(line, "wait_p99_cycles"));
  CHECK(number(line, "acquire_wait_ms") == 5000);
  return line;
}
}  // namespace

TEST_CASE("bench fair-lease measures the unfair and the fair lease in one cell, waits also in cycles",
          "[bench][cli]") {
  // At 1 client there is no queue: only the 3-client cell is emitted.
  const std::string line = sync_cell({"--clients", "1,3"}, "fair-lease", 3);
  // The unfair side, under the same names with unfair_.
  CHECK(field(line, "unfair_errors") == "0");
  CHECK(field(line, "unfair_overlaps") == "0");
  for (const char* k : {"unfair_ops_per_s", "unfair_p50_ms", "unfair_p99_ms", "unfair_ops", "unfair_per_client_min",
                        "unfair_per_client_max", "unfair_wait_p99_ms", "unfair_wait_max_ms", "unfair_wait_p99_cycles",
                        "unfair_wait_max_cycles", "unfair_timeouts"})
    number(line, k);
  CHECK(!field(line, "unfair_jain_index").empty());
  CHECK(!field(line, "fair_vs_unfair").empty());
  if (number(line, "unfair_ops_per_s") > 0)
    CHECK(number(line, "fair_vs_unfair") == Approx(number(line, "ops_per_s") / number(line, "unfair_ops_per_s"))
              .margin(0.002));
}

TEST_CASE("bench semaphore-hot never sees more holders than permits", "[bench][cli]") {
  const std::string line = sync_cell({"--clients", "4", "--permits", "2"}, "semaphore-hot", 4);
  CHECK(number(line, "permits") == 2);
  CHECK(number(line, "max_holders") >= 0);
  CHECK(number(line, "max_holders") <= 2);
}

TEST_CASE("bench rw-mixed reports each mode, the writers' longest wait and no overlapping holders", "[bench][cli]") {
  const std::string line = sync_cell({"--clients", "3"}, "rw-mixed", 3);
  CHECK(number(line, "exclusive_share") == Approx(0.1));
  for (const char* k : {"shared_ops_per_s", "shared_ops", "shared_p50_ms", "shared_p99_ms", "shared_wait_max_ms",
                        "shared_wait_max_cycles", "shared_timeouts", "exclusive_ops_per_s", "exclusive_ops",
                        "exclusive_p50_ms", "exclusive_p99_ms", "exclusive_wait_max_ms", "exclusive_wait_max_cycles",
                        "exclusive_timeouts", "writer_wait_max_ms", "max_shared_holders",
                        "statements_per_exclusive_op"})
    number(line, k);
  CHECK(number(line, "shared_ops") + number(line, "exclusive_ops") == number(line, "ops"));
  CHECK(number(line, "max_shared_holders") <= 3);
}

TEST_CASE("bench --emit-sql prints the synchronizer ops' statements from sync.sql", "[bench][cli]") {
  std::string out;
  REQUIRE(sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "bench", "--emit-sql", "--ops",
                               "fair-lease,semaphore-hot,rw-mixed"},
                              &out) == 0);
  INFO(out);
  const std::string sync = " (sql/" + ctx().name + "/sync.sql)";
  for (const char* op : {"fair-lease", "semaphore-hot", "rw-mixed"})
    CHECK(out.find(std::string("-- op: ") + op + " (") != std::string::npos);
  // An uncontended fair acquire asks the queue first (nobody waits: its turn).
  CHECK(out.find("-- fair_gate" + sync) != std::string::npos);
  CHECK(out.find("-- sync_open" + sync) != std::string::npos);
  CHECK(out.find("-- sync_hold" + sync) != std::string::npos);
  CHECK(out.find("-- sync_release" + sync) != std::string::npos);
  CHECK(out.find("-- an exclusive cycle (") != std::string::npos);
  // What the run leaves behind: nothing of its names in the synchronizer tables.
  auto conn = ctx().connect();
  for (const char* table : {"sqlguard_sync", "sqlguard_sync_holder", "sqlguard_lock_queue"})
    CHECK(conn->execute(std::string("SELECT COUNT(*) FROM ") + table + " WHERE name LIKE 'bench:%'")
              .rows.at(0)[0]
              .as_int() == 0);
}

TEST_CASE("bench lock-set takes orders of several names as a set and name by name in one cell", "[bench][cli][lock-set]") {
  std::string out;
  int rc = sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "--json", "bench", "--ops", "lock-set",
                                "--clients", "1,3", "--duration", "300ms", "--warmup", "50ms"},
                               &out);
  INFO(out);
  REQUIRE(rc == 0);
  const auto lines = json_lines(out);
  REQUIRE(lines.size() == 2);
  for (const auto& line : lines) {
    INFO(line);
    CHECK(field(line, "op") == "\"lock-set\"");
    CHECK(field(line, "names_per_order") == "5");
    CHECK(field(line, "errors") == "0");
    CHECK(field(line, "one_by_one_errors") == "0");
    CHECK(field(line, "overlaps") == "0");
    CHECK(field(line, "one_by_one_overlaps") == "0");
    CHECK(number(line, "ops_per_s") > 0);
    CHECK(number(line, "one_by_one_ops_per_s") > 0);
    CHECK(number(line, "p99_ms") >= number(line, "p50_ms"));
    CHECK(!field(line, "set_vs_one_by_one").empty());
  }
  CHECK(field(lines[0], "clients") == "1");
  CHECK(field(lines[1], "clients") == "3");
  // One client never waits: its orders never time out.
  CHECK(field(lines[0], "timeouts") == "0");
  // What the run leaves behind: none of its names held.
  auto conn = ctx().connect();
  CHECK(conn->execute("SELECT COUNT(*) FROM sqlguard_lock WHERE name LIKE 'bench:%' AND beat <> 0").rows.at(0)[0].as_int() ==
        0);
}

TEST_CASE("bench lease-coalesced runs many requesters on one lock client with coalescing on and off in one cell",
          "[bench][cli][coalesce]") {
  std::string out;
  int rc = sgtest::run_process({sgtest::cli_path(), "--db", ctx().uri, "--json", "bench", "--ops", "lease-coalesced",
                                "--requesters", "4,24", "--duration", "300ms", "--warmup", "50ms"},
                               &out);
  INFO(out);
  REQUIRE(rc == 0);
  const auto lines = json_lines(out);
  REQUIRE(lines.size() == 2);
  for (const auto& line : lines) {
    INFO(line);
    CHECK(field(line, "op") == "\"lease-coalesced\"");
    CHECK(field(line, "errors") == "0");
    CHECK(field(line, "alone_errors") == "0");
    CHECK(field(line, "misses") == "0");  // each requester's name is its own: every try wins
    CHECK(number(line, "ops_per_s") > 0);
    CHECK(number(line, "alone_ops_per_s") > 0);
    CHECK(number(line, "p99_ms") >= number(line, "p50_ms"));
    CHECK(number(line, "connections") <= 4);
    CHECK(!field(line, "coalesced_vs_alone").empty());
    // The same requesters as coroutines (acquire_awaitable / release_awaitable).
    CHECK(number(line, "coroutine_ops_per_s") > 0);
    CHECK(field(line, "coroutine_errors") == "0");
    CHECK(field(line, "coroutine_misses") == "0");
    CHECK(number(line, "coroutine_p99_ms") >= number(line, "coroutine_p50_ms"));
    // SQLite sends every call alone; a server dialect batches once 24
    // requesters share two work connections (4 may not always queue).
    if (ctx().is_sqlite()) CHECK(number(line, "batches") == 0);
    else if (field(line, "requesters") == "24") CHECK(number(line, "batches") > 0);
  }
  CHECK(field(lines[0], "requesters") == "4");
  CHECK(field(lines[1], "requesters") == "24");
}
