// Lease lock handle: hold count, trust window, renew and release. How an
// attempt is decided and how a waiter is woken are the dialect's plans
// (strategies/lease/plans.h); the free functions are in lease/lease_ops.cpp,
// the watchdog in lease/watchdog.cpp. See include/sqlguard/lease_lock.h for
// the invariants.
#include "sqlguard/lease_lock.h"

#include <algorithm>

#include "core/catalog.h"
#include "core/metric_hooks.h"
#include "dialect/dialect.h"
#include "sqlguard/validate.h"
#include "sqlguard/lock_client.h"
#include "strategies/lease/client_core.h"
#include "strategies/lease/lease_state.h"
#include "strategies/lease/lease_util.h"
#include "strategies/lease/plans.h"
#include "strategies/lease/watchdog.h"
#include "strategies/lease/waiter.h"

namespace sqlguard {

using detail::PauseResult;
using detail::Sql;
using detail::run;
using detail::with_reconnect;
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
  if (!o.owner.empty()) validate_name(o.owner, "owner");
  if (o.place_ttl) {
    if (!o.fair)
      throw Error(ErrorCode::kInvalidArgument, "place_ttl is set but fair is false: only a fair lease has queue places");
    check_duration(*o.place_ttl, "place_ttl", milliseconds(300), std::chrono::hours(1));
  }
}

// ---- LeaseLock ---------------------------------------------------------------

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

void observe_wait(steady_clock::time_point t0, bool histogram) {
  const auto waited = steady_clock::now() - t0;
  metric::lock_wait_ms_total() += static_cast<std::uint64_t>(std::chrono::duration_cast<milliseconds>(waited).count());
  if (histogram) metric::lock_wait_seconds().observe(std::chrono::duration<double>(waited).count());
}
}  // namespace

// The connection one call of a handle uses: the borrowed one, or one of its
// client's work connections (the one that acquired, where the dialect's
// release must run on that session), held for the call.
class LeaseLock::Conn {
 public:
  explicit Conn(LeaseLock& l, bool pinned = false) : conn_(l.conn_) {
    if (!l.client_) return;
    int slot = -1;
    if (pinned) {
      std::lock_guard<std::mutex> lk(l.state_->mu);
      slot = l.lease_->slot;
    }
    borrowed_.emplace(l.client_->core()->borrow(slot));
    conn_ = &**borrowed_;
  }
  Connection& operator*() const { return *conn_; }

 private:
  Connection* conn_;
  std::optional<detail::ClientCore::Borrowed> borrowed_;
};

LeaseLock::LeaseLock(Connection& conn, std::string name, LeaseOptions options)
    : conn_(&conn), name_(std::move(name)), options_(std::move(options)), state_(std::make_shared<detail::LeaseState>()) {
  init(std::nullopt);
}

LeaseLock::LeaseLock(std::shared_ptr<LockClient> client, std::string name, LeaseOptions options, Watchdog watchdog)
    : conn_(nullptr), name_(std::move(name)), options_(std::move(options)) {
  if (!client) throw Error(ErrorCode::kInvalidArgument, "LeaseLock: the lock client is null");
  if (options_.watchdog_connection)
    throw Error(ErrorCode::kInvalidArgument,
                "LeaseLock of a lock client: options.watchdog_connection is for a handle on a borrowed connection "
                "(the client renews its leases itself)");
  client->core()->check_process();
  client_ = std::move(client);
  init_client(watchdog == Watchdog::kOn || static_cast<bool>(options_.on_lost));
}

