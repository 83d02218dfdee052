// The grant history (include/sqlguard/history.h): scopes and their triggers
// (sql/<dialect>/history.sql), reading the record, and the checker.
#include "sqlguard/history.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>

#include "core/catalog.h"
#include "core/migration_lock.h"
#include "dialect/dialect.h"
#include "sqlguard/validate.h"

namespace sqlguard {

using detail::Sql;
using detail::run;

namespace {

void no_transaction(Connection& conn, const char* who) {
  if (conn.in_transaction())
    throw Error(ErrorCode::kInvalidArgument,
                std::string(who) + " runs DDL and statements of its own: call it outside a transaction");
}

void check_prefix(const std::string& prefix, const char* what) {
  if (!prefix.empty()) validate_name(prefix, what);
}

// Whether this dialect's triggers carry the scopes in their text (PostgreSQL,
// MariaDB: sql/<dialect>/history.sql) instead of reading sqlguard_history_scope
// (SQLite): then every scope change rewrites them.
bool triggers_carry_scopes(Connection& conn) { return detail::catalog(conn).has(Sql::history_scope_retain_new); }

std::string hex_of(const std::string& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 0xf];
  }
  return out;
}

// Installs (or replaces) the functions and triggers of this dialect; each
// statement is idempotent (CREATE OR REPLACE / IF NOT EXISTS). Where the
// triggers carry the scopes, `scopes` (not empty) is written into them, longest
// retention first (the CASE answers the first scope that covers a name).
void install_triggers(Connection& conn, std::vector<HistoryScope> scopes) {
  const auto& cat = detail::catalog(conn);
  const bool carry = triggers_carry_scopes(conn);
  if (carry && scopes.empty()) throw Error(ErrorCode::kInternal, "history triggers written without a scope");
  if (!carry) scopes.clear();
  std::stable_sort(scopes.begin(), scopes.end(), [](const auto& a, const auto& b) { return a.retention > b.retention; });
  std::vector<std::string> on_new, on_old;
  for (const auto& s : scopes) {
    const detail::Slots slots{{"len", std::to_string(s.prefix.size())},
                              {"prefix", hex_of(s.prefix)},
                              {"retain_ms", std::to_string(s.retention.count())}};
    on_new.push_back(cat.render(Sql::history_scope_retain_new, slots));
    on_old.push_back(cat.render(Sql::history_scope_retain_old, slots));
  }
  for (Sql id : {Sql::history_lock_function, Sql::history_holder_function, Sql::history_lock_insert_trigger,
                 Sql::history_lock_update_trigger, Sql::history_lock_delete_trigger, Sql::history_holder_insert_trigger,
                 Sql::history_holder_update_trigger, Sql::history_holder_delete_trigger}) {
    if (!cat.has(id)) continue;
    if (carry)
      detail::run_rendered(conn, id, cat.render(id, {{"retain_new", on_new}, {"retain_old", on_old}}), {});
    else
      run(conn, id);
  }
}

void drop_triggers(Connection& conn) {
  const auto& cat = detail::catalog(conn);
  for (Sql id : {Sql::history_drop_lock_insert_trigger, Sql::history_drop_lock_update_trigger,
                 Sql::history_drop_lock_delete_trigger, Sql::history_drop_holder_insert_trigger,
                 Sql::history_drop_holder_update_trigger, Sql::history_drop_holder_delete_trigger,
                 Sql::history_drop_lock_function, Sql::history_drop_holder_function})
    if (cat.has(id)) run(conn, id);
}

