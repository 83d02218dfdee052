#include "sqlguard/transition.h"

#include <algorithm>

#include "core/metric_hooks.h"
#include "core/catalog.h"
#include "dialect/dialect.h"
#include "sqlguard/validate.h"
#include "sqlguard/retry.h"
#include "sqlguard/version_cas.h"
#include "strategies/version_rule.h"

namespace sqlguard {

std::string_view to_string(GuardedStatus s) noexcept {
  switch (s) {
    case GuardedStatus::kApplied: return "applied";
    case GuardedStatus::kRejected: return "rejected";
    case GuardedStatus::kNotFound: return "not_found";
  }
  return "unknown";
}

std::string_view to_string(TransitionStatus s) noexcept {
  switch (s) {
    case TransitionStatus::kApplied: return "applied";
    case TransitionStatus::kAlreadyInTarget: return "already_in_target";
    case TransitionStatus::kRejected: return "rejected";
    case TransitionStatus::kNotFound: return "not_found";
  }
  return "unknown";
}

using detail::Sql;

namespace {

// Result columns read by name (src/core/statements.def).
constexpr auto kStatus = detail::column(Sql::sm_state, "status");
constexpr auto kLockedStatus = detail::column(Sql::sm_state_locked, "status");

[[noreturn]] void invalid(const std::string& msg) { throw Error(ErrorCode::kInvalidArgument, msg); }

Sql guard_fragment(Compare op) {
  switch (op) {
    case Compare::kEq: return Sql::guard_eq;
    case Compare::kNe: return Sql::guard_ne;
    case Compare::kLt: return Sql::guard_lt;
    case Compare::kLe: return Sql::guard_le;
    case Compare::kGt: return Sql::guard_gt;
    case Compare::kGe: return Sql::guard_ge;
  }
  invalid("unknown Compare operator");
}

Sql assign_fragment(AssignOp op) {
  switch (op) {
    case AssignOp::kSet: return Sql::assign_set;
    case AssignOp::kAdd: return Sql::assign_add;
    case AssignOp::kSubtract: return Sql::assign_subtract;
  }
  invalid("unknown AssignOp");
}

// The assignment / guard fragments of the catalog, rendered with the
// validated, quoted column (once, at construction).
std::vector<std::string> assignments_sql(const Connection& c, const std::vector<Assignment>& as, std::string_view what) {
  std::vector<std::string> out;
  for (const auto& a : as) {
    validate_identifier(a.column, what);
    out.push_back(detail::catalog(c).render(assign_fragment(a.op), {{"col", c.dialect().quote(a.column)}}));
  }
  return out;
}

std::vector<std::string> guards_sql(const Connection& c, const std::vector<Guard>& gs, std::string_view what) {
  std::vector<std::string> out;
  for (const auto& g : gs) {
    validate_identifier(g.column, what);
    out.push_back(detail::catalog(c).render(guard_fragment(g.op), {{"col", c.dialect().quote(g.column)}}));
  }
  return out;
}

// The caller's transaction if one is open, else our own (committed only
// when the update applied).
class MaybeTransaction {
 public:
  // `needed` false: no transaction of its own (one statement commits itself).
  explicit MaybeTransaction(Connection& c, bool needed = true) {
    if (needed && !c.in_transaction()) own_.emplace(c);
  }
  void commit() {
    if (own_) own_->commit();
  }
  void rollback() {
    if (own_) own_->rollback();
  }

