// Lease lock. The SQL is built once per dialect from the Dialect seam; see
// include/sqlguard/lease_lock.h for the invariants it keeps.
#include "sqlguard/lease_lock.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <random>

#include "core/catalog.h"
#include "core/crypto.h"
#include "sqlguard/backoff.h"
#include "sqlguard/fenced_write.h"
#include "sqlguard/metrics.h"
#include "sqlguard/validate.h"

namespace sqlguard {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// ---- metrics ----------------------------------------------------------------
// The lease counters live in the metrics registry (metrics.h lists the names),
// so lease_metrics() and an exporter read the same numbers.
metrics::Counter& lost_counter(const char* cause) {
  return metrics::counter("sqlguard_lock_lost_total", "Leases lost, by cause", {{"cause", cause}});
}
struct AtomicMetrics {
  metrics::Counter& attempts = metrics::counter("sqlguard_lock_attempts_total", "Lease acquire attempts sent to the database");
  metrics::Counter& acquired = metrics::counter("sqlguard_lock_acquired_total", "Lease acquire attempts that took the lock");
  metrics::Counter& busy = metrics::counter("sqlguard_lock_busy_total", "Lease acquire attempts that found the lock held");
  metrics::Counter& contention_retries = metrics::counter(
      "sqlguard_lock_contention_retries_total", "Deadlock victims / lock wait timeouts retried inside an acquire attempt");
  // Exported as the histogram below (seconds; promtool refuses "ms" in a name); kept for lease_metrics().
  std::atomic<std::uint64_t> wait_ms_total{0};
  metrics::Counter& renewals = metrics::counter("sqlguard_lock_renewals_total", "Successful lease renewals");
  metrics::Counter& renew_errors =
      metrics::counter("sqlguard_lock_renew_errors_total", "Transient renewal failures retried by the watchdog");
  metrics::Counter& releases = metrics::counter("sqlguard_lock_releases_total", "Releases of a held lease");
  metrics::Counter& releases_not_held =
      metrics::counter("sqlguard_lock_releases_not_held_total", "Releases of a lease that was no longer held");
  metrics::Counter& lost_expired = lost_counter("expired");
  metrics::Counter& lost_taken_over = lost_counter("taken_over");
  metrics::Counter& lost_unreachable = lost_counter("unreachable");
  metrics::Counter& lost_outcome_unknown = lost_counter("outcome_unknown");
  metrics::Histogram& wait_seconds =
      metrics::histogram("sqlguard_lock_wait_seconds", "Time blocked in a waiting lease acquire");
};
AtomicMetrics g_metrics;

void count_loss(LossCause c) {
  switch (c) {
    case LossCause::kExpired: ++g_metrics.lost_expired; break;
    case LossCause::kTakenOver: ++g_metrics.lost_taken_over; break;
    case LossCause::kUnreachable: ++g_metrics.lost_unreachable; break;
    case LossCause::kOutcomeUnknown: ++g_metrics.lost_outcome_unknown; break;
  }
}

using detail::Sql;
using detail::run;

// Lease statements are idempotent by owner token, so a connection lost, a
// timeout or an unknown outcome is retried on a fresh connection, with
// full-jitter backoff, until `budget` has passed; other errors propagate.
// InDoubt::kThrow: an unknown COMMIT outcome is not retried (a guarded
// transaction's work may have committed).
enum class InDoubt { kRetry, kThrow };

// The database could not be reached or did not answer: worth retrying on a
// fresh connection (a lost answer too, where the statement is idempotent).
bool is_outage(const Error& e) {
  return e.code() == ErrorCode::kConnectionLost || e.code() == ErrorCode::kTimeout ||
         e.code() == ErrorCode::kCommitInDoubt;
}
template <typename F>
auto with_reconnect(Connection& conn, milliseconds budget, const std::string& what, F&& f,
                    InDoubt in_doubt = InDoubt::kRetry) {
  const auto deadline = steady_clock::now() + budget;
  for (int attempt = 1;; ++attempt) {
    try {
      return f(attempt);
    } catch (const Error& e) {
      const bool transient = is_outage(e) && (e.code() != ErrorCode::kCommitInDoubt || in_doubt == InDoubt::kRetry);
      auto left = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
      if (!transient || conn.in_transaction() || left.count() <= 0) throw;
      log(LogLevel::kInfo, what + " failed, reconnecting and retrying: " + e.what());
      std::this_thread::sleep_for(std::min(Backoff{milliseconds(10), milliseconds(500)}.delay(attempt), left));
      try {
        conn.reconnect();
      } catch (const Error& re) {
        log(LogLevel::kInfo, what + ": reconnect failed (the next attempt reports it): " + re.what());
      }
    }
  }
}


bool is_contention(const Error& e) {
  return e.code() == ErrorCode::kConflict || e.code() == ErrorCode::kLockBusy || e.code() == ErrorCode::kTimeout;
}

// Full jitter, at least 1 ms.
milliseconds jitter(milliseconds upto) { return jittered(std::max(upto, milliseconds(1)), milliseconds(1)); }

// The first cell of the first row is 1 (GET_LOCK, the queue join).
bool first_is_one(const Result& r) { return !r.rows.empty() && !r.rows[0][0].is_null() && r.rows[0][0].as_int() == 1; }

// Frees a session-scoped lock this handle holds (`held`): the MariaDB
// wake-up lock, the PostgreSQL waiter-queue head. On failure the session's
// end frees it; until then the other waiters poll.
void free_session_lock(Connection& conn, bool& held, Sql id, const std::string& channel, const char* what) noexcept {
  if (!held) return;
  held = false;
  try {
    run(conn, id, {channel});
  } catch (const std::exception& e) {
    log(LogLevel::kDebug, std::string(what) + " failed: " + e.what());
  }
}


// A waiter's place in the PostgreSQL waiter queue, for one attempt
// (lease_acquire's queue_role: 'head' when `head`, else 'join').
struct QueueSeat {
  const std::string* channel;
  bool head;            // the caller is the head (the one listener)
  bool left = false;    // out: the take-over left the head's place
  bool joined = false;  // out: the busy attempt made the caller the head
};

AcquireResult busy(const std::string& owner, std::int64_t holder_remaining_ms) {
  AcquireResult out;
  out.owner = owner;
  out.holder_remaining_ms = std::max<std::int64_t>(0, holder_remaining_ms);
  return out;
}

// One attempt: a busy attempt is a read (no row lock, no write lock, no WAL)
// on every dialect, and one statement decides a take-over on the database
// clock. Where UPDATE itself takes the database write lock (SQLite), the
// catalog has lease_precheck, a plain read that decides first. Then:
// lease_acquire takes over an expired row (a held row does not match, so it
// stays a read); lease_insert creates a name never seen; lease_read_mine
// reads the fence where the statements cannot return it (MariaDB).
// seat: the caller waits in the PostgreSQL waiter queue (LeaseLock::acquire);
// lease_acquire then joins it or leaves it in the same round trip.
AcquireResult attempt_once(Connection& conn, const std::string& name, const std::string& owner, milliseconds ttl,
                           milliseconds min_hold, QueueSeat* seat = nullptr) {
  const auto& cat = detail::catalog(conn);
  const Params args{name, owner, ttl.count(), min_hold.count()};
  enum { kUnknown, kExpired, kMissing } state = kUnknown;
  if (cat.has(Sql::lease_precheck)) {
    auto pre = run(conn, Sql::lease_precheck, {name});
    if (!pre.rows.empty() && pre.rows[0][2].as_int() == 1)
      return busy(owner, pre.rows[0][1].as_int() - pre.rows[0][3].as_int());
    state = pre.rows.empty() ? kMissing : kExpired;
  }
  if (cat.has(Sql::lease_take)) {
    // Take-over or create, fence read and wake-up lock in one round trip
    // (MariaDB): the row comes back as the statement left it.
    auto r = run(conn, Sql::lease_take, {name, owner, ttl.count(), min_hold.count(), lease_wakeup_channel(name)});
    if (r.rows.empty()) return busy(owner, 0);
    const auto& row = r.rows[0];
    if (row[0].as_string() != owner || row[3].as_int() != row[4].as_int())
      return busy(owner, row[2].as_int() - row[4].as_int());  // another contender took it just now
    AcquireResult out;
    out.owner = owner;
    out.acquired = true;
    out.fence = row[1].as_int();
    out.expire_at_ms = row[2].as_int();
    // The wake-up lock was busy: the previous holder has not freed it yet,
    // or a woken waiter is finding out that it lost. Both let go within a
    // round trip or two; wait that long for it so later waiters block on it
    // (without it they poll with backoff: slower, never unsafe).
    if (row[5].is_null() || row[5].as_int() != 1) {
      try {
        run(conn, Sql::lease_wakeup_wait, {lease_wakeup_channel(name), 0.02});
      } catch (const Error& e) {
        log(LogLevel::kDebug, std::string("taking the wake-up lock failed: ") + e.what());
      }
    }
    return out;
  }
  auto acquired = [&](const Result& r) {
    AcquireResult out;
    out.owner = owner;
    if (r.rows.empty()) {  // the statement cannot return the fence: read it
      auto mine = run(conn, Sql::lease_read_mine, {name, owner, lease_wakeup_channel(name)});
      if (mine.rows.empty()) return out;  // taken over already (tiny ttl): not ours
      out.fence = mine.rows[0][0].as_int();
      out.expire_at_ms = mine.rows[0][1].as_int();
    } else {
      out.fence = r.rows[0][0].as_int();
      out.expire_at_ms = r.rows[0][1].as_int();
    }
    out.acquired = true;
    return out;
  };
  if (state != kMissing) {
    const char* role = !seat ? "" : seat->head ? "head" : "join";
    auto r = run(conn, Sql::lease_acquire,
                 {name, owner, ttl.count(), min_hold.count(), role, seat ? *seat->channel : std::string()});
    // One row back, fence NULL when busy (PostgreSQL: then the holder's
    // expiry and the clock, NULL expiry = no such name, and the queue
    // columns); or a row only when taken (SQLite).
    const bool took = !r.rows.empty() && !r.rows[0][0].is_null();
    if (seat && !r.rows.empty() && r.rows[0].size() >= 6) {
      const auto& cell = r.rows[0][took ? 4 : 5];
      const bool yes = !cell.is_null() && cell.as_int() == 1;
      (took ? seat->left : seat->joined) = yes;
    }
    if (took || (r.rows.empty() && r.affected == 1)) return acquired(r);
    if (!r.rows.empty() && r.rows[0].size() >= 4) {
      if (!r.rows[0][2].is_null()) return busy(owner, r.rows[0][2].as_int() - r.rows[0][3].as_int());
      state = kMissing;
    }
    if (state == kExpired) return busy(owner, 0);  // another contender took it just now
    if (state != kMissing) {
      // Held, or never seen: a consistent read (no locks) tells which.
      auto info = run(conn, Sql::lease_info, {name});
      if (!info.rows.empty()) return busy(owner, info.rows[0][3].as_int() - info.rows[0][6].as_int());
    }
  }
  auto ins = detail::try_insert(conn, Sql::lease_insert, args);
  if (!ins) return busy(owner, 0);  // someone created it first
  return acquired(*ins);
}

LeaseInfo to_info(const Row& r) {
  LeaseInfo i;
  i.name = r[0].as_string();
  i.owner = r[1].as_string();
  i.fence = r[2].as_int();
  i.expire_at_ms = r[3].as_int();
  i.acquired_at_ms = r[4].as_int();
  i.renewed_at_ms = r[5].as_int();
  i.db_now_ms = r[6].as_int();
  return i;
}

// Why `owner` no longer holds lease `name`. `known_expire_at`: a DB-clock
// time the lease was known to last until (its acquire's expiry; renewals
// only move it later): a lease gone before it is not "expired" but ended by
// someone else (a forced release, its row deleted) — kTakenOver, whose
// contract covers a forced release.
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

// One watchdog renewal, run on a thread of its own (see start_watchdog).
struct RenewTask {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;                  // guarded by mu
  std::shared_ptr<Connection> conn;   // the watchdog's connection (made here when missing)
  std::atomic<bool> connected{false};
  bool ok = false;
  LossCause cause = LossCause::kExpired;
  std::string detail;
  std::exception_ptr error;
};
}  // namespace