HistoryEvent event_of(const Row& row) {
  static constexpr auto kId = detail::column(Sql::history_read, "id");
  static constexpr auto kName = detail::column(Sql::history_read, "name");
  static constexpr auto kAt = detail::column(Sql::history_read, "at_ms");
  static constexpr auto kEvent = detail::column(Sql::history_read, "event");
  static constexpr auto kKind = detail::column(Sql::history_read, "kind");
  static constexpr auto kMode = detail::column(Sql::history_read, "mode");
  static constexpr auto kSlot = detail::column(Sql::history_read, "slot");
  static constexpr auto kOwner = detail::column(Sql::history_read, "owner");
  static constexpr auto kFence = detail::column(Sql::history_read, "fence");
  static constexpr auto kPermits = detail::column(Sql::history_read, "permits");
  static constexpr auto kCapacity = detail::column(Sql::history_read, "capacity");
  static constexpr auto kUntil = detail::column(Sql::history_read, "until_ms");
  static constexpr auto kPrevOwner = detail::column(Sql::history_read, "prev_owner");
  static constexpr auto kPrevFence = detail::column(Sql::history_read, "prev_fence");
  static constexpr auto kPrevUntil = detail::column(Sql::history_read, "prev_until_ms");
  static constexpr auto kPrevTtl = detail::column(Sql::history_read, "prev_ttl_ms");
  // history_read_name answers the same columns in the same order.
  static_assert(detail::column(Sql::history_read_name, "prev_ttl_ms").index == kPrevTtl.index);
  HistoryEvent e;
  e.id = detail::cell(row, kId).as_int();
  e.name = detail::cell(row, kName).as_string();
  e.at_ms = detail::cell(row, kAt).as_int();
  e.event = detail::cell(row, kEvent).as_string();
  e.kind = detail::cell(row, kKind).as_string();
  e.mode = detail::cell(row, kMode).as_string();
  e.slot = detail::cell(row, kSlot).as_int();
  e.owner = detail::cell(row, kOwner).as_string();
  e.fence = detail::cell(row, kFence).as_int();
  e.permits = detail::cell(row, kPermits).as_int();
  e.capacity = detail::cell(row, kCapacity).as_int();
  e.until_ms = detail::cell(row, kUntil).as_int();
  e.prev_owner = detail::cell(row, kPrevOwner).as_string();
  e.prev_fence = detail::cell(row, kPrevFence).as_int();
  e.prev_until_ms = detail::cell(row, kPrevUntil).as_int();
  e.prev_ttl_ms = detail::cell(row, kPrevTtl).as_int();
  return e;
}

std::string holding(const HistoryEvent& g) {
  return "fence " + std::to_string(g.fence) + " (owner " + printable(g.owner, 64) +
         (g.kind == "lease" ? "" : ", slot " + std::to_string(g.slot) + ", " + g.mode + " x" + std::to_string(g.permits)) +
         ", granted " + format_db_time(g.at_ms) + ")";
}

// The clock-rate allowance of a holding of this ttl: TakeOver::kWatched
// assumes clock rates agree within it (1000 ppm), and times are whole ms.
std::int64_t allowance(std::int64_t ttl_ms) { return ttl_ms / 1000 + 1; }

constexpr std::int64_t kLive = std::numeric_limits<std::int64_t>::max();

struct Holding {
  HistoryEvent grant;
  std::int64_t trusted_until = kLive;  // kLive: not ended; else its holder's trust ended before this
  bool in_trust(std::int64_t t) const { return trusted_until == kLive || trusted_until > t; }
};

struct NameState {
  std::optional<Holding> lease;
  std::vector<Holding> gone;                // leases and holdings ended by others, still in trust
  std::map<std::int64_t, Holding> holders;  // semaphore / read-write holdings by slot
  std::int64_t last_lease_fence = 0;
};

class Checker {
 public:
  explicit Checker(VerifyReport& r, int max_violations) : r_(r), max_(max_violations) {}

  void add(const HistoryEvent& e) {
    ++r_.events;
    auto [it, fresh] = names_.try_emplace(e.name);
    if (fresh) ++r_.names;
    NameState& s = it->second;
    std::erase_if(s.gone, [&](const Holding& h) { return !h.in_trust(e.at_ms); });
    if (e.event == "renew_gap") {
      ++r_.renewal_gaps;
      return;
    }
    if (e.kind == "lease") lease_event(s, e);
    else holder_event(s, e);
  }

