#include "sqlguard/row_lock.h"

#include "core/metric_hooks.h"
#include "core/catalog.h"
#include "dialect/dialect.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/validate.h"
#include "sqlguard/version_cas.h"
#include "strategies/version_rule.h"

namespace sqlguard {

using detail::Sql;
using detail::Slots;

std::string_view to_string(LockStatus s) noexcept {
  switch (s) {
    case LockStatus::kLocked: return "locked";
    case LockStatus::kNotFound: return "not_found";
    case LockStatus::kBusy: return "busy";
  }
  return "unknown";
}

void RowLockOptions::validate() const {
  check_duration(lock_timeout, "RowLockOptions::lock_timeout", std::chrono::milliseconds(1), std::chrono::hours(24));
}

// ---- RowLockScope -----------------------------------------------------------

RowLockScope::RowLockScope(RowLockScope&& o) noexcept
    : conn_(o.conn_), status_(o.status_), active_(o.active_), rows_(std::move(o.rows_)), busy_(std::move(o.busy_)) {
  o.active_ = false;
}

RowLockScope::~RowLockScope() {
  if (!active_) return;
  try {
    finish(false);
  } catch (const std::exception& e) {
    log(LogLevel::kWarning, std::string("rollback of a row-lock scope failed: ") + e.what());
  }
}

Result RowLockScope::execute(std::string_view sql, const Params& params) {
  if (!active_) throw Error(ErrorCode::kInvalidArgument, "execute() on a row-lock scope that is no longer active");
  return conn_->execute(sql, params);
}

void RowLockScope::commit() {
  if (!active_) throw Error(ErrorCode::kInvalidArgument, "commit() on a row-lock scope that is no longer active");
  finish(true);
}

void RowLockScope::rollback() {
  if (active_) finish(false);
}

void RowLockScope::finish(bool commit) {
  active_ = false;  // whatever happens next, this scope no longer owns the transaction
  if (commit) conn_->commit();
  else conn_->rollback();
}

namespace {
// The mark, renew, complete and release statements of leased claims, plain
// or moving the declared version column (`slots` then has "version").
void render_lease_statements(const detail::Catalog& cat, const Slots& slots, bool versioned,
                             const std::vector<std::string>& complete_sets, std::string& mark, std::string& renew,
                             std::string& complete, std::string& release) {
  Slots with_sets = slots, no_sets = slots;
  with_sets.emplace_back("sets", complete_sets);
  no_sets.emplace_back("sets", std::vector<std::string>{});
  mark = cat.render(versioned ? Sql::row_lease_mark_versioned : Sql::row_lease_mark, slots);
  renew = cat.render(versioned ? Sql::row_lease_renew_versioned : Sql::row_lease_renew, slots);
  const Sql finish = versioned ? Sql::row_lease_finish_versioned : Sql::row_lease_finish;
  complete = cat.render(finish, with_sets);
  release = cat.render(finish, no_sets);
}
}  // namespace

// ---- RowLocker --------------------------------------------------------------

RowLocker::RowLocker(Connection& conn, RowLockSpec spec) : conn_(conn) {
  const Dialect& d = conn.dialect();
  validate_identifier(spec.table, "RowLockSpec::table");
  validate_identifier(spec.key_column, "RowLockSpec::key_column");
  const auto& cat = detail::catalog(conn);
  table_ = d.quote(spec.table);
  key_ = d.quote(spec.key_column);
  detail::warn_loose_key_collation(conn, spec.table, spec.key_column, "RowLocker");
  cols_.push_back(key_);
  for (const auto& c : spec.columns) {
    validate_identifier(c, "RowLockSpec::columns");
    cols_.push_back(d.quote(c));
  }
  for (const auto& c : spec.claim_filter) {
    validate_identifier(c, "RowLockSpec::claim_filter");
    filter_.push_back(cat.render(Sql::param_eq, {{"col", d.quote(c)}}));
    claim_names_.push_back("RowLocker::claim() filter value for '" + c + "'");
  }
  filter_count_ = spec.claim_filter.size();
  claim_names_.emplace_back("RowLocker::claim() limit");
  lock_names_.emplace_back("RowLocker::lock() key");
  if (!spec.lease) return;

  // Leased claims: every statement rendered here, once.
  const auto& l = *spec.lease;
  validate_identifier(l.owner_column, "RowLockSpec::lease.owner_column");
  validate_identifier(l.until_column, "RowLockSpec::lease.until_column");
  if (l.owner_column == l.until_column || l.owner_column == spec.key_column || l.until_column == spec.key_column)
    throw Error(ErrorCode::kInvalidArgument, "RowLockSpec::lease: owner_column, until_column and key_column must differ");
  if (!l.owner.empty()) validate_name(l.owner, "RowLockSpec::lease.owner", 255);
  owner_ = l.owner.empty() ? make_owner_token() : l.owner;
  table_name_ = spec.table;
  key_name_ = spec.key_column;
  owner_col_ = l.owner_column;
  until_col_ = l.until_column;
  for (const auto& c : l.complete_columns) {
    validate_identifier(c, "RowLockSpec::lease.complete_columns");
    if (c == l.owner_column || c == l.until_column || c == spec.key_column)
      throw Error(ErrorCode::kInvalidArgument, "RowLockSpec::lease.complete_columns: '" + c +
                                                   "' is the key, claim or version column");
    complete_sets_.push_back(cat.render(Sql::assign_set_tail, {{"col", d.quote(c)}}));
  }
  complete_columns_ = l.complete_columns;
  ncomplete_ = l.complete_columns.size();
  const std::string owner = d.quote(l.owner_column), until = d.quote(l.until_column);
  const Slots slots{{"table", table_}, {"key", key_}, {"columns", cols_}, {"filter", filter_},
                    {"owner", owner},  {"until", until}};
  lease_select_sql_ = cat.render(filter_.empty() ? Sql::row_lease_claim : Sql::row_lease_claim_filtered, slots);
  render_lease_statements(cat, slots, false, complete_sets_, lease_mark_sql_, lease_renew_sql_, lease_complete_sql_,
                          lease_release_sql_);
  leased_ = true;
  // The one version rule (version_cas.h): on a table declared already,
  // complete_columns may not name the version column.
  if (versioned_now() && !complete_error_.empty()) throw Error(ErrorCode::kInvalidArgument, complete_error_);
}

bool RowLocker::versioned_now() {
  const auto& vc = detail::version_column(conn_, table_name_, version_column_);
  if (!vc || versioned_) return vc.has_value();
  const Dialect& d = conn_.dialect();
  const auto& cat = detail::catalog(conn_);
  if (detail::same_column(conn_, *vc, owner_col_) || detail::same_column(conn_, *vc, until_col_) ||
      detail::same_column(conn_, *vc, key_name_))
    throw Error(ErrorCode::kInvalidArgument, "RowLockSpec::lease: '" + *vc + "', the declared version column of '" +
                                                 table_name_ + "', is the key or a claim column");
  complete_error_.clear();
  for (const auto& c : complete_columns_)
    if (detail::same_column(conn_, c, *vc))
      complete_error_ = "RowLockSpec::lease.complete_columns: '" + c + "' is the key, claim or version column ('" + *vc +
                        "' is the declared version column of '" + table_name_ + "')";
  const Slots slots{{"table", table_},  {"key", key_},          {"columns", cols_},
                    {"filter", filter_}, {"owner", d.quote(owner_col_)}, {"until", d.quote(until_col_)},
                    {"version", d.quote(*vc)}};
  render_lease_statements(cat, slots, true, complete_sets_, lease_mark_v_sql_, lease_renew_v_sql_,
                          lease_complete_v_sql_, lease_release_v_sql_);
  versioned_ = true;
  return true;
}


void LeaseClaimOptions::validate() const {
  check_duration(lease, "LeaseClaimOptions::lease", std::chrono::milliseconds(10), std::chrono::hours(24));
}

void RowLocker::require_lease(const char* what) const {
  if (!leased_)
    throw Error(ErrorCode::kInvalidArgument,
                std::string("RowLocker::") + what + "(): leased claims need RowLockSpec::lease (owner and until columns)");
}

std::vector<Row> RowLocker::claim_leased(std::int64_t limit, const Params& filter_values,
                                         const LeaseClaimOptions& options) {
  require_lease("claim_leased");
  options.validate();
  if (limit < 1 || limit > 10000)
    throw Error(ErrorCode::kInvalidArgument,
                "RowLocker::claim_leased(): limit is " + std::to_string(limit) + "; it must be between 1 and 10000");
  if (filter_values.size() != filter_count_)
    throw Error(ErrorCode::kInvalidArgument, "RowLocker::claim_leased(): " + std::to_string(filter_values.size()) +
                                                 " filter values for " + std::to_string(filter_count_) +
                                                 " claim_filter columns");
  require_no_transaction(conn_, "RowLocker::claim_leased()", "it opens its own transaction");
  Params params = filter_values;
  params.emplace_back(limit);
  const bool filtered = filter_count_ > 0;
  static const std::vector<std::string> kMarkNames{"claim owner", "claim lease (ms)", "claimed key"};
  Transaction tx(conn_);
  const bool versioned = versioned_now();  // in the claim's transaction
  Result candidates = detail::run_rendered(conn_, filtered ? Sql::row_lease_claim_filtered : Sql::row_lease_claim,
                                           lease_select_sql_, params, &claim_names_);
  std::vector<Row> claimed;
  for (auto& row : candidates.rows) {
    // The candidate is locked (SKIP LOCKED) or the database is (SQLite), and
    // the mark repeats the lease condition: 1 row = ours now.
    // The claim returns cols_: the key first (row_lock.h).
    Params mark{owner_, static_cast<std::int64_t>(options.lease.count()), row[0]};
    if (detail::run_rendered(conn_, versioned ? Sql::row_lease_mark_versioned : Sql::row_lease_mark,
                             versioned ? lease_mark_v_sql_ : lease_mark_sql_, mark, &kMarkNames)
            .affected == 1)
      claimed.push_back(std::move(row));
  }
  tx.commit();
  return claimed;
}

bool RowLocker::renew_claim(const Value& key, std::chrono::milliseconds lease) {
  require_lease("renew_claim");
  check_duration(lease, "RowLocker::renew_claim() lease", std::chrono::milliseconds(10), std::chrono::hours(24));
  const bool versioned = versioned_now();
  return detail::run_rendered(conn_, versioned ? Sql::row_lease_renew_versioned : Sql::row_lease_renew,
                              versioned ? lease_renew_v_sql_ : lease_renew_sql_,
                              {static_cast<std::int64_t>(lease.count()), key, owner_})
             .affected == 1;
}

bool RowLocker::complete_claim(const Value& key, const Params& values) {
  require_lease("complete_claim");
  if (values.size() != ncomplete_)
    throw Error(ErrorCode::kInvalidArgument, "RowLocker::complete_claim(): " + std::to_string(values.size()) +
                                                 " values for " + std::to_string(ncomplete_) + " complete_columns");
  const bool versioned = versioned_now();
  if (versioned && !complete_error_.empty()) throw Error(ErrorCode::kInvalidArgument, complete_error_);
  Params p = values;
  p.push_back(key);
  p.emplace_back(owner_);
  return detail::run_rendered(conn_, versioned ? Sql::row_lease_finish_versioned : Sql::row_lease_finish,
                              versioned ? lease_complete_v_sql_ : lease_complete_sql_, p)
             .affected == 1;
}

bool RowLocker::release_claim(const Value& key) {
  require_lease("release_claim");
  const bool versioned = versioned_now();
  return detail::run_rendered(conn_, versioned ? Sql::row_lease_finish_versioned : Sql::row_lease_finish,
                              versioned ? lease_release_v_sql_ : lease_release_sql_, {key, owner_})
             .affected == 1;
}

namespace {
Sql statement_of(bool claim, bool filtered) {
  return !claim ? Sql::row_lock_select : filtered ? Sql::row_claim_filtered : Sql::row_claim;
}
}  // namespace

std::string RowLocker::select_sql(const RowLockOptions& o, bool claim) const {
  const auto& cat = detail::catalog(conn_);
  static constexpr Sql kLock[2][3] = {
      {Sql::lock_exclusive, Sql::lock_exclusive_nowait, Sql::lock_exclusive_skip_locked},
      {Sql::lock_shared, Sql::lock_shared_nowait, Sql::lock_shared_skip_locked}};
  const int wait = o.wait == LockWait::kNoWait ? 1 : o.wait == LockWait::kSkipLocked ? 2 : 0;
  std::string lock = cat.render(kLock[o.strength == LockStrength::kShared ? 1 : 0][wait], {});
  // Where the catalog bounds the wait inside the statement (MariaDB's SET
  // STATEMENT), in whole seconds, at least 1.
  const auto secs = std::max<std::int64_t>(1, (o.lock_timeout.count() + 999) / 1000);
  return cat.render(statement_of(claim, !filter_.empty()), {{"table", table_},
                                                            {"key", key_},
                                                            {"columns", cols_},
                                                            {"filter", filter_},
                                                            {"lock", lock},
                                                            {"timeout_s", std::to_string(secs)}});
}

RowLockScope RowLocker::lock(const Value& key, const RowLockOptions& options) {
  options.validate();
  if (options.wait == LockWait::kSkipLocked)
    throw Error(ErrorCode::kInvalidArgument,
                "RowLocker::lock(): SKIP LOCKED on a single key would silently lock nothing; use claim()");
  return run(false, {key}, options);
}

RowLockScope RowLocker::claim(std::int64_t limit, const Params& filter_values, const RowLockOptions& options) {
  options.validate();
  if (limit < 1 || limit > 10000)
    throw Error(ErrorCode::kInvalidArgument,
                "RowLocker::claim(): limit is " + std::to_string(limit) + "; it must be between 1 and 10000");
  if (filter_values.size() != filter_count_)
    throw Error(ErrorCode::kInvalidArgument, "RowLocker::claim(): " + std::to_string(filter_values.size()) +
                                                 " filter values for " + std::to_string(filter_count_) +
                                                 " claim_filter columns");
  if (options.wait == LockWait::kSkipLocked && !conn_.capabilities().skip_locked)
    conn_.dialect().not_supported("row-lock claim with SKIP LOCKED");
  Params params = filter_values;
  params.emplace_back(limit);
  return run(true, params, options);
}

namespace {
// Puts a session-scoped lock timeout back; never throws from the destructor.
// (A flag + value rather than std::optional: GCC 12 misreports the latter
// as maybe-uninitialized here.)
struct TimeoutRestore {
  Connection& conn;
  bool pending = false;
  std::int64_t previous = 0;
  void now() {
    if (!pending) return;
    pending = false;
    conn.dialect().restore_session_lock_timeout(conn, previous);
  }
  ~TimeoutRestore() {
    try {
      now();
    } catch (const std::exception& e) {
      log(LogLevel::kWarning, std::string("restoring the session lock timeout failed: ") + e.what());
    }
  }
};
}  // namespace

RowLockScope RowLocker::run(bool claim, const Params& params, const RowLockOptions& o) {
  const std::string sql = select_sql(o, claim);
  require_no_transaction(conn_, "a row-lock scope", "it opens its own transaction");
  const Dialect& d = conn_.dialect();
  RowLockScope scope(conn_);
  // NOWAIT and SKIP LOCKED never wait on dialects that have them; on SQLite
  // NOWAIT means "do not wait for the write lock" (busy timeout 0).
  std::optional<std::chrono::milliseconds> session_wait;
  if (o.wait == LockWait::kWait) session_wait = o.lock_timeout;
  else if (o.wait == LockWait::kNoWait && !conn_.capabilities().nowait) session_wait = std::chrono::milliseconds(0);
  TimeoutRestore restore{conn_};
  if (session_wait) {
    if (auto previous = d.push_session_lock_timeout(conn_, *session_wait)) {
      restore.pending = true;
      restore.previous = *previous;
    }
  }
  try {
    conn_.begin(o.isolation);
  } catch (const Error& e) {
    // SQLite: BEGIN IMMEDIATE could not get the write lock in time.
    if (e.code() != ErrorCode::kLockBusy) throw;
    scope.busy_ = e;
    scope.status_ = LockStatus::kBusy;
    detail::metric::rowlock_busy().inc();
    return scope;
  }
  scope.active_ = true;
  if (!conn_.capabilities().row_locks) restore.now();  // the lock is held now
  try {
    if (o.wait == LockWait::kWait) d.set_local_lock_timeout(conn_, o.lock_timeout);
    Result r = detail::run_rendered(conn_, statement_of(claim, !filter_.empty()), sql, params,
                                    claim ? &claim_names_ : &lock_names_);
    restore.now();
    scope.rows_ = std::move(r.rows);
    scope.status_ = scope.rows_.empty() ? LockStatus::kNotFound : LockStatus::kLocked;
  } catch (const Error& e) {
    // Roll back first (PostgreSQL aborted the transaction; a MySQL deadlock
    // already rolled it back server-side), then report.
    try {
      scope.finish(false);
    } catch (const std::exception& re) {
      log(LogLevel::kWarning, std::string("rollback after a failed row lock failed: ") + re.what());
    }
    if (e.code() != ErrorCode::kLockBusy) throw;
    scope.busy_ = e;
    scope.status_ = LockStatus::kBusy;
    detail::metric::rowlock_busy().inc();
  }
  return scope;
}

}  // namespace sqlguard
