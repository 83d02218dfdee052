// sqlguard/transition.h — state-machine transitions and guarded updates as
// ONE conditional UPDATE on the user's own table.
//
// StateMachine: a declared transition table, validated at construction.
// fire(id, "pay") compiles to
//   UPDATE orders SET status = 'paid' [, assignments] WHERE id = ? AND status IN ('pending') [AND guards]
// (every value bound) and rows affected decides:
//   kApplied          this call moved the row
//   kAlreadyInTarget  the row is already in the target state (idempotent repeat)
//   kRejected         the row is in another state (current_state read back), or
//                     its state allowed the event but a guard did not hold
//                     (guard_failed)
//   kNotFound         no row with that key
// An event that is not declared, or a target state no declared transition
// leads to, throws Error(kInvalidTransition) BEFORE any SQL runs; an unknown
// state name throws kInvalidArgument.
//
// GuardedUpdate: the same without a status column, e.g. inventory decrement
//   UPDATE stock SET qty = qty - ? WHERE id = ? AND qty >= ?
// (kApplied / kRejected / kNotFound). It never oversells: the check and the
// write are one statement, atomic on every dialect. apply_all() does the
// same for several keys at once, all or none (an order's cart), and
// StateMachine::fire_all() moves several rows together or none.
//
// Audit (optional): one row per APPLIED transition, written in the same
// transaction as the UPDATE, into sqlguard_transition_audit (created by
// migration 0003; run sqlguard migrate) or a table of your own with the same
// columns:
//   machine, entity_key, event, from_state, to_state, actor, at_ms (DB clock)
// plus an auto-increment audit_id. entity_key is the key as text. from_state
// is exact: when an audited event has several from-states, the row is first
// read with a row lock (one extra statement; SQLite: BEGIN IMMEDIATE).
//
// Transactions: fire()/apply() run in the caller's transaction when one is
// open (your business writes commit with them); otherwise each call opens
// and commits its own.
//
// Ownership and threads: borrows the Connection (which must outlive it);
// one connection per thread. Identifiers are validated and quoted once at
// construction (Error kInvalidArgument with the offending name).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "sqlguard/connection.h"
#include "sqlguard/retry.h"

namespace sqlguard {

enum class Compare { kEq, kNe, kLt, kLe, kGt, kGe };

// `column <op> ?`
struct Guard {
  std::string column{};
  Compare op = Compare::kEq;
};

enum class AssignOp {
  kSet,       // column = ?
  kAdd,       // column = column + ?
  kSubtract,  // column = column - ?
};

struct Assignment {
  std::string column{};
  AssignOp op = AssignOp::kSet;
};

// ---- GuardedUpdate ----------------------------------------------------------

struct GuardedUpdateSpec {
  std::string table{};            // required
  std::string key_column = "id";  // Default: "id"
  std::vector<Assignment> assignments{};  // at least one
  std::vector<Guard> guards{};          // Default: none
};

enum class GuardedStatus { kApplied, kRejected, kNotFound };
std::string_view to_string(GuardedStatus s) noexcept;

struct GuardedResult {
  GuardedStatus status = GuardedStatus::kRejected;
  explicit operator bool() const noexcept { return status == GuardedStatus::kApplied; }
};

// One key of GuardedUpdate::apply_all(): the key and its values, as apply()
// takes them (one per assignment, then one per guard).
struct GuardedItem {
  Value key{};
  Params values{};
};

// A key that kept apply_all() from writing: its index in the call's items,
// and why (kRejected: its row's guards did not hold; kNotFound: no row).
struct GuardedFailure {
  std::size_t index = 0;
  GuardedStatus status = GuardedStatus::kRejected;
};

struct GuardedBatchResult {
  // kApplied: every key was written. Otherwise NOTHING was written; status is
  // the first failure's and `failures` lists every key that failed, in item
  // order.
  GuardedStatus status = GuardedStatus::kRejected;
  std::vector<GuardedFailure> failures{};
  RetryStats stats{};  // attempts (apply_all's own transaction only; see below)
  explicit operator bool() const noexcept { return status == GuardedStatus::kApplied; }
};

class GuardedUpdate {
 public:
  GuardedUpdate(Connection& conn, GuardedUpdateSpec spec);
  // `values`: one per assignment, then one per guard, in declaration order.
  // Throws Error(kInvalidArgument) on a count mismatch.
  GuardedResult apply(const Value& key, const Params& values);

