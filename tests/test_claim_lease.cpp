// Leased (rescuable) claims, RowLocker::claim_leased(): claims live in the
// table, renew/complete/release are owner-checked, and the rows of a paused
// (SIGSTOP) or killed (kill -9) claimer become claimable once their lease
// ends -- on every dialect. Negative control: completing without the owner
// check completes a rescued job twice.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "process_helpers.h"
#include "sqlguard/row_lock.h"
#include "test_context.h"
#include "test_helpers.h"

using namespace sqlguard;
using namespace std::chrono_literals;
using sgtest::ctx;
using sgtest::query_int;

namespace {

std::string make_jobs(int n) {
  std::string t = ctx().unique("lq_jobs");
  sgtest::probe().execute_script("CREATE TABLE " + t +
                                 " (id INTEGER NOT NULL PRIMARY KEY, status VARCHAR(16) NOT NULL, done_by INTEGER, "
                                 "claimed_by VARCHAR(255), claimed_until BIGINT)");
  for (int i = 1; i <= n; ++i) sgtest::exec("INSERT INTO " + t + " (id, status) VALUES (?, 'pending')", {i});
  return t;
}

RowLockSpec spec(const std::string& t) {
  return {.table = t, .claim_filter = {"status"}, .lease = ClaimLease{.complete_columns = {"status", "done_by"}}};
}

// Lines "WORD ID" of a worker's output file.
std::vector<std::pair<std::string, long>> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::pair<std::string, long>> out;
  std::string w;
  long id;
  while (in >> w >> id) out.emplace_back(w, id);
  return out;
}

long first_claimed(const std::string& path) {
  auto until = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < until) {
    for (auto& [w, id] : lines_of(path))
      if (w == "claimed") return id;
    std::this_thread::sleep_for(10ms);
  }
  return -1;
}

}  // namespace

TEST_CASE("a leased claim excludes other claimers until its lease ends, then the row is rescued and the old owner cannot complete it",
          "[rowlock][lease]") {
  std::string t = make_jobs(3);
  auto c1 = ctx().connect();
  auto c2 = ctx().connect();
  RowLocker a(*c1, spec(t)), b(*c2, spec(t));
  CHECK(a.claim_owner() != b.claim_owner());
  LeaseClaimOptions shortl{.lease = 300ms};
  auto got = a.claim_leased(2, {"pending"}, shortl);
  REQUIRE(got.size() == 2);
  CHECK(got[0][0].as_int() == 1);
  CHECK(got[1][0].as_int() == 2);
  // The claim is in the table, not in a transaction.
  CHECK_FALSE(c1->in_transaction());
  CHECK(query_int("SELECT COUNT(*) FROM " + t + " WHERE claimed_by IS NOT NULL") == 2);
  auto other = b.claim_leased(5, {"pending"}, {.lease = 10s});
  REQUIRE(other.size() == 1);
  CHECK(other[0][0].as_int() == 3);
  CHECK(b.claim_leased(5, {"pending"}).empty());

  // a renews job 1 but not job 2; after the original lease only job 2 is rescued.
  CHECK(a.renew_claim(1, 10s));
  std::this_thread::sleep_for(600ms);
  auto rescued = b.claim_leased(5, {"pending"}, {.lease = 10s});
  REQUIRE(rescued.size() == 1);
  CHECK(rescued[0][0].as_int() == 2);
  CHECK_FALSE(a.complete_claim(2, {"done", 1}));  // no longer ours
  CHECK_FALSE(a.renew_claim(2, 10s));
  CHECK(b.complete_claim(2, {"done", 2}));
  CHECK_FALSE(b.complete_claim(2, {"done", 2}));  // completed once
  CHECK(a.complete_claim(1, {"done", 1}));
  CHECK(b.release_claim(3));                       // given back: claimable at once
  auto again = a.claim_leased(5, {"pending"});
  REQUIRE(again.size() == 1);
  CHECK(again[0][0].as_int() == 3);
  CHECK(query_int("SELECT done_by FROM " + t + " WHERE id = 2") == 2);
  CHECK(query_int("SELECT COUNT(*) FROM " + t + " WHERE status = 'done'") == 2);
  CHECK(query_int("SELECT COUNT(*) FROM " + t + " WHERE id IN (1, 2) AND claimed_by IS NULL AND claimed_until IS NULL") == 2);
}

