// Lease lock handle: hold count, trust window, renew and release, as a
// handle of a lock client (the client attempts, waits and renews:
// strategies/lease/client_*.cpp). How an attempt is decided and how a waiter
// is woken are the dialect's plans (plans/plans.h); the free
// functions are in lease/lease_ops.cpp. See include/sqlguard/lease_lock.h
// for the invariants.
#include "sqlguard/lease_lock.h"

#include <algorithm>

#include "core/catalog.h"
#include "core/metric_hooks.h"
#include "dialect/dialect.h"
#include "sqlguard/validate.h"
#include "sqlguard/lock_client.h"
#include "client/client.h"
#include "strategies/lease/lease_state.h"
#include "core/reconnect.h"
#include "plans/plans.h"
#include "strategies/kinds.h"

namespace sqlguard {

using detail::Sql;
using detail::run;
using detail::with_reconnect;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
namespace metric = detail::metric;

// ---- LeaseLock ---------------------------------------------------------------

ConnectOptions detail::lease_connect_options(ConnectOptions o, milliseconds ttl) {
  const milliseconds bound = std::max<milliseconds>(ttl / 3, milliseconds(1000));
  if (!o.io_timeout || *o.io_timeout > bound) o.io_timeout = bound;
  o.connect_timeout = std::min(o.connect_timeout, bound);
  return o;
}

namespace {
void observe_wait(steady_clock::time_point t0, bool histogram) {
  const auto waited = steady_clock::now() - t0;
  metric::lock_wait_ms_total() += static_cast<std::uint64_t>(std::chrono::duration_cast<milliseconds>(waited).count());
  if (histogram) metric::lock_wait_seconds().observe(std::chrono::duration<double>(waited).count());
}
}  // namespace

namespace {
// The refusal a fair lease gets where its client cannot renew queue places.
[[noreturn]] void refuse_fair_over_borrowed() {
  throw Error(ErrorCode::kNotSupported, "a fair lease (options.fair) needs a shared lock client's handle "
                                        "(LeaseLock(client, ...) or from a URI): the client renews its waiters' queue "
                                        "places; a LeaseLock on a borrowed connection (or in-memory SQLite) cannot");
}
}  // namespace

LeaseLock::LeaseLock(Connection& conn, std::string name, LeaseOptions options)
    : name_(std::move(name)), options_(std::move(options)) {
  validate_name(name_, "lock name");
  validate(options_);
  if (options_.fair) refuse_fair_over_borrowed();
  client_ = std::make_shared<LockClient>(detail::ClientCore::over(conn, options_.watchdog_connection, std::nullopt));
  init_client(static_cast<bool>(options_.watchdog_connection));
}

LeaseLock::LeaseLock(std::shared_ptr<LockClient> client, std::string name, LeaseOptions options, Watchdog watchdog)
    : name_(std::move(name)), options_(std::move(options)) {
  if (!client) throw Error(ErrorCode::kInvalidArgument, "LeaseLock: the lock client is null");
  if (options_.watchdog_connection)
    throw Error(ErrorCode::kInvalidArgument,
                "LeaseLock of a lock client: options.watchdog_connection is for a handle on a borrowed connection "
                "(the client renews its leases itself)");
  client->core()->check_process();
  if (client->core()->borrows())
    throw Error(ErrorCode::kInvalidArgument,
                "LeaseLock: this lock client is the one of a LeaseLock on a borrowed connection and serves that "
                "handle alone (its connection is the caller's, used from the caller's thread); make handles of a "
                "LockClient::create()/shared() client");
  client_ = std::move(client);
  init_client(watchdog == Watchdog::kOn || static_cast<bool>(options_.on_lost));
}

LeaseLock::LeaseLock(const std::string& uri, std::string name, LeaseOptions options, Watchdog watchdog,
                     const ConnectOptions& connect)
    : name_(std::move(name)), options_(std::move(options)) {
  // Validated before connecting: a bad name or option never costs a session.
  validate_name(name_, "lock name");
  validate(options_);
  if (!options_.watchdog_connection && !detail::private_to_connection(uri)) {
    client_ = LockClient::shared(uri, detail::lease_connect_options(connect, options_.ttl));
    init_client(watchdog == Watchdog::kOn || static_cast<bool>(options_.on_lost));
    return;
  }
  if (options_.fair) refuse_fair_over_borrowed();
  own_conn_ = make_connection(uri, detail::lease_connect_options(connect, options_.ttl));
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
  client_ = std::make_shared<LockClient>(detail::ClientCore::over(
      *own_conn_, options_.watchdog_connection, *detail::lease_connect_options(connect, options_.ttl).io_timeout / 2));
  init_client(static_cast<bool>(options_.watchdog_connection));
}

void LeaseLock::init_client(bool renew) {
  validate_name(name_, "lock name");
  validate(options_);
  // The name is kept once, in the lease the client shares (name() reads it).
  lease_ = detail::make_client_lease(detail::RowKind::kLease, std::move(name_), options_, renew);
  lease_->wakes = true;
  lease_->options.release_commit = options_.release_commit;
  state_ = lease_->state;
}

LeaseLock::~LeaseLock() {
  // In a forked child the lease is the parent's: leave it alone.
  if (!client_->core()->same_process()) return;
  client_->core()->wait_async_releases(*lease_);  // (its completion uses this handle)
  client_->core()->cancel_acquire(lease_);
  stop_renewing();
  client_->core()->forget(*lease_);
  std::string owner;
  std::int64_t fence = 0;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    if (state_->hold == 0 || state_->lost) return;
    owner = state_->owner;
    fence = state_->fence;
    state_->hold = 0;
  }
  const detail::HeldPlace place = detail::take_held_place(*lease_);
  try {
    auto c = client_->core()->borrow_for(*lease_, true);
    if (!detail::release_lease(*c, name(), owner, fence, options_.release_commit, options_.fair, place))
      log(LogLevel::kWarning, "lease '" + name() + "' was no longer held when its LeaseLock was destroyed");
  } catch (const std::exception& e) {
    log(LogLevel::kWarning, "releasing lease '" + name() + "' in ~LeaseLock failed (it expires by itself): " + e.what());
  }
  client_->core()->local_release(name());
}

