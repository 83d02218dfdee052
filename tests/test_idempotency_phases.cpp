// Recovery points (IdempotencyKeys::execute_phases): phases commit with
// their recovery point; a retry after a crash resumes after the last
// committed phase. Real processes are killed (kill -9) between phases and
// inside each phase; each phase's effect must happen exactly once and the
// response be stored once and replayed byte-identical. Negative control: the
// same effects in one execute() handler run twice after the same crash.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>

#include "process_helpers.h"
#include "sqlguard/idempotency.h"
#include "test_context.h"
#include "test_helpers.h"

using namespace sqlguard;
using namespace std::chrono_literals;
using sgtest::ctx;
using sgtest::probe;
using sgtest::query_int;

namespace {

const std::string kFp = request_fingerprint({"POST", "/charge", "phases"});

// PREFIX_fx (local effects), PREFIX_calls (foreign calls), PREFIX_charges
// (the foreign system's deduplicated effect).
std::string make_tables() {
  std::string px = ctx().unique("ph");
  probe().execute_script("CREATE TABLE " + px + "_fx (k VARCHAR(255) NOT NULL, phase VARCHAR(32) NOT NULL, attempt INTEGER NOT NULL)");
  probe().execute_script("CREATE TABLE " + px + "_calls (fkey VARCHAR(255) NOT NULL, attempt INTEGER NOT NULL)");
  probe().execute_script("CREATE TABLE " + px + "_charges (fkey VARCHAR(255) NOT NULL PRIMARY KEY)");
  return px;
}

std::int64_t fx(const std::string& px, const std::string& phase) {
  return query_int("SELECT COUNT(*) FROM " + px + "_fx WHERE phase = ?", {phase});
}

struct Out {
  std::string outcome, resumed, body;
  int http = 0, attempt = 0;
};
Out parse(const std::string& s) {
  Out o;
  std::istringstream in(s);
  in >> o.outcome >> o.http >> o.attempt >> o.resumed >> o.body;
  return o;
}

std::vector<Phase> three_phases(const std::string& px, int* runs) {
  return {
      {"reserve", PhaseKind::kLocal,
       [=](PhaseExecution& x) -> std::optional<StoredResponse> {
         ++runs[0];
         x.connection().execute("INSERT INTO " + px + "_fx (k, phase, attempt) VALUES (?, ?, ?)", {x.key(), x.phase(), x.attempt()});
         x.set_state(std::string("r\0s", 3));
         return std::nullopt;
       }},
      {"charge", PhaseKind::kForeign,
       [=](PhaseExecution& x) -> std::optional<StoredResponse> {
         ++runs[1];
         CHECK_FALSE(x.connection().in_transaction());
         x.set_state(x.state().value_or("?") + "|" + x.foreign_key());
         return std::nullopt;
       }},
      {"finish", PhaseKind::kLocal,
       [=](PhaseExecution& x) -> std::optional<StoredResponse> {
         ++runs[2];
         CHECK(x.connection().in_transaction());
         return StoredResponse{201, x.state().value_or("?")};
       }},
  };
}

}  // namespace

TEST_CASE("phases run in order with their state, commit recovery points, and the response is replayed byte-identical",
          "[idempotency][phases]") {
  auto conn = ctx().connect();
  std::string px = make_tables();
  std::string scope = ctx().unique("ph_scope");
  IdempotencyKeys idem(*conn);
  int runs[3] = {0, 0, 0};
  auto phases = three_phases(px, runs);
  auto r = idem.execute_phases(scope, "k1", kFp, phases);
  REQUIRE(r.outcome == IdempotencyOutcome::kExecuted);
  CHECK(r.attempt == 1);
  CHECK_FALSE(r.resumed_after);
  const std::string expected = std::string("r\0s", 3) + "|" + scope + "/k1/charge";
  CHECK(r.response == StoredResponse{201, expected});
  auto again = idem.execute_phases(scope, "k1", kFp, phases);
  CHECK(again.outcome == IdempotencyOutcome::kReplayed);
  CHECK(again.response == r.response);
  CHECK(runs[0] == 1);
  CHECK(runs[1] == 1);
  CHECK(runs[2] == 1);
  CHECK(fx(px, "reserve") == 1);
  CHECK(query_int("SELECT COUNT(*) FROM sqlguard_idempotency WHERE scope = ? AND recovery_point = 'charge' AND status = 'completed'",
                  {scope}) == 1);
  // A different request under the same key is still a mismatch.
  CHECK(idem.execute_phases(scope, "k1", request_fingerprint("other"), phases).outcome == IdempotencyOutcome::kMismatch);
}