LeaseLock::LeaseLock(const std::string& uri, std::string name, LeaseOptions options, Watchdog watchdog,
                     const ConnectOptions& connect)
    : conn_(nullptr), name_(std::move(name)), options_(std::move(options)), state_(std::make_shared<detail::LeaseState>()) {
  if (!options_.watchdog_connection && !detail::private_to_connection(uri)) {
    // Validated before connecting: a bad name or option never costs a session.
    validate_name(name_, "lock name");
    validate(options_);
    client_ = LockClient::shared(uri, lease_connect_options(connect, options_.ttl));
    init_client(watchdog == Watchdog::kOn || static_cast<bool>(options_.on_lost));
    return;
  }
  own_conn_ = make_connection(uri, lease_connect_options(connect, options_.ttl));
  conn_ = own_conn_.get();
  if ((watchdog == Watchdog::kOn || options_.on_lost) && !options_.watchdog_connection) {
    // The watchdog's statements must not outlive the trust window on a hung
    // server: bound them by the renew period (client-side always; on the
    // server too where the dialect can).
    auto bound = std::max<milliseconds>(options_.renew_period.value_or(options_.ttl / 3), milliseconds(1000));
    options_.watchdog_connection = [uri, bound, connect] {
      ConnectOptions o = connect;
      o.connect_timeout = std::min(connect.connect_timeout, bound);
      o.io_timeout = bound;
      auto c = make_connection(uri, o);
      c->dialect().bound_session_statements(*c, bound);
      return c;
    };
  }
  // A waiter blocked in a wake-up statement keeps each wait well inside io_timeout.
  init(*lease_connect_options(connect, options_.ttl).io_timeout / 2);
}

void LeaseLock::init_client(bool renew) {
  validate_name(name_, "lock name");
  validate(options_);
  margin_ = options_.safety_margin.value_or(std::min<milliseconds>(options_.ttl / 10, std::chrono::seconds(2)));
  period_ = options_.renew_period.value_or(options_.ttl / 3);
  lease_ = std::make_shared<detail::ClientLease>();
  lease_->name = std::move(name_);  // kept once, in the lease the client shares (name() reads it)
  lease_->wakes = true;
  lease_->options.ttl = options_.ttl;
  lease_->options.min_hold = options_.min_hold;
  lease_->options.backoff_initial = options_.backoff_initial;
  lease_->options.backoff_max = options_.backoff_max;
  lease_->options.release_commit = options_.release_commit;
  lease_->options.owner = options_.owner;
  lease_->options.fair = options_.fair;
  lease_->options.place_ttl =
      options_.place_ttl.value_or(std::clamp<milliseconds>(options_.ttl, milliseconds(300), std::chrono::seconds(10)));
  lease_->margin = margin_;
  lease_->period = period_;
  lease_->renew = renew;
  state_ = lease_->state;
  state_->on_lost = options_.on_lost;
}

void LeaseLock::init(std::optional<milliseconds> wait_cap) {
  validate_name(name_, "lock name");
  validate(options_);
  if (options_.fair)
    throw Error(ErrorCode::kNotSupported, "a fair lease (options.fair) needs a lock-client handle (LeaseLock(client, "
                                          "...) or from a URI): the client renews its waiters' queue places; a "
                                          "LeaseLock on a borrowed connection (or in-memory SQLite) cannot");
  margin_ = options_.safety_margin.value_or(std::min<milliseconds>(options_.ttl / 10, std::chrono::seconds(2)));
  period_ = options_.renew_period.value_or(options_.ttl / 3);
  state_->on_lost = options_.on_lost;
  waiter_ = conn_->dialect().plans().wait->make_waiter(lease_wakeup_channel(name_), wait_cap);
  if (options_.watchdog_connection)
    watchdog_ = std::make_unique<detail::LeaseWatchdog>(state_, options_.watchdog_connection, name_, options_.ttl,
                                                         margin_, period_);
}

LeaseLock::~LeaseLock() {
  if (client_) {
    // In a forked child the lease is the parent's: leave it alone.
    if (!client_->core()->same_process()) return;
    client_->core()->cancel_acquire(lease_);
  }
  stop_renewing();
  if (waiter_) waiter_->close(*conn_);
  std::string owner;
  std::int64_t fence = 0;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    if (state_->hold == 0 || state_->lost) return;
    owner = state_->owner;
    fence = state_->fence;
    state_->hold = 0;
  }
  const detail::HeldPlace place = lease_ ? detail::take_held_place(*lease_) : detail::HeldPlace{};
  try {
    Conn c(*this, true);
    if (!detail::release_lease(*c, name(), owner, fence, options_.release_commit, options_.fair, place))
      log(LogLevel::kWarning, "lease '" + name() + "' was no longer held when its LeaseLock was destroyed");
  } catch (const std::exception& e) {
    log(LogLevel::kWarning, "releasing lease '" + name() + "' in ~LeaseLock failed (it expires by itself): " + e.what());
  }
  if (client_) client_->core()->local_release(name());
}