template <class Read>
auto LeaseLock::observe(Read read) const {
  return detail::observe(*client_->core(), *lease_, read);
}

void LeaseLock::stop_renewing() { client_->core()->renew_unregister(lease_.get()); }

const std::string& LeaseLock::name() const noexcept { return lease_->name; }

namespace {
// A lock-client handle in a forked child: every call but name() and
// options() throws (lock_client.h), the observers included — the lease is
// the parent's, and a child that went on would act on owns() == true.
void refuse_in_forked_child(const std::shared_ptr<LockClient>& client) { client->core()->check_process(); }
}  // namespace

bool LeaseLock::try_acquire() { return client_->core()->try_acquire(lease_); }

void LeaseLock::acquire_async(milliseconds wait, AcquireCallback done) {
  client_->core()->acquire_async(lease_, wait, std::move(done));
}


bool LeaseLock::cancel_acquire() {
  refuse_in_forked_child(client_);
  return client_->core()->cancel_acquire(lease_);
}

bool LeaseLock::acquire(milliseconds wait) {
  check_duration(wait, "wait", milliseconds(0), std::chrono::hours(24 * 365));
  const auto t0 = steady_clock::now();
  const bool got = client_->core()->acquire(lease_, wait);
  observe_wait(t0, wait.count() > 0 || !got);
  return got;
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
  auto c = client_->core()->borrow_for(*lease_, false);
  Connection& conn = *c;
  auto start = steady_clock::now();
  if (with_reconnect(conn, remaining(), "renewing lease '" + name() + "'",
                     [&](int) { return renew_lease(conn, name(), owner, fence, options_.ttl); })) {
    std::lock_guard<std::mutex> lk(state_->mu);
    if (state_->owner == owner && !state_->lost) state_->valid_until = start + options_.ttl - lease_->margin;
    return true;
  }
  std::string detail;
  auto cause = diagnose(conn, owner, fence, &detail);
  stop_renewing();
  state_->mark_lost(cause, std::move(detail));
  return false;
}

