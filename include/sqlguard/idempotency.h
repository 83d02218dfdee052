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
// transactional where that matters).
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
#include <string>
#include <string_view>

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
  std::string body;
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
  std::function<StoredResponse(std::exception_ptr)> failure_response;
};

enum class IdempotencyOutcome { kExecuted, kReplayed, kInProgress, kMismatch, kLeaseLost };
// "executed", "replayed", "in_progress", "mismatch", "lease_lost".
std::string_view to_string(IdempotencyOutcome outcome) noexcept;

struct IdempotencyResult {
  IdempotencyOutcome outcome = IdempotencyOutcome::kExecuted;
  // kExecuted / kReplayed: the stored response. kLeaseLost: the handler's
  // response (not stored). Otherwise empty.
  StoredResponse response;
  // The response is a stored failure (OnHandlerError::kStoreFailure).
  bool failed = false;
  // kExecuted with failed: the handler's exception (not rethrown).
  std::exception_ptr error;
  // kExecuted / kLeaseLost: this call took over the row instead of
  // inserting it: a placeholder whose lease had expired (its execution
  // crashed or stalled) or a finished row past its retention not yet purged.
  bool took_over = false;

  // HTTP status to answer with: the response's status for kExecuted /
  // kReplayed, 409 for kInProgress, 422 for kMismatch, 500 for kLeaseLost.
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

  const IdempotencyOptions& options() const noexcept { return opt_; }

 private:
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