void LeaseLock::stop_renewing() {
  if (client_) client_->core()->renew_unregister(lease_.get());
  if (watchdog_) watchdog_->stop();
}

const std::string& LeaseLock::name() const noexcept { return lease_ ? lease_->name : name_; }

namespace {
// A lock-client handle in a forked child: every call but name() and
// options() throws (lock_client.h), the observers included — the lease is
// the parent's, and a child that went on would act on owns() == true.
void refuse_in_forked_child(const std::shared_ptr<LockClient>& client) {
  if (client) client->core()->check_process();
}
}  // namespace

bool LeaseLock::try_acquire() {
  if (client_) return client_->core()->try_acquire(lease_);
  return attempt(std::nullopt);
}

void LeaseLock::acquire_async(milliseconds wait, AcquireCallback done) {
  if (!client_)
    throw Error(ErrorCode::kNotSupported,
                "lease '" + name() + "': acquire_async needs a handle of a LockClient (this one borrows a connection)");
  client_->core()->acquire_async(lease_, wait, std::move(done));
}

std::future<bool> LeaseLock::acquire_async(milliseconds wait) {
  auto [done, f] = detail::completion_future();
  acquire_async(wait, std::move(done));
  return std::move(f);
}

bool LeaseLock::cancel_acquire() {
  refuse_in_forked_child(client_);
  return client_ ? client_->core()->cancel_acquire(lease_) : false;
}

// One attempt (re-entrant), riding the waiter's queue place when it has one.
// `retry_budget`: how long a lost connection is retried (default ttl -
// safety margin; a waiting acquire passes what is left of its wait).
bool LeaseLock::attempt(std::optional<milliseconds> retry_budget) {
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    if (state_->hold > 0) {
      if (!state_->valid_locked()) return false;  // lost: release() first
      ++state_->hold;
      return true;
    }
  }
  std::string owner = options_.owner.empty() ? make_owner_token() : options_.owner;
  auto start = steady_clock::now();
  const milliseconds budget = std::min<milliseconds>(options_.ttl - margin_, retry_budget.value_or(options_.ttl));
  auto r = with_reconnect(*conn_, budget, "acquiring lease '" + name() + "'", [&](int attempt) {
    if (attempt > 1) {
      // A retry after an unanswered attempt first asks whether that attempt
      // took the lease (the owner token is ours alone).
      auto mine = run(*conn_, Sql::lease_read_mine, {name(), owner, lease_wakeup_channel(name())});
      if (!mine.rows.empty()) {
        static constexpr auto kFence = detail::column(Sql::lease_read_mine, "fence");
        static constexpr auto kExpireAt = detail::column(Sql::lease_read_mine, "expire_at");
        if (cell(mine.rows[0], kExpireAt).as_int() > conn_->db_now_ms())
          return AcquireResult{true, cell(mine.rows[0], kFence).as_int(), cell(mine.rows[0], kExpireAt).as_int(), owner};
      }
      waiter_->session_lost();  // a new session: it holds no queue place and listens to nothing
    }
    auto res = detail::acquire_lease_seated(*conn_, name(), owner, options_.ttl, options_.min_hold, waiter_->seat());
    waiter_->seated();
    return res;
  });
  if (!r.acquired) {
    // 0 = taken by another contender just now (the row was being taken over,
    // so the attempt saw the old, expired lease): the new lease has just
    // begun; count on one like ours.
    holder_remaining_ = r.holder_remaining_ms > 0 ? milliseconds(r.holder_remaining_ms) : options_.ttl;
    return false;
  }
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->hold = 1;
    state_->owner = owner;
    state_->fence = r.fence;
    ++state_->acquisition;
    state_->expire_at = r.expire_at_ms;
    state_->valid_until = start + options_.ttl - margin_;
    state_->lost = false;
    state_->loss.reset();
    state_->stop = false;
  }
  if (watchdog_) watchdog_->start();
  return true;
}

