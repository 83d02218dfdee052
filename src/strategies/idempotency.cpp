// Idempotency keys over sqlguard_idempotency. Every statement is one atomic
// step decided by the database (primary key or conditional UPDATE), with
// every time taken from the database clock (sql/<dialect>/dedup.sql).
#include "sqlguard/idempotency.h"

#include <unistd.h>

#include <algorithm>
#include <random>
#include <thread>

#include "core/metric_hooks.h"
#include "core/crypto.h"
#include "core/catalog.h"
#include "sqlguard/backoff.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/validate.h"
#include "strategies/purge.h"
#include <mutex>

namespace sqlguard {
namespace {

constexpr std::size_t kMaxScopeBytes = 64;  // column size
// A Conflict (MariaDB deadlock between a placeholder INSERT and an owner
// DELETE of the same key) on an autocommit statement is simply retried.
constexpr int kMaxConflictRetries = 20;

std::string owner_token() { return make_owner_token(); }

using detail::Sql;
using detail::run;
using detail::cell;

// Result columns read by name (src/core/statements.def).
constexpr auto kSelStatus = detail::column(Sql::idem_select, "status");
constexpr auto kSelFingerprint = detail::column(Sql::idem_select, "fingerprint");
constexpr auto kSelResponseCode = detail::column(Sql::idem_select, "response_code");
constexpr auto kSelResponseBody = detail::column(Sql::idem_select, "response_body");
constexpr auto kSelLockExpired = detail::column(Sql::idem_select, "lock_expired");
constexpr auto kSelExpired = detail::column(Sql::idem_select, "expired");
constexpr auto kPhaseRecoveryPoint = detail::column(Sql::idem_phase_state, "recovery_point");
constexpr auto kPhaseState = detail::column(Sql::idem_phase_state, "phase_state");
constexpr auto kPhaseAttempt = detail::column(Sql::idem_phase_state, "attempt");

void check_fingerprint(std::string_view fp) {
  bool ok = fp.size() == 64 && std::all_of(fp.begin(), fp.end(), [](char c) {
              return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
            });
  if (!ok)
    throw Error(ErrorCode::kInvalidArgument,
                "idempotency fingerprint must be 64 hex digits (SHA-256, see request_fingerprint()), got " +
                    std::to_string(fp.size()) + " bytes");
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// Full-jitter backoff for polling an in-progress key.
std::chrono::milliseconds backoff(int attempt) {
  auto cap = std::chrono::milliseconds(std::min<long>(250, 10L << std::min(attempt, 5)));
  return jittered(cap, cap / 2);
}


// The stored response of a handler failure (OnHandlerError::kStoreFailure).
StoredResponse failure_response_of(const IdempotencyOptions& opt, std::exception_ptr error) {
  if (opt.failure_response) return opt.failure_response(error);
  StoredResponse r;
  r.status = 500;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    r.body = e.what();
  } catch (...) {
    r.body = "handler failed";
  }
  return r;
}

}  // namespace

std::string request_fingerprint(std::string_view canonical_request) { return detail::sha256_hex(canonical_request); }

std::string request_fingerprint(std::initializer_list<std::string_view> parts) {
  std::string framed;
  for (auto p : parts) {
    framed += std::to_string(p.size());
    framed += ':';
    framed += p;
  }
  return detail::sha256_hex(framed);
}

std::string_view to_string(IdempotencyOutcome o) noexcept {
  switch (o) {
    case IdempotencyOutcome::kExecuted: return "executed";
    case IdempotencyOutcome::kReplayed: return "replayed";
    case IdempotencyOutcome::kInProgress: return "in_progress";
    case IdempotencyOutcome::kMismatch: return "mismatch";
    case IdempotencyOutcome::kLeaseLost: return "lease_lost";
    case IdempotencyOutcome::kConflict: return "conflict";
  }
  return "unknown";
}

int IdempotencyResult::http_status() const noexcept {
  switch (outcome) {
    case IdempotencyOutcome::kExecuted:
    case IdempotencyOutcome::kReplayed: return response.status;
    case IdempotencyOutcome::kInProgress:
    case IdempotencyOutcome::kConflict: return 409;
    case IdempotencyOutcome::kMismatch: return 422;
    case IdempotencyOutcome::kLeaseLost: return 500;
  }
  return 500;
}

IdempotencyExecution::IdempotencyExecution(Connection& conn, const IdempotencyOptions& opt, std::string scope,
                                           std::string key, std::string owner, bool took_over)
    : conn_(conn), opt_(opt), scope_(std::move(scope)), key_(std::move(key)), owner_(std::move(owner)),
      took_over_(took_over) {}

bool IdempotencyExecution::renew() {
  std::int64_t lease = opt_.lease.count();
  return run(conn_, Sql::idem_renew, {lease, lease + opt_.retention.count(), scope_, key_, owner_}).affected == 1;
}

IdempotencyKeys::IdempotencyKeys(Connection& conn, IdempotencyOptions options)
    : conn_(conn), opt_(std::move(options)) {
  using namespace std::chrono;
  check_duration(opt_.lease, "idempotency lease", milliseconds(10), hours(24));
  check_duration(opt_.retention, "idempotency retention", milliseconds(1), hours(24 * 3650));
  check_duration(opt_.in_progress_wait, "idempotency in_progress_wait", milliseconds(0), hours(1));
  if (opt_.max_key_bytes < 1 || opt_.max_key_bytes > kMaxNameBytes)
    throw Error(ErrorCode::kInvalidArgument, "idempotency max_key_bytes must be 1..255, got " +
                                                 std::to_string(opt_.max_key_bytes));
}

std::optional<IdempotencyResult> IdempotencyKeys::acquire(const std::string& s, const std::string& k,
                                                          const std::string& fp, const std::string& owner, bool phased,
                                                          bool& took_over) {
  const std::int64_t lease = opt_.lease.count();
  const std::int64_t in_progress_expiry = lease + opt_.retention.count();
  const auto deadline = std::chrono::steady_clock::now() + opt_.in_progress_wait;
  bool acquired = false;
  int conflicts = 0;

  for (int poll = 0; !acquired; ) {
    try {
      if (detail::insert_if_absent(conn_, Sql::idem_insert, {s, k, fp, owner, lease, in_progress_expiry})) {
        acquired = true;
        break;
      }
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kConflict && ++conflicts < kMaxConflictRetries) continue;  // deadlock: retry
      throw;
    }
    // The key exists: read it.
    Result row = run(conn_, Sql::idem_select, {s, k});
    if (row.empty()) continue;  // removed (handler failed / purged) since the INSERT: try again
    const Row& r = row.rows[0];
    const std::string status = cell(r, kSelStatus).as_string();
    const bool lease_expired = cell(r, kSelLockExpired).as_int() == 1;
    const bool row_expired = cell(r, kSelExpired).as_int() == 1;

    bool stale = status == "in_progress" ? lease_expired : row_expired;
    if (cell(r, kSelFingerprint).as_string() != fp && !(status != "in_progress" && row_expired)) {
      IdempotencyResult out;
      out.outcome = IdempotencyOutcome::kMismatch;
      return out;
    }
    if (!stale && status != "in_progress") {
      IdempotencyResult out;
      out.outcome = IdempotencyOutcome::kReplayed;
      out.failed = status == "failed";
      out.response.status = static_cast<int>(cell(r, kSelResponseCode).as_opt_int().value_or(0));
      out.response.body = cell(r, kSelResponseBody).as_opt_string().value_or("");
      return out;
    }
    if (stale) {
      try {
        if (run(conn_, phased ? Sql::idem_phase_takeover : Sql::idem_takeover, {fp, owner, lease, in_progress_expiry, s, k}).affected == 1) {
          acquired = took_over = true;
          break;
        }
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kConflict || ++conflicts >= kMaxConflictRetries) throw;
      }
      continue;  // another retry won the take-over: read its state again
    }
    // In progress elsewhere, lease alive.
    auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) {
      IdempotencyResult out;
      out.outcome = IdempotencyOutcome::kInProgress;
      return out;
    }
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(backoff(poll++), left));
  }

  return std::nullopt;
}

