// sqlguard/history.h — the grant history and its checker (`sqlguard history`,
// `sqlguard verify`; docs/history.md).
//
// An opt-in record, per name prefix, of every grant, hand-over, release,
// take-over and late renewal of every lock kind (leases default and fair,
// semaphore permits, read-write holdings), written by the database itself in
// the same transaction as the lock's own write (row triggers that
// enable_history() installs and the last disable_history() removes: with no
// scope, nothing is recorded and nothing costs). Times are the database
// clock's. `verify_history()` proves from the record that no two holdings of
// a name overlapped beyond what its kind allows, naming the first violation.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sqlguard/connection.h"

namespace sqlguard {

// A prefix whose names are recorded ("" = every name) and how long its rows
// are kept (cleanup() deletes them after; a name under several scopes keeps
// the longest).
struct HistoryScope {
  std::string prefix;
  std::chrono::milliseconds retention{std::chrono::hours(24 * 7)};
  std::int64_t since_ms = 0;  // database clock: when the scope was first enabled
};

// Starts recording the names that start with `prefix` ("" = all; otherwise
// 1..255 bytes, the text rule) for `retention` (1 min .. 10 years; enabling
// an existing scope again sets its retention). Installs the triggers the
// first time (DDL: PostgreSQL briefly locks the two lock tables against
// writes). Writes made after it returns are recorded. Not inside a
// transaction (kInvalidArgument). Needs the schema of `migrate` 0015.
void enable_history(Connection& conn, const std::string& prefix,
                    std::chrono::milliseconds retention = std::chrono::hours(24 * 7));
// Stops recording `prefix` (its rows stay until cleanup() reaches their
// retention); with the last scope gone the triggers are dropped. False when
// there was no such scope.
bool disable_history(Connection& conn, const std::string& prefix);
std::vector<HistoryScope> history_scopes(Connection& conn);

// One row of the record. `owner`/`fence` are the holding the event is
// about; the prev_* fields the holding it ended (hand-over, confirm,
// take-over, delete) as last renewed.
struct HistoryEvent {
  std::int64_t id = 0;  // a name's events in the order of its writes
  std::string name;
  std::int64_t at_ms = 0;  // database clock
  // grant (a free or released name taken; over a released lease row, prev_*
  // is the released holding and prev_until_ms its release time), handover (a
  // release that granted the lease to the next waiter), confirm (a handed
  // lease taken with the waiter's own token), takeover (an unreleased holding
  // replaced or, for a semaphore or read-write holding, deleted to be
  // replaced), release (a released row purged -- by cleanup(), or a
  // semaphore's / read-write lease's next acquire -- timed at its release),
  // delete (an unreleased lease row deleted by an operator), renew_gap (a
  // renewal that came after its expiry: nobody had taken it over).
  // A release is recorded with the write that ends its released row (one
  // event per lock cycle, not two); until then the row itself shows it.
  std::string event;
  std::string kind;  // lease, semaphore, rw
  std::string mode;  // X (a lease), P (semaphore permits), S or X (read-write)
  std::int64_t slot = 0;
  std::string owner;
  std::int64_t fence = 0;
  std::int64_t permits = 1;
  std::int64_t capacity = 1;  // a semaphore's permits at the event; 1 otherwise
  // The holding's expiry after the event. Its holder's trust window ended
  // before it: the window starts when the holder sent its request (before the
  // database wrote this) and is shorter than the ttl by the safety margin.
  std::int64_t until_ms = 0;
  std::string prev_owner;
  std::int64_t prev_fence = 0;
  std::int64_t prev_until_ms = 0;
  std::int64_t prev_ttl_ms = 0;
};

struct HistoryQuery {
  std::string name;            // exactly this name; or, when empty,
  std::string prefix;          // every name starting with this ("" = all)
  std::int64_t since_ms = 0;   // no event older (database clock)
  std::int64_t after_id = 0;   // page on: the last id already read
  int limit = 1000;            // 1 .. 100000
};
// In id order. Bad input: kInvalidArgument before any statement.
std::vector<HistoryEvent> read_history(Connection& conn, const HistoryQuery& query);

struct HistoryViolation {
  std::string name;
  // overlap: a holding began while another still trusted its lease (a lease,
  //          or a read-write writer against anyone);
  // permits: a semaphore's holdings in trust exceeded its permits;
  // two_kinds: a name held as two kinds at once;
  // fence_order: a lease granted a fence not above every earlier one.
  std::string rule;
  std::string detail;  // one sentence naming both holdings and times
  HistoryEvent event;  // where it shows
  std::optional<HistoryEvent> other;  // the grant of the holding it overlapped
};

struct VerifyReport {
  std::int64_t events = 0;
  std::int64_t names = 0;
  std::int64_t grants = 0;        // grant, handover, confirm, takeover (leases)
  std::int64_t takeovers = 0;
  std::int64_t releases = 0;
  std::int64_t renewal_gaps = 0;
  // Events about a holding the record does not show being granted (it began
  // before since_ms or before recording began): checked as far as they go.
  std::int64_t unmatched = 0;
  std::vector<HistoryViolation> violations;  // the first max_violations, in record order
  bool ok() const noexcept { return violations.empty(); }
};

struct VerifyOptions {
  std::string prefix;          // names starting with it ("" = all)
  std::int64_t since_ms = 0;   // events from then on (database clock)
  int max_violations = 10;     // 1 .. 10000
};
// Reads the record in pages and checks it. A holding ends for the check when
// its holder releases it; one taken over or deleted still counts until its
// holder's trust window ended (prev_until_ms, less a clock-rate allowance of
// 1/1000 of its ttl: the rate assumption of TakeOver::kWatched).
VerifyReport verify_history(Connection& conn, const VerifyOptions& options = {});
// The same check over events already read (any names, in id order).
VerifyReport verify_events(const std::vector<HistoryEvent>& events, int max_violations = 10);

}  // namespace sqlguard