 private:
  void violation(const HistoryEvent& e, const char* rule, std::string detail, const HistoryEvent* other) {
    if (static_cast<int>(r_.violations.size()) >= max_) return;
    HistoryViolation v{e.name, rule, "name '" + printable(e.name, 128) + "': " + detail, e, std::nullopt};
    if (other) v.other = *other;
    r_.violations.push_back(std::move(v));
  }

  // Holdings of another kind, and those ended by others whose holders still
  // trusted them at the event: a lease may begin beside none of them.
  void check_against(const NameState& s, const HistoryEvent& e, bool as_lease) {
    for (const auto& h : s.gone) {
      if (h.grant.kind != e.kind)
        return violation(e, "two_kinds", e.kind + " " + holding(e) + " began while " + h.grant.kind + " " +
                                             holding(h.grant) + " still trusted its holding (until " +
                                             format_db_time(h.trusted_until) + ")", &h.grant);
      if (as_lease)
        return violation(e, "overlap", holding(e) + " began at " + format_db_time(e.at_ms) + " while " + holding(h.grant) +
                                           ", ended by another, still trusted its lease until " + format_db_time(h.trusted_until),
                         &h.grant);
    }
    if (!as_lease && s.lease)
      return violation(e, "two_kinds", e.kind + " " + holding(e) + " began while lease " + holding(s.lease->grant) +
                                           " was held", &s.lease->grant);
    for (const auto& [slot, h] : s.holders)
      if (as_lease || h.grant.kind != e.kind)
        return violation(e, "two_kinds", e.kind + " " + holding(e) + " began while " + h.grant.kind + " " +
                                             holding(h.grant) + " was held", &h.grant);
  }

  void new_lease(NameState& s, const HistoryEvent& e) {
    ++r_.grants;
    if (e.fence <= s.last_lease_fence)
      violation(e, "fence_order", "fence " + std::to_string(e.fence) + " granted at " + format_db_time(e.at_ms) +
                                      " is not above the earlier fence " + std::to_string(s.last_lease_fence),
                nullptr);
    s.last_lease_fence = std::max(s.last_lease_fence, e.fence);
    s.lease = Holding{e};
  }

  // The row's previous holding as the event names it: matched against the
  // record's (unmatched when the record began after its grant).
  void ends_previous(NameState& s, const HistoryEvent& e) {
    if (!s.lease || s.lease->grant.fence != e.prev_fence) ++r_.unmatched;
  }

