// Worker modes for the issue-17 multi-process tests: phased idempotent
// handlers killed between and inside phases, and leased claims of paused
// and killed claimers.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "sqlguard/idempotency.h"
#include "sqlguard/row_lock.h"
#include "worker_registry.h"

using namespace sqlguard;

namespace {

// At the named point: tell the test (marker file) and wait to be killed.
void maybe_pause(const std::string& pause_at, const std::string& here, const std::string& marker) {
  if (pause_at != here) return;
  { std::ofstream(marker) << here << "\n"; }
  std::this_thread::sleep_for(std::chrono::seconds(120));
}

}  // namespace

// idem-phases URI SCOPE KEY PREFIX PAUSE_AT MARKER LEASE_MS: one request through a
// three-phase handler (reserve: local; charge: foreign; finish: local). Tables
// PREFIX_fx (k, phase, attempt), PREFIX_calls (fkey, attempt) and the "foreign
// system" PREFIX_charges (fkey PRIMARY KEY), which deduplicates by foreign key.
// PAUSE_AT = in:reserve | after:reserve | in:charge | after:charge | in:finish
// | none. Prints "OUTCOME HTTP ATTEMPT RESUMED_AFTER BODY_HEX".
static sgworker::Register idem_phases("idem-phases", [](const std::string& uri, const std::vector<std::string>& a) {
  auto conn = make_connection(uri);
  const std::string scope = a.at(0), key = a.at(1), px = a.at(2), pause = a.at(3), marker = a.at(4);
  IdempotencyOptions o;
  o.lease = std::chrono::milliseconds(std::stoll(a.at(5)));
  o.in_progress_wait = std::chrono::seconds(20);
  IdempotencyKeys idem(*conn, o);
  std::vector<Phase> phases{
      {"reserve", PhaseKind::kLocal,
       [&](PhaseExecution& x) -> std::optional<StoredResponse> {
         x.connection().execute("INSERT INTO " + px + "_fx (k, phase, attempt) VALUES (?, ?, ?)",
                                {x.key(), x.phase(), x.attempt()});
         x.set_state("reserved:" + x.key());
         maybe_pause(pause, "in:reserve", marker);
         return std::nullopt;
       }},
      {"charge", PhaseKind::kForeign,
       [&](PhaseExecution& x) -> std::optional<StoredResponse> {
         maybe_pause(pause, "after:reserve", marker);
         // The foreign call: logged (every call), effect deduplicated by key.
         x.connection().execute("INSERT INTO " + px + "_calls (fkey, attempt) VALUES (?, ?)",
                                {x.foreign_key(), x.attempt()});
         try {
           x.connection().execute("INSERT INTO " + px + "_charges (fkey) VALUES (?)", {x.foreign_key()});
         } catch (const Error& e) {
           if (e.code() != ErrorCode::kAlreadyExists) throw;
         }
         x.set_state(x.state().value_or("?") + "|charged:" + x.foreign_key());
         maybe_pause(pause, "in:charge", marker);
         return std::nullopt;
       }},
      {"finish", PhaseKind::kLocal,
       [&](PhaseExecution& x) -> std::optional<StoredResponse> {
         maybe_pause(pause, "after:charge", marker);
         x.connection().execute("INSERT INTO " + px + "_fx (k, phase, attempt) VALUES (?, ?, ?)",
                                {x.key(), x.phase(), x.attempt()});
         maybe_pause(pause, "in:finish", marker);
         return StoredResponse{201, x.state().value_or("?") + std::string("\0\xff", 2)};
       }},
  };
  auto r = idem.execute_phases(scope, key, request_fingerprint({"POST", "/charge", key}), phases);
  std::printf("%s %d %d %s %s\n", std::string(to_string(r.outcome)).c_str(), r.http_status(), r.attempt,
              r.resumed_after.value_or("-").c_str(), sgworker::hex(r.response.body).c_str());
  return 0;
});

