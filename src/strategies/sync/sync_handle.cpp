// Semaphore and ReadWriteLease handles' shared part (sync_handle.h).
#include "strategies/sync/sync_handle.h"

#include <algorithm>

#include "core/metric_hooks.h"
#include "sqlguard/validate.h"
#include "strategies/lease/lease_util.h"

namespace sqlguard::detail {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

void validate_sync_options(const LeaseOptions& o, std::string_view type) {
  if (o.watchdog_connection)
    throw Error(ErrorCode::kInvalidArgument, std::string(type) + ": options.watchdog_connection is for a LeaseLock on a "
                                             "borrowed connection (the lock client renews holdings itself)");
  if (o.fair || o.place_ttl)
    throw Error(ErrorCode::kInvalidArgument, std::string(type) + ": options.fair / place_ttl are LeaseLock options (fair "
                                             "order is not offered for " + std::string(type) + " yet)");
  validate(o);
}

std::shared_ptr<LockClient> shared_client_for(const std::string& uri, const LeaseOptions& options,
                                              const ConnectOptions& connect, std::string_view type) {
  if (private_to_connection(uri))
    throw Error(ErrorCode::kNotSupported, std::string(type) + " needs a database its lock client's connections share; "
                                          "in-memory SQLite gives every connection its own (use a file)", "sqlite");
  ConnectOptions o = connect;
  const milliseconds bound = std::max<milliseconds>(options.ttl / 3, milliseconds(1000));
  if (!o.io_timeout || *o.io_timeout > bound) o.io_timeout = bound;
  o.connect_timeout = std::min(o.connect_timeout, bound);
  return LockClient::shared(uri, o);
}

SyncHandle::SyncHandle(std::shared_ptr<LockClient> client, std::string name, std::string kind, LeaseOptions options,
                       bool renew, std::string_view type)
    : client_(std::move(client)), options_(std::move(options)), kind_(std::move(kind)), type_(type) {
  if (!client_) throw Error(ErrorCode::kInvalidArgument, type_ + ": the lock client is null");
  validate_name(name, type_ + " name");
  validate_sync_options(options_, type_);
  client_->core()->check_process();
  lease_ = std::make_shared<ClientLease>();
  lease_->kind = RowKind::kHolding;
  lease_->name = std::move(name);
  lease_->options.ttl = options_.ttl;
  lease_->options.min_hold = options_.min_hold;
  lease_->options.backoff_initial = options_.backoff_initial;
  lease_->options.backoff_max = options_.backoff_max;
  lease_->options.owner = options_.owner;
  lease_->margin = options_.safety_margin.value_or(std::min<milliseconds>(options_.ttl / 10, std::chrono::seconds(2)));
  lease_->period = options_.renew_period.value_or(options_.ttl / 3);
  lease_->renew = renew || static_cast<bool>(options_.on_lost);
  lease_->state->on_lost = options_.on_lost;
  wake_key_ = kind_ + ":" + lease_->name;
  lease_->queue_key = wake_key_;
  intent_ = std::max<milliseconds>(milliseconds(1000), options_.backoff_max * 4);
}

void SyncHandle::shutdown() noexcept {
  if (!client_->core()->same_process()) return;  // a forked child: the holding is the parent's
  client_->core()->cancel_acquire(lease_);
  {
    std::lock_guard<std::mutex> lk(lease_->state->mu);
    if (lease_->state->hold == 0) return;
    lease_->state->hold = 1;
  }
  try {
    release();
  } catch (const std::exception& e) {
    log(LogLevel::kWarning, type_ + " '" + lease_->name + "': release in the destructor failed (the holding expires "
                            "by itself): " + e.what());
  }
}

int SyncHandle::reenter(SyncMode mode, std::int64_t n) {
  auto& st = *lease_->state;
  std::lock_guard<std::mutex> lk(st.mu);
  if (st.hold == 0) return 0;
  if (!st.valid_locked()) return -1;
  if (mode_ != mode || n_ != n)
    throw Error(ErrorCode::kInvalidArgument,
                type_ + " '" + printable(lease_->name, 64) + "': this handle already holds " +
                    (mode_ == SyncMode::kPermits ? std::to_string(n_) + " permit(s)"
                                                 : std::string(mode_ == SyncMode::kShared ? "a shared" : "an exclusive") + " hold") +
                    "; release it first (a handle holds one holding at a time and never changes it)");
  ++st.hold;
  return 1;
}

bool SyncHandle::attempt_on(Connection& conn, SyncMode mode, std::int64_t n, std::int64_t capacity,
                            milliseconds* holder_remaining, bool waiting) {
  const std::string owner = options_.owner.empty() ? make_owner_token() : options_.owner;
  const auto start = steady_clock::now();
  const SyncRequest req{lease_->name, kind_, mode, n, capacity, owner, options_.ttl, options_.min_hold,
                        mode == SyncMode::kExclusive && waiting ? intent_ : milliseconds(0)};
  const SyncGrant g = sync_attempt(conn, req);
  if (!g.acquired) {
    if (holder_remaining) *holder_remaining = milliseconds(std::max<std::int64_t>(g.holder_remaining_ms, 0));
    return false;
  }
  {
    auto& st = *lease_->state;
    std::lock_guard<std::mutex> lk(st.mu);
    st.hold = 1;
    st.owner = owner;
    st.fence = g.fence;
    st.expire_at = g.expire_at;
    st.valid_until = start + options_.ttl - lease_->margin;
    st.lost = false;
    st.loss.reset();
    lease_->key = g.slot;
    mode_ = mode;
    n_ = n;
  }
  if (lease_->renew) client_->core()->renew_register(lease_);
  return true;
}

int SyncHandle::attempt(SyncMode mode, std::int64_t n, std::int64_t capacity, milliseconds* holder_remaining,
                        bool waiting) {
  client_->core()->check_process();
  if (int r = reenter(mode, n); r != 0) return r;
  if (client_->core()->waiting(*lease_))
    throw Error(ErrorCode::kInvalidArgument, type_ + " '" + printable(lease_->name, 64) + "': an asynchronous "
                                             "acquire of this handle is still pending (cancel_acquire() it first)");
  auto conn = client_->core()->borrow();
  return attempt_on(*conn, mode, n, capacity, holder_remaining, waiting) ? 1 : 0;
}

void SyncHandle::acquire_async(SyncMode mode, std::int64_t n, std::int64_t capacity, milliseconds wait,
                               AcquireCallback done) {
  client_->core()->check_process();
  if (!done) throw Error(ErrorCode::kInvalidArgument, "acquire_async: the completion callback is empty");
  if (int r = reenter(mode, n); r != 0) {
    done(r > 0, nullptr);
    return;
  }
  auto w = std::make_shared<ClientWait>();
  w->lease = lease_;
  w->several = mode != SyncMode::kExclusive;
  // The waiter thread runs these; the handle outlives them (its destructor
  // cancels the wait, and a running attempt finishes before that returns).
  auto self = shared_from_this();
  w->attempt = [self, mode, n, capacity](Connection& conn, milliseconds* holder) {
    return self->attempt_on(conn, mode, n, capacity, holder, true);
  };
  w->release = [self] {
    try {
      {
        std::lock_guard<std::mutex> lk(self->lease_->state->mu);
        self->lease_->state->hold = 1;
      }
      self->release();
    } catch (const std::exception& e) {
      log(LogLevel::kWarning, self->type_ + " '" + self->lease_->name + "': releasing what a cancelled acquire took "
                              "failed (it expires by itself): " + e.what());
    }
  };
  client_->core()->acquire_async(std::move(w), wait, std::move(done));
}

bool SyncHandle::cancel_acquire() { return client_->core()->cancel_acquire(lease_); }

bool SyncHandle::try_acquire(SyncMode mode, std::int64_t n, std::int64_t capacity) {
  return attempt(mode, n, capacity, nullptr, false) > 0;
}

bool SyncHandle::acquire(SyncMode mode, std::int64_t n, std::int64_t capacity, milliseconds wait) {
  check_duration(wait, "wait", milliseconds(0), std::chrono::hours(24 * 365));
  auto& core = *client_->core();
  const auto deadline = steady_clock::now() + wait;
  milliseconds backoff = options_.backoff_initial;
  const std::uint64_t first = core.sync_wait_begin(wake_key_);
  struct End {
    ClientCore& c;
    const std::string& k;
    ~End() { c.sync_wait_end(k); }
  } end{core, wake_key_};
  std::uint64_t gen = first;
  std::optional<Error> outage;
  for (;;) {
    milliseconds holder{0};
    int r = 0;
    try {
      r = attempt(mode, n, capacity, &holder, wait.count() > 0);
      outage.reset();
    } catch (const Error& e) {
      // Unreachable, or no connection free: keep trying while the wait lasts.
      if (!is_outage(e) && e.code() != ErrorCode::kResourceExhausted) throw;
      outage = e;
    }
    if (r != 0) return r > 0;
    const auto now = steady_clock::now();
    if (now >= deadline) {
      if (outage) throw *outage;
      return false;
    }
    const milliseconds cap = outage ? backoff : std::min(backoff, std::max(holder, options_.backoff_initial));
    const auto until = std::min(deadline, now + jitter(cap));
    core.sync_wait(wake_key_, gen, until);
    gen = core.sync_generation(wake_key_);
    backoff = std::min(backoff * 2, options_.backoff_max);
  }
}

bool SyncHandle::release() {
  client_->core()->check_process();
  auto& st = *lease_->state;
  std::string owner;
  std::int64_t fence = 0, slot = 0;
  bool lost = false;
  {
    std::lock_guard<std::mutex> lk(st.mu);
    if (st.hold == 0) return false;
    if (--st.hold > 0) return true;
    owner = st.owner;
    fence = st.fence;
    slot = lease_->key;
    lost = st.lost;
  }
  client_->core()->renew_unregister(lease_.get());
  if (lost) {
    log(LogLevel::kWarning, "release of " + type_ + " '" + lease_->name + "': it was no longer held (" +
                                std::string(to_string(st.loss ? st.loss->cause : LossCause::kExpired)) + ")");
    return false;
  }
  bool held = false;
  {
    auto conn = client_->core()->borrow();
    held = with_reconnect(*conn, std::max<milliseconds>(options_.ttl / 3, milliseconds(1000)),
                          "releasing " + type_ + " '" + lease_->name + "'",
                          [&](int) { return sync_release(*conn, lease_->name, slot, owner, fence); });
  }
  client_->core()->sync_notify(wake_key_);
  client_->core()->local_release(wake_key_);
  if (!held)
    log(LogLevel::kWarning, "release of " + type_ + " '" + lease_->name + "' (fence " + std::to_string(fence) +
                                "): it was no longer held");
  return held;
}

bool SyncHandle::owns() const {
  std::lock_guard<std::mutex> lk(lease_->state->mu);
  return lease_->state->valid_locked();
}

std::optional<SyncMode> SyncHandle::mode() const {
  std::lock_guard<std::mutex> lk(lease_->state->mu);
  if (lease_->state->hold == 0) return std::nullopt;
  return mode_;
}

std::int64_t SyncHandle::held() const {
  std::lock_guard<std::mutex> lk(lease_->state->mu);
  return lease_->state->hold > 0 ? n_ : 0;
}

std::int64_t SyncHandle::fence() const {
  std::lock_guard<std::mutex> lk(lease_->state->mu);
  return lease_->state->fence;
}

std::string SyncHandle::owner() const {
  std::lock_guard<std::mutex> lk(lease_->state->mu);
  return lease_->state->owner;
}

int SyncHandle::hold_count() const {
  std::lock_guard<std::mutex> lk(lease_->state->mu);
  return lease_->state->hold;
}

milliseconds SyncHandle::remaining() const {
  std::lock_guard<std::mutex> lk(lease_->state->mu);
  if (!lease_->state->valid_locked()) return milliseconds(0);
  return std::chrono::duration_cast<milliseconds>(lease_->state->valid_until - steady_clock::now());
}

std::optional<LeaseLoss> SyncHandle::last_loss() const {
  std::lock_guard<std::mutex> lk(lease_->state->mu);
  return lease_->state->loss;
}

// ---- ClientCore's naps ---------------------------------------------------------

std::uint64_t ClientCore::sync_wait_begin(const std::string& key) {
  std::lock_guard<std::mutex> lk(sync_mu_);
  auto& e = sync_naps_[key];
  ++e.second;
  return e.first;
}

std::uint64_t ClientCore::sync_generation(const std::string& key) {
  std::lock_guard<std::mutex> lk(sync_mu_);
  auto it = sync_naps_.find(key);
  return it == sync_naps_.end() ? 0 : it->second.first;
}

void ClientCore::sync_wait(const std::string& key, std::uint64_t gen, steady_clock::time_point until) {
  std::unique_lock<std::mutex> lk(sync_mu_);
  sync_cv_.wait_until(lk, until, [&] {
    auto it = sync_naps_.find(key);
    return it == sync_naps_.end() || it->second.first != gen;
  });
}

void ClientCore::sync_wait_end(const std::string& key) {
  std::lock_guard<std::mutex> lk(sync_mu_);
  auto it = sync_naps_.find(key);
  if (it != sync_naps_.end() && --it->second.second <= 0) sync_naps_.erase(it);
}

void ClientCore::sync_notify(const std::string& key) {
  {
    std::lock_guard<std::mutex> lk(sync_mu_);
    auto it = sync_naps_.find(key);
    if (it == sync_naps_.end()) return;
    ++it->second.first;
  }
  sync_cv_.notify_all();
}

}  // namespace sqlguard::detail