// ---- free functions ----------------------------------------------------------

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
  const pid_t pid = getpid();
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

namespace {
AcquireResult acquire_lease_impl(Connection& conn, const std::string& name, const std::string& owner, milliseconds ttl,
                                 milliseconds min_hold, QueueSeat* seat);
}

AcquireResult acquire_lease(Connection& conn, const std::string& name, const std::string& owner, milliseconds ttl,
                            milliseconds min_hold) {
  return acquire_lease_impl(conn, name, owner, ttl, min_hold, nullptr);
}

namespace {
AcquireResult acquire_lease_impl(Connection& conn, const std::string& name, const std::string& owner, milliseconds ttl,
                                 milliseconds min_hold, QueueSeat* seat) {
  validate_name(name, "lock name");
  validate_name(owner, "owner");
  check_duration(ttl, "ttl", milliseconds(10), std::chrono::hours(24 * 7));
  check_duration(min_hold, "min_hold", milliseconds(0), ttl);
  require_no_transaction(conn, "acquiring a lease",
                         "the lock row would stay locked and invisible until it commits; use another connection");
  // MariaDB hot names: the take-over UPDATE can still be picked as a
  // deadlock victim against cleanup; that is contention, retried briefly
  // and then reported as "not acquired", never as an error.
  for (int i = 0;; ++i) {
    ++g_metrics.attempts;
    try {
      auto r = attempt_once(conn, name, owner, ttl, min_hold, seat);
      ++(r.acquired ? g_metrics.acquired : g_metrics.busy);
      return r;
    } catch (const Error& e) {
      if (!is_contention(e) || conn.in_transaction()) throw;
      ++g_metrics.contention_retries;
      if (i >= 3) {
        ++g_metrics.busy;
        return AcquireResult{false, 0, 0, owner};
      }
      std::this_thread::sleep_for(jitter(milliseconds(2 << i)));
    }
  }
}
}  // namespace