TEST_CASE("a serialization failure in a phase unlocks the key (409) and the immediate retry resumes after the last committed phase",
          "[idempotency][phases]") {
  auto conn = ctx().connect();
  std::string px = make_tables();
  std::string scope = ctx().unique("ph_scope");
  IdempotencyKeys idem(*conn);  // 30 s lease: only the unlock lets the retry in at once
  int runs[3] = {0, 0, 0};
  auto phases = three_phases(px, runs);
  bool fail = true;
  auto inner = phases[2].run;
  phases[2].run = [&](PhaseExecution& x) -> std::optional<StoredResponse> {
    x.connection().execute("INSERT INTO " + px + "_fx (k, phase, attempt) VALUES (?, 'finish-try', 0)", {x.key()});
    if (fail) throw Error(ErrorCode::kConflict, "could not serialize access (simulated 40001)");
    return inner(x);
  };
  auto r = idem.execute_phases(scope, "k", kFp, phases);
  CHECK(r.outcome == IdempotencyOutcome::kConflict);
  CHECK(r.http_status() == 409);
  CHECK(r.error);
  CHECK(fx(px, "finish-try") == 0);  // the phase rolled back
  CHECK(query_int("SELECT COUNT(*) FROM sqlguard_idempotency WHERE scope = ? AND status = 'in_progress' AND recovery_point = 'charge'",
                  {scope}) == 1);
  fail = false;
  auto retry = idem.execute_phases(scope, "k", kFp, phases);
  REQUIRE(retry.outcome == IdempotencyOutcome::kExecuted);
  CHECK(retry.took_over);
  CHECK(retry.attempt == 2);
  CHECK(retry.resumed_after == std::optional<std::string>("charge"));
  CHECK(runs[0] == 1);  // completed phases never ran again
  CHECK(runs[1] == 1);
  CHECK(fx(px, "reserve") == 1);
  CHECK(fx(px, "finish-try") == 1);

  if (ctx().is(DialectKind::kPostgresql)) {
    // A real one: under REPEATABLE READ the phase updates a row another
    // session changed after the phase's snapshot -> 40001 from the server.
    probe().execute_script("CREATE TABLE " + px + "_acct (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)");
    probe().execute("INSERT INTO " + px + "_acct (id, n) VALUES (1, 0)");
    auto other = ctx().connect();
    bool interfere = true;
    std::vector<Phase> rr{
        {"bump", PhaseKind::kLocal,
         [&](PhaseExecution& x) -> std::optional<StoredResponse> {
           x.connection().execute("SELECT n FROM " + px + "_acct WHERE id = 1");  // takes the snapshot
           if (interfere) other->execute("UPDATE " + px + "_acct SET n = n + 100 WHERE id = 1");
           x.connection().execute("UPDATE " + px + "_acct SET n = n + 1 WHERE id = 1");
           return StoredResponse{200, "bumped"};
         },
         Isolation::kRepeatableRead}};
    auto c1 = idem.execute_phases(scope, "rr", kFp, rr);
    CHECK(c1.outcome == IdempotencyOutcome::kConflict);
    CHECK(c1.http_status() == 409);
    interfere = false;
    auto c2 = idem.execute_phases(scope, "rr", kFp, rr);  // unlocked: runs at once
    CHECK(c2.outcome == IdempotencyOutcome::kExecuted);
    CHECK(c2.attempt == 2);
    CHECK(query_int("SELECT n FROM " + px + "_acct WHERE id = 1") == 101);
  }
}