namespace {
// The hold count's part of a release: the answer at once (not the last hold:
// whether the lease is still held; not held; lost already: nothing sent), or
// nothing: the acquisition (`owner`, `fence`) now belongs to this release
// (LeaseState::ending set) and its release is sent.
std::optional<bool> begin_release(detail::LeaseState& st, const std::string& name, std::string& owner,
                                  std::int64_t& fence) {
  std::lock_guard<std::mutex> lk(st.mu);
  auto not_held = [&](const std::string& what, const std::string& tail) {
    ++metric::lock_releases_not_held();
    log(LogLevel::kWarning, what + " of lease '" + name + "': it was no longer held (" +
                                std::string(to_string(st.loss ? st.loss->cause : LossCause::kExpired)) + ")" + tail);
    return false;
  };
  if (st.hold == 0) {
    log(LogLevel::kWarning, "release() of lease '" + name + "' that this handle does not hold");
    ++metric::lock_releases_not_held();
    return false;
  }
  if (st.hold > 1) {
    // Not the last hold: nothing is sent, but the answer is still whether
    // the lease was held (a lost one, or one past its trust window, is not).
    --st.hold;
    return !st.lost && st.valid_locked() ? true : not_held("release of a hold", "");
  }
  if (st.lost) {
    // The loss was reported already (on_lost / last_loss()); the database
    // may be unreachable, so do not wait on it: the row expires by itself.
    st.hold = 0;
    return not_held("release", "; nothing sent to the database");
  }
  owner = st.owner;
  fence = st.fence;
  // From here on the acquisition belongs to this release: a renewal round
  // that finds the row gone (this release deleted it, another process took
  // it a moment later) reports nothing.
  st.ending = true;
  return std::nullopt;
}
}  // namespace

bool LeaseLock::release() {
  refuse_in_forked_child(client_);
  std::string owner;
  std::int64_t fence = 0;
  if (auto answer = begin_release(*state_, name(), owner, fence)) return *answer;
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
  const detail::HeldPlace place = detail::peek_held_place(*lease_);
  auto& core = *client_->core();
  // While every work connection is busy, sent in a batch with other
  // releases (LockClientOptions::batch_max); else alone, below.
  std::optional<detail::ClientCore::Borrowed> alone;
  if (place.owner.empty() && core.coalesces_release(*lease_, options_.release_commit) &&
      core.coalesced_release(*lease_, owner, fence, alone)) {
    core.local_release(name());
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->hold = 0;
    return true;
  }
  auto c = alone ? std::move(*alone) : core.borrow_for(*lease_, true);
  return release_on(*c, owner, fence, place);
}