namespace {
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

bool renew_lease(Connection& conn, const std::string& name, const std::string& owner, std::int64_t fence,
                 milliseconds ttl) {
  check_lease_ref(name, owner, fence);
  check_duration(ttl, "ttl", milliseconds(10), std::chrono::hours(24 * 7));
  auto r = run(conn, Sql::lease_renew, {ttl.count(), name, owner, fence});
  if (r.affected == 1) ++g_metrics.renewals;
  return r.affected == 1;
}

bool renew_lease(Connection& conn, const std::string& name, const std::string& owner, milliseconds ttl) {
  check_duration(ttl, "ttl", milliseconds(10), std::chrono::hours(24 * 7));
  auto fence = current_fence(conn, name, owner);
  return fence > 0 && renew_lease(conn, name, owner, fence, ttl);
}

namespace {
// Wakes waiters blocked on this session's wake-up lock (MariaDB); elsewhere
// the release statement itself wakes them (NOTIFY) or the commit does (SQLite).
void signal_waiters(Connection& conn, const std::string& name) {
  if (!detail::catalog(conn).has(Sql::lease_wakeup_signal)) return;
  try {
    run(conn, Sql::lease_wakeup_signal, {lease_wakeup_channel(name)});
  } catch (const Error& e) {
    // Waiters fall back to polling; the release itself already happened.
    log(LogLevel::kWarning, "waking the waiters of '" + name + "' failed: " + e.what());
  }
}

// A released / ended row: 1 row affected, or 1 row back where the statement
// also sends a NOTIFY (PostgreSQL).
bool changed_one(const Result& r) { return r.affected == 1 || r.rows.size() == 1; }
}  // namespace

bool release_lease(Connection& conn, const std::string& name, const std::string& owner) {
  auto fence = current_fence(conn, name, owner);
  if (fence == 0) {
    ++g_metrics.releases_not_held;
    return false;
  }
  return release_lease(conn, name, owner, fence);
}

bool release_lease(Connection& conn, const std::string& name, const std::string& owner, std::int64_t fence) {
  check_lease_ref(name, owner, fence);
  // On its own a release may skip the commit flush (PostgreSQL); inside the
  // caller's transaction the catalog's _in_tx form leaves durability alone.
  const auto id = conn.in_transaction() && detail::catalog(conn).has(Sql::lease_release_in_tx) ? Sql::lease_release_in_tx
                                                                                               : Sql::lease_release;
  if (changed_one(run(conn, id, {name, owner, fence, lease_wakeup_channel(name)}))) {
    ++g_metrics.releases;
    signal_waiters(conn, name);
    return true;
  }
  ++g_metrics.releases_not_held;
  return false;
}

bool force_release(Connection& conn, const std::string& name) {
  validate_name(name, "lock name");
  return changed_one(run(conn, Sql::lease_force_release, {name, lease_wakeup_channel(name)}));
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
  m.attempts = g_metrics.attempts;
  m.acquired = g_metrics.acquired;
  m.busy = g_metrics.busy;
  m.contention_retries = g_metrics.contention_retries;
  m.wait_ms_total = g_metrics.wait_ms_total;
  m.renewals = g_metrics.renewals;
  m.renew_errors = g_metrics.renew_errors;
  m.releases = g_metrics.releases;
  m.releases_not_held = g_metrics.releases_not_held;
  m.lost_expired = g_metrics.lost_expired;
  m.lost_taken_over = g_metrics.lost_taken_over;
  m.lost_unreachable = g_metrics.lost_unreachable;
  m.lost_outcome_unknown = g_metrics.lost_outcome_unknown;
  return m;
}

void reset_lease_metrics() {
  for (auto* a : {&g_metrics.attempts, &g_metrics.acquired, &g_metrics.busy, &g_metrics.contention_retries,
                  &g_metrics.renewals, &g_metrics.renew_errors, &g_metrics.releases,
                  &g_metrics.releases_not_held, &g_metrics.lost_expired, &g_metrics.lost_taken_over,
                  &g_metrics.lost_unreachable, &g_metrics.lost_outcome_unknown})
    a->reset();
  g_metrics.wait_ms_total = 0;
  g_metrics.wait_seconds.reset();
}

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
  if (!o.owner.empty()) validate_name(o.owner, "owner");
}