  // Several keys, ALL OR NONE — a cart of SKUs, each with its own quantity:
  //   auto r = stock.apply_all({{sku1, {2, 2}}, {sku2, {1, 1}}});
  //   if (!r) for (auto& f : r.failures) ... items[f.index] was f.status
  // Every key's guards are checked on its row LOCKED, and the rows are
  // written only when every key's held; otherwise nothing is written and
  // the result names each key that failed. The rows are locked in key order
  // (the database's), whatever order the items come in, so two apply_all()
  // calls on overlapping keys never deadlock: one waits for the other.
  // PostgreSQL: one statement (guarded_apply_many). MariaDB and SQLite: a
  // locking read, then the write when every guard held, in one transaction
  // (the caller's when one is open, else its own; on SQLite every sqlguard
  // transaction holds the write lock from its BEGIN). A table declared
  // versioned has the version of every written row moved (version_cas.h).
  // In the caller's transaction the rows stay locked until it ends; rows the
  // caller locked before, in another order, can still deadlock with it.
  // Retries: outside a caller's transaction, an attempt that ends in a
  // deadlock or serialization failure with ANOTHER writer (one that locks
  // the same rows in another order; on Galera a write certified first on
  // another node) or SQLite busy wrote nothing and is run again under
  // `policy` (retry.h); when attempts run out, that error is thrown. In the
  // caller's transaction it is thrown at once (their transaction is lost).
  // Error(kInvalidArgument), before any SQL: no items, more than
  // max_keys_per_call(), a value count that is not apply()'s, a NULL key, or
  // a key given twice.
  GuardedBatchResult apply_all(const std::vector<GuardedItem>& items, const RetryPolicy& policy = {});
  // How many keys one apply_all() call may carry with this spec (at most
  // 1000; fewer where the statement's bound values would pass 32,000).
  std::size_t max_keys_per_call() const noexcept;

 private:
  // apply_all()'s rendered guards (`guards`) or assignments for n keys.
  std::vector<std::string> many_sql(std::size_t n, bool guards) const;
  // The one version rule: an assignment that adds to the version column
  // must add a whole number >= 1 (Error kInvalidArgument naming `who`).
  void check_own_bump(const Params& values, std::string_view who) const;
  // The one version rule (version_cas.h), looked up at every write until the
  // table is found declared; then the versioned UPDATE is rendered once.
  void prepare_versioned(const std::string& version_column);
  Connection& conn_;
  std::size_t nvalues_ = 0, nassign_ = 0;
  std::string update_sql_, exists_sql_;
  std::vector<std::string> update_names_;  // names of the UPDATE's values, for errors
  std::string table_name_, table_, key_;   // as given; quoted
  std::vector<Assignment> assignments_;
  std::vector<Guard> guards_;
  std::vector<std::string> assign_sql_, guard_sql_;  // rendered fragments
  std::size_t nguards_ = 0;
  // apply_all()'s rendered statements by (key count, versioned): the first
  // statement (PostgreSQL's one, or the locking read) and the write.
  static constexpr std::size_t kManyCached = 8;
  std::map<std::pair<std::size_t, bool>, std::pair<std::string, std::string>> many_cache_;
  std::optional<std::string> version_column_;        // declared version column, once seen
  std::string versioned_sql_;                        // rendered once it is
  std::ptrdiff_t own_bump_ = -1;  // the assignment that adds to the version column, if any
};

// ---- StateMachine -----------------------------------------------------------

struct TransitionDef {
  std::string event{};            // unique name, e.g. "pay"
  std::vector<std::string> from{};  // allowed current states (at least one)
  std::string to{};               // target state
  // Extra predicates and writes of this event, e.g. guards {{"paid_amount", kGe}}.
  std::vector<Guard> guards{};
  std::vector<Assignment> assignments{};  // may not touch the status column
};

struct AuditSpec {
  // Audit table (validated identifier). Default: "sqlguard_transition_audit".
  std::string table = "sqlguard_transition_audit";
  // Written to the `machine` column. Default: "" = the state machine's table name.
  std::string machine{};
};

struct StateMachineSpec {
  std::string table{};                    // required
  std::string key_column = "id";          // Default: "id"
  std::string status_column = "status";   // Default: "status"
  std::vector<std::string> states{};      // every state, at least one
  std::vector<std::string> terminal_states{};  // no transition may leave these
  std::vector<TransitionDef> transitions{};  // at least one
  std::optional<AuditSpec> audit{};          // Default: no audit
};

enum class TransitionStatus { kApplied, kAlreadyInTarget, kRejected, kNotFound };
std::string_view to_string(TransitionStatus s) noexcept;

struct TransitionResult {
  TransitionStatus status = TransitionStatus::kRejected;
  std::string event{};
  std::string to{};                   // target state
  // kApplied: the state it came from, when known (single from-state, or audited).
  std::optional<std::string> from{};
  // kAlreadyInTarget / kRejected: the state read back after the UPDATE matched nothing.
  std::optional<std::string> current_state{};
  bool guard_failed = false;          // kRejected although the state allowed the event
  explicit operator bool() const noexcept { return status == TransitionStatus::kApplied; }
};

struct FireOptions {
  // One per assignment, then one per guard of the event, in declaration order.
  Params values{};
  // Audit `actor` column; "" = NULL. At most 255 bytes (the column) of text
  // (validate.h), checked whether or not the machine audits, so a bad actor
  // fails the same way everywhere. Default: "".
  std::string actor{};
};

// One key of StateMachine::fire_all(): the key and the event's values for it
// (as FireOptions::values: one per assignment, then one per guard).
struct FireItem {
  Value key{};
  Params values{};
};

// A key that kept fire_all() from moving any: its index in the call's items
// and why: kNotFound (no row), kAlreadyInTarget (current_state is the
// target), kRejected (current_state is not a from-state of the event, or it
// is and a guard did not hold: guard_failed).
struct TransitionFailure {
  std::size_t index = 0;
  TransitionStatus status = TransitionStatus::kRejected;
  std::optional<std::string> current_state{};
  bool guard_failed = false;
};

struct TransitionBatchResult {
  // kApplied: every key moved. Otherwise NOTHING moved; status is the first
  // failure's and `failures` lists every key that failed, in item order.
  TransitionStatus status = TransitionStatus::kRejected;
  std::string event{};
  std::string to{};
  std::vector<TransitionFailure> failures{};
  RetryStats stats{};  // attempts (fire_all's own transaction only)
  explicit operator bool() const noexcept { return status == TransitionStatus::kApplied; }
};

class StateMachine {
 public:
  // Validates everything: identifiers, states declared and unique, events
  // unique, from/to declared, no transition out of a terminal state, no
  // assignment to the key or status column. Error(kInvalidArgument).
  StateMachine(Connection& conn, StateMachineSpec spec);