TEST_CASE("leased claims validate their spec and options, and the transaction-scoped claim is unchanged", "[rowlock][lease]") {
  std::string t = make_jobs(1);
  auto c = ctx().connect();
  RowLocker plain(*c, {.table = t});
  CHECK(sgtest::code_of([&] { plain.claim_leased(1); }) == ErrorCode::kInvalidArgument);
  RowLocker q(*c, spec(t));
  CHECK(sgtest::code_of([&] { q.claim_leased(0, {"pending"}); }) == ErrorCode::kInvalidArgument);
  CHECK(sgtest::code_of([&] { q.claim_leased(1, {}); }) == ErrorCode::kInvalidArgument);
  CHECK(sgtest::code_of([&] { q.claim_leased(1, {"pending"}, {.lease = 1ms}); }) == ErrorCode::kInvalidArgument);
  CHECK(sgtest::code_of([&] { q.complete_claim(1, {"done"}); }) == ErrorCode::kInvalidArgument);
  CHECK(sgtest::code_of([&] {
          RowLocker bad(*c, {.table = t, .lease = ClaimLease{.owner_column = "x y"}});
        }) == ErrorCode::kInvalidArgument);
  {
    Transaction tx(*c);
    CHECK(sgtest::code_of([&] { q.claim_leased(1, {"pending"}); }) == ErrorCode::kInvalidArgument);
  }
  // The transaction-scoped claim still works (kWait: every dialect).
  auto scope = plain.claim(1);
  CHECK(scope.status() == LockStatus::kLocked);
  scope.rollback();
}

namespace {

struct Run {
  int done_rows = 0;       // log rows
  int distinct_done = 0;   // distinct jobs in the log
  int max_per_job = 0;
  long victim_job = -1;    // the paused claimer's first job
  int victim_job_logs = 0;
};

// 3 healthy claimers + one paused (SIGSTOP) + one killed (kill -9) claimer,
// both stopped while holding a claim with a short lease.
Run run_jobs(int njobs, const std::string& paused_mode) {
  std::string t = make_jobs(njobs);
  std::string logt = ctx().unique("lq_log");
  sgtest::probe().execute_script("CREATE TABLE " + logt + " (job INTEGER NOT NULL, worker INTEGER NOT NULL)");
  sgtest::tree::TempDir dir;
  const auto w = sgtest::worker_path();
  // Victims: lease 400 ms, each "works" 4 s on its first job without renewing.
  int paused = sgtest::spawn({w, "lease-claim-jobs", ctx().uri, t, logt, "91", "400", "4000", paused_mode}, dir.file("p"));
  int killed = sgtest::spawn({w, "lease-claim-jobs", ctx().uri, t, logt, "92", "400", "4000", "ok"}, dir.file("k"));
  Run out;
  out.victim_job = first_claimed(dir.file("p"));
  long killed_job = first_claimed(dir.file("k"));
  REQUIRE(out.victim_job > 0);
  REQUIRE(killed_job > 0);
  REQUIRE(::kill(paused, SIGSTOP) == 0);
  REQUIRE(::kill(killed, SIGKILL) == 0);
  CHECK(sgtest::wait_pid(killed) == 128 + SIGKILL);

  std::vector<int> healthy;
  for (int i = 1; i <= 3; ++i)
    healthy.push_back(sgtest::spawn({w, "lease-claim-jobs", ctx().uri, t, logt, std::to_string(i), "5000", "5", "ok"},
                                    dir.file("h" + std::to_string(i))));
  for (int pid : healthy) CHECK(sgtest::wait_pid(pid) == 0);
  // Every job is done while the paused claimer is still stopped: its job and
  // the killed claimer's job were rescued after their leases.
  CHECK(query_int("SELECT COUNT(*) FROM " + t + " WHERE status = 'done'") == njobs);
  CHECK(query_int("SELECT done_by FROM " + t + " WHERE id = ?", {killed_job}) != 92);
  REQUIRE(::kill(paused, SIGCONT) == 0);
  CHECK(sgtest::wait_pid(paused) == 0);
  out.done_rows = static_cast<int>(query_int("SELECT COUNT(*) FROM " + logt));
  out.distinct_done = static_cast<int>(query_int("SELECT COUNT(DISTINCT job) FROM " + logt));
  out.max_per_job = static_cast<int>(
      query_int("SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM " + logt + " GROUP BY job) AS per_job"));
  out.victim_job_logs = static_cast<int>(query_int("SELECT COUNT(*) FROM " + logt + " WHERE job = ?", {out.victim_job}));
  return out;
}

}  // namespace

TEST_CASE("claimers paused by SIGSTOP and killed by kill -9 lose their jobs to others after the lease: none lost, none completed twice",
          "[rowlock][lease][multiprocess]") {
  const int njobs = 40;
  auto r = run_jobs(njobs, "ok");
  CHECK(r.distinct_done == njobs);  // no job lost
  CHECK(r.done_rows == njobs);      // none completed twice
  CHECK(r.max_per_job == 1);
  CHECK(r.victim_job_logs == 1);
}

TEST_CASE("negative control: a resumed claimer that completes without the owner check completes a rescued job twice",
          "[rowlock][lease][multiprocess]") {
  auto r = run_jobs(12, "naive");
  CHECK(r.distinct_done == 12);
  CHECK(r.victim_job_logs == 2);  // the rescuer's completion and the stale one
  CHECK(r.done_rows >= 13);
}