// ---- LeaseLock ---------------------------------------------------------------

struct LeaseLock::Shared {
  mutable std::mutex mu;
  std::condition_variable cv;
  int hold = 0;
  std::string owner;
  std::int64_t fence = 0;
  std::int64_t expire_at = 0;
  steady_clock::time_point valid_until{};
  bool lost = false;
  std::optional<LeaseLoss> loss;
  bool stop = false;
  std::function<void(const LeaseLoss&)> on_lost;

  bool valid_locked() const { return hold > 0 && !lost && steady_clock::now() < valid_until; }
};

namespace {
// A connection a LeaseLock opens itself: no call on it, reconnects
// included, may block past a third of the ttl (at least 1 s; the caller's
// timeouts, if smaller, win).
ConnectOptions lease_connect_options(ConnectOptions o, milliseconds ttl) {
  const milliseconds bound = std::max<milliseconds>(ttl / 3, milliseconds(1000));
  if (!o.io_timeout || *o.io_timeout > bound) o.io_timeout = bound;
  o.connect_timeout = std::min(o.connect_timeout, bound);
  return o;
}
}  // namespace

LeaseLock::LeaseLock(Connection& conn, std::string name, LeaseOptions options)
    : conn_(&conn), name_(std::move(name)), options_(std::move(options)), shared_(std::make_shared<Shared>()) {
  init();
}

LeaseLock::LeaseLock(const std::string& uri, std::string name, LeaseOptions options, Watchdog watchdog,
                     const ConnectOptions& connect)
    : own_conn_(make_connection(uri, lease_connect_options(connect, options.ttl))),
      conn_(own_conn_.get()),
      name_(std::move(name)),
      options_(std::move(options)),
      shared_(std::make_shared<Shared>()) {
  init();
  // MariaDB waiters block in GET_LOCK: keep each wait well inside io_timeout.
  nap_cap_ = *lease_connect_options(connect, options_.ttl).io_timeout / 2;
  if ((watchdog == Watchdog::kOn || options_.on_lost) && !options_.watchdog_connection) {
    // The watchdog's statements must not outlive the trust window on a hung
    // server: bound them by the renew period.
    auto bound = std::max<milliseconds>(period_, milliseconds(1000));
    options_.watchdog_connection = [uri, bound, connect] {
      ConnectOptions o = connect;
      o.connect_timeout = std::min(connect.connect_timeout, bound);
      o.io_timeout = bound;
      auto c = make_connection(uri, o);
      // Where the server has a statement timeout, bound it too (the others
      // are bounded by io_timeout above).
      if (detail::catalog(*c).has(Sql::session_statement_timeout))
        run(*c, Sql::session_statement_timeout, {std::to_string(bound.count())});
      return c;
    };
  }
}

void LeaseLock::init() {
  validate_name(name_, "lock name");
  validate(options_);
  margin_ = options_.safety_margin.value_or(std::min<milliseconds>(options_.ttl / 10, std::chrono::seconds(2)));
  period_ = options_.renew_period.value_or(options_.ttl / 3);
  shared_->on_lost = options_.on_lost;
  // How waiters wake on a release: statements where the catalog has them
  // (MariaDB's wake-up lock), else the connection's own wake-ups
  // (PostgreSQL NOTIFY, SQLite futex word), else plain backoff.
  if (detail::catalog(*conn_).has(Sql::lease_wakeup_wait)) wakeup_ = Wakeup::kStatements;
  else if (conn_->capabilities().wakeups) wakeup_ = Wakeup::kConnection;
  if (wakeup_ != Wakeup::kNone) wakeup_channel_ = lease_wakeup_channel(name_);
}

LeaseLock::~LeaseLock() {
  stop_watchdog();
  stop_listening();
  std::string owner;
  std::int64_t fence = 0;
  {
    std::lock_guard<std::mutex> lk(shared_->mu);
    if (shared_->hold == 0 || shared_->lost) return;
    owner = shared_->owner;
    fence = shared_->fence;
    shared_->hold = 0;
  }
  try {
    if (!release_lease(*conn_, name_, owner, fence))
      log(LogLevel::kWarning, "lease '" + name_ + "' was no longer held when its LeaseLock was destroyed");
  } catch (const std::exception& e) {
    log(LogLevel::kWarning, "releasing lease '" + name_ + "' in ~LeaseLock failed (it expires by itself): " + e.what());
  }
}

bool LeaseLock::try_acquire() { return try_acquire_queued(false); }

bool LeaseLock::try_acquire_queued(bool queue, std::optional<milliseconds> retry_budget) {
  {
    std::lock_guard<std::mutex> lk(shared_->mu);
    if (shared_->hold > 0) {
      if (!shared_->valid_locked()) return false;  // lost: release() first
      ++shared_->hold;
      return true;
    }
  }
  std::string owner = options_.owner.empty() ? make_owner_token() : options_.owner;
  auto start = steady_clock::now();
  // A retry after an unanswered attempt first asks whether that attempt
  // took the lease (the owner token is ours alone).
  const milliseconds budget = std::min<milliseconds>(options_.ttl - margin_, retry_budget.value_or(options_.ttl));
  auto r = with_reconnect(*conn_, budget, "acquiring lease '" + name_ + "'", [&](int attempt) {
    if (attempt > 1) {
      auto mine = run(*conn_, Sql::lease_read_mine, {name_, owner, lease_wakeup_channel(name_)});
      if (!mine.rows.empty() && mine.rows[0][1].as_int() > conn_->db_now_ms()) {
        AcquireResult held;
        held.acquired = true;
        held.owner = owner;
        held.fence = mine.rows[0][0].as_int();
        held.expire_at_ms = mine.rows[0][1].as_int();
        return held;
      }
    }
    if (attempt > 1) {
      // A new session: it holds no queue place and listens to nothing.
      queue_head_ = false;
      listening_ = false;
    }
    QueueSeat seat{&wakeup_channel_, queue_head_};
    auto res = acquire_lease_impl(*conn_, name_, owner, options_.ttl, options_.min_hold, queue ? &seat : nullptr);
    if (seat.left) queue_head_ = false;   // the take-over left the waiter queue itself
    if (seat.joined) queue_head_ = true;  // a busy attempt became the head
    return res;
  });
  if (!r.acquired) {
    // 0 = taken by another contender just now (PostgreSQL: the row was being
    // taken over, locked, so the statement saw the old, expired lease): the
    // new lease has just begun; count on one like ours.
    holder_remaining_ = r.holder_remaining_ms > 0 ? milliseconds(r.holder_remaining_ms) : options_.ttl;
    return false;
  }
  {
    std::lock_guard<std::mutex> lk(shared_->mu);
    shared_->hold = 1;
    shared_->owner = owner;
    shared_->fence = r.fence;
    shared_->expire_at = r.expire_at_ms;
    shared_->valid_until = start + options_.ttl - margin_;
    shared_->lost = false;
    shared_->loss.reset();
    shared_->stop = false;
  }
  if (options_.watchdog_connection) start_watchdog();
  return true;
}