bool LeaseLock::acquire(milliseconds wait) {
  check_duration(wait, "wait", milliseconds(0), std::chrono::hours(24 * 365));
  const auto t0 = steady_clock::now();
  if (client_) {
    const bool got = client_->core()->acquire(lease_, wait);
    observe_wait(t0, wait.count() > 0 || !got);
    return got;
  }
  const auto deadline = t0 + wait;
  auto backoff = options_.backoff_initial;
  int idle_wakes = 0;  // wake-ups that found the lease still held
  detail::Waiter& w = *waiter_;
  w.begin(*conn_, wait.count() > 0 && !conn_->in_transaction());
  struct Finish {  // a waiter that leaves gives up what it held (a queue place, a wake-up lock, a LISTEN)
    detail::Waiter& w;
    Connection& conn;
    bool acquired = false;
    ~Finish() { w.finish(conn, acquired); }
  } finish{w, *conn_};
  std::optional<Error> outage;  // the last attempt that failed because the database was unreachable
  for (;;) {
    bool got = false;
    try {
      // A lost connection is retried for what is left of this wait, not a
      // whole ttl: acquire(wait) returns (or reports the outage) on time.
      const auto left_now = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
      got = wait.count() == 0 ? attempt(std::nullopt) : attempt(std::max(left_now, milliseconds(1)));
      outage.reset();
    } catch (const Error& e) {
      // The database went away while this waiter waits: keep waiting (and
      // retrying) until the wait's own deadline, and report the outage, not
      // "busy", if it lasts that long.
      if (!detail::is_outage(e) || conn_->in_transaction() || wait.count() == 0 || steady_clock::now() >= deadline)
        throw;
      outage = e;
      w.session_lost();
    }
    if (got) {
      finish.acquired = true;
      w.acquired(*conn_);
      observe_wait(t0, wait.count() > 0);
      return true;
    }
    w.busy(*conn_);
    {
      std::lock_guard<std::mutex> lk(state_->mu);
      if (state_->hold > 0) return false;  // holding a lost lease: waiting cannot help
    }
    if (w.listen_first(*conn_, outage)) continue;
    const auto now = steady_clock::now();
    if (now >= deadline) {
      if (outage) throw *outage;
      break;
    }
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - now);
    if (outage) {
      std::this_thread::sleep_for(std::min(detail::jitter(backoff), std::max(left, milliseconds(1))));
      backoff = std::min(backoff * 2, options_.backoff_max);
      continue;
    }
    // Full jitter, capped by the backoff and by what the holder's lease has
    // left: no point polling a 30 s lease every 5 ms, nor sleeping past its end.
    const auto cap = std::min(backoff, std::max(holder_remaining_, options_.backoff_initial));
    const detail::PauseArgs args{std::min(detail::jitter(cap), std::max(left, milliseconds(1))), left, holder_remaining_,
                                 options_.backoff_initial, options_.backoff_max, idle_wakes};
    const auto paused = w.pause(*conn_, args, outage);
    if (paused == PauseResult::kRetryNow) continue;
    if (paused != PauseResult::kNapped)
      idle_wakes = paused == PauseResult::kWoken && !conn_->dialect().plans().wait->wakes_every_waiter() ? idle_wakes + 1 : 0;
    backoff = std::min(backoff * 2, options_.backoff_max);
  }
  observe_wait(t0, true);
  return false;
}

LossCause LeaseLock::diagnose(Connection& conn, const std::string& owner, std::int64_t fence, std::string* detail) {
  std::int64_t known_expire_at = 0;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    if (state_->fence == fence) known_expire_at = state_->expire_at;
  }
  return detail::diagnose_lease(conn, name(), owner, fence, known_expire_at, detail);
}

bool LeaseLock::renew() {
  refuse_in_forked_child(client_);
  std::string owner;
  std::int64_t fence = 0;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    if (state_->hold == 0 || state_->lost) return false;
    owner = state_->owner;
    fence = state_->fence;
  }
  Conn c(*this);
  Connection& conn = *c;
  auto start = steady_clock::now();
  if (with_reconnect(conn, remaining(), "renewing lease '" + name() + "'",
                     [&](int) { return renew_lease(conn, name(), owner, fence, options_.ttl); })) {
    std::lock_guard<std::mutex> lk(state_->mu);
    if (state_->owner == owner && !state_->lost) state_->valid_until = start + options_.ttl - margin_;
    return true;
  }
  std::string detail;
  auto cause = diagnose(conn, owner, fence, &detail);
  stop_renewing();
  state_->mark_lost(cause, std::move(detail));
  return false;
}

