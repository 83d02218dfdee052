// Semaphore and ReadWriteLease handles' shared part (sync_handle.h).
#include "strategies/sync/sync_handle.h"

#include <algorithm>
#include <future>

#include "core/metric_hooks.h"
#include "sqlguard/validate.h"
#include "core/reconnect.h"
#include "strategies/lease/takeover.h"

namespace sqlguard::detail {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

void validate_sync_options(const LeaseOptions& o, std::string_view type, bool fair_offered) {
  if (o.watchdog_connection)
    throw Error(ErrorCode::kInvalidArgument, std::string(type) + ": options.watchdog_connection is for a LeaseLock on a "
                                             "borrowed connection (the lock client renews holdings itself)");
  if (!fair_offered && (o.fair || o.place_ttl))
    throw Error(ErrorCode::kInvalidArgument, std::string(type) + ": options.fair / place_ttl are not offered for a " +
                                             std::string(type) + " (its writer preference already keeps writers from "
                                             "starving)");
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

// A holding acquired (`owner`, the grant's fence and slot): the handle's
// state set, its renewal registered.
void took_grant(ClientCore& core, SyncShared& s, const SyncGrant& g, const std::string& owner, SyncMode mode,
                std::int64_t n, steady_clock::time_point sent) {
  {
    auto& st = *s.lease->state;
    std::lock_guard<std::mutex> lk(st.mu);
    st.hold = 1;
    st.owner = owner;
    st.fence = g.fence;
    ++st.acquisition;
    st.expire_at = g.expire_at;
    st.valid_until = sent + s.options.ttl - s.lease->margin;
    st.lost = false;
    st.loss.reset();
    st.takeover_in.reset();
    s.lease->key = g.slot;
    s.mode = mode;
    s.n = n;
  }
  if (s.lease->renew) core.renew_register(s.lease);
}

namespace {

// One attempt on `conn` (no re-entrancy check): true when acquired; the
// holding is then registered with `core`'s renewer. A fair semaphore asks its
// queue first: a waiter (`w`) tries only at its turn, a try without a place
// only when nobody waits; a waiter that acquired leaves its place.
bool attempt_on(ClientCore& core, SyncShared& s, Connection& conn, SyncMode mode, std::int64_t n,
                std::int64_t capacity, milliseconds* holder_remaining, bool waiting, ClientWait* w = nullptr) {
  if (s.lease->renew) core.admit(*s.lease);
  if (s.lease->options.fair) {
    milliseconds next{0};
    if (!core.fair_turn_on(conn, *s.lease, w, s.options.ttl, &next, nullptr)) {
      if (holder_remaining) *holder_remaining = next;
      note_refusal(*s.lease->state, 0);  // not its turn: no take-over to count down to
      return false;
    }
  }
  const std::string owner = s.options.owner.empty() ? make_owner_token() : s.options.owner;
  const auto start = steady_clock::now();
  const SyncRequest req{s.lease->name, s.kind, mode, n, capacity, owner, s.options.ttl, s.options.min_hold,
                        mode == SyncMode::kExclusive && waiting ? s.intent : milliseconds(0), s.options.take_over};
  const SyncGrant g = sync_attempt(conn, req);
  if (!g.acquired) {
    if (holder_remaining) *holder_remaining = milliseconds(std::max<std::int64_t>(g.holder_remaining_ms, 0));
    note_refusal(*s.lease->state, g.takeover_in_ms);
    return false;
  }
  took_grant(core, s, g, owner, mode, n, start);
  if (s.lease->options.fair) core.fair_acquired(conn, w);
  return true;
}

// Drops one hold; the last one releases the holding (owner-, slot- and
// fence-checked) and wakes the client's waiters of the name.
bool release_on(ClientCore& core, SyncShared& s) {
  core.check_process();
  auto& st = *s.lease->state;
  std::string owner;
  std::int64_t fence = 0, slot = 0;
  bool lost = false;
  {
    std::lock_guard<std::mutex> lk(st.mu);
    if (st.hold == 0) return false;
    if (--st.hold > 0) return true;
    owner = st.owner;
    fence = st.fence;
    slot = s.lease->key;
    lost = st.lost;
  }
  core.renew_unregister(s.lease.get());
  if (lost) {
    log(LogLevel::kWarning, "release of " + s.type + " '" + s.lease->name + "': it was no longer held (" +
                                std::string(to_string(st.loss ? st.loss->cause : LossCause::kExpired)) + ")");
    return false;
  }
  bool held = false;
  {
    auto conn = core.borrow();
    held = with_reconnect(*conn, std::max<milliseconds>(s.options.ttl / 3, milliseconds(1000)),
                          "releasing " + s.type + " '" + s.lease->name + "'",
                          [&](int) { return sync_release(*conn, s.lease->name, slot, owner, fence); });
  }
  core.sync_notify(s.wake_key);
  core.local_release(s.wake_key);
  if (!held)
    log(LogLevel::kWarning, "release of " + s.type + " '" + s.lease->name + "' (fence " + std::to_string(fence) +
                                "): it was no longer held");
  return held;
}

}  // namespace

SyncHandle::SyncHandle(std::shared_ptr<LockClient> client, std::string name, LockKind kind, LeaseOptions options,
                       bool renew, std::string_view type)
    : client_(std::move(client)), s_(std::make_shared<SyncShared>()) {
  s_->type = std::string(type);
  if (!client_) throw Error(ErrorCode::kInvalidArgument, s_->type + ": the lock client is null");
  validate_name(name, s_->type + " name");
  validate_sync_options(options, s_->type, kind == LockKind::kSemaphore);
  client_->core()->check_process();
  if (client_->core()->borrows())
    throw Error(ErrorCode::kInvalidArgument,
                s_->type + ": this lock client is the one of a LeaseLock on a borrowed connection and serves that "
                "handle alone; make handles of a LockClient::create()/shared() client");
  s_->options = std::move(options);
  s_->kind = kind;
  const LeaseOptions& o = s_->options;
  // A fair semaphore: its waiters queue like a fair lease's, in the queue of
  // the semaphore's own name (its sqlguard_sync row hands out the tickets).
  auto lease = make_client_lease(RowKind::kHolding, std::move(name), o, renew || static_cast<bool>(o.on_lost));
  lease->options.queue_kind = s_->kind;
  s_->wake_key = std::string(kind_name(s_->kind)) + ":" + lease->name;
  lease->queue_key = s_->wake_key;
  s_->lease = std::move(lease);
  s_->intent = std::max<milliseconds>(milliseconds(1000), o.backoff_max * 4);
}

SyncHandle::~SyncHandle() {
  auto& core = *client_->core();
  if (!core.same_process()) return;  // a forked child: the holding is the parent's
  core.cancel_acquire(s_->lease);
  {
    std::lock_guard<std::mutex> lk(s_->lease->state->mu);
    if (s_->lease->state->hold == 0) return;
    s_->lease->state->hold = 1;
  }
  try {
    release_on(core, *s_);
  } catch (const std::exception& e) {
    log(LogLevel::kWarning, s_->type + " '" + s_->lease->name + "': release in the destructor failed (the holding "
                            "expires by itself): " + e.what());
  }
}

int SyncHandle::reenter(SyncMode mode, std::int64_t n) {
  auto& st = *s_->lease->state;
  std::lock_guard<std::mutex> lk(st.mu);
  if (st.hold == 0) return 0;
  if (!st.valid_locked()) return -1;
  if (s_->mode != mode || s_->n != n)
    throw Error(ErrorCode::kInvalidArgument,
                s_->type + " '" + printable(s_->lease->name, 64) + "': this handle already holds " +
                    (s_->mode == SyncMode::kPermits
                         ? std::to_string(s_->n) + " permit(s)"
                         : std::string(s_->mode == SyncMode::kShared ? "a shared" : "an exclusive") + " hold") +
                    "; release it first (a handle holds one holding at a time and never changes it)");
  ++st.hold;
  return 1;
}

int SyncHandle::attempt(SyncMode mode, std::int64_t n, std::int64_t capacity, milliseconds* holder_remaining,
                        bool waiting) {
  auto& core = *client_->core();
  core.check_process();
  if (int r = reenter(mode, n); r != 0) return r;
  if (core.waiting(*s_->lease))
    throw Error(ErrorCode::kInvalidArgument, s_->type + " '" + printable(s_->lease->name, 64) + "': an asynchronous "
                                             "acquire of this handle is still pending (cancel_acquire() it first)");
  auto conn = core.borrow();
  return attempt_on(core, *s_, *conn, mode, n, capacity, holder_remaining, waiting) ? 1 : 0;
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
  w->lease = s_->lease;
  w->several = mode != SyncMode::kExclusive;
  s_->lease->options.queue_permits = capacity;  // a fair semaphore's place may create the name
  // Run on the client's waiter thread, with the client's core; they keep the
  // shared state (never the client) alive.
  w->attempt = [s = s_, mode, n, capacity](ClientCore& core, Connection& conn, milliseconds* holder, ClientWait* cw) {
    return attempt_on(core, *s, conn, mode, n, capacity, holder, true, cw);
  };
  w->release = [s = s_](ClientCore& core) {
    try {
      {
        std::lock_guard<std::mutex> lk(s->lease->state->mu);
        s->lease->state->hold = 1;
      }
      release_on(core, *s);
    } catch (const std::exception& e) {
      log(LogLevel::kWarning, s->type + " '" + s->lease->name + "': releasing what a cancelled acquire took failed "
                              "(it expires by itself): " + e.what());
    }
  };
  client_->core()->acquire_async(std::move(w), wait, std::move(done));
}

SetPart SyncHandle::set_part(SyncMode mode, std::int64_t n, std::int64_t capacity) {
  SetPart p;
  p.lease = s_->lease;
  p.take = [s = s_, mode, n, capacity](Connection& conn, const std::string& owner) {
    const SyncRequest req{s->lease->name, s->kind,          mode, n, capacity, owner, s->options.ttl,
                          s->options.min_hold, milliseconds(0), s->options.take_over};
    return sync_attempt_here(conn, req);
  };
  p.took = [s = s_, mode, n](ClientCore& core, const SyncGrant& g, const std::string& owner,
                             steady_clock::time_point sent) { took_grant(core, *s, g, owner, mode, n, sent); };
  p.release = [s = s_](ClientCore& core) {
    try {
      release_on(core, *s);
    } catch (const std::exception& e) {
      log(LogLevel::kWarning, s->type + " '" + s->lease->name + "': releasing what a cancelled lock set's acquire "
                              "took failed (it expires by itself): " + e.what());
    }
  };
  return p;
}

bool SyncHandle::cancel_acquire() {
  client_->core()->check_process();
  return client_->core()->cancel_acquire(s_->lease);
}

bool SyncHandle::try_acquire(SyncMode mode, std::int64_t n, std::int64_t capacity) {
  return attempt(mode, n, capacity, nullptr, false) > 0;
}

bool SyncHandle::acquire(SyncMode mode, std::int64_t n, std::int64_t capacity, milliseconds wait) {
  check_duration(wait, "wait", milliseconds(0), std::chrono::hours(24 * 365));
  auto& core = *client_->core();
  if (s_->lease->options.fair && wait.count() > 0) {
    // A fair semaphore's waiter needs its place in the queue: it waits as an
    // asynchronous acquire does (the caller's thread blocks on the result).
    if (core.on_waiter_thread())
      throw Error(ErrorCode::kInvalidArgument, s_->type + " '" + printable(s_->lease->name, 64) + "': a blocking "
                                               "acquire() from a callback on the lock client's waiter thread would "
                                               "wait for that thread itself; use acquire_async()");
    if (int r = reenter(mode, n); r != 0) return r > 0;
    try {
      if (attempt(mode, n, capacity, nullptr, false) > 0) return true;  // nobody waits and permits are free
    } catch (const Error& e) {
      if (!is_outage(e) && e.code() != ErrorCode::kResourceExhausted) throw;
    }
    auto [done, f] = completion_future();
    acquire_async(mode, n, capacity, wait, std::move(done));
    return f.get();
  }
  return core.nap_wait(s_->wake_key, s_->lease->name, wait, s_->options, [&](std::optional<milliseconds>* holder) {
    milliseconds left{0};
    const int r = attempt(mode, n, capacity, &left, wait.count() > 0);
    *holder = left;
    return r;
  });
}

bool SyncHandle::release() { return release_on(*client_->core(), *s_); }

using State = LeaseState;
bool SyncHandle::owns() const { return observe(core(), *s_->lease, [](const State& s) { return s.valid_locked(); }); }

std::optional<SyncMode> SyncHandle::mode() const {
  return observe(core(), *s_->lease, [&](const State& s) -> std::optional<SyncMode> {
    if (s.hold == 0) return std::nullopt;
    return s_->mode;
  });
}

std::int64_t SyncHandle::held() const {
  return observe(core(), *s_->lease, [&](const State& s) { return s.hold > 0 ? s_->n : std::int64_t{0}; });
}

std::int64_t SyncHandle::fence() const { return observe(core(), *s_->lease, [](const State& s) { return s.fence; }); }
std::string SyncHandle::owner() const { return observe(core(), *s_->lease, [](const State& s) { return s.owner; }); }
int SyncHandle::hold_count() const { return observe(core(), *s_->lease, [](const State& s) { return s.hold; }); }
milliseconds SyncHandle::remaining() const {
  return observe(core(), *s_->lease, [](const State& s) { return s.remaining_locked(); });
}
std::optional<LeaseLoss> SyncHandle::last_loss() const {
  return observe(core(), *s_->lease, [](const State& s) { return s.last_loss_locked(); });
}
std::optional<milliseconds> SyncHandle::takeover_in() const {
  return observe(core(), *s_->lease, [](const State& s) { return s.takeover_in_locked(); });
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

void ClientCore::sync_wait_end(const std::string& key, const std::string& name) {
  {
    std::lock_guard<std::mutex> lk(sync_mu_);
    auto it = sync_naps_.find(key);
    if (it == sync_naps_.end() || --it->second.second > 0) return;
    sync_naps_.erase(it);
  }
  // The last wait of this client on the name is over: its watch of the
  // name's holdings goes (a name no longer waited for leaves nothing), unless
  // a holding looked dead: a later wait continues that watch.
  group_watches().wait_ended(holdings_watch_key(description_, name));
}

bool ClientCore::nap_wait(const std::string& key, const std::string& name, milliseconds wait,
                          const LeaseOptions& options,
                          const std::function<int(std::optional<milliseconds>*)>& attempt) {
  const auto deadline = steady_clock::now() + wait;
  milliseconds backoff = options.backoff_initial;
  std::uint64_t gen = sync_wait_begin(key);
  struct End {
    ClientCore& c;
    const std::string& k;
    const std::string& name;
    ~End() { c.sync_wait_end(k, name); }
  } end{*this, key, name};
  std::optional<Error> outage;
  for (;;) {
    std::optional<milliseconds> holder;
    int r = 0;
    try {
      r = attempt(&holder);
      outage.reset();
    } catch (const Error& e) {
      // Unreachable, or no connection free: keep trying while the wait lasts.
      if (!is_outage(e) && e.code() != ErrorCode::kResourceExhausted) throw;
      outage = e;
      holder.reset();
    }
    if (r != 0) return r > 0;
    const auto now = steady_clock::now();
    if (now >= deadline) {
      if (outage) throw *outage;
      return false;
    }
    const milliseconds cap = holder ? std::min(backoff, std::max(*holder, options.backoff_initial)) : backoff;
    sync_wait(key, gen, std::min(deadline, now + jitter(cap)));
    gen = sync_generation(key);
    backoff = std::min(backoff * 2, options.backoff_max);
  }
}

void ClientCore::sync_notify_sets() {
  {
    std::lock_guard<std::mutex> lk(sync_mu_);
    const std::string prefix = kSetNapPrefix;
    bool any = false;
    for (auto it = sync_naps_.lower_bound(prefix); it != sync_naps_.end() && it->first.starts_with(prefix); ++it) {
      ++it->second.first;
      any = true;
    }
    if (!any) return;
  }
  sync_cv_.notify_all();
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