  // Fires a declared event on the row with key `key`.
  TransitionResult fire(const Value& key, std::string_view event, const FireOptions& options = {});
  // Moves to `to_state` from any state some declared event allows (the
  // union of their from-states); the event reported/audited is the first
  // declared one leading there from the state actually left (audited), or
  // the first declared one leading there. Events with guards or assignments
  // are not eligible. Error(kInvalidTransition) if nothing declared leads to
  // `to_state` (before any SQL), kInvalidArgument if it is not a state.
  TransitionResult transition_to(const Value& key, std::string_view to_state, const std::string& actor = {});

  // Fires `event` on several rows, ALL OR NONE (an order's line items
  // reserved together): every row must be in one of the event's from-states
  // with every guard holding, checked on the row LOCKED; then all move to
  // the target (with the event's assignments, each key's own values), else
  // none does and the result names each key that failed. Rows are locked in
  // key order whatever the items' order, so two fire_all() calls never
  // deadlock; statements, transactions and retries as
  // GuardedUpdate::apply_all(). An audited machine writes one audit row per
  // key, with the exact state it left, in the same transaction.
  // Error(kInvalidTransition) for an undeclared event and
  // Error(kInvalidArgument) for bad items (as apply_all()) or `actor`,
  // before any SQL.
  TransitionBatchResult fire_all(const std::vector<FireItem>& items, std::string_view event,
                                 const std::string& actor = {}, const RetryPolicy& policy = {});
  // How many keys one fire_all() of `event` may carry (at most 1000; fewer
  // where the statement's bound values would pass 32,000).
  std::size_t max_keys_per_call(std::string_view event) const;

  // Pure lookups, no SQL.
  bool can_fire(std::string_view from_state, std::string_view event) const;
  bool is_terminal(std::string_view state) const;
  // Reads the current state (std::nullopt: no such row).
  std::optional<std::string> state_of(const Value& key);

 private:
  struct Compiled {
    TransitionDef def{};
    std::string update_sql{};
    std::string versioned_sql{}; // rendered once the table is found declared
    std::string version_error{}; // ... or why this event may not run on it
    std::size_t nvalues = 0;
    std::vector<std::string> value_names{};  // FireOptions::values, for errors
  };
  // `update_sql`: the plain UPDATE; `versioned_sql`: where its versioned
  // twin will be (filled by prepare_versioned()).
  const Compiled& declared_event(std::string_view event) const;  // else Error(kInvalidTransition)
  TransitionResult run(const Value& key, const std::vector<const Compiled*>& candidates,
                       const std::string& update_sql, const std::string& versioned_sql,
                       const std::vector<std::string>& from, const std::string& to, const FireOptions& options);
  std::string build_update(const std::vector<std::string>& from, const std::vector<Guard>& guards,
                           const std::vector<Assignment>& assignments, bool versioned) const;
  // The one version rule (version_cas.h): checks the spec against the
  // declared version column and renders the versioned UPDATEs, once.
  void prepare_versioned(const std::string& version_column);

  Connection& conn_;
  std::string table_name_;
  std::string table_, key_, status_;
  std::set<std::string> states_, terminal_;
  std::vector<Compiled> events_;
  std::map<std::string, std::string> to_state_sql_;  // transition_to() UPDATEs by target
  std::map<std::string, std::vector<std::string>> to_from_;  // ... and their from-states
  bool audit_ = false;
  std::string machine_, audit_sql_, state_sql_, state_locked_sql_;
  std::string key_name_, status_name_;  // as given
  std::optional<std::string> version_column_;  // declared version column, once seen (version_cas.h)
  std::string version_;                        // ... quoted
  bool versioned_ = false;                     // prepare_versioned() ran
  std::map<std::string, std::string> to_state_versioned_sql_;
  // fire_all()'s rendered statements by (event, key count, versioned,
  // statement): rendered once per shape of cart (kept for the last few).
  static constexpr std::size_t kFireCached = 16;
  std::map<std::tuple<std::string, std::size_t, bool, int>, std::string> fire_cache_;
};

}  // namespace sqlguard
