// sqlguard/idempotency.h — idempotency keys: duplicate-submission prevention
// in the style of Stripe/brandur and the IETF Idempotency-Key draft.
//
//   sqlguard::IdempotencyKeys idem(conn);
//   auto fp = sqlguard::request_fingerprint({method, path, body});
//   auto r = idem.execute(tenant, request_key, fp, [&](sqlguard::IdempotencyExecution&) {
//     return sqlguard::StoredResponse{201, create_order(body)};
//   });
//   reply(r.http_status(), r.response.body);
//
// How it works. The (scope, key) primary key of sqlguard_idempotency IS the
// mutex: the first request inserts an `in_progress` placeholder in one
// atomic statement (never check-then-insert), runs the handler with no
// sqlguard transaction open, then stores the response (status code + body
// bytes) and marks the row `completed`. The placeholder carries a lease
// (locked_until, on the DATABASE clock). If the executing process dies, a
// retry after the lease takes the row over with ONE conditional UPDATE that
// matches only while the lease is expired, so exactly one retry re-runs the
// handler. Completing, renewing and removing are owner-checked: an execution
// whose placeholder was taken over cannot overwrite the new owner's result.
//
// Outcomes (return values, never exceptions):
//   kExecuted    the handler ran in this call; its response is stored
//   kReplayed    an earlier execution's stored response (or stored failure)
//   kInProgress  another execution holds the key (HTTP 409); after the
//                optional wait it still does
//   kMismatch    the key was used with a different request fingerprint (422)
//   kLeaseLost   the handler ran but its placeholder was taken over (lease
//                expired) or removed before completion; nothing was stored
//
// Errors (sqlguard::Error): kInvalidArgument for an empty/oversize/non-UTF-8
// scope or key, a fingerprint that is not 64 hex digits, or invalid options
// (at construction); database errors as classified by the dialect. If the
// database fails after the handler ran, the Error propagates and the
// placeholder stays until its lease expires; a retry then runs the handler
// again (the handler's own effects should therefore be idempotent or
// transactional where that matters). A response the database can never
// store (kInvalidArgument: e.g. a body over MariaDB's max_allowed_packet,
// refused before it is sent) releases the key at once instead.
//
// Recovery points (execute_phases(); brandur's "atomic phases"). A handler
// that calls a foreign system (charges a card) cannot be made idempotent by
// replay alone: if the process dies after the charge, the retry that takes
// the key over runs everything again. Written as named phases instead, the
// handler's progress lives on the key's row:
//   - a kLocal phase runs inside a transaction sqlguard opens on the
//     connection; its writes and the recovery point (its name, plus the
//     optional state blob it set) commit together, or not at all;
//   - a kForeign phase runs with no transaction open (never hold one across
//     a network call); it is handed the key, a stable foreign_key() to pass
//     as the foreign system's idempotency key, and the attempt number; its
//     recovery point commits right after it returns;
//   - the phase that returns a response (normally the last) stores it and
//     marks the key completed in that same commit: stored exactly once.
// A retry that takes over an in_progress key whose lease expired resumes
// AFTER the last committed phase, with that phase's state; a completed phase
// never runs again. Only the phase that was running when the execution
// died may run again: a kLocal one from scratch (its transaction rolled
// back), a kForeign one with the same foreign_key() (so the foreign system
// deduplicates the repeated call).
// Errors in a phase: a serialization failure or deadlock (Error kConflict)
// rolls the phase back, unlocks the key (its lease ends now, recovery point
// kept) and returns kConflict (HTTP 409: retry with the same key, which
// resumes at once). TerminalError stores its response as a `failed` result
// that every repeat replays (kExecuted, failed = true). Any other exception
// unlocks the key likewise and is rethrown (with kStoreFailure: stored as
// for execute()).
//
// Thread safety: an IdempotencyKeys borrows one Connection and must not
// outlive it; use one instance (and one Connection) per thread. The handler
// may use the same Connection: no sqlguard transaction is open while it runs.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sqlguard/connection.h"