bool LeaseLock::wait_for_release(milliseconds nap) {
  if (wakeup_ == Wakeup::kConnection) return conn_->wait_for_notify(wakeup_channel_, nap);
  // MariaDB: block on the holder's wake-up lock (GET_LOCK with a timeout in
  // seconds). The woken waiter keeps it while it tries: the others stay
  // blocked behind it (one wake-up per release, not a chain of them), and it
  // is already the holder's wake-up lock when the take-over succeeds. If the
  // lease was taken by someone else first, acquire() frees it at once, for
  // that holder (lease_take waits briefly for it) or the next waiter.
  if (nap_cap_) nap = std::min(nap, *nap_cap_);
  auto r = run(*conn_, Sql::lease_wakeup_wait, {wakeup_channel_, static_cast<double>(nap.count()) / 1000.0});
  wake_head_ = first_is_one(r);
  return wake_head_;
}

// A wait that failed because the database went away: what the waiter held
// in that session (the wake-up lock, a LISTEN, a queue place) went with it;
// the next attempt reconnects (with_reconnect). Not woken.
bool LeaseLock::wait_for_release_riding_outages(milliseconds nap) {
  try {
    return wait_for_release(nap);
  } catch (const Error& e) {
    const bool transient = is_outage(e);
    if (!transient || conn_->in_transaction()) throw;
    log(LogLevel::kInfo, "waiting for lease '" + name_ + "' to be released: " + e.what() + "; retrying");
    wake_head_ = queue_head_ = listening_ = false;
    std::this_thread::sleep_for(nap);
    return false;
  }
}

void LeaseLock::stop_listening() noexcept {
  if (!listening_) return;
  listening_ = false;
  try {
    conn_->unlisten(wakeup_channel_);
  } catch (const std::exception& e) {
    log(LogLevel::kDebug, std::string("UNLISTEN failed: ") + e.what());
  }
}

bool LeaseLock::has_waiter_queue() const { return detail::catalog(*conn_).has(Sql::lease_queue_leave); }

void LeaseLock::leave_waiter_queue() noexcept {
  free_session_lock(*conn_, queue_head_, Sql::lease_queue_leave, wakeup_channel_, "leaving the waiter queue");
}

void LeaseLock::leave_wake_queue() noexcept {
  free_session_lock(*conn_, wake_head_, Sql::lease_wakeup_signal, wakeup_channel_, "freeing the wake-up lock");
}