TEST_CASE("a terminal error stores its response, which every repeat replays, and no later phase runs", "[idempotency][phases]") {
  auto conn = ctx().connect();
  std::string px = make_tables();
  std::string scope = ctx().unique("ph_scope");
  IdempotencyKeys idem(*conn);
  int runs[3] = {0, 0, 0};
  auto phases = three_phases(px, runs);
  phases[1].run = [&](PhaseExecution&) -> std::optional<StoredResponse> {
    ++runs[1];
    throw TerminalError(StoredResponse{402, std::string("card declined\0", 14)});
  };
  auto r = idem.execute_phases(scope, "k", kFp, phases);
  CHECK(r.outcome == IdempotencyOutcome::kExecuted);
  CHECK(r.failed);
  CHECK(r.http_status() == 402);
  auto again = idem.execute_phases(scope, "k", kFp, phases);
  CHECK(again.outcome == IdempotencyOutcome::kReplayed);
  CHECK(again.failed);
  CHECK(again.response == r.response);
  CHECK(runs[1] == 1);
  CHECK(runs[2] == 0);
  CHECK(fx(px, "reserve") == 1);
}

TEST_CASE("an ordinary phase error unlocks the key, keeps the recovery point and is rethrown; bad phase lists are refused",
          "[idempotency][phases]") {
  auto conn = ctx().connect();
  std::string px = make_tables();
  std::string scope = ctx().unique("ph_scope");
  IdempotencyKeys idem(*conn);
  int runs[3] = {0, 0, 0};
  auto phases = three_phases(px, runs);
  auto broken = phases;
  broken[2].run = [](PhaseExecution&) -> std::optional<StoredResponse> { throw std::runtime_error("boom"); };
  CHECK_THROWS_WITH(idem.execute_phases(scope, "k", kFp, broken), "boom");
  auto r = idem.execute_phases(scope, "k", kFp, phases);
  CHECK(r.outcome == IdempotencyOutcome::kExecuted);
  CHECK(r.resumed_after == std::optional<std::string>("charge"));
  CHECK(runs[0] == 1);

  // A handler whose phases no longer include the recovery point.
  broken[2].run = [](PhaseExecution&) -> std::optional<StoredResponse> { throw std::runtime_error("boom"); };
  CHECK_THROWS(idem.execute_phases(scope, "k2", kFp, broken));
  std::vector<Phase> renamed{{"other", PhaseKind::kLocal, [](PhaseExecution&) { return std::optional<StoredResponse>(StoredResponse{}); }}};
  CHECK(sgtest::code_of([&] { idem.execute_phases(scope, "k2", kFp, renamed); }) == ErrorCode::kInvalidArgument);

  CHECK(sgtest::code_of([&] { idem.execute_phases(scope, "k3", kFp, {}); }) == ErrorCode::kInvalidArgument);
  auto dup = phases;
  dup[1].name = "reserve";
  CHECK(sgtest::code_of([&] { idem.execute_phases(scope, "k3", kFp, dup); }) == ErrorCode::kInvalidArgument);
  std::vector<Phase> no_response{{"only", PhaseKind::kLocal, [](PhaseExecution&) { return std::optional<StoredResponse>(); }}};
  CHECK(sgtest::code_of([&] { idem.execute_phases(scope, "k4", kFp, no_response); }) == ErrorCode::kInvalidArgument);
  CHECK(query_int("SELECT COUNT(*) FROM sqlguard_idempotency WHERE scope = ? AND idem_key = 'k4' AND recovery_point IS NULL",
                  {scope}) == 1);
}

