// The lease lock's free functions (one attempt, renew, release, operator
// overrides, listings, fenced writes, metrics): the statements of
// sql/<dialect>/lease.sql, run through the dialect's acquire and wait plans.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <span>
#include <mutex>
#include <thread>

#include "core/catalog.h"
#include "core/crypto.h"
#include "core/metric_hooks.h"
#include "core/process.h"
#include "dialect/dialect.h"
#include "sqlguard/fenced_write.h"
#include "sqlguard/metrics.h"
#include "sqlguard/validate.h"
#include "strategies/lease/lease_state.h"
#include "core/reconnect.h"
#include "plans/plans.h"

namespace sqlguard {

using detail::Sql;
using detail::run;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
namespace metric = detail::metric;

void validate(const LeaseOptions& o) {
  check_duration(o.ttl, "ttl", milliseconds(10), std::chrono::hours(24 * 7));
  if (o.renew_period) {
    if (o.renew_period->count() <= 0 || *o.renew_period > o.ttl / 2)
      throw Error(ErrorCode::kInvalidArgument,
                  "renew_period is " + format_duration(*o.renew_period) + "; it must be positive and at most ttl/2 (" +
                      format_duration(o.ttl / 2) + ") so a renewal can fail once and still be retried in time");
  }
  if (o.safety_margin) check_duration(*o.safety_margin, "safety_margin", milliseconds(0), o.ttl / 2 - milliseconds(1));
  check_duration(o.min_hold, "min_hold", milliseconds(0), o.ttl);
  check_duration(o.wait, "wait", milliseconds(0), std::chrono::hours(24 * 365));
  check_duration(o.backoff_initial, "backoff_initial", milliseconds(1), std::chrono::minutes(10));
  check_duration(o.backoff_max, "backoff_max", o.backoff_initial, std::chrono::minutes(10));
  check_duration(o.barging_limit, "barging_limit", milliseconds(0), std::chrono::hours(1));
  if (!o.owner.empty()) validate_name(o.owner, "owner");
  if (o.place_ttl) {
    if (!o.fair)
      throw Error(ErrorCode::kInvalidArgument, "place_ttl is set but fair is false: only a fair lease has queue places");
    check_duration(*o.place_ttl, "place_ttl", milliseconds(300), std::chrono::hours(1));
  }
}

namespace {
// Every lease series exists (at 0) from the start, as an exporter expects.
const bool kLeaseMetricsRegistered = [] {
  // Labels are to_string(LossCause): one spelling per cause everywhere.
  for (auto c : {LossCause::kExpired, LossCause::kTakenOver, LossCause::kUnreachable, LossCause::kOutcomeUnknown})
    metric::lock_lost(c);
  metric::lock_attempts(), metric::lock_acquired(), metric::lock_busy(), metric::lock_contention_retries();
  metric::lock_renewals(), metric::lock_renew_errors(), metric::lock_releases(), metric::lock_releases_not_held();
  metric::lock_wait_seconds();
  return true;
}();

LeaseInfo to_info(const Row& r) {
  // lease_info, lease_list_held and lease_list_all declare the same columns.
  static constexpr auto kName = detail::column(Sql::lease_info, "name");
  static constexpr auto kOwner = detail::column(Sql::lease_info, "owner");
  static constexpr auto kFence = detail::column(Sql::lease_info, "fence");
  static constexpr auto kExpireAt = detail::column(Sql::lease_info, "expire_at");
  static constexpr auto kAcquiredAt = detail::column(Sql::lease_info, "acquired_at");
  static constexpr auto kRenewedAt = detail::column(Sql::lease_info, "renewed_at");
  static constexpr auto kNow = detail::column(Sql::lease_info, "db_now_ms");
  static_assert(detail::kDeclared[static_cast<int>(Sql::lease_list_held)].columns ==
                    detail::kDeclared[static_cast<int>(Sql::lease_info)].columns &&
                detail::kDeclared[static_cast<int>(Sql::lease_list_all)].columns ==
                    detail::kDeclared[static_cast<int>(Sql::lease_info)].columns);
  LeaseInfo i;
  i.name = cell(r, kName).as_string();
  i.owner = cell(r, kOwner).as_string();
  i.fence = cell(r, kFence).as_int();
  i.expire_at_ms = cell(r, kExpireAt).as_int();
  i.acquired_at_ms = cell(r, kAcquiredAt).as_int();
  i.renewed_at_ms = cell(r, kRenewedAt).as_int();
  i.db_now_ms = cell(r, kNow).as_int();
  return i;
}

void check_lease_ref(const std::string& name, const std::string& owner, std::int64_t fence) {
  validate_name(name, "lock name");
  validate_name(owner, "owner");
  if (fence <= 0)
    throw Error(ErrorCode::kInvalidArgument, "fence is " + std::to_string(fence) +
                                                 "; fencing tokens are positive (the one acquire returned)");
}

// The fence `owner` holds `name` under now (owner-only renew/release), or 0.
std::int64_t current_fence(Connection& conn, const std::string& name, const std::string& owner) {
  validate_name(owner, "owner");
  auto info = lease_info(conn, name);
  return info && info->owner == owner && info->held() ? info->fence : 0;
}
}  // namespace

std::string_view to_string(LossCause cause) noexcept {
  switch (cause) {
    case LossCause::kExpired: return "expired";
    case LossCause::kTakenOver: return "taken_over";
    case LossCause::kUnreachable: return "database_unreachable";
    case LossCause::kOutcomeUnknown: return "outcome_unknown";
  }
  return "unknown";
}

std::string lease_wakeup_channel(const std::string& name) { return "sqlguard_" + detail::sha256_hex(name).substr(0, 24); }

std::string make_owner_token() {
  // 128 random bits + host + pid, drawn once per process (and again in a
  // forked child), plus a per-process counter: unique per acquisition
  // without a CSPRNG call and uname() each time (both showed up in `sqlguard
  // bench` profiles of hot paths).
  static std::mutex mu;
  static std::string prefix;
  static pid_t prefix_pid = 0;
  static std::uint64_t counter = 0;
  const pid_t pid = detail::process_id();
  std::lock_guard<std::mutex> lk(mu);
  if (prefix_pid != pid) {
    char host[65] = {0};
    if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown");
    prefix = detail::random_hex(16) + "@" + host + ":" + std::to_string(pid) + "#";
    prefix_pid = pid;
    counter = 0;
  }
  return prefix + std::to_string(++counter);
}

namespace detail {

bool LeaseState::mark_lost(LossCause cause, std::string detail, const std::string* of_owner, std::int64_t of_fence) {
  std::function<void(const LeaseLoss&)> cb;
  LeaseLoss out;
  {
    std::lock_guard<std::mutex> lk(mu);
    if (lost || hold == 0 || ending) return false;
    if (of_owner && (owner != *of_owner || fence != of_fence)) return false;
    lost = true;
    auto left = std::chrono::duration_cast<milliseconds>(valid_until - std::chrono::steady_clock::now());
    out = LeaseLoss{cause, std::move(detail), fence, std::max(left, milliseconds(0))};
    loss = std::make_unique<LeaseLoss>(out);
    cb = on_lost;
  }
  ++metric::lock_lost(cause);
  log(LogLevel::kWarning, "lease lost (" + std::string(to_string(cause)) + "): " + out.detail);
  if (cb) {
    try {
      cb(out);
    } catch (const std::exception& e) {
      log(LogLevel::kError, std::string("on_lost callback threw: ") + e.what());
    }
  }
  return true;
}

LossCause diagnose_lease(Connection& conn, const std::string& name, const std::string& owner, std::int64_t fence,
                         std::int64_t known_expire_at, std::string* detail) {
  auto info = lease_info(conn, name);
  if (!info) {
    const std::int64_t now = conn.db_now_ms();
    if (known_expire_at > now) {
      *detail = "lease '" + name + "' (fence " + std::to_string(fence) + ") was ended by someone else " +
                std::to_string(known_expire_at - now) + " ms before its expiry: its row was deleted (an operator, "
                "or a cleanup), not expired";
      return LossCause::kTakenOver;
    }
    *detail = "lease '" + name + "' expired and its row was cleaned up";
    return LossCause::kExpired;
  }
  if (info->owner == owner && info->fence == fence && info->expire_at_ms < known_expire_at) {
    *detail = "lease '" + name + "' (fence " + std::to_string(fence) + ") was ended by someone else " +
              std::to_string(known_expire_at - info->expire_at_ms) +
              " ms before its expiry (a forced release), not expired";
    return LossCause::kTakenOver;
  }
  if (info->owner != owner || info->fence != fence) {
    *detail = "lease '" + name + "' (fence " + std::to_string(fence) + ") was taken over by another acquisition (fence " +
              std::to_string(info->fence) + (info->owner == owner ? ", same owner string" : "") + ")";
    return LossCause::kTakenOver;
  }
  *detail = "lease '" + name + "' expired before it was renewed";
  return LossCause::kExpired;
}

// A busy attempt saw the holder's row: a sighting for this process's watch,
// and, under the watched rule, how long until the watch lets it take over.
void watched_busy(AcquireResult& r, const std::string& key, const Sighting& seen, TakeOver rule) {
  if (rule != TakeOver::kWatched) return;  // the database-clock rule keeps no watch
  const milliseconds unchanged = watches().sighted(key, seen, steady_clock::now());
  r.holder_unchanged_ms = unchanged.count();
  r.watch_ms = seen.watch.count();
  r.holder_remaining_ms = seen.released ? 0 : std::max<std::int64_t>(0, (seen.watch - unchanged).count());
}

// This process's first sighting of `name` once the database clock says it
// ran out: continues the watch an earlier process on this machine started
// (sqlguard_lock_watch: a CLI call, a cron job, each a new process), or
// records this one for later processes. True when the watch is ripe now.
// Never throws: the watch is then this process's only.
bool continue_machine_watch(Connection& conn, const std::string& name, const std::string& key, const Sighting& seen) {
  const std::string& watcher = machine_watcher();
  if (watcher.empty() || seen.released) return false;
  static constexpr auto kFence = column(Sql::lease_watch_read, "fence");
  static constexpr auto kBeat = column(Sql::lease_watch_read, "beat");
  static constexpr auto kExpireAt = column(Sql::lease_watch_read, "expire_at");
  static constexpr auto kFirstSeen = column(Sql::lease_watch_read, "first_seen_ms");
  try {
    auto r = run(conn, Sql::lease_watch_read, {name, watcher});
    const std::int64_t mono = machine_monotonic_ms();
    const auto now = steady_clock::now();
    if (!r.rows.empty()) {
      const Row& w = r.rows[0];
      const RowVersion v{cell(w, kFence).as_int(), cell(w, kBeat).as_int(), cell(w, kExpireAt).as_int()};
      if (v == seen.version) {
        const std::int64_t age = std::max<std::int64_t>(0, mono - cell(w, kFirstSeen).as_int());
        watches().adopt(key, v, now - milliseconds(age));
        return watches().look(key, now).ripe.has_value();
      }
    }
    run(conn, Sql::lease_watch_write,
        {name, watcher, seen.version.fence, seen.version.beat, seen.version.expire_at, mono});
  } catch (const Error& e) {
    log(LogLevel::kDebug, "sharing the sighting of lease '" + name + "' with this machine failed: " + e.message());
  }
  return false;
}

AcquireResult acquire_lease_seated(Connection& conn, const std::string& name, const std::string& owner,
                                   milliseconds ttl, milliseconds min_hold, QueueSeat* seat, bool seen_free,
                                   TakeOver rule, const std::string& turn_owner, bool hold_grant,
                                   std::optional<NextTurnSeen>* next_seen) {
  validate_name(name, "lock name");
  validate_name(owner, "owner");
  check_duration(ttl, "ttl", milliseconds(10), std::chrono::hours(24 * 7));
  check_duration(min_hold, "min_hold", milliseconds(0), ttl);
  require_no_transaction(conn, "acquiring a lease",
                         "the lock row would stay locked and invisible until it commits; use another connection");
  return acquire_lease_here(conn, name, owner, ttl, min_hold, seat, seen_free, rule, turn_owner, hold_grant, next_seen);
}

AcquireResult acquire_lease_here(Connection& conn, const std::string& name, const std::string& owner,
                                 milliseconds ttl, milliseconds min_hold, QueueSeat* seat, bool seen_free,
                                 TakeOver rule, const std::string& turn_owner, bool hold_grant,
                                 std::optional<NextTurnSeen>* next_seen) {
  const AcquirePlan& plan = *conn.dialect().plans().acquire;
  const std::string key = watch_key(conn, name);
  // Inside a caller's transaction (a lock set's attempt) contention is never
  // retried here: the server may have rolled the transaction back (a Galera
  // brute-force abort, a deadlock victim), and a retry would then run in
  // autocommit, taking the name outside the transaction.
  const bool in_transaction = conn.in_transaction();
  // MariaDB hot names: the take-over can still be picked as a deadlock victim
  // against cleanup; that is contention, retried briefly and then reported as
  // "not acquired", never as an error.
  bool machine_checked = false;
  for (int i = 0;; ++i) {
    ++metric::lock_attempts();
    try {
      LeaseRequest req{name, owner, ttl, min_hold, seen_free, rule};
      req.turn_owner = turn_owner;
      req.hold_grant = hold_grant && !turn_owner.empty();
      const auto look = rule == TakeOver::kWatched ? watches().look(key, steady_clock::now()) : WatchBook::Look{};
      if (look.ripe) req.watched = *look.ripe;
      auto r = plan.attempt(conn, req, seat);
      if (next_seen) *next_seen = req.next_seen;
      ++(r.acquired ? metric::lock_acquired() : metric::lock_busy());
      if (r.acquired) {
        watches().forget(key);  // (also what a concurrent poll of this process saw meanwhile)
        return r;
      }
      if (!req.seen) return r;
      watched_busy(r, key, *req.seen, rule);
      // This process's first look at a lease the database clock says ran out
      // (a hint only: it decides nothing, it only keeps a live holder's busy
      // attempts from writing sightings) continues this machine's watch.
      const bool ran_out = !req.seen->released && req.seen->version.expire_at <= req.seen->db_now;
      if (rule == TakeOver::kWatched && !look.known && ran_out && !machine_checked) {
        machine_checked = true;
        // Ripe by an earlier process's sighting: take it now (a waiter's
        // queue seat is not re-used in one call: its next attempt comes soon).
        if (continue_machine_watch(conn, name, key, *req.seen) && !seat) {
          --i;
          continue;
        }
        watched_busy(r, key, *req.seen, rule);
      }
      return r;
    } catch (const Error& e) {
      if (!is_contention(e) || in_transaction) throw;
      ++metric::lock_contention_retries();
      if (i >= 3) {
        ++metric::lock_busy();
        return AcquireResult{false, 0, 0, owner};
      }
      std::this_thread::sleep_for(jitter(milliseconds(2 << i)));
    }
  }
}

}  // namespace detail

AcquireResult acquire_lease(Connection& conn, const std::string& name, const std::string& owner, milliseconds ttl,
                            milliseconds min_hold, TakeOver rule) {
  return detail::acquire_lease_seated(conn, name, owner, ttl, min_hold, nullptr, false, rule);
}

bool renew_lease(Connection& conn, const std::string& name, const std::string& owner, std::int64_t fence,
                 milliseconds ttl) {
  check_lease_ref(name, owner, fence);
  check_duration(ttl, "ttl", milliseconds(10), std::chrono::hours(24 * 7));
  const bool renewed = run(conn, Sql::lease_renew, {ttl.count(), name, owner, fence}).affected == 1;
  if (renewed) ++metric::lock_renewals();
  return renewed;
}

std::vector<bool> renew_leases(Connection& conn, const std::vector<LeaseRenewal>& leases) {
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < leases.size(); ++i) {
    const auto& l = leases[i];
    try {
      check_lease_ref(l.name, l.owner, l.fence);
      check_duration(l.ttl, "ttl", milliseconds(10), std::chrono::hours(24 * 7));
    } catch (const Error& e) {
      throw Error(ErrorCode::kInvalidArgument, "renew_leases: entry " + std::to_string(i) + ": " + e.message());
    }
    if (!names.insert(l.name).second)
      throw Error(ErrorCode::kInvalidArgument,
                  "renew_leases: entry " + std::to_string(i) + " lists lease '" + l.name + "' a second time");
  }
  std::vector<bool> out;
  out.reserve(leases.size());
  const detail::RenewPlan& plan = *conn.dialect().plans().renew;
  for (std::size_t start = 0; start < leases.size(); start += kMaxRenewalBatch) {
    const std::span<const LeaseRenewal> batch(leases.data() + start, std::min(kMaxRenewalBatch, leases.size() - start));
    const auto renewed = plan.renew(conn, batch);
    for (const auto& l : batch) {
      const bool ok = renewed.count({l.name, l.fence}) > 0;
      if (ok) ++metric::lock_renewals();
      out.push_back(ok);
    }
  }
  return out;
}