bool LeaseLock::release() {
  refuse_in_forked_child(client_);
  std::string owner;
  std::int64_t fence = 0;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    auto not_held = [&](const std::string& what, const std::string& tail) {
      ++metric::lock_releases_not_held();
      log(LogLevel::kWarning, what + " of lease '" + name() + "': it was no longer held (" +
                                  std::string(to_string(state_->loss ? state_->loss->cause : LossCause::kExpired)) +
                                  ")" + tail);
      return false;
    };
    if (state_->hold == 0) {
      log(LogLevel::kWarning, "release() of lease '" + name() + "' that this handle does not hold");
      ++metric::lock_releases_not_held();
      return false;
    }
    if (state_->hold > 1) {
      // Not the last hold: nothing is sent, but the answer is still whether
      // the lease was held (a lost one, or one past its trust window, is not).
      --state_->hold;
      return !state_->lost && state_->valid_locked() ? true : not_held("release of a hold", "");
    }
    if (state_->lost) {
      // The loss was reported already (on_lost / last_loss()); the database
      // may be unreachable, so do not wait on it: the row expires by itself.
      state_->hold = 0;
      return not_held("release", "; nothing sent to the database");
    }
    owner = state_->owner;
    fence = state_->fence;
    // From here on the acquisition belongs to this release: a renewal round
    // or the watchdog that finds the row gone (this release deleted it,
    // another process took it a moment later) reports nothing.
    state_->ending = true;
  }
  struct EndRelease {  // the release returned or threw: nothing is ending any more
    detail::LeaseState& st;
    ~EndRelease() {
      std::lock_guard<std::mutex> lk(st.mu);
      st.ending = false;
    }
  } end_release{*state_};
  stop_renewing();
  // Kept until the release went through: a release that throws can be
  // called again (or the destructor tries), and must still end the place.
  const detail::HeldPlace place = lease_ ? detail::peek_held_place(*lease_) : detail::HeldPlace{};
  Conn c(*this, true);
  Connection& conn = *c;
  // Idempotent by owner token: retried on a fresh connection; if it still
  // fails, the handle keeps the lease (release() can be called again, and
  // the destructor tries once more) rather than forget one that may be held.
  bool ok = with_reconnect(conn, std::min<milliseconds>(options_.ttl, std::chrono::seconds(10)),
                           "releasing lease '" + name() + "'", [&](int attempt) {
                             bool released = detail::release_lease(conn, name(), owner, fence,
                                                                   options_.release_commit, options_.fair, place);
                             if (released || attempt == 1) return released;
                             // An earlier attempt's answer was lost: did it release?
                             auto info = lease_info(conn, name());
                             return info && info->owner == owner && info->fence == fence && !info->held();
                           });
  if (lease_) (void)detail::take_held_place(*lease_);
  if (waiter_) waiter_->released(conn);
  if (client_) client_->core()->local_release(name());
  if (!ok) {
    // Not held when the release came: lost before it, reported here once.
    {
      std::lock_guard<std::mutex> lk(state_->mu);
      state_->ending = false;
    }
    std::string detail;
    LossCause cause = LossCause::kExpired;
    try {
      cause = diagnose(conn, owner, fence, &detail);
    } catch (const std::exception& e) {
      detail = std::string("lease '") + name() + "' was not held at release (diagnosis failed: " + e.what() + ")";
    }
    state_->mark_lost(cause, detail);
    log(LogLevel::kWarning, "release of lease '" + name() + "': it was no longer held (" + std::string(to_string(cause)) + ")");
  }
  std::lock_guard<std::mutex> lk(state_->mu);
  state_->hold = 0;
  return ok;
}

bool LeaseLock::owns() const {
  refuse_in_forked_child(client_);
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->valid_locked();
}

std::int64_t LeaseLock::fence() const {
  refuse_in_forked_child(client_);
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->fence;
}

std::string LeaseLock::owner() const {
  refuse_in_forked_child(client_);
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->owner;
}

int LeaseLock::hold_count() const {
  refuse_in_forked_child(client_);
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->hold;
}

std::int64_t LeaseLock::expires_at_ms() const {
  refuse_in_forked_child(client_);
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->expire_at;
}