 private:
  std::optional<Transaction> own_;
};

}  // namespace

// ---- GuardedUpdate ----------------------------------------------------------

GuardedUpdate::GuardedUpdate(Connection& conn, GuardedUpdateSpec spec) : conn_(conn) {
  const Dialect& d = conn.dialect();
  validate_identifier(spec.table, "GuardedUpdateSpec::table");
  validate_identifier(spec.key_column, "GuardedUpdateSpec::key_column");
  if (spec.assignments.empty()) invalid("GuardedUpdateSpec::assignments must have at least one entry");
  for (const auto& a : spec.assignments)
    if (a.column == spec.key_column) invalid("GuardedUpdateSpec::assignments may not write the key column '" + a.column + "'");
  table_name_ = spec.table;
  table_ = d.quote(spec.table);
  key_ = d.quote(spec.key_column);
  detail::warn_loose_key_collation(conn, spec.table, spec.key_column, "GuardedUpdate");
  assignments_ = spec.assignments;
  guards_ = spec.guards;
  const auto& cat = detail::catalog(conn);
  assign_sql_ = assignments_sql(conn, spec.assignments, "GuardedUpdateSpec::assignments");
  guard_sql_ = guards_sql(conn, spec.guards, "GuardedUpdateSpec::guards");
  update_sql_ = cat.render(Sql::guarded_update,
                           {{"table", table_}, {"version", std::string()}, {"key", key_}, {"assignments", assign_sql_},
                            {"guards", guard_sql_}});
  exists_sql_ = cat.render(Sql::row_exists, {{"table", table_}, {"key", key_}});
  nvalues_ = spec.assignments.size() + spec.guards.size();
  nassign_ = spec.assignments.size();
  nguards_ = spec.guards.size();
  for (const auto& a : spec.assignments) update_names_.push_back("GuardedUpdate::apply() value for '" + a.column + "'");
  update_names_.push_back("GuardedUpdate::apply() key");
  for (const auto& g : spec.guards) update_names_.push_back("GuardedUpdate::apply() guard value for '" + g.column + "'");
  // The one version rule (version_cas.h): a table declared already refuses
  // a spec that writes its version column here; apply() looks again.
  if (const auto& vc = detail::version_column(conn, table_name_, version_column_)) prepare_versioned(*vc);
}

void GuardedUpdate::prepare_versioned(const std::string& vc) {
  // An assignment that adds to the version column is taken as the spec's
  // own bump (code written before the rule; apply() refuses an addend < 1);
  // any other write of it would break the version's monotony. Column names
  // ignore case on SQLite and MariaDB.
  std::ptrdiff_t own = -1;
  for (std::size_t i = 0; i < assignments_.size(); ++i)
    if (detail::same_column(conn_, assignments_[i].column, vc)) {
      if (assignments_[i].op != AssignOp::kAdd)
        invalid("GuardedUpdateSpec::assignments sets or subtracts '" + assignments_[i].column +
                "', the declared version column of '" + table_name_ + "' (sqlguard moves it itself)");
      own = static_cast<std::ptrdiff_t>(i);
    }
  own_bump_ = own;
  versioned_sql_ = own >= 0 ? update_sql_
                            : detail::catalog(conn_).render(Sql::guarded_update_versioned,
                                                            {{"table", table_},
                                                             {"version", conn_.dialect().quote(vc)},
                                                             {"key", key_},
                                                             {"assignments", assign_sql_},
                                                             {"guards", guard_sql_}});
}

GuardedResult GuardedUpdate::apply(const Value& key, const Params& values) {
  if (values.size() != nvalues_)
    invalid("GuardedUpdate::apply(): " + std::to_string(values.size()) + " values; expected " +
            std::to_string(nvalues_) + " (assignments, then guards)");
  // Looked up at the write, in the caller's transaction if one is open: a
  // declaration made after construction counts.
  const auto& vc = detail::version_column(conn_, table_name_, version_column_);
  if (vc && versioned_sql_.empty()) prepare_versioned(*vc);
  if (vc) check_own_bump(values, "GuardedUpdate::apply()");
  const bool versioned = vc && own_bump_ < 0;
  Params p(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(nassign_));
  p.push_back(key);
  p.insert(p.end(), values.begin() + static_cast<std::ptrdiff_t>(nassign_), values.end());
  if (detail::run_rendered(conn_, versioned ? Sql::guarded_update_versioned : Sql::guarded_update,
                           vc ? versioned_sql_ : update_sql_, p, &update_names_)
          .affected >= 1) {
    detail::metric::guarded_applied().inc();
    return {GuardedStatus::kApplied};
  }
  if (detail::run_rendered(conn_, Sql::row_exists, exists_sql_, {key}).rows.empty()) return {GuardedStatus::kNotFound};
  detail::metric::guarded_rejected().inc();
  return {GuardedStatus::kRejected};
}

void GuardedUpdate::check_own_bump(const Params& values, std::string_view who) const {
  if (own_bump_ < 0) return;
  // A hand-made bump counts only if it moves the version forward: adding
  // 0 (or less) would let a stale compare_and_set() overwrite this write.
  const Value& add = values[static_cast<std::size_t>(own_bump_)];
  if (!add.is_int() || add.as_int() < 1)
    invalid(std::string(who) + ": the value added to '" + assignments_[static_cast<std::size_t>(own_bump_)].column +
            "', the declared version column of '" + table_name_ + "', must be a whole number >= 1 (got " +
            (add.is_int() ? std::to_string(add.as_int()) : add.is_null() ? std::string("NULL") : std::string("a non-integer")) +
            "): a write that does not move the version is not seen by compare_and_set()");
}

namespace {
// Bound values of one apply_all() statement stay under this (SQLite allows
// 32,766 per statement; PostgreSQL and MariaDB 65,535).
constexpr std::size_t kMaxManyParams = 32000;
constexpr std::size_t kMaxManyKeys = 1000;
// update_names_' prefix (apply()'s), replaced in apply_all()'s names.
constexpr std::string_view kApplyPrefix = "GuardedUpdate::apply() ";

Sql many_fragment(AssignOp op) {
  switch (op) {
    case AssignOp::kSet: return Sql::many_set;
    case AssignOp::kAdd: return Sql::many_add;
    case AssignOp::kSubtract: return Sql::many_subtract;
  }
  invalid("unknown AssignOp");
}

Sql many_fragment(Compare op) {
  switch (op) {
    case Compare::kEq: return Sql::many_guard_eq;
    case Compare::kNe: return Sql::many_guard_ne;
    case Compare::kLt: return Sql::many_guard_lt;
    case Compare::kLe: return Sql::many_guard_le;
    case Compare::kGt: return Sql::many_guard_gt;
    case Compare::kGe: return Sql::many_guard_ge;
  }
  invalid("unknown Compare operator");
}

// apply_all() and fire_all(): the items' checks, refused before any SQL.
template <class Item>
void check_many(const std::string& who, const std::vector<Item>& items, std::size_t nvalues, std::size_t max_keys,
                const char* values_are) {
  const std::size_t n = items.size();
  if (n == 0) invalid(who + ": no items");
  if (n > max_keys)
    invalid(who + ": " + std::to_string(n) + " items; at most " + std::to_string(max_keys) +
            " per call with this spec (split the keys, in one transaction of yours if they must go together)");
  for (std::size_t i = 0; i < n; ++i) {
    const auto& it = items[i];
    if (it.values.size() != nvalues)
      invalid(who + ": items[" + std::to_string(i) + "] has " + std::to_string(it.values.size()) + " values; expected " +
              std::to_string(nvalues) + " (" + values_are + ")");
    if (it.key.is_null()) invalid(who + ": items[" + std::to_string(i) + "] has a NULL key");
    for (std::size_t j = 0; j < i; ++j)
      if (items[j].key == it.key)
        invalid(who + ": items[" + std::to_string(i) + "] repeats the key of items[" + std::to_string(j) +
                "] (give each key once, with its whole change)");
  }
}

// Bound values of a many-key statement, each with its name for the text
// rule's errors.
struct ManyParams {
  Params values;
  std::vector<std::string> names;
  void add(Value v, std::string name) {
    values.push_back(std::move(v));
    names.push_back(std::move(name));
  }
  void append(const ManyParams& o) {
    values.insert(values.end(), o.values.begin(), o.values.end());
    names.insert(names.end(), o.names.begin(), o.names.end());
  }
};

std::string item_name(const std::string& who, std::size_t i, std::string_view what) {
  return who + " items[" + std::to_string(i) + "] " + std::string(what);
}
// (key, index) per key: which item a row is (CASE key WHEN ? THEN ?).
template <class Item>
void add_item_pairs(ManyParams& p, const std::string& who, const std::vector<Item>& items) {
  for (std::size_t i = 0; i < items.size(); ++i) {
    p.add(items[i].key, item_name(who, i, "key"));
    p.add(static_cast<std::int64_t>(i), "item index");
  }
}
// (key, value v) per key, `what` naming value v.
template <class Item>
void add_value_pairs(ManyParams& p, const std::string& who, const std::vector<Item>& items, std::size_t v,
                     std::string_view what) {
  for (std::size_t i = 0; i < items.size(); ++i) {
    p.add(items[i].key, item_name(who, i, "key"));
    p.add(items[i].values[v], item_name(who, i, what));
  }
}
template <class Item>
void add_keys(ManyParams& p, const std::string& who, const std::vector<Item>& items) {
  for (std::size_t i = 0; i < items.size(); ++i) p.add(items[i].key, item_name(who, i, "key"));
}

// Runs one all-or-none attempt; outside the caller's transaction a deadlock
// or serialization failure with another writer (or SQLite busy) wrote
// nothing and the attempt runs again under `policy`; inside it the error is
// the caller's. The result's `stats` says how many attempts ran.
// What a many-key statement answered per item (its rows: item, [state,]
// ok, ...): found (a row), its state, whether it may be written. A row
// whose item is -1 (a key matched loosely by its collation) counts for none.
struct ManyAnswer {
  std::vector<char> found, ok;
  std::vector<std::optional<std::string>> state;
  ManyAnswer(const Result& r, std::size_t n, std::size_t ok_col, std::optional<std::size_t> state_col)
      : found(n, 0), ok(n, 0), state(n) {
    for (const auto& row : r.rows) {
      const std::int64_t i = row[0].as_int();
      if (i < 0 || static_cast<std::size_t>(i) >= n) continue;
      const auto k = static_cast<std::size_t>(i);
      found[k] = 1;
      ok[k] = row[ok_col].as_int() == 1;
      if (state_col) state[k] = row[*state_col].as_string();
    }
  }
};

template <class R, class F>
R run_retried(Connection& conn, const RetryPolicy& policy, F&& attempt) {
  const bool own = !conn.in_transaction();
  RetryStats stats;
  for (int n_try = 1;; ++n_try) {
    stats.attempts = n_try;
    try {
      R out = attempt();
      out.stats = stats;
      return out;
    } catch (const Error& e) {
      if (!own || !detail::note_failure(policy, e, stats) || n_try >= policy.max_attempts) throw;
      if (e.code() == ErrorCode::kConnectionLost) conn.reconnect();
    }
    const auto d = detail::backoff_delay(policy, n_try);
    stats.backoff += d;
    detail::sleep_for(d);
  }
}
}  // namespace

std::size_t GuardedUpdate::max_keys_per_call() const noexcept {
  // Per key: its item pair, a pair per guard and per assignment, and its
  // place in both IN lists (PostgreSQL's one statement; the other dialects'
  // two send no more between them).
  const std::size_t per_key = 2 + 2 * nguards_ + 2 * nassign_ + 2;
  return std::min(kMaxManyKeys, (kMaxManyParams - 1) / per_key);
}

std::vector<std::string> GuardedUpdate::many_sql(std::size_t n, bool guards) const {
  const auto& cat = detail::catalog(conn_);
  const std::vector<std::string> whens(n, cat.render(Sql::many_when, {}));
  std::vector<std::string> out;
  auto one = [&](Sql fragment, const std::string& column) {
    out.push_back(cat.render(fragment, {{"col", conn_.dialect().quote(column)}, {"key", key_}, {"whens", whens}}));
  };
  if (guards) {
    for (const auto& g : guards_) one(many_fragment(g.op), g.column);
    return out;
  }
  for (const auto& a : assignments_) one(many_fragment(a.op), a.column);
  return out;
}

GuardedBatchResult GuardedUpdate::apply_all(const std::vector<GuardedItem>& items, const RetryPolicy& policy) {
  policy.validate();
  const std::string who = "GuardedUpdate::apply_all()";
  check_many(who, items, nvalues_, max_keys_per_call(), "assignments, then guards");
  const std::size_t n = items.size();
  const auto& vc = detail::version_column(conn_, table_name_, version_column_);
  if (vc && versioned_sql_.empty()) prepare_versioned(*vc);
  if (vc)
    for (const auto& it : items) check_own_bump(it.values, who);
  const bool versioned = vc && own_bump_ < 0;
  // Values in the statements' order. The lock: (key, index) per key, (key,
  // value) per key for each guard, the keys. The write: (key, value) per
  // key for each assignment, [PostgreSQL: the key count], the keys.
  // (update_names_ is apply()'s: values (assignments), key, guard values.)
  auto what = [&](std::size_t v) { return update_names_[v < nassign_ ? v : v + 1].substr(kApplyPrefix.size()); };
  ManyParams lock, assign, keys;
  add_item_pairs(lock, who, items);
  for (std::size_t v = nassign_; v < nvalues_; ++v) add_value_pairs(lock, who, items, v, what(v));
  add_keys(keys, who, items);
  lock.append(keys);
  for (std::size_t v = 0; v < nassign_; ++v) add_value_pairs(assign, who, items, v, what(v));
  // The statements for n keys, rendered once per key count (a few sizes of
  // cart recur; kept for the last kManyCached counts).
  const auto& cat = detail::catalog(conn_);
  const Sql apply_id = versioned ? Sql::guarded_apply_many_versioned : Sql::guarded_apply_many;
  const Sql update_id = versioned ? Sql::guarded_update_many_versioned : Sql::guarded_update_many;
  const bool one = conn_.dialect().guards_many_keys_in_one_statement();
  auto cached = many_cache_.find({n, versioned});
  if (cached == many_cache_.end()) {
    const detail::Slots common{{"table", table_},
                               {"key", key_},
                               {"items", std::vector<std::string>(n, cat.render(Sql::many_when, {}))},
                               {"guards", many_sql(n, true)},
                               {"keys", std::vector<std::string>(n, cat.render(Sql::param, {}))},
                               {"assignments", many_sql(n, false)},
                               {"version", versioned ? conn_.dialect().quote(*version_column_) : std::string()}};
    if (many_cache_.size() >= kManyCached) many_cache_.clear();
    cached = many_cache_
                 .emplace(std::make_pair(n, versioned),
                          one ? std::make_pair(cat.render(apply_id, common), std::string())
                              : std::make_pair(cat.render(Sql::guarded_lock_many, common), cat.render(update_id, common)))
                 .first;
  }
  const std::string& first_sql = cached->second.first;
  const std::string& update_sql = cached->second.second;
  auto attempt = [&]() -> GuardedBatchResult {
    // Each key's answer (item, ok): found, its guards held.
    auto outcome = [&](const Result& r) {
      const ManyAnswer a(r, n, 1, std::nullopt);
      GuardedBatchResult out;
      for (std::size_t i = 0; i < n; ++i)
        if (!a.found[i] || !a.ok[i])
          out.failures.push_back({i, a.found[i] ? GuardedStatus::kRejected : GuardedStatus::kNotFound});
      out.status = out.failures.empty() ? GuardedStatus::kApplied : out.failures.front().status;
      return out;
    };
    if (one) {
      ManyParams p = lock;
      p.append(assign);
      p.add(static_cast<std::int64_t>(n), who + " key count");
      p.append(keys);
      const Result r = detail::run_rendered(conn_, apply_id, first_sql, p.values, &p.names);
      const bool wrote = !r.rows.empty() && r.rows[0][2].as_int() > 0;
      auto out = outcome(r);
      if (wrote != out.failures.empty())
        throw Error(ErrorCode::kInternal, who + ": the statement " + (wrote ? "wrote" : "did not write") +
                                              " although " + std::to_string(out.failures.size()) + " key(s) failed");
      if (wrote) detail::metric::guarded_applied().inc(n);  // rows written; a refusal counts once
      else detail::metric::guarded_rejected().inc();
      return out;
    }
    MaybeTransaction tx(conn_);
    auto out = outcome(detail::run_rendered(conn_, Sql::guarded_lock_many, first_sql, lock.values, &lock.names));
    if (!out.failures.empty()) {
      tx.rollback();
      detail::metric::guarded_rejected().inc();
      return out;
    }
    ManyParams w = assign;
    w.append(keys);
    const auto wrote = detail::run_rendered(conn_, update_id, update_sql, w.values, &w.names).affected;
    if (wrote != static_cast<std::int64_t>(n))
      throw Error(ErrorCode::kInternal, who + ": " + std::to_string(wrote) + " rows written of " + std::to_string(n) +
                                            " locked (the transaction rolls back)");
    tx.commit();
    detail::metric::guarded_applied().inc(n);
    return out;
  };
  return run_retried<GuardedBatchResult>(conn_, policy, attempt);
}

// ---- StateMachine -----------------------------------------------------------

std::string StateMachine::build_update(const std::vector<std::string>& from, const std::vector<Guard>& guards,
                                       const std::vector<Assignment>& assignments, bool versioned) const {
  const auto& cat = detail::catalog(conn_);
  std::vector<std::string> sets{cat.render(Sql::assign_set, {{"col", status_}})};
  for (auto& a : assignments_sql(conn_, assignments, "TransitionDef::assignments")) sets.push_back(std::move(a));
  std::vector<std::string> params(from.size(), cat.render(Sql::param, {}));
  return cat.render(versioned ? Sql::sm_update_versioned : Sql::sm_update, {{"table", table_},
                                     {"version", version_},
                                     {"key", key_},
                                     {"status", status_},
                                     {"assignments", sets},
                                     {"from", params},
                                     {"guards", guards_sql(conn_, guards, "TransitionDef::guards")}});
}

StateMachine::StateMachine(Connection& conn, StateMachineSpec spec) : conn_(conn) {
  const Dialect& d = conn.dialect();
  validate_identifier(spec.table, "StateMachineSpec::table");
  validate_identifier(spec.key_column, "StateMachineSpec::key_column");
  validate_identifier(spec.status_column, "StateMachineSpec::status_column");
  if (spec.key_column == spec.status_column)
    invalid("StateMachineSpec: key_column and status_column are both '" + spec.key_column + "'");
  table_name_ = spec.table;
  table_ = d.quote(spec.table);
  key_ = d.quote(spec.key_column);
  detail::warn_loose_key_collation(conn, spec.table, spec.key_column, "StateMachine");
  status_ = d.quote(spec.status_column);
  key_name_ = spec.key_column;
  status_name_ = spec.status_column;

  if (spec.states.empty()) invalid("StateMachineSpec::states must declare at least one state");
  for (const auto& s : spec.states) {
    validate_name(s, "state name", 64);
    if (!states_.insert(s).second) invalid("state '" + s + "' is declared twice");
  }
  auto known = [&](const std::string& s, const std::string& where) {
    if (!states_.count(s)) invalid(where + " names state '" + s + "', which is not in StateMachineSpec::states");
  };
  for (const auto& s : spec.terminal_states) {
    known(s, "terminal_states");
    terminal_.insert(s);
  }
  if (spec.transitions.empty()) invalid("StateMachineSpec::transitions must declare at least one transition");
  std::set<std::string> events;
  for (const auto& t : spec.transitions) {
    validate_name(t.event, "event name", 64);
    if (!events.insert(t.event).second) invalid("event '" + t.event + "' is declared twice");
    if (t.from.empty()) invalid("event '" + t.event + "' has no from-states");
    std::set<std::string> from;
    for (const auto& f : t.from) {
      known(f, "event '" + t.event + "'");
      if (terminal_.count(f)) invalid("event '" + t.event + "' leaves terminal state '" + f + "'");
      if (!from.insert(f).second) invalid("event '" + t.event + "' lists from-state '" + f + "' twice");
    }
    known(t.to, "event '" + t.event + "'");
    for (const auto& a : t.assignments)
      if (a.column == spec.status_column || a.column == spec.key_column)
        invalid("event '" + t.event + "' assigns '" + a.column + "', the key or status column");
    Compiled c{t, build_update(t.from, t.guards, t.assignments, false), {}, {}, t.assignments.size() + t.guards.size(), {}};
    for (const auto& a : t.assignments) c.value_names.push_back("fire('" + t.event + "') value for '" + a.column + "'");
    for (const auto& g : t.guards) c.value_names.push_back("fire('" + t.event + "') guard value for '" + g.column + "'");
    events_.push_back(std::move(c));
  }
  // transition_to(): one UPDATE per reachable target, from the union of the
  // from-states of the plain (unguarded, no-assignment) events leading there.
  std::map<std::string, std::vector<std::string>> from_by_target;
  for (const auto& e : events_) {
    if (!e.def.guards.empty() || !e.def.assignments.empty()) continue;
    auto& v = from_by_target[e.def.to];
    for (const auto& f : e.def.from)
      if (std::find(v.begin(), v.end(), f) == v.end()) v.push_back(f);
  }
  for (auto& [to, from] : from_by_target) {
    to_state_sql_[to] = build_update(from, {}, {}, false);
    to_from_[to] = from;
  }

  const auto& cat = detail::catalog(conn);
  state_sql_ = cat.render(Sql::sm_state, {{"table", table_}, {"key", key_}, {"status", status_}});
  state_locked_sql_ = cat.render(Sql::sm_state_locked, {{"table", table_}, {"key", key_}, {"status", status_}});
  if (spec.audit) {
    validate_identifier(spec.audit->table, "AuditSpec::table");
    machine_ = spec.audit->machine.empty() ? spec.table : spec.audit->machine;
    validate_name(machine_, "AuditSpec::machine", 128);
    audit_ = true;
    audit_sql_ = cat.render(Sql::sm_audit_insert, {{"audit_table", d.quote(spec.audit->table)}});
  }
  // The one version rule (version_cas.h): on a table declared already, a
  // spec that writes the version column is refused here; every write looks
  // the declaration up again until it is found.
  if (const auto& vc = detail::version_column(conn, table_name_, version_column_)) {
    prepare_versioned(*vc);
    for (const auto& e : events_)
      if (!e.version_error.empty()) invalid(e.version_error);
  }
}

void StateMachine::prepare_versioned(const std::string& vc) {
  if (detail::same_column(conn_, vc, status_name_) || detail::same_column(conn_, vc, key_name_))
    invalid("StateMachineSpec: '" + vc + "' is the declared version column of '" + table_name_ + "'");
  version_ = conn_.dialect().quote(vc);
  versioned_ = true;  // build_update() below renders with version_
  for (auto& e : events_) {
    e.version_error.clear();
    for (const auto& a : e.def.assignments)
      if (detail::same_column(conn_, a.column, vc))
        e.version_error = "event '" + e.def.event + "' assigns '" + a.column + "', the declared version column of '" +
                          table_name_ + "' (sqlguard moves it itself)";
    if (e.version_error.empty()) e.versioned_sql = build_update(e.def.from, e.def.guards, e.def.assignments, true);
  }
  for (const auto& [to, from] : to_from_) to_state_versioned_sql_[to] = build_update(from, {}, {}, true);
}

bool StateMachine::can_fire(std::string_view from_state, std::string_view event) const {
  for (const auto& e : events_)
    if (e.def.event == event) return std::find(e.def.from.begin(), e.def.from.end(), from_state) != e.def.from.end();
  return false;
}

bool StateMachine::is_terminal(std::string_view state) const { return terminal_.count(std::string(state)) > 0; }

std::optional<std::string> StateMachine::state_of(const Value& key) {
  Result r = detail::run_rendered(conn_, Sql::sm_state, state_sql_, {key});
  if (r.rows.empty()) return std::nullopt;
  return detail::cell(r.rows[0], kStatus).as_string();
}

const StateMachine::Compiled& StateMachine::declared_event(std::string_view event) const {
  // Refused before any SQL: the event must be declared.
  for (const auto& e : events_)
    if (e.def.event == event) return e;
  std::string names;
  for (const auto& e : events_) names += (names.empty() ? "" : ", ") + e.def.event;
  throw Error(ErrorCode::kInvalidTransition, "event '" + std::string(event) + "' is not declared for state machine '" +
                                                 table_name_ + "' (declared: " + names + ")");
}

TransitionResult StateMachine::fire(const Value& key, std::string_view event, const FireOptions& options) {
  const Compiled* c = &declared_event(event);
  if (options.values.size() != c->nvalues)
    invalid("fire('" + c->def.event + "'): " + std::to_string(options.values.size()) + " values; the event needs " +
            std::to_string(c->nvalues) + " (assignments, then guards)");
  return run(key, {c}, c->update_sql, c->versioned_sql, c->def.from, c->def.to, options);
}

TransitionResult StateMachine::transition_to(const Value& key, std::string_view to_state, const std::string& actor) {
  std::string to(to_state);
  if (!states_.count(to))
    invalid("state '" + to + "' is not declared for state machine '" + table_name_ + "'");
  auto it = to_state_sql_.find(to);
  if (it == to_state_sql_.end())
    throw Error(ErrorCode::kInvalidTransition, "no declared (unguarded) transition of state machine '" + table_name_ +
                                                   "' leads to state '" + to + "'");
  std::vector<const Compiled*> candidates;
  for (const auto& e : events_)
    if (e.def.to == to && e.def.guards.empty() && e.def.assignments.empty()) candidates.push_back(&e);
  FireOptions o;
  o.actor = actor;
  return run(key, candidates, it->second, to_state_versioned_sql_[to], to_from_.at(to), to, o);
}

std::size_t StateMachine::max_keys_per_call(std::string_view event) const {
  const Compiled& c = declared_event(event);
  // Per key: its item pair, a pair per guard and per assignment, its place
  // in both IN lists; per call: the from-states, the target, the count.
  const std::size_t per_key = 2 + 2 * c.def.guards.size() + 2 * c.def.assignments.size() + 2;
  return std::min(kMaxManyKeys, (kMaxManyParams - 2 - c.def.from.size()) / per_key);
}

TransitionBatchResult StateMachine::fire_all(const std::vector<FireItem>& items, std::string_view event,
                                             const std::string& actor, const RetryPolicy& policy) {
  policy.validate();
  const Compiled& c = declared_event(event);
  const std::string who = "StateMachine::fire_all('" + c.def.event + "')";
  check_many(who, items, c.nvalues, max_keys_per_call(event), "the event's assignments, then its guards");
  if (!actor.empty()) validate_name(actor, "fire_all() actor", 255);
  const std::size_t n = items.size(), nassign = c.def.assignments.size();
  const auto& cat = detail::catalog(conn_);
  const Dialect& d = conn_.dialect();
  // The names of FireOptions-style values, without fire()'s prefix.
  auto what = [&](std::size_t v) {
    const std::string& name = c.value_names[v];
    return name.substr(name.find(' ') + 1);
  };
  // Values in the statements' order. The lock: (key, index) per key, the
  // from-states, (key, value) per key for each guard, the keys. The write:
  // the target state, (key, value) per key for each assignment, [PostgreSQL:
  // the key count], the keys.
  ManyParams lock, assign, keys;
  add_item_pairs(lock, who, items);
  for (const auto& f : c.def.from) lock.add(f, "from state");
  for (std::size_t v = nassign; v < c.nvalues; ++v) add_value_pairs(lock, who, items, v, what(v));
  add_keys(keys, who, items);
  lock.append(keys);
  assign.add(c.def.to, "target state");
  for (std::size_t v = 0; v < nassign; ++v) add_value_pairs(assign, who, items, v, what(v));
  auto render = [&](bool versioned, Sql id) {
    const std::vector<std::string> whens(n, cat.render(Sql::many_when, {}));
    std::vector<std::string> guards, sets{cat.render(Sql::assign_set, {{"col", status_}})};
    for (const auto& g : c.def.guards)
      guards.push_back(cat.render(many_fragment(g.op), {{"col", d.quote(g.column)}, {"key", key_}, {"whens", whens}}));
    for (const auto& a : c.def.assignments)
      sets.push_back(cat.render(many_fragment(a.op), {{"col", d.quote(a.column)}, {"key", key_}, {"whens", whens}}));
    return cat.render(id, {{"table", table_},
                           {"key", key_},
                           {"status", status_},
                           {"items", whens},
                           {"from", std::vector<std::string>(c.def.from.size(), cat.render(Sql::param, {}))},
                           {"guards", guards},
                           {"keys", std::vector<std::string>(n, cat.render(Sql::param, {}))},
                           {"assignments", sets},
                           {"version", versioned ? version_ : std::string()}});
  };
  // Rendered once per (event, key count, versioned, statement): a shop's
  // carts come in a few sizes. Used at once (a later call may clear it).
  auto rendered = [&](bool versioned, Sql id) -> const std::string& {
    const auto k = std::make_tuple(c.def.event, n, versioned, static_cast<int>(id));
    auto it = fire_cache_.find(k);
    if (it == fire_cache_.end()) {
      if (fire_cache_.size() >= kFireCached) fire_cache_.clear();
      it = fire_cache_.emplace(k, render(versioned, id)).first;
    }
    return it->second;
  };
  auto attempt = [&]() -> TransitionBatchResult {
    TransitionBatchResult out;
    out.event = c.def.event;
    out.to = c.def.to;
    MaybeTransaction tx(conn_, audit_ || !d.guards_many_keys_in_one_statement());
    // The one version rule, looked up in the write's transaction.
    if (const auto& vc = detail::version_column(conn_, table_name_, version_column_)) {
      if (!versioned_) prepare_versioned(*vc);
      if (!c.version_error.empty()) invalid(c.version_error);
    }
    // Each key's answer (item, status, ok): its state, whether the event may fire on it.
    std::optional<ManyAnswer> answer;
    bool wrote = false;
    if (d.guards_many_keys_in_one_statement()) {
      const Sql id = versioned_ ? Sql::sm_apply_many_versioned : Sql::sm_apply_many;
      ManyParams p = lock;
      p.append(assign);
      p.add(static_cast<std::int64_t>(n), who + " key count");
      p.append(keys);
      const Result r = detail::run_rendered(conn_, id, rendered(versioned_, id), p.values, &p.names);
      answer.emplace(r, n, 2, 1);
      wrote = !r.rows.empty() && r.rows[0][3].as_int() > 0;
    } else {
      answer.emplace(detail::run_rendered(conn_, Sql::sm_lock_many, rendered(false, Sql::sm_lock_many), lock.values,
                                          &lock.names),
                     n, 2, 1);
    }
    const auto& state = answer->state;
    const auto& ok = answer->ok;
    for (std::size_t i = 0; i < n; ++i) {
      if (ok[i]) continue;
      TransitionFailure f{i, TransitionStatus::kNotFound, state[i], false};
      if (state[i]) {
        const bool from = std::find(c.def.from.begin(), c.def.from.end(), *state[i]) != c.def.from.end();
        f.status = !from && *state[i] == c.def.to ? TransitionStatus::kAlreadyInTarget : TransitionStatus::kRejected;
        f.guard_failed = from;
      }
      out.failures.push_back(std::move(f));
    }
    if (!out.failures.empty()) {
      if (wrote)
        throw Error(ErrorCode::kInternal, who + ": the statement wrote although " +
                                              std::to_string(out.failures.size()) + " key(s) failed");
      tx.rollback();
      out.status = out.failures.front().status;
      const auto& f = out.failures.front();
      detail::metric::transition_rejected(f.status == TransitionStatus::kNotFound          ? "not_found"
                                          : f.status == TransitionStatus::kAlreadyInTarget ? "already_in_target"
                                          : f.guard_failed                                 ? "guard_failed"
                                                                                           : "illegal_move");
      return out;
    }
    if (!d.guards_many_keys_in_one_statement()) {
      const Sql id = versioned_ ? Sql::guarded_update_many_versioned : Sql::guarded_update_many;
      ManyParams w = assign;
      w.append(keys);
      const auto n_wrote = detail::run_rendered(conn_, id, rendered(versioned_, id), w.values, &w.names).affected;
      if (n_wrote != static_cast<std::int64_t>(n))
        throw Error(ErrorCode::kInternal, who + ": " + std::to_string(n_wrote) + " rows written of " +
                                              std::to_string(n) + " locked (the transaction rolls back)");
    } else if (!wrote) {
      throw Error(ErrorCode::kInternal, who + ": every key could move but the statement wrote nothing");
    }
    if (audit_)
      for (std::size_t i = 0; i < n; ++i)
        detail::run_rendered(conn_, Sql::sm_audit_insert, audit_sql_,
                             {machine_, items[i].key.as_string(), c.def.event, *state[i], c.def.to,
                              actor.empty() ? Value() : Value(actor)});
    tx.commit();
    out.status = TransitionStatus::kApplied;
    detail::metric::transition_applied().inc(n);
    return out;
  };
  return run_retried<TransitionBatchResult>(conn_, policy, attempt);
}

TransitionResult StateMachine::run(const Value& key, const std::vector<const Compiled*>& candidates,
                                   const std::string& update_sql, const std::string& versioned_sql,
                                   const std::vector<std::string>& from, const std::string& to,
                                   const FireOptions& options) {
  if (key.is_null()) invalid("state machine key must not be NULL");
  if (!options.actor.empty()) validate_name(options.actor, "FireOptions::actor", 255);
  TransitionResult out;
  out.to = to;
  out.event = candidates.front()->def.event;
  std::size_t nassign = candidates.front()->def.assignments.size();

  MaybeTransaction tx(conn_);
  // The one version rule, looked up in the write's transaction: a
  // declaration made after construction counts.
  if (const auto& vc = detail::version_column(conn_, table_name_, version_column_)) {
    if (!versioned_) prepare_versioned(*vc);
    for (const auto* c : candidates)
      if (!c->version_error.empty()) invalid(c->version_error);
  }
  if (from.size() == 1) {
    out.from = from.front();
  } else if (audit_) {
    // The audit row needs the exact from-state: lock the row and read it.
    Result r = detail::run_rendered(conn_, Sql::sm_state_locked, state_locked_sql_, {key});
    if (r.rows.empty()) {
      tx.rollback();
      out.status = TransitionStatus::kNotFound;
      return out;
    }
    out.from = detail::cell(r.rows[0], kLockedStatus).as_string();
  }
  if (out.from && candidates.size() > 1)
    for (const auto* c : candidates)
      if (std::find(c->def.from.begin(), c->def.from.end(), *out.from) != c->def.from.end()) {
        out.event = c->def.event;
        break;
      }

  Params p;
  p.reserve(3 + from.size() + options.values.size());
  p.emplace_back(to);
  p.insert(p.end(), options.values.begin(), options.values.begin() + static_cast<std::ptrdiff_t>(nassign));
  p.push_back(key);
  for (const auto& f : from) p.emplace_back(f);
  p.insert(p.end(), options.values.begin() + static_cast<std::ptrdiff_t>(nassign), options.values.end());
  // Names for the text rule's errors, in the same order.
  const auto& value_names = candidates.front()->value_names;
  std::vector<std::string> names{"target state"};
  names.insert(names.end(), value_names.begin(), value_names.begin() + static_cast<std::ptrdiff_t>(nassign));
  names.emplace_back("state machine key");
  names.insert(names.end(), from.size(), "from state");
  names.insert(names.end(), value_names.begin() + static_cast<std::ptrdiff_t>(nassign), value_names.end());

  if (detail::run_rendered(conn_, versioned_ ? Sql::sm_update_versioned : Sql::sm_update,
                           versioned_ ? versioned_sql : update_sql, p, &names)
          .affected >= 1) {
    if (audit_)
      detail::run_rendered(conn_, Sql::sm_audit_insert, audit_sql_, {machine_, key.as_string(), out.event, *out.from, to,
                                 options.actor.empty() ? Value() : Value(options.actor)});
    tx.commit();
    out.status = TransitionStatus::kApplied;
    detail::metric::transition_applied().inc();
    return out;
  }
  // Nothing matched: read back why.
  Result r = detail::run_rendered(conn_, Sql::sm_state, state_sql_, {key});
  tx.rollback();
  out.from.reset();  // only meaningful for kApplied
  if (r.rows.empty()) {
    out.status = TransitionStatus::kNotFound;
    detail::metric::transition_rejected("not_found");
    return out;
  }
  out.current_state = detail::cell(r.rows[0], kStatus).as_string();
  if (std::find(from.begin(), from.end(), *out.current_state) != from.end()) {
    out.status = TransitionStatus::kRejected;
    out.guard_failed = true;
    detail::metric::transition_rejected("guard_failed");
  } else if (*out.current_state == to) {
    out.status = TransitionStatus::kAlreadyInTarget;
    detail::metric::transition_rejected("already_in_target");
  } else {
    out.status = TransitionStatus::kRejected;
    detail::metric::transition_rejected("illegal_move");
  }
  return out;
}

}  // namespace sqlguard