bool LeaseLock::acquire(milliseconds wait) {
  check_duration(wait, "wait", milliseconds(0), std::chrono::hours(24 * 365));
  auto t0 = steady_clock::now();
  auto deadline = t0 + wait;
  auto backoff = options_.backoff_initial;
  int idle_wakes = 0;  // wake-ups that found the lease still held
  const bool can_listen = wakeup_ == Wakeup::kConnection && wait.count() > 0 && !conn_->in_transaction();
  // Wake-ups that arrived since the last call are stale: drain them.
  if (can_listen && listening_) conn_->wait_for_notify(wakeup_channel_, milliseconds(0));
  // A waiter that leaves without the lease frees the wake-up lock it holds
  // as the queue head (MariaDB), so the next waiter takes its place.
  // The same for the PostgreSQL waiter queue (lease_acquire, queue_role).
  const bool queue = can_listen && has_waiter_queue();
  struct LeaveQueue {
    LeaseLock* self;
    bool queue;
    bool acquired = false;
    ~LeaveQueue() {
      self->leave_wake_queue();
      self->leave_waiter_queue();
      // A handle that gave up stops listening: an idle listener still gets
      // every release's NOTIFY, costs the holders, and one whose socket is
      // never read holds back the server's notification queue.
      if (queue && !acquired) self->stop_listening();
    }
  } leave_queue{this, queue};
  std::optional<Error> outage;  // the last attempt that failed because the database was unreachable
  // LISTEN (PostgreSQL, SQLite): a database that went away makes it an
  // outage like a failed attempt.
  auto start_listening = [this](std::optional<Error>& out) {
    try {
      conn_->wait_for_notify(wakeup_channel_, milliseconds(0));
      listening_ = true;
    } catch (const Error& e) {
      const bool transient = is_outage(e);
      if (!transient) throw;
      out = e;
      listening_ = false;
    }
  };
  for (;;) {
    bool got = false;
    try {
      // A lost connection is retried for what is left of this wait, not a
      // whole ttl: acquire(wait) returns (or reports the outage) on time.
      const auto left_now = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
      got = wait.count() == 0 ? try_acquire_queued(queue)
                              : try_acquire_queued(queue, std::max(left_now, milliseconds(1)));
      outage.reset();
    } catch (const Error& e) {
      // The database went away while this waiter waits: keep waiting (and
      // retrying) until the wait's own deadline, and report the outage, not
      // "busy", if it lasts that long.
      const bool transient = is_outage(e);
      if (!transient || conn_->in_transaction() || wait.count() == 0 || steady_clock::now() >= deadline) throw;
      outage = e;
      wake_head_ = queue_head_ = listening_ = false;
    }
    if (got) {
      leave_queue.acquired = true;
      wake_head_ = false;  // the wake-up lock it holds is now the holder's
      leave_waiter_queue();  // the next waiter becomes the head
      g_metrics.wait_ms_total += static_cast<std::uint64_t>(
          std::chrono::duration_cast<milliseconds>(steady_clock::now() - t0).count());
      if (wait.count() > 0) g_metrics.wait_seconds.observe(std::chrono::duration<double>(steady_clock::now() - t0).count());
      return true;
    }
    leave_wake_queue();  // woken, but another contender took it: pass the wake-up lock on
    {
      std::lock_guard<std::mutex> lk(shared_->mu);
      if (shared_->hold > 0) return false;  // holding a lost lease: waiting cannot help
    }
    if (can_listen && !listening_ && !queue) {
      // Listen (once per handle; it stays for later calls), then try again
      // at once: a release between the failed attempt and the LISTEN is
      // not missed.
      start_listening(outage);
      continue;
    }
    auto now = steady_clock::now();
    if (now >= deadline) {
      if (outage) throw *outage;
      break;
    }
    auto left = std::chrono::duration_cast<milliseconds>(deadline - now);
    if (outage) {
      std::this_thread::sleep_for(std::min(jitter(backoff), std::max(left, milliseconds(1))));
      backoff = std::min(backoff * 2, options_.backoff_max);
      continue;
    }
    // Full jitter, capped by the backoff and by what the holder's lease has
    // left: no point polling a 30 s lease every 5 ms, nor sleeping past its end.
    auto cap = std::min(backoff, std::max(holder_remaining_, options_.backoff_initial));
    auto nap = std::min(jitter(cap), std::max(left, milliseconds(1)));
    if (queue && queue_head_ && !listening_) {
      // The head, not listening: that busy attempt made this waiter the head
      // (lease_acquire joins the queue in the same statement), or the head
      // is back from a nap. LISTEN, then try at once (a release before the
      // LISTEN is not missed).
      start_listening(outage);
      continue;
    }
    if (queue && !queue_head_) {
      // Not the head: the next release goes to the head, so this waiter
      // polls only to take the head's place when it leaves (its attempts try
      // for it), and naps with full jitter sized to what the holder's lease
      // has left (up to backoff_max) from the first nap on, not the ramp
      // from backoff_initial: every busy attempt on a hot lock is a reader
      // racing the holder's next take-over, and 15 waiters ramping from 5 ms
      // cost a 16-client lock a third of its cycles (measured). Only the
      // head listens (a listener that does not read makes every NOTIFY cost
      // it work), so a handle that listened as an earlier head stops.
      stop_listening();
      const auto far = std::min(options_.backoff_max, std::max(holder_remaining_, options_.backoff_initial));
      std::this_thread::sleep_for(std::min(jitter(far), std::max(left, milliseconds(1))));
      backoff = std::min(backoff * 2, options_.backoff_max);
      continue;
    }
    // A release wakes waiters at once where the dialect can. A waiter whose
    // wake-ups keep finding the lease held (a holder that releases and
    // re-acquires faster than a waiter can try) sleeps its backoff after two
    // of them instead of racing it on every release: on SQLite every release
    // since the waiter's last look counts, the MariaDB wake-up lock also
    // "wakes" when its holder has none, and on PostgreSQL a listening
    // backend costs the notifying holder at every release (it is signalled
    // and reads the queue; measured: one other listener makes a hot lock's
    // cycles 15-25 % slower), so the head stops listening for its nap.
    bool woke = false;
    if (wakeup_ != Wakeup::kNone && !conn_->in_transaction() && idle_wakes < 2) {
      auto cap_wait = std::min(options_.backoff_max, std::max(left, milliseconds(1)));
      woke = wait_for_release_riding_outages(std::min(cap_wait, std::max(holder_remaining_, nap)));
    } else {
      if (queue) stop_listening();
      std::this_thread::sleep_for(nap);
    }
    idle_wakes = woke ? idle_wakes + 1 : 0;
    backoff = std::min(backoff * 2, options_.backoff_max);
  }
  g_metrics.wait_ms_total +=
      static_cast<std::uint64_t>(std::chrono::duration_cast<milliseconds>(steady_clock::now() - t0).count());
  g_metrics.wait_seconds.observe(std::chrono::duration<double>(steady_clock::now() - t0).count());
  return false;
}

LossCause LeaseLock::diagnose(Connection& conn, const std::string& owner, std::int64_t fence, std::string* detail) {
  std::int64_t known_expire_at = 0;
  {
    std::lock_guard<std::mutex> lk(shared_->mu);
    if (shared_->fence == fence) known_expire_at = shared_->expire_at;
  }
  return diagnose_lease(conn, name_, owner, fence, known_expire_at, detail);
}


void LeaseLock::mark_lost(LossCause cause, std::string detail) {
  std::function<void(const LeaseLoss&)> cb;
  LeaseLoss loss;
  {
    std::lock_guard<std::mutex> lk(shared_->mu);
    if (shared_->lost || shared_->hold == 0) return;
    shared_->lost = true;
    auto left = std::chrono::duration_cast<milliseconds>(shared_->valid_until - steady_clock::now());
    loss = LeaseLoss{cause, std::move(detail), shared_->fence, std::max(left, milliseconds(0))};
    shared_->loss = loss;
    cb = shared_->on_lost;
  }
  count_loss(cause);
  log(LogLevel::kWarning, "lease lost (" + std::string(to_string(cause)) + "): " + loss.detail);
  if (cb) {
    try {
      cb(loss);
    } catch (const std::exception& e) {
      log(LogLevel::kError, std::string("on_lost callback threw: ") + e.what());
    }
  }
}

bool LeaseLock::renew() {
  std::string owner;
  std::int64_t fence = 0;
  {
    std::lock_guard<std::mutex> lk(shared_->mu);
    if (shared_->hold == 0 || shared_->lost) return false;
    owner = shared_->owner;
    fence = shared_->fence;
  }
  auto start = steady_clock::now();
  if (with_reconnect(*conn_, remaining(), "renewing lease '" + name_ + "'",
                     [&](int) { return renew_lease(*conn_, name_, owner, fence, options_.ttl); })) {
    std::lock_guard<std::mutex> lk(shared_->mu);
    if (shared_->owner == owner && !shared_->lost) shared_->valid_until = start + options_.ttl - margin_;
    return true;
  }
  std::string detail;
  auto cause = diagnose(*conn_, owner, fence, &detail);
  mark_lost(cause, std::move(detail));
  return false;
}