namespace sqlguard {

// SHA-256 (OpenSSL) of the canonical request, as 64 lower-case hex digits.
std::string request_fingerprint(std::string_view canonical_request);
// Same, over several parts framed unambiguously (each part is prefixed by
// its byte length), so {"ab", "c"} and {"a", "bc"} differ. Typical parts:
// method, path, a canonical form of the body.
std::string request_fingerprint(std::initializer_list<std::string_view> parts);

// A response as stored and replayed: status code + body bytes (binary safe).
struct StoredResponse {
  int status = 200;
  std::string body{};
  bool operator==(const StoredResponse&) const = default;
};

// What to do when the handler throws.
enum class OnHandlerError {
  // Delete the placeholder and rethrow the handler's exception: the request
  // may be retried with the same key and runs anew.
  kRemovePlaceholder,
  // Store a `failed` response (IdempotencyOptions::failure_response) that
  // every repeat replays; execute() returns kExecuted with failed = true and
  // the exception in `error` instead of throwing.
  kStoreFailure,
};

struct IdempotencyOptions {
  // In-progress lease: after it expires (database clock) without the
  // handler completing, one retry takes the key over and runs the handler
  // again. Must exceed the handler's run time (or call renew()).
  // Default: 30s. Range: 10ms..24h.
  std::chrono::milliseconds lease{std::chrono::seconds(30)};
  // How long completed/failed responses are kept for replay; after that the
  // key executes anew and purge_expired_idempotency_keys() deletes the row.
  // In-progress rows expire `lease + retention` after their last renewal.
  // Default: 24h (Stripe's minimum). Range: 1ms..3650 days.
  std::chrono::milliseconds retention{std::chrono::hours(24)};
  // How long execute() waits for a concurrent execution of the same key to
  // finish (then replays its response, or takes over an expired lease)
  // before returning kInProgress. 0 = return kInProgress at once.
  // Default: 0. Range: 0..1h.
  std::chrono::milliseconds in_progress_wait{0};
  // Longest accepted key in bytes; longer keys are refused, never truncated.
  // Default: 255 (the column size). Range: 1..255.
  std::size_t max_key_bytes = 255;
  // Default: kRemovePlaceholder.
  OnHandlerError on_handler_error = OnHandlerError::kRemovePlaceholder;
  // With kStoreFailure: turns the handler's exception into the stored
  // response. Default (empty): status 500, body = what() of a
  // std::exception, else "handler failed".
  std::function<StoredResponse(std::exception_ptr)> failure_response{};
};

enum class IdempotencyOutcome { kExecuted, kReplayed, kInProgress, kMismatch, kLeaseLost, kConflict };
// "executed", "replayed", "in_progress", "mismatch", "lease_lost", "conflict".
// kConflict (execute_phases() only): a phase hit a serialization failure or
// deadlock; the key was unlocked, so retrying the request resumes at once (409).
std::string_view to_string(IdempotencyOutcome outcome) noexcept;

struct IdempotencyResult {
  IdempotencyOutcome outcome = IdempotencyOutcome::kExecuted;
  // kExecuted / kReplayed: the stored response. kLeaseLost: the handler's
  // response (not stored). Otherwise empty.
  StoredResponse response{};
  // The response is a stored failure (OnHandlerError::kStoreFailure).
  bool failed = false;
  // kExecuted with failed: the handler's exception (not rethrown).
  std::exception_ptr error{};
  // kExecuted / kLeaseLost: this call took over the row instead of
  // inserting it: a placeholder whose lease had expired (its execution
  // crashed or stalled) or a finished row past its retention not yet purged.
  bool took_over = false;
  // execute_phases(): the attempt number of this execution (1 = the first,
  // +1 per take-over) and the recovery point it resumed after, if any.
  int attempt = 0;
  std::optional<std::string> resumed_after{};

  // HTTP status to answer with: the response's status for kExecuted /
  // kReplayed, 409 for kInProgress and kConflict, 422 for kMismatch, 500 for
  // kLeaseLost.
  int http_status() const noexcept;
};

// Handed to the handler while it holds the key.
class IdempotencyExecution {
 public:
  const std::string& scope() const noexcept { return scope_; }
  const std::string& key() const noexcept { return key_; }
  // Unique token of this execution (random 128 bits + host + pid).
  const std::string& owner() const noexcept { return owner_; }
  // This execution took over an existing row: a placeholder whose lease had
  // expired (an earlier execution may have partly run) or an expired result.
  bool took_over() const noexcept { return took_over_; }
  // Extends the lease by IdempotencyOptions::lease from now (database
  // clock). Returns false if this execution no longer holds the key (taken
  // over or removed). Uses the borrowed Connection; throws Error on
  // database failure.
  bool renew();