  void lease_event(NameState& s, const HistoryEvent& e) {
    const HistoryEvent* prev = s.lease ? &s.lease->grant : nullptr;
    if (e.event == "grant") {
      // Over a released row (or a new one): the holding it ends was released
      // by its holder (prev_*: that holding, prev_until_ms its release time).
      if (s.lease && s.lease->grant.fence == e.prev_fence) {
        ++r_.releases;
        s.lease.reset();
      } else if (s.lease) {
        violation(e, "overlap", holding(e) + " began at " + format_db_time(e.at_ms) + " but the record shows no end of " +
                                    holding(s.lease->grant), prev);
      } else if (e.prev_fence != 0) {
        ++r_.releases;  // released before the record began
        ++r_.unmatched;
      }
      check_against(s, e, true);
      new_lease(s, e);
    } else if (e.event == "handover") {
      // The holder's own release granted it on: the previous holding ended here.
      ends_previous(s, e);
      ++r_.releases;
      check_against(s, e, true);
      new_lease(s, e);
    } else if (e.event == "confirm" || e.event == "takeover") {
      ends_previous(s, e);
      const bool early = e.at_ms < e.prev_until_ms - allowance(e.prev_ttl_ms);
      if (e.event == "confirm" && early) {
        // A handed lease taken before its expiry: its grantee's own
        // confirmation (only the turn's owner may take it then), one holder.
        if (e.fence <= s.last_lease_fence)
          violation(e, "fence_order", "fence " + std::to_string(e.fence) + " confirmed at " + format_db_time(e.at_ms) +
                                          " is not above the earlier fence " + std::to_string(s.last_lease_fence),
                    nullptr);
        s.last_lease_fence = std::max(s.last_lease_fence, e.fence);
        s.lease = Holding{e};
        return;
      }
      ++r_.takeovers;
      if (early) {
        HistoryEvent was = prev ? *prev : e;
        if (!prev) {
          was.owner = e.prev_owner;
          was.fence = e.prev_fence;
        }
        violation(e, "overlap", "took over " + holding(was) + " at " + format_db_time(e.at_ms) + " while its holder's lease ran to " +
                                    format_db_time(e.prev_until_ms) + " (" + std::to_string(e.prev_until_ms - e.at_ms) +
                                    " ms early): new " + holding(e), prev);
      }
      s.lease.reset();
      check_against(s, e, true);
      new_lease(s, e);
    } else if (e.event == "release") {
      // A released row purged: its release, timed at it.
      ++r_.releases;
      if (!s.lease || s.lease->grant.fence != e.fence) ++r_.unmatched;
      else s.lease.reset();
    } else if (e.event == "delete") {
      if (!s.lease || s.lease->grant.fence != e.fence) ++r_.unmatched;
      Holding h{s.lease ? s.lease->grant : e};
      h.trusted_until = e.prev_until_ms - allowance(e.prev_ttl_ms);
      s.lease.reset();
      if (h.in_trust(e.at_ms)) s.gone.push_back(h);
    }
  }

  void holder_event(NameState& s, const HistoryEvent& e) {
    auto it = s.holders.find(e.slot);
    const bool known = it != s.holders.end() && it->second.grant.fence == e.fence;
    if (e.event == "grant") {
      ++r_.grants;
      check_against(s, e, false);
      std::int64_t permits = 0;
      const Holding* writer = nullptr;
      const Holding* any = nullptr;
      auto count = [&](const Holding& h) {
        permits += h.grant.permits;
        if (h.grant.mode == "X") writer = &h;
        any = &h;
      };
      for (const auto& [slot, h] : s.holders) count(h);
      for (const auto& h : s.gone)
        if (h.grant.kind == e.kind) count(h);
      if (e.kind == "semaphore" && permits + e.permits > e.capacity)
        violation(e, "permits", holding(e) + " took " + std::to_string(e.permits) + " permit(s) while holdings of " +
                                    std::to_string(permits) + " of " + std::to_string(e.capacity) +
                                    " permits were held or still trusted", any ? &any->grant : nullptr);
      else if (e.kind == "rw" && e.mode == "X" && any)
        violation(e, "overlap", "writer " + holding(e) + " began while " + holding(any->grant) + " was held or still trusted",
                  &any->grant);
      else if (e.kind == "rw" && writer)
        violation(e, "overlap", "reader " + holding(e) + " began while writer " + holding(writer->grant) +
                                    " was held or still trusted", &writer->grant);
      s.holders[e.slot] = Holding{e};
    } else if (e.event == "release") {
      ++r_.releases;
      if (!known) ++r_.unmatched;
      if (known) s.holders.erase(it);
    } else if (e.event == "takeover" || e.event == "delete") {
      ++r_.takeovers;
      Holding h{known ? it->second.grant : e};
      if (!known) ++r_.unmatched;
      else s.holders.erase(it);
      h.trusted_until = e.prev_until_ms - allowance(e.prev_ttl_ms);
      if (h.in_trust(e.at_ms)) s.gone.push_back(h);
    }
  }

  VerifyReport& r_;
  int max_;
  std::unordered_map<std::string, NameState> names_;
};

void check_max(int max_violations) {
  if (max_violations < 1 || max_violations > 10000)
    throw Error(ErrorCode::kInvalidArgument, "max_violations must be between 1 and 10000");
}