// The rest of a release, alone, on `conn`. Returns as release() does.
bool LeaseLock::release_on(Connection& conn, const std::string& owner, std::int64_t fence,
                           const detail::HeldPlace& place) {
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
  (void)detail::take_held_place(*lease_);
  client_->core()->released(*lease_, conn);
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

void LeaseLock::release_async(ReleaseCallback done) {
  refuse_in_forked_child(client_);
  auto& core = *client_->core();
  if (core.borrows())
    throw Error(ErrorCode::kNotSupported, "lease '" + name() + "': release_async needs a handle of a LockClient (this "
                                          "one borrows a connection: its calls run on the caller's thread)");
  if (!done) throw Error(ErrorCode::kInvalidArgument, "release_async: the completion callback is empty");
  std::string owner;
  std::int64_t fence = 0;
  if (auto answer = begin_release(*state_, name(), owner, fence)) {
    done(*answer, nullptr);
    return;
  }
  stop_renewing();
  const detail::HeldPlace place = detail::peek_held_place(*lease_);
  const bool batchable = place.owner.empty() && core.coalesces_release(*lease_, options_.release_commit);
  // The handle outlives the completion (its destructor waits for it).
  auto finish = [this, owner, fence, place, done](const detail::ClientCore::AsyncAnswer& a) {
    auto& c = *client_->core();
    bool ok = false;
    std::exception_ptr err;
    if (a.batched && a.released) {
      ++metric::lock_releases();
      c.local_release(name());
      std::lock_guard<std::mutex> lk(state_->mu);
      state_->hold = 0;
      ok = true;
    } else if (a.error) {
      // Never sent (no work connection in time): as after a release that
      // threw, the handle keeps the lease (not renewed any more: it runs to
      // its expiry unless release is called again).
      err = std::make_exception_ptr(*a.error);
    } else {
      try {
        auto conn = c.borrow_for(*lease_, true);
        ok = release_on(*conn, owner, fence, place);
      } catch (...) {
        err = std::current_exception();
      }
    }
    {
      std::lock_guard<std::mutex> lk(state_->mu);
      state_->ending = false;
    }
    c.async_release_end(*lease_);  // before `done`: it may destroy the handle
    done(ok, err);
  };
  try {
    core.release_async(*lease_, owner, fence, batchable, std::move(finish));
  } catch (...) {
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->ending = false;
    throw;
  }
}

using State = detail::LeaseState;
bool LeaseLock::owns() const { return observe([](const State& s) { return s.valid_locked(); }); }
std::int64_t LeaseLock::fence() const { return observe([](const State& s) { return s.fence; }); }
std::string LeaseLock::owner() const { return observe([](const State& s) { return s.owner; }); }
int LeaseLock::hold_count() const { return observe([](const State& s) { return s.hold; }); }
std::int64_t LeaseLock::expires_at_ms() const { return observe([](const State& s) { return s.expire_at; }); }
milliseconds LeaseLock::remaining() const { return observe([](const State& s) { return s.remaining_locked(); }); }
std::optional<LeaseLoss> LeaseLock::last_loss() const {
  return observe([](const State& s) { return s.last_loss_locked(); });
}
std::optional<milliseconds> LeaseLock::takeover_in() const {
  return observe([](const State& s) { return s.takeover_in_locked(); });
}

bool LeaseLock::run_guarded(const std::function<void(Transaction&)>& work) {
  return client_->core()->run_guarded(lease_, work);
}

// ---- the kinds kLease and kFairLease (lock_kinds.def) ---------------------------

namespace detail {
namespace {
void check_lease(const LockSpec& spec) {
  refuse_spec_extras(spec, spec.kind == LockKind::kFairLease ? "a fair lease" : "a lease");
}

LeaseOptions lease_kind_options(const LockSpec& spec, LeaseOptions o) {
  const bool fair = spec.kind == LockKind::kFairLease;
  if (o.fair && !fair)
    throw Error(ErrorCode::kInvalidArgument, "LockSpec kind 'lease' with LeaseOptions::fair set: ask for kind 'fair'");
  o.fair = fair;
  return o;
}

std::vector<LockHolder> lease_holders(Connection& conn, const std::string& name) {
  std::vector<LockHolder> out;
  // A synchronizer's reservation (owner '') is no holder of a lease.
  if (auto info = lease_info(conn, name); info && info->held() && !info->owner.empty())
    out.push_back(LockHolder{info->owner, info->fence, "", 0, info->remaining_ms()});
  return out;
}

std::shared_ptr<Lock> make_lease(std::shared_ptr<LockClient> client, std::string name, const LockSpec& spec,
                                 LeaseOptions options, Watchdog watchdog) {
  return std::make_shared<LeaseLock>(std::move(client), std::move(name), lease_kind_options(spec, std::move(options)),
                                     watchdog);
}

std::shared_ptr<Lock> make_lease_from_uri(const std::string& uri, std::string name, const LockSpec& spec,
                                          LeaseOptions options, Watchdog watchdog, const ConnectOptions& connect) {
  return std::make_shared<LeaseLock>(uri, std::move(name), lease_kind_options(spec, std::move(options)), watchdog,
                                     connect);
}
}  // namespace

const KindOps kLeaseKind{check_lease, make_lease, make_lease_from_uri, lease_holders};
const KindOps kFairLeaseKind{check_lease, make_lease, make_lease_from_uri, lease_holders};
}  // namespace detail

}  // namespace sqlguard