 private:
  friend class IdempotencyKeys;
  IdempotencyExecution(Connection& conn, const IdempotencyOptions& opt, std::string scope, std::string key,
                       std::string owner, bool took_over);
  Connection& conn_;
  const IdempotencyOptions& opt_;
  std::string scope_, key_, owner_;
  bool took_over_;
};

// Handed to each phase of execute_phases().
class PhaseExecution {
 public:
  const std::string& scope() const noexcept { return scope_; }
  const std::string& key() const noexcept { return key_; }
  const std::string& owner() const noexcept { return owner_; }
  // The running phase's name.
  const std::string& phase() const noexcept { return phase_; }
  // 1 for the first execution of the key, +1 for every take-over.
  int attempt() const noexcept { return attempt_; }
  // "<scope>/<key>/<phase>": the same on every attempt, for the foreign
  // system's own idempotency key.
  std::string foreign_key() const { return scope_ + "/" + key_ + "/" + phase_; }
  // The state blob committed with the previous recovery point (the last
  // set_state() of an earlier phase), std::nullopt if none.
  const std::optional<std::string>& state() const noexcept { return state_; }
  // Replaces the state blob; committed with this phase's recovery point
  // (binary safe). Without it the previous blob is carried forward.
  void set_state(std::string blob) { state_ = std::move(blob); }
  // The connection; in a kLocal phase the phase's transaction is open on it.
  Connection& connection() noexcept { return conn_; }

 private:
  friend class IdempotencyKeys;
  PhaseExecution(Connection& conn, std::string scope, std::string key, std::string owner, int attempt)
      : conn_(conn), scope_(std::move(scope)), key_(std::move(key)), owner_(std::move(owner)), attempt_(attempt) {}
  Connection& conn_;
  std::string scope_, key_, owner_, phase_;
  int attempt_;
  std::optional<std::string> state_;
};

enum class PhaseKind {
  kLocal,    // runs inside a transaction that also stores its recovery point
  kForeign,  // runs with no transaction open (calls another system)
};

struct Phase {
  std::string name{};  // 1..64 bytes UTF-8, unique within the handler
  PhaseKind kind = PhaseKind::kLocal;
  // Returns the response to store (the request is done) or std::nullopt
  // to go on with the next phase. The last phase must return a response.
  std::function<std::optional<StoredResponse>(PhaseExecution&)> run{};
  // Isolation of a kLocal phase's transaction. Default: the server's.
  Isolation isolation = Isolation::kDefault;
};

// Thrown by a phase: the request failed for good (a declined card). Its
// response is stored as a `failed` result and replayed to every repeat.
class TerminalError : public std::runtime_error {
 public:
  explicit TerminalError(StoredResponse response)
      : std::runtime_error("terminal error " + std::to_string(response.status)), response_(std::move(response)) {}
  const StoredResponse& response() const noexcept { return response_; }

 private:
  StoredResponse response_;
};

class IdempotencyKeys {
 public:
  using Handler = std::function<StoredResponse(IdempotencyExecution&)>;

  // Validates `options` (Error kInvalidArgument). Borrows `conn`.
  explicit IdempotencyKeys(Connection& conn, IdempotencyOptions options = {});

  // Runs `handler` at most once per (scope, key) within the retention, and
  // replays its response to repeats. `scope` separates tenants/APIs
  // (1..64 bytes UTF-8); `key` is the client's idempotency key
  // (1..max_key_bytes UTF-8); `fingerprint` is request_fingerprint() of the
  // request (64 hex digits). Must not be called inside a transaction open on
  // the connection (the placeholder must commit before the handler runs).
  IdempotencyResult execute(std::string_view scope, std::string_view key, std::string_view fingerprint,
                            const Handler& handler);

  // The same contract for a handler written as phases with recovery points
  // (see "Recovery points" above). `phases`: at least one, names unique.
  // A recovery point that names no phase of `phases` (the handler changed
  // under a live key) is Error(kInvalidArgument); the key is unlocked.
  IdempotencyResult execute_phases(std::string_view scope, std::string_view key, std::string_view fingerprint,
                                   const std::vector<Phase>& phases);

  const IdempotencyOptions& options() const noexcept { return opt_; }

 private:
  // Inserts the placeholder or takes an expired one over (`phased`: keeping
  // its recovery point). Returns a finished result when the key is not ours.
  std::optional<IdempotencyResult> acquire(const std::string& s, const std::string& k, const std::string& fp,
                                           const std::string& owner, bool phased, bool& took_over);
  Connection& conn_;
  IdempotencyOptions opt_;
};

// Retention cleanup, called by `sqlguard cleanup`: deletes rows of
// sqlguard_idempotency whose expire_at (database clock) has passed — never an
// in-progress row whose lease is still running — in batches of at most
// `batch_size` rows, each batch its own autocommit statement so acquirers are
// never blocked for long. Stops after a short batch or `max_batches`
// batches; returns the number of rows deleted (a result of batch_size *
// max_batches means more may remain). Refuses to run inside an open
// transaction. Errors: kInvalidArgument (batch_size outside 1..100000,
// max_batches < 1), database errors.
// `batches`, when given, is increased by the number of DELETE batches run.
std::int64_t purge_expired_idempotency_keys(Connection& conn, int batch_size = 1000, int max_batches = 1000,
                                  int* batches = nullptr);

}  // namespace sqlguard