bool renew_lease(Connection& conn, const std::string& name, const std::string& owner, milliseconds ttl) {
  check_duration(ttl, "ttl", milliseconds(10), std::chrono::hours(24 * 7));
  auto fence = current_fence(conn, name, owner);
  return fence > 0 && renew_lease(conn, name, owner, fence, ttl);
}

bool release_lease(Connection& conn, const std::string& name, const std::string& owner) {
  auto fence = current_fence(conn, name, owner);
  if (fence == 0) {
    ++metric::lock_releases_not_held();
    return false;
  }
  return release_lease(conn, name, owner, fence);
}

bool release_lease(Connection& conn, const std::string& name, const std::string& owner, std::int64_t fence,
                   ReleaseCommit commit) {
  return detail::release_lease(conn, name, owner, fence, commit, false, {});
}

bool detail::release_lease(Connection& conn, const std::string& name, const std::string& owner, std::int64_t fence,
                           ReleaseCommit commit, bool fair, const HeldPlace& place) {
  check_lease_ref(name, owner, fence);
  // On its own a release may skip the commit flush (PostgreSQL); inside the
  // caller's transaction, or when asked to be durable, the _flushed form
  // leaves durability alone.
  const bool flushed = (conn.in_transaction() || commit == ReleaseCommit::kDurable) &&
                       conn.dialect().release_skips_commit_flush();
  // A fair lease's release ends the place it was acquired from in the same
  // statement (lease_release_fair) where the dialect has one (and names the
  // next ticket in its wake-up), else in the same transaction.
  const bool one_statement = fair && catalog(conn).has(Sql::lease_release_fair);
  const auto id = one_statement ? (flushed ? Sql::lease_release_fair_flushed : Sql::lease_release_fair)
                                : (flushed ? Sql::lease_release_flushed : Sql::lease_release);
  Params values{name, owner, fence, lease_wakeup_channel(name)};
  if (one_statement) {
    values.emplace_back(place.ticket);
    values.emplace_back(place.owner);
  }
  const bool own_tx = !one_statement && !place.owner.empty() && !conn.in_transaction();
  // A deadlock victim (InnoDB: the release's row locks against an enqueue's
  // or a take-over's) or a Galera certification failure runs again: the
  // statements are owner- and fence-checked.
  const bool released = detail::retry_contention(conn, [&] {
    if (own_tx) {
      // The release and the place's removal in one commit: the next waiter,
      // woken by the release, finds the place gone.
      Transaction tx(conn, Isolation::kReadCommitted);
      const bool ok = run(conn, id, values).affected == 1;
      run(conn, Sql::fair_leave, {name, place.ticket, place.owner});
      tx.commit();
      return ok;
    }
    const bool ok = run(conn, id, values).affected >= 1;  // lease_release_fair: 2 with the place
    if (!one_statement && !place.owner.empty()) run(conn, Sql::fair_leave, {name, place.ticket, place.owner});
    return ok;
  });
  if (released) {
    ++metric::lock_releases();
    conn.dialect().plans().wait->wake_waiters(conn, name);
    // A release statement that could only expire the place (MariaDB) leaves
    // its row: delete it now that the next waiter is on its way, so no
    // expired place is left per acquisition. Not part of the release: a
    // failure is logged and cleanup() deletes the row.
    if (one_statement && !place.owner.empty() && !conn.in_transaction() &&
        catalog(conn).has(Sql::lease_release_fair_place)) {
      try {
        detail::retry_contention(conn, [&] {
          return run(conn, Sql::lease_release_fair_place, {name, place.ticket, place.owner}).affected;
        });
      } catch (const Error& e) {
        log(LogLevel::kDebug, "fair release of '" + name + "': deleting its expired queue place failed (cleanup() "
                              "deletes it): " + e.what());
      }
    }
    return true;
  }
  ++metric::lock_releases_not_held();
  return false;
}