// How long a scope change waits for the dialect's migration lock (a migration
// run holds it for seconds, another scope change for milliseconds).
constexpr std::chrono::seconds kScopeLockWait{2};

// Runs `ddl` (trigger DDL and the scope rows that go with it) as the one
// writer of the history's triggers: under the dialect's migration lock
// (PostgreSQL: a transaction-scoped advisory lock; MariaDB: the lock row,
// cluster-wide on Galera; SQLite: BEGIN IMMEDIATE's write lock), in one
// transaction where DDL is transactional (all or nothing), and bounded by the
// tables' lock wait (PostgreSQL: 2 s lock_timeout, which bounds the advisory
// lock's wait too; MariaDB: each statement's 2 s lock_wait_timeout; SQLite: the
// busy timeout). Two changes at once otherwise collide (PostgreSQL: "tuple
// concurrently updated" on the function) or undo each other (a drop after
// another's install). Where DDL is not transactional (MariaDB) each statement
// commits alone: a failure after the first calls `restore` (still under the
// lock) to put the triggers back as the unchanged scope list needs them. A lock
// not had in time is reported for what it is: nothing held is disturbed, the
// caller tries again.
template <typename F, typename R>
void bounded_ddl(Connection& conn, const char* who, F&& ddl, R&& restore) {
  const bool one_transaction = conn.capabilities().transactional_ddl;
  std::unique_ptr<detail::MigrationLockHold> hold;
  try {
    if (one_transaction) {
      conn.begin();
      if (detail::catalog(conn).has(Sql::history_ddl_lock_timeout)) run(conn, Sql::history_ddl_lock_timeout);
    }
    hold = conn.dialect().plans().migrations->lock(conn, kScopeLockWait);
    ddl();
    if (one_transaction) conn.commit();
  } catch (const Error& e) {
    std::string outcome = "nothing was changed";
    if (one_transaction && conn.in_transaction()) {
      try {
        conn.rollback();
      } catch (const Error&) {
      }
    } else if (!one_transaction && hold) {
      try {
        restore();
        outcome = "the triggers were put back as the listed scopes need them";
      } catch (const Error& again) {
        outcome = "putting the triggers back failed too (" + again.message() +
                  "): enable_history() or disable_history() again rewrites them";
      }
    }
    hold.reset();
    if (e.code() == ErrorCode::kLockBusy || e.code() == ErrorCode::kTimeout)
      throw Error(ErrorCode::kLockBusy,
                  std::string(who) + ": the grant history's triggers could not be changed within 2 s: a transaction "
                                     "holds rows of sqlguard_lock or sqlguard_sync_holder (a guarded transaction, a "
                                     "row-lock scope), or a migration or another scope change runs; " + outcome +
                      ", try again (" + e.message() + ")",
                  e.dialect(), e.native_code());
    throw;
  }
}

// The triggers as `scopes` need them: dropped with the last scope.
void write_triggers(Connection& conn, const std::vector<HistoryScope>& scopes) {
  if (scopes.empty())
    drop_triggers(conn);
  else
    install_triggers(conn, scopes);
}

// Sets (retention given) or drops one scope: the triggers are rewritten for the
// scopes as they will be, then the scope row changes. Where the dialect is not
// transactional (MariaDB), a new scope is so recorded before it is listed, and a
// dropped one stops being recorded just before it leaves the list; a failure
// in between puts the triggers back (bounded_ddl).
bool change_scope(Connection& conn, const char* who, const std::string& prefix,
                  std::optional<std::chrono::milliseconds> retention) {
  bool had = false;
  bounded_ddl(
      conn, who,
      [&] {
        auto scopes = history_scopes(conn);
        auto it = std::find_if(scopes.begin(), scopes.end(), [&](const auto& s) { return s.prefix == prefix; });
        had = it != scopes.end();
        if (!retention && !had) return;  // nothing to drop
        if (!retention)
          scopes.erase(it);
        else if (had)
          it->retention = *retention;
        else
          scopes.push_back({prefix, *retention, 0});
        write_triggers(conn, scopes);
        if (retention)
          run(conn, Sql::history_scope_set, {prefix, static_cast<std::int64_t>(retention->count())});
        else
          run(conn, Sql::history_scope_drop, {prefix});
      },
      [&] { write_triggers(conn, history_scopes(conn)); });
  return had;
}

}  // namespace