namespace {

// Runs the three-phase request in a worker that pauses at `pause_at`, kills
// it there with SIGKILL, then retries in a fresh process and replays in a
// third; returns the retry's and the replay's output.
std::pair<Out, Out> crash_and_retry(const std::string& mode, const std::string& px, const std::string& scope,
                                    const std::string& key, const std::string& pause_at) {
  sgtest::tree::TempDir dir;
  const std::string marker = dir.file("marker");
  const auto w = sgtest::worker_path();
  int pid = sgtest::spawn({w, mode, ctx().uri, scope, key, px, pause_at, marker, "500"}, dir.file("victim"));
  auto until = std::chrono::steady_clock::now() + 30s;
  while (!std::filesystem::exists(marker) && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
  REQUIRE(std::filesystem::exists(marker));
  REQUIRE(::kill(pid, SIGKILL) == 0);
  CHECK(sgtest::wait_pid(pid) == 128 + SIGKILL);
  std::string retry_out, replay_out;
  CHECK(sgtest::run_process({w, mode, ctx().uri, scope, key, px, "none", marker, "500"}, &retry_out) == 0);
  CHECK(sgtest::run_process({w, mode, ctx().uri, scope, key, px, "none", marker, "500"}, &replay_out) == 0);
  return {parse(retry_out), parse(replay_out)};
}

}  // namespace

TEST_CASE("processes killed between phases and inside each phase: each effect once, the response stored once and replayed byte-identical",
          "[idempotency][phases][multiprocess]") {
  struct Point {
    std::string pause_at, resumed;
    int calls;  // foreign calls made (the repeat carries the same foreign key)
  };
  const std::vector<Point> points{{"in:reserve", "-", 1},   {"after:reserve", "reserve", 1},
                                  {"in:charge", "reserve", 2}, {"after:charge", "charge", 1},
                                  {"in:finish", "charge", 1}};
  std::string px = make_tables();
  std::string scope = ctx().unique("ph_kill");
  int n = 0;
  for (const auto& p : points) {
    INFO("killed at " << p.pause_at);
    const std::string key = "order-" + std::to_string(++n);
    auto [retry, replay] = crash_and_retry("idem-phases", px, scope, key, p.pause_at);
    CHECK(retry.outcome == "executed");
    CHECK(retry.http == 201);
    CHECK(retry.attempt == 2);
    CHECK(retry.resumed == p.resumed);
    CHECK(replay.outcome == "replayed");
    CHECK(replay.http == 201);
    CHECK(replay.body == retry.body);  // byte-identical (hex of the stored bytes)
    CHECK(retry.body.size() > 4);
    CHECK(retry.body.substr(retry.body.size() - 4) == "00ff");
    const std::string fkey = scope + "/" + key + "/charge";
    CHECK(query_int("SELECT COUNT(*) FROM " + px + "_fx WHERE k = ? AND phase = 'reserve'", {key}) == 1);
    CHECK(query_int("SELECT COUNT(*) FROM " + px + "_fx WHERE k = ? AND phase = 'finish'", {key}) == 1);
    CHECK(query_int("SELECT COUNT(*) FROM " + px + "_charges WHERE fkey = ?", {fkey}) == 1);
    CHECK(query_int("SELECT COUNT(*) FROM " + px + "_calls WHERE fkey = ?", {fkey}) == p.calls);
    // The foreign phase's repeat was told it is attempt 2.
    CHECK(query_int("SELECT MAX(attempt) FROM " + px + "_calls WHERE fkey = ?", {fkey}) == (p.calls == 2 ? 2 : p.pause_at == "in:reserve" || p.pause_at == "after:reserve" ? 2 : 1));
    CHECK(query_int("SELECT COUNT(*) FROM sqlguard_idempotency WHERE scope = ? AND idem_key = ? AND status = 'completed' AND attempt = 2",
                    {scope, key}) == 1);
  }
}

TEST_CASE("negative control: the same effects in one execute() handler run twice after a kill between them",
          "[idempotency][phases][multiprocess]") {
  std::string px = make_tables();
  std::string scope = ctx().unique("ph_plain");
  sgtest::tree::TempDir dir;
  const std::string marker = dir.file("marker");
  const auto w = sgtest::worker_path();
  int pid = sgtest::spawn({w, "idem-plain", ctx().uri, scope, "k", px, "after:reserve", marker, "500"}, dir.file("victim"));
  auto until = std::chrono::steady_clock::now() + 30s;
  while (!std::filesystem::exists(marker) && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
  REQUIRE(::kill(pid, SIGKILL) == 0);
  sgtest::wait_pid(pid);
  std::string out;
  CHECK(sgtest::run_process({w, "idem-plain", ctx().uri, scope, "k", px, "none", marker, "500"}, &out) == 0);
  CHECK(out.rfind("executed 201", 0) == 0);
  CHECK(fx(px, "reserve") == 2);  // the whole handler ran again
  CHECK(fx(px, "finish") == 1);
}