milliseconds LeaseLock::remaining() const {
  refuse_in_forked_child(client_);
  std::lock_guard<std::mutex> lk(state_->mu);
  if (!state_->valid_locked()) return milliseconds(0);
  return std::chrono::duration_cast<milliseconds>(state_->valid_until - steady_clock::now());
}

std::optional<LeaseLoss> LeaseLock::last_loss() const {
  refuse_in_forked_child(client_);
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->last_loss_locked();
}

bool LeaseLock::run_guarded(const std::function<void(Transaction&)>& work) {
  // A connection that broke (a killed session, a failover, an I/O deadline)
  // before COMMIT was sent committed nothing, so the whole transaction runs
  // again on a fresh connection while the trust window lasts. An unknown
  // COMMIT outcome is never retried.
  Conn c(*this);
  Connection& conn = *c;
  // A client handle: the renewer leaves this lease out while the transaction
  // holds its row (a batch would wait for it), and renews it right after.
  struct Guarded {
    detail::ClientLease* lease;
    detail::ClientCore* core;
    explicit Guarded(LeaseLock& l) : lease(l.lease_.get()), core(l.client_ ? l.client_->core().get() : nullptr) {
      if (core) ++lease->guarded;
    }
    ~Guarded() {
      if (!core) return;
      --lease->guarded;
      core->renew_soon(lease);
    }
  } guarded(*this);
  return with_reconnect(
      conn, remaining(), "guarded transaction on lease '" + name() + "'",
      [&](int) {
        std::string owner;
        std::int64_t fence;
        {
          std::lock_guard<std::mutex> lk(state_->mu);
          if (!state_->valid_locked()) return false;
          owner = state_->owner;
          fence = state_->fence;
        }
        return guarded_once(conn, owner, fence, work);
      },
      detail::InDoubt::kThrow);
}

bool LeaseLock::guarded_once(Connection& conn, const std::string& owner, std::int64_t fence,
                             const std::function<void(Transaction&)>& work) {
  Transaction tx(conn);
  // A lease of the client whose renewal fell due while guarded transactions
  // kept the renewer out is renewed here, on the row this transaction has
  // locked already: one statement a period, not one per transaction.
  detail::ClientCore* core = client_ ? client_->core().get() : nullptr;
  const bool renew_here = core && lease_->renew && core->renewal_wanted(lease_.get());
  const auto renew_start = steady_clock::now();
  // Still held: a locking read found the row, or (MySQL) the row was written,
  // so that Galera certifies the transaction against a take-over elsewhere;
  // then renewed if it is due.
  if (run(conn, Sql::lease_guard_check, {name(), owner, fence}).affected != 1 ||
      (renew_here && !renew_lease(conn, name(), owner, fence, options_.ttl))) {
    tx.rollback();
    std::string detail;
    auto cause = diagnose(conn, owner, fence, &detail);
    state_->mark_lost(cause, std::move(detail), &owner, fence);
    return false;
  }
  work(tx);
  tx.commit();
  if (renew_here) {
    {
      std::lock_guard<std::mutex> lk(state_->mu);
      if (state_->owner == owner && state_->fence == fence && !state_->lost)
        state_->valid_until = renew_start + options_.ttl - margin_;
    }
    core->renewed_in_guard(lease_.get());
  }
  return true;
}

void LeaseLock::lock() {
  auto wait = options_.wait.count() > 0 ? options_.wait : std::chrono::hours(24 * 365);
  if (!acquire(wait))
    throw Error(ErrorCode::kLockBusy, "lease '" + name() + "' not acquired within " + format_duration(wait));
}

void LeaseLock::unlock() noexcept {
  try {
    release();
  } catch (const std::exception& e) {
    log(LogLevel::kWarning, "unlock of lease '" + name() + "' failed (it expires by itself): " + e.what());
  }
}

// ---- LeaseGuard ----------------------------------------------------------------

LeaseGuard::LeaseGuard(LeaseLock& lock, milliseconds wait) : lock_(lock) {
  if (!lock_.acquire(wait))
    throw Error(ErrorCode::kLockBusy, "lease '" + lock.name() + "' not acquired within " + format_duration(wait));
}

LeaseGuard::~LeaseGuard() { lock_.unlock(); }

}  // namespace sqlguard