bool force_release(Connection& conn, const std::string& name) {
  validate_name(name, "lock name");
  return run(conn, Sql::lease_force_release, {name, lease_wakeup_channel(name)}).affected == 1;
}

std::vector<LeaseInfo> list_leases(Connection& conn, bool include_free) {
  std::vector<LeaseInfo> out;
  for (const auto& row : run(conn, include_free ? Sql::lease_list_all : Sql::lease_list_held).rows)
    out.push_back(to_info(row));
  return out;
}

std::optional<LeaseInfo> lease_info(Connection& conn, const std::string& name) {
  validate_name(name, "lock name");
  auto r = run(conn, Sql::lease_info, {name});
  if (r.rows.empty()) return std::nullopt;
  return to_info(r.rows[0]);
}

bool fenced_write(Connection& conn, const std::string& resource, std::int64_t fence) {
  validate_name(resource, "resource");
  if (fence <= 0) throw Error(ErrorCode::kInvalidArgument, "fencing token must be positive");
  detail::insert_if_absent(conn, Sql::fenced_ensure, {resource});
  return run(conn, Sql::fenced_update, {resource, fence}).affected == 1;
}

LeaseMetrics lease_metrics() {
  LeaseMetrics m;
  m.attempts = metric::lock_attempts();
  m.acquired = metric::lock_acquired();
  m.busy = metric::lock_busy();
  m.contention_retries = metric::lock_contention_retries();
  m.wait_ms_total = metric::lock_wait_ms_total();
  m.renewals = metric::lock_renewals();
  m.renew_errors = metric::lock_renew_errors();
  m.releases = metric::lock_releases();
  m.releases_not_held = metric::lock_releases_not_held();
  m.lost_expired = metric::lock_lost(LossCause::kExpired);
  m.lost_taken_over = metric::lock_lost(LossCause::kTakenOver);
  m.lost_unreachable = metric::lock_lost(LossCause::kUnreachable);
  m.lost_outcome_unknown = metric::lock_lost(LossCause::kOutcomeUnknown);
  return m;
}

void reset_lease_metrics() {
  for (auto* a : {&metric::lock_attempts(), &metric::lock_acquired(), &metric::lock_busy(),
                  &metric::lock_contention_retries(), &metric::lock_renewals(), &metric::lock_renew_errors(),
                  &metric::lock_releases(), &metric::lock_releases_not_held(), &metric::lock_lost(LossCause::kExpired),
                  &metric::lock_lost(LossCause::kTakenOver), &metric::lock_lost(LossCause::kUnreachable),
                  &metric::lock_lost(LossCause::kOutcomeUnknown)})
    a->reset();
  metric::lock_wait_ms_total() = 0;
  metric::lock_wait_seconds().reset();
}

}  // namespace sqlguard