// idem-plain URI SCOPE KEY PREFIX PAUSE_AT MARKER LEASE_MS: the negative control,
// the same effects in ONE execute() handler (no recovery points).
static sgworker::Register idem_plain("idem-plain", [](const std::string& uri, const std::vector<std::string>& a) {
  auto conn = make_connection(uri);
  const std::string scope = a.at(0), key = a.at(1), px = a.at(2), pause = a.at(3), marker = a.at(4);
  IdempotencyOptions o;
  o.lease = std::chrono::milliseconds(std::stoll(a.at(5)));
  o.in_progress_wait = std::chrono::seconds(20);
  IdempotencyKeys idem(*conn, o);
  auto r = idem.execute(scope, key, request_fingerprint({"POST", "/charge", key}), [&](IdempotencyExecution&) {
    conn->execute("INSERT INTO " + px + "_fx (k, phase, attempt) VALUES (?, 'reserve', 0)", {key});
    maybe_pause(pause, "after:reserve", marker);
    conn->execute("INSERT INTO " + px + "_fx (k, phase, attempt) VALUES (?, 'finish', 0)", {key});
    return StoredResponse{201, "done"};
  });
  std::printf("%s %d\n", std::string(to_string(r.outcome)).c_str(), r.http_status());
  return 0;
});

// lease-claim-jobs URI JOBS LOG WORKER LEASE_MS WORK_MS MODE: claims pending jobs
// one at a time with a leased claim, "works" WORK_MS, then completes the job
// and logs it (LOG: job, worker) in ONE transaction, only if the claim is
// still ours. MODE = ok | naive (negative control: completes without the
// owner check). Prints "claimed ID" / "done ID" / "lost ID", flushed.
// Exits when no job is pending any more.
static sgworker::Register lease_claim_jobs("lease-claim-jobs", [](const std::string& uri, const std::vector<std::string>& a) {
  auto conn = make_connection(uri);
  const std::string jobs = a.at(0), logt = a.at(1);
  const int worker = std::stoi(a.at(2));
  LeaseClaimOptions o;
  o.lease = std::chrono::milliseconds(std::stoll(a.at(3)));
  const auto work = std::chrono::milliseconds(std::stoll(a.at(4)));
  const bool naive = a.at(5) == "naive";
  RowLocker q(*conn, {.table = jobs,
                      .claim_filter = {"status"},
                      .lease = ClaimLease{.complete_columns = {"status", "done_by"}}});
  for (;;) {
    std::vector<Row> rows;
    try {
      rows = q.claim_leased(1, {"pending"}, o);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kLockBusy && e.code() != ErrorCode::kConflict) throw;
      continue;
    }
    if (rows.empty()) {
      auto left = conn->execute("SELECT COUNT(*) FROM " + jobs + " WHERE status = 'pending'").rows.at(0)[0].as_int();
      if (left == 0) return 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(30));  // claimed by others: wait for them or their leases
      continue;
    }
    const auto id = rows[0][0].as_int();
    std::printf("claimed %lld\n", static_cast<long long>(id));
    std::fflush(stdout);
    std::this_thread::sleep_for(work);
    for (int attempt = 0;; ++attempt) {
      try {
        Transaction tx(*conn);
        bool ours;
        if (naive)
          ours = tx.execute("UPDATE " + jobs + " SET status = 'done', done_by = ?, claimed_by = NULL, claimed_until = NULL "
                            "WHERE id = ?", {worker, id}).affected == 1;
        else
          ours = q.complete_claim(id, {"done", worker});
        if (ours) {
          tx.execute("INSERT INTO " + logt + " (job, worker) VALUES (?, ?)", {id, worker});
          tx.commit();
        }
        std::printf("%s %lld\n", ours ? "done" : "lost", static_cast<long long>(id));
        std::fflush(stdout);
        break;
      } catch (const Error& e) {
        if ((e.code() != ErrorCode::kLockBusy && e.code() != ErrorCode::kConflict) || attempt > 50) throw;
      }
    }
  }
});