bool LeaseLock::release() {
  std::string owner;
  std::int64_t fence = 0;
  {
    std::lock_guard<std::mutex> lk(shared_->mu);
    if (shared_->hold == 0) {
      log(LogLevel::kWarning, "release() of lease '" + name_ + "' that this handle does not hold");
      ++g_metrics.releases_not_held;
      return false;
    }
    if (shared_->hold > 1) {
      // Not the last hold: nothing is sent, but the answer is still whether
      // the lease was held (a lost one, or one past its trust window, is not).
      --shared_->hold;
      if (!shared_->lost && shared_->valid_locked()) return true;
      ++g_metrics.releases_not_held;
      log(LogLevel::kWarning, "release of a hold of lease '" + name_ + "': it was no longer held (" +
                                  std::string(to_string(shared_->loss ? shared_->loss->cause : LossCause::kExpired)) +
                                  ")");
      return false;
    }
    if (shared_->lost) {
      // The loss was reported already (on_lost / last_loss()); the database
      // may be unreachable, so do not wait on it: the row expires by itself.
      shared_->hold = 0;
      ++g_metrics.releases_not_held;
      log(LogLevel::kWarning, "release of lease '" + name_ + "': it was no longer held (" +
                                  std::string(to_string(shared_->loss ? shared_->loss->cause : LossCause::kExpired)) +
                                  "); nothing sent to the database");
      return false;
    }
    owner = shared_->owner;
    fence = shared_->fence;
  }
  stop_watchdog();
  // Idempotent by owner token: retried on a fresh connection; if it still
  // fails, the handle keeps the lease (release() can be called again, and
  // the destructor tries once more) rather than forget one that may be held.
  bool ok = with_reconnect(*conn_, std::min<milliseconds>(options_.ttl, std::chrono::seconds(10)),
                           "releasing lease '" + name_ + "'",
                           [&](int attempt) {
                             bool released = release_lease(*conn_, name_, owner, fence);
                             if (released || attempt == 1) return released;
                             // An earlier attempt's answer was lost: did it release?
                             auto info = lease_info(*conn_, name_);
                             return info && info->owner == owner && info->fence == fence && !info->held();
                           });
  // A former head of the PostgreSQL waiters listened while it held the
  // lease (its own NOTIFY is cheap); released, it stops: an idle listener
  // costs every later release of this lock. After the release statement,
  // so the next waiter is already woken.
  if (listening_ && !conn_->in_transaction() && has_waiter_queue()) stop_listening();
  if (!ok) {
    std::string detail;
    LossCause cause = LossCause::kExpired;
    try {
      cause = diagnose(*conn_, owner, fence, &detail);
    } catch (const std::exception& e) {
      detail = std::string("lease '") + name_ + "' was not held at release (diagnosis failed: " + e.what() + ")";
    }
    mark_lost(cause, detail);
    log(LogLevel::kWarning, "release of lease '" + name_ + "': it was no longer held (" +
                                std::string(to_string(cause)) + ")");
  }
  std::lock_guard<std::mutex> lk(shared_->mu);
  shared_->hold = 0;
  return ok;
}

bool LeaseLock::owns() const {
  std::lock_guard<std::mutex> lk(shared_->mu);
  return shared_->valid_locked();
}

std::int64_t LeaseLock::fence() const {
  std::lock_guard<std::mutex> lk(shared_->mu);
  return shared_->fence;
}

std::string LeaseLock::owner() const {
  std::lock_guard<std::mutex> lk(shared_->mu);
  return shared_->owner;
}

int LeaseLock::hold_count() const {
  std::lock_guard<std::mutex> lk(shared_->mu);
  return shared_->hold;
}

std::int64_t LeaseLock::expires_at_ms() const {
  std::lock_guard<std::mutex> lk(shared_->mu);
  return shared_->expire_at;
}

milliseconds LeaseLock::remaining() const {
  std::lock_guard<std::mutex> lk(shared_->mu);
  if (!shared_->valid_locked()) return milliseconds(0);
  return std::chrono::duration_cast<milliseconds>(shared_->valid_until - steady_clock::now());
}

std::optional<LeaseLoss> LeaseLock::last_loss() const {
  std::lock_guard<std::mutex> lk(shared_->mu);
  return shared_->loss;
}

bool LeaseLock::run_guarded(const std::function<void(Transaction&)>& work) {
  // A connection that broke (a killed session, a failover, an I/O deadline)
  // before COMMIT was sent committed nothing, so the whole transaction runs
  // again on a fresh connection while the trust window lasts. An unknown
  // COMMIT outcome is never retried.
  return with_reconnect(
      *conn_, remaining(), "guarded transaction on lease '" + name_ + "'",
      [&](int) {
        std::string owner;
        std::int64_t fence;
        {
          std::lock_guard<std::mutex> lk(shared_->mu);
          if (!shared_->valid_locked()) return false;
          owner = shared_->owner;
          fence = shared_->fence;
        }
        return guarded_once(owner, fence, work);
      },
      InDoubt::kThrow);
}

bool LeaseLock::guarded_once(const std::string& owner, std::int64_t fence,
                             const std::function<void(Transaction&)>& work) {
  Transaction tx(*conn_);
  // A row back (a locking read) or a row changed (MySQL: the row is written,
  // so that Galera certifies the transaction against a take-over elsewhere).
  auto r = run(*conn_, Sql::lease_guard_check, {name_, owner, fence});
  if (r.rows.empty() && r.affected != 1) {
    tx.rollback();
    std::string detail;
    auto cause = diagnose(*conn_, owner, fence, &detail);
    mark_lost(cause, std::move(detail));
    return false;
  }
  work(tx);
  tx.commit();
  return true;
}

void LeaseLock::lock() {
  auto wait = options_.wait.count() > 0 ? options_.wait : std::chrono::hours(24 * 365);
  if (!acquire(wait))
    throw Error(ErrorCode::kLockBusy, "lease '" + name_ + "' not acquired within " + format_duration(wait));
}