namespace {
// Counts an outcome of execute() / execute_phases() and its duration.
struct IdemMetric {
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  IdempotencyResult record(IdempotencyResult r) const {
    switch (r.outcome) {
      case IdempotencyOutcome::kExecuted: detail::metric::idem_executions().inc(); break;
      case IdempotencyOutcome::kReplayed: detail::metric::idem_replays().inc(); break;
      case IdempotencyOutcome::kInProgress: detail::metric::idem_in_progress().inc(); break;
      case IdempotencyOutcome::kMismatch: detail::metric::idem_mismatch().inc(); break;
      case IdempotencyOutcome::kLeaseLost: detail::metric::idem_lease_lost().inc(); break;
      case IdempotencyOutcome::kConflict: break;
    }
    detail::metric::idem_seconds().observe(detail::metric::seconds_since(t0));
    return r;
  }
};
}  // namespace

IdempotencyResult IdempotencyKeys::execute(std::string_view scope, std::string_view key, std::string_view fingerprint,
                                           const Handler& handler) {
  validate_name(scope, "idempotency scope", kMaxScopeBytes);
  validate_name(key, "idempotency key", opt_.max_key_bytes);
  check_fingerprint(fingerprint);
  if (!handler) throw Error(ErrorCode::kInvalidArgument, "idempotency handler is empty");
  require_no_transaction(conn_, "IdempotencyKeys::execute()");
  const IdemMetric metric;

  const std::string fp = lower(fingerprint);
  const std::string owner = owner_token();
  const std::string s(scope), k(key);
  bool took_over = false;
  if (auto done = acquire(s, k, fp, owner, false, took_over)) return metric.record(std::move(*done));

  // We hold the key: run the handler with no transaction of ours open.
  IdempotencyExecution exec(conn_, opt_, s, k, owner, took_over);
  IdempotencyResult out;
  out.took_over = took_over;
  std::string status = "completed";
  try {
    out.response = handler(exec);
  } catch (...) {
    auto error = std::current_exception();
    if (opt_.on_handler_error == OnHandlerError::kRemovePlaceholder) {
      // Owner-checked: never remove a placeholder another execution took over.
      try {
        auto del = run(conn_, Sql::idem_remove, {s, k, owner});
        if (del.affected != 1)
          log(LogLevel::kWarning, "idempotency key '" + k + "' in scope '" + s +
                                      "': handler failed after its placeholder was taken over; nothing removed");
      } catch (const std::exception& e) {
        // The handler's exception is what the caller must see; the
        // placeholder then simply expires with its lease.
        log(LogLevel::kWarning, "idempotency key '" + k + "': removing the placeholder failed: " + e.what());
      }
      std::rethrow_exception(error);
    }
    status = "failed";
    out.failed = true;
    out.error = error;
    out.response = failure_response_of(opt_, error);
  }

  // Owner-checked completion: only the execution holding the placeholder
  // stores its response. A lease that expired without a take-over is still
  // ours (the owner token did not change), so the response is kept.
  Result done;
  try {
    done = run(conn_, Sql::idem_complete,
               {status, out.response.status, Value::blob(out.response.body), opt_.retention.count(), s, k, owner});
  } catch (const Error& e) {
    // A response the database can never store (over its packet or value
    // limit: refused before anything was sent) would leave the key in
    // progress until its lease ends: release it now (owner-checked), so a
    // retry does not wait for nothing. Other failures keep the placeholder
    // (the completion may have been stored; the lease decides).
    if (e.code() == ErrorCode::kInvalidArgument) {
      try {
        run(conn_, Sql::idem_remove, {s, k, owner});
      } catch (const std::exception& re) {
        log(LogLevel::kWarning, "idempotency key '" + k + "': releasing it after a response that cannot be stored "
                                "failed: " + re.what());
      }
    }
    throw;
  }
  out.outcome = done.affected == 1 ? IdempotencyOutcome::kExecuted : IdempotencyOutcome::kLeaseLost;
  return metric.record(std::move(out));
}