void enable_history(Connection& conn, const std::string& prefix, std::chrono::milliseconds retention) {
  check_prefix(prefix, "history prefix");
  check_duration(retention, "history retention", std::chrono::minutes(1), std::chrono::hours(24 * 3650));
  no_transaction(conn, "enable_history()");
  change_scope(conn, "enable_history()", prefix, retention);
}

bool disable_history(Connection& conn, const std::string& prefix) {
  check_prefix(prefix, "history prefix");
  no_transaction(conn, "disable_history()");
  return change_scope(conn, "disable_history()", prefix, std::nullopt);
}

std::vector<HistoryScope> history_scopes(Connection& conn) {
  static constexpr auto kPrefix = detail::column(Sql::history_scopes, "prefix");
  static constexpr auto kRetain = detail::column(Sql::history_scopes, "retain_ms");
  static constexpr auto kSince = detail::column(Sql::history_scopes, "since_ms");
  std::vector<HistoryScope> out;
  for (const auto& row : run(conn, Sql::history_scopes).rows)
    out.push_back({detail::cell(row, kPrefix).as_string(), std::chrono::milliseconds(detail::cell(row, kRetain).as_int()),
                   detail::cell(row, kSince).as_int()});
  return out;
}

std::vector<HistoryEvent> read_history(Connection& conn, const HistoryQuery& q) {
  if (!q.name.empty()) validate_name(q.name, "lock name");
  if (!q.name.empty() && !q.prefix.empty())
    throw Error(ErrorCode::kInvalidArgument, "read_history(): give a name or a prefix, not both");
  check_prefix(q.prefix, "history prefix");
  if (q.limit < 1 || q.limit > 100000) throw Error(ErrorCode::kInvalidArgument, "limit must be between 1 and 100000");
  if (q.since_ms < 0 || q.after_id < 0)
    throw Error(ErrorCode::kInvalidArgument, "since_ms and after_id must not be negative");
  const auto res = q.name.empty()
                       ? run(conn, Sql::history_read,
                             {q.prefix, q.after_id, q.since_ms, static_cast<std::int64_t>(q.limit)})
                       : run(conn, Sql::history_read_name, {q.name, q.after_id, q.since_ms, static_cast<std::int64_t>(q.limit)});
  std::vector<HistoryEvent> out;
  out.reserve(res.rows.size());
  for (const auto& row : res.rows) out.push_back(event_of(row));
  return out;
}

VerifyReport verify_events(const std::vector<HistoryEvent>& events, int max_violations) {
  check_max(max_violations);
  VerifyReport r;
  Checker c(r, max_violations);
  for (const auto& e : events) c.add(e);
  return r;
}

VerifyReport verify_history(Connection& conn, const VerifyOptions& o) {
  check_prefix(o.prefix, "history prefix");
  check_max(o.max_violations);
  if (o.since_ms < 0) throw Error(ErrorCode::kInvalidArgument, "since_ms must not be negative");
  VerifyReport r;
  Checker c(r, o.max_violations);
  HistoryQuery q;
  q.prefix = o.prefix;
  q.since_ms = o.since_ms;
  q.limit = 10000;
  for (;;) {
    auto page = read_history(conn, q);
    for (const auto& e : page) c.add(e);
    if (static_cast<int>(page.size()) < q.limit) break;
    q.after_id = page.back().id;
  }
  return r;
}

}  // namespace sqlguard