void LeaseLock::unlock() noexcept {
  try {
    release();
  } catch (const std::exception& e) {
    log(LogLevel::kWarning, "unlock of lease '" + name_ + "' failed (it expires by itself): " + e.what());
  }
}

// ---- watchdog ----------------------------------------------------------------

void LeaseLock::start_watchdog() {
  stop_watchdog();
  {
    std::lock_guard<std::mutex> lk(shared_->mu);
    shared_->stop = false;
  }
  auto shared = shared_;
  auto factory = options_.watchdog_connection;
  auto ttl = options_.ttl;
  auto margin = margin_;
  auto period = period_;
  const std::string name = name_;
  watchdog_ = std::thread([this, shared, factory, ttl, margin, period, name] {
    // Retry quickly after a transient failure, but keep enough of the trust
    // window to report the loss before it ends.
    const milliseconds retry = std::clamp<milliseconds>(period / 4, milliseconds(10), milliseconds(1000));
    // The loss is signalled this long before the trust window ends.
    const milliseconds early = std::min<milliseconds>(retry, milliseconds(20));
    std::shared_ptr<Connection> c;
    milliseconds next = period;
    bool unknown = false;  // the last failure was a sent renewal with no answer
    for (;;) {
      std::string owner;
      std::int64_t fence = 0;
      std::int64_t known_expire_at = 0;
      steady_clock::time_point valid_until;
      {
        std::unique_lock<std::mutex> lk(shared->mu);
        shared->cv.wait_for(lk, next, [&] { return shared->stop; });
        if (shared->stop || shared->hold == 0 || shared->lost) return;
        owner = shared->owner;
        fence = shared->fence;
        known_expire_at = shared->expire_at;
        valid_until = shared->valid_until;
      }
      // The renewal runs on a thread of its own: a call blocked by a frozen
      // server or a silent partition cannot hold the loss signal past the
      // trust window. This thread waits for it only until then; a renewal
      // still blocked after that is abandoned with its connection.
      auto start = steady_clock::now();
      auto task = std::make_shared<RenewTask>();
      task->conn = std::move(c);
      std::thread([task, factory, name, owner, fence, ttl, known_expire_at] {
        std::unique_lock<std::mutex> lk(task->mu, std::defer_lock);
        try {
          if (!task->conn) task->conn = std::shared_ptr<Connection>(factory());
          task->connected = true;
          task->ok = renew_lease(*task->conn, name, owner, fence, ttl);
          if (!task->ok)
            task->cause = diagnose_lease(*task->conn, name, owner, fence, known_expire_at, &task->detail);
        } catch (...) {
          task->error = std::current_exception();
        }
        lk.lock();
        task->done = true;
        task->cv.notify_all();
      }).detach();
      {
        // Wait for the answer until the trust window ends, looking at the
        // stop flag every 20 ms: stop_watchdog() (release, ~LeaseLock) never
        // waits for a renewal that hangs.
        std::unique_lock<std::mutex> lk(task->mu);
        for (;;) {
          auto until = std::min(valid_until - early, steady_clock::now() + milliseconds(20));
          if (task->cv.wait_until(lk, until, [&] { return task->done; })) break;
          if (steady_clock::now() >= valid_until - early) break;
          std::lock_guard<std::mutex> slk(shared->mu);
          if (shared->stop) return;  // the renewal thread finishes on its own
        }
        if (!task->done) {
          lk.unlock();
          // No renewal answered within the trust window: the lease may be
          // gone in the database by now. owns() is already false.
          bool sent = task->connected.load();
          mark_lost(sent || unknown ? LossCause::kOutcomeUnknown : LossCause::kUnreachable,
                    "no renewal of lease '" + name + "' succeeded within its trust window: database " +
                        (sent ? "did not answer" : "unreachable"));
          return;
        }
      }
      if (!task->error) {
        c = task->conn;
        if (task->ok) {
          std::lock_guard<std::mutex> lk(shared->mu);
          if (shared->owner == owner && shared->fence == fence && !shared->lost) shared->valid_until = start + ttl - margin;
          next = period;
          unknown = false;
          continue;
        }
        mark_lost(task->cause, std::move(task->detail));
        return;
      }
      try {
        std::rethrow_exception(task->error);
      } catch (const std::exception& e) {
        ++g_metrics.renew_errors;
        const Error* se = dynamic_cast<const Error*>(&e);
        bool conn_problem = !se || se->code() == ErrorCode::kConnectionLost ||
                            se->code() == ErrorCode::kCommitInDoubt || se->code() == ErrorCode::kTimeout;
        unknown = task->connected && conn_problem;
        if (!conn_problem) c = task->conn;  // else reconnect on the next try
        log(LogLevel::kInfo, "watchdog renew of '" + name + "' failed, retrying: " + e.what());
      } catch (...) {
        ++g_metrics.renew_errors;
        log(LogLevel::kInfo, "watchdog renew of '" + name + "' failed with a non-standard exception, retrying");
      }
      auto now = steady_clock::now();
      if (valid_until - now <= retry * 2) {
        mark_lost(unknown ? LossCause::kOutcomeUnknown : LossCause::kUnreachable,
                  "could not renew lease '" + name + "' before its trust window ended: database " +
                      (unknown ? "did not answer" : "unreachable"));
        return;
      }
      next = retry;
    }
  });
}

void LeaseLock::stop_watchdog() noexcept {
  if (!watchdog_.joinable()) return;
  {
    std::lock_guard<std::mutex> lk(shared_->mu);
    shared_->stop = true;
  }
  shared_->cv.notify_all();
  if (watchdog_.get_id() == std::this_thread::get_id()) {
    watchdog_.detach();  // called from on_lost on the watchdog thread itself
    return;
  }
  watchdog_.join();
}

// ---- LeaseGuard ----------------------------------------------------------------

LeaseGuard::LeaseGuard(LeaseLock& lock, milliseconds wait) : lock_(lock) {
  if (!lock_.acquire(wait))
    throw Error(ErrorCode::kLockBusy, "lease '" + lock.name() + "' not acquired within " + format_duration(wait));
}

LeaseGuard::~LeaseGuard() { lock_.unlock(); }

}  // namespace sqlguard