IdempotencyResult IdempotencyKeys::execute_phases(std::string_view scope, std::string_view key,
                                                  std::string_view fingerprint, const std::vector<Phase>& phases) {
  validate_name(scope, "idempotency scope", kMaxScopeBytes);
  validate_name(key, "idempotency key", opt_.max_key_bytes);
  check_fingerprint(fingerprint);
  if (phases.empty()) throw Error(ErrorCode::kInvalidArgument, "execute_phases(): no phases");
  for (std::size_t i = 0; i < phases.size(); ++i) {
    validate_name(phases[i].name, "idempotency phase name", 64);
    if (!phases[i].run) throw Error(ErrorCode::kInvalidArgument, "phase '" + phases[i].name + "' has no function");
    for (std::size_t j = 0; j < i; ++j)
      if (phases[j].name == phases[i].name)
        throw Error(ErrorCode::kInvalidArgument, "phase '" + phases[i].name + "' is declared twice");
  }
  require_no_transaction(conn_, "IdempotencyKeys::execute_phases()");
  const IdemMetric metric;

  const std::string fp = lower(fingerprint);
  const std::string owner = owner_token();
  const std::string s(scope), k(key);
  bool took_over = false;
  if (auto done = acquire(s, k, fp, owner, true, took_over)) return metric.record(std::move(*done));

  IdempotencyResult out;
  out.took_over = took_over;
  Result st = run(conn_, Sql::idem_phase_state, {s, k, owner});
  if (st.empty()) {  // taken over or removed between acquiring and reading (lease shorter than a round trip)
    out.outcome = IdempotencyOutcome::kLeaseLost;
    return metric.record(std::move(out));
  }
  const auto recovery_point = cell(st.rows[0], kPhaseRecoveryPoint).as_opt_string();
  PhaseExecution exec(conn_, s, k, owner, static_cast<int>(cell(st.rows[0], kPhaseAttempt).as_int()));
  exec.state_ = cell(st.rows[0], kPhaseState).as_opt_string();
  out.attempt = exec.attempt_;
  out.resumed_after = recovery_point;

  // Ends the lease now, keeping the recovery point; never masks the error
  // that led here.
  auto unlock = [&] {
    try {
      run(conn_, Sql::idem_unlock, {s, k, owner});
    } catch (const std::exception& e) {
      log(LogLevel::kWarning, "idempotency key '" + k + "': unlocking after a failed phase failed: " + e.what() +
                                  " (the key is free once its lease ends)");
    }
  };
  // Stores the final response, owner-checked: false = the key is not ours.
  auto complete = [&](const StoredResponse& r, const char* status) {
    return run(conn_, Sql::idem_complete,
               {std::string(status), r.status, Value::blob(r.body), opt_.retention.count(), s, k, owner})
               .affected == 1;
  };
  auto lease_lost = [&](std::optional<StoredResponse> r) {
    out.outcome = IdempotencyOutcome::kLeaseLost;
    if (r) out.response = std::move(*r);
    return out;
  };
  // The handler failed and failures are stored: the stored failure response
  // is the answer (replayed to retries), unless the key's lease was lost.
  auto store_failure = [&](std::exception_ptr error) {
    out.failed = true;
    out.error = std::move(error);
    out.response = failure_response_of(opt_, out.error);
    if (!complete(out.response, "failed")) return metric.record(lease_lost(std::nullopt));
    out.outcome = IdempotencyOutcome::kExecuted;
    return metric.record(std::move(out));
  };

  std::size_t next = 0;
  if (recovery_point) {
    auto it = std::find_if(phases.begin(), phases.end(), [&](const Phase& p) { return p.name == *recovery_point; });
    if (it == phases.end()) {
      unlock();
      throw Error(ErrorCode::kInvalidArgument, "idempotency key '" + k + "' stopped after phase '" + *recovery_point +
                                                   "', which is not a phase of this handler");
    }
    next = static_cast<std::size_t>(it - phases.begin()) + 1;
  }
  const std::int64_t lease = opt_.lease.count();
  for (std::size_t i = next; i < phases.size(); ++i) {
    const Phase& phase = phases[i];
    exec.phase_ = phase.name;
    const bool last = i + 1 == phases.size();
    try {
      std::optional<Transaction> tx;
      if (phase.kind == PhaseKind::kLocal) tx.emplace(conn_, phase.isolation);
      std::optional<StoredResponse> response = phase.run(exec);
      if (!response && last)
        throw Error(ErrorCode::kInvalidArgument, "the last phase ('" + phase.name + "') returned no response");
      if (phase.kind == PhaseKind::kForeign && conn_.in_transaction())
        throw Error(ErrorCode::kInvalidArgument, "foreign phase '" + phase.name + "' left a transaction open");
      bool ours;
      if (response) {
        ours = complete(*response, "completed");
      } else {
        Value blob = exec.state_ ? Value::blob(*exec.state_) : Value();
        ours = run(conn_, Sql::idem_phase_commit,
                   {phase.name, blob, lease, lease + opt_.retention.count(), s, k, owner})
                   .affected == 1;
      }
      if (!ours) return metric.record(lease_lost(std::move(response)));  // tx rolls back: the phase's writes vanish with it
      if (tx) tx->commit();
      if (response) {
        out.outcome = IdempotencyOutcome::kExecuted;
        out.response = std::move(*response);
        return metric.record(std::move(out));
      }
    } catch (const TerminalError& e) {
      // The phase's transaction rolled back; the failure is the answer.
      out.failed = true;
      out.error = std::current_exception();
      out.response = e.response();
      if (!complete(out.response, "failed")) return metric.record(lease_lost(std::nullopt));
      out.outcome = IdempotencyOutcome::kExecuted;
      return metric.record(std::move(out));
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kConflict) {
        // Serialization failure / deadlock: free the key for an immediate retry (409).
        unlock();
        out.outcome = IdempotencyOutcome::kConflict;
        out.error = std::current_exception();
        return metric.record(std::move(out));
      }
      if (opt_.on_handler_error == OnHandlerError::kStoreFailure && e.code() != ErrorCode::kCommitInDoubt &&
          e.code() != ErrorCode::kConnectionLost)
        return store_failure(std::current_exception());
      unlock();
      throw;
    } catch (...) {
      if (opt_.on_handler_error == OnHandlerError::kStoreFailure) return store_failure(std::current_exception());
      unlock();
      throw;
    }
  }
  // Every phase had committed before this call (only reachable when the
  // handler gained phases after its last one ran; the response was stored
  // then, so the key is not in progress): report it as lost.
  return metric.record(lease_lost(std::nullopt));
}

std::int64_t purge_expired_idempotency_keys(Connection& conn, int batch_size, int max_batches, int* batches) {
  if (max_batches < 1)
    throw Error(ErrorCode::kInvalidArgument, "purge_expired_idempotency_keys: max_batches must be >= 1");
  // expire_at always lies beyond locked_until for in-progress rows; the
  // statement's second condition keeps that from ever deleting a live lease.
  return detail::purge_in_batches(conn, "purge_expired_idempotency_keys()", Sql::idem_purge, {}, {batch_size, max_batches},
                                  batches);
}

}  // namespace sqlguard
