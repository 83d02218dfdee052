// A lock set (include/sqlguard/lock_set.h): one LeaseLock handle per name,
// taken together by the lock client's all-or-none attempt
// (ClientCore::try_acquire_set_on) and released, observed and lost together.
#include "sqlguard/lock_set.h"

#include <algorithm>

#include "client/client.h"
#include "core/reconnect.h"
#include "strategies/lease/lease_state.h"
#include "strategies/sync/sync_handle.h"
#include "sqlguard/semaphore.h"
#include "sqlguard/errors.h"
#include "sqlguard/validate.h"

namespace sqlguard {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// What the members' on_lost callbacks share with the set: the first loss of
// an acquisition is the set's, reported once.
struct LockSet::Shared {
  mutable std::mutex mu;
  std::chrono::steady_clock::time_point wait_since{};  // the pending asynchronous acquire's start
  std::function<void(const LeaseLoss&)> on_lost;  // the set's (options.on_lost)
  int hold = 0;                   // the set's hold count (0: not held)
  std::uint64_t acquisition = 0;  // counts the set's attempts
  std::uint64_t lost_in = 0;      // the acquisition whose loss was reported (0: none)
  std::optional<LeaseLoss> loss;
  std::string blocked_by;

  void member_lost(const std::string& name, const LeaseLoss& l) {
    std::function<void(const LeaseLoss&)> cb;
    LeaseLoss loss_of_set = l;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (lost_in == acquisition) return;  // said once
      lost_in = acquisition;
      loss_of_set.detail = "lock set: '" + name + "' lost: " + l.detail;
      loss = loss_of_set;
      cb = on_lost;
    }
    if (cb) cb(loss_of_set);
  }
};

// The client's view of each name, in names_ order, and the set's queue in
// the client's waiter thread (acquire_async: a row of its own it has not).
struct LockSet::Parts {
  std::vector<detail::SetPart> parts;
  std::vector<std::string> lease_names;  // the names held as leases (byte order): what a wait listens on
  // The lease its last attempt found busy ("": none, or a semaphore's
  // permits): what its wait listens for (ClientCore::set_nap_name).
  std::string wake_name(const std::string& blocked_by) const {
    return std::binary_search(lease_names.begin(), lease_names.end(), blocked_by) ? blocked_by : std::string();
  }
  std::shared_ptr<detail::ClientLease> wait_lease;
};

namespace {
std::vector<LockSetMember> as_leases(std::vector<std::string> names) {
  std::vector<LockSetMember> m;
  m.reserve(names.size());
  for (auto& n : names) m.push_back(LockSetMember{std::move(n), LockSpec{}});
  return m;
}
}  // namespace

LockSet::LockSet(std::shared_ptr<LockClient> client, std::vector<std::string> names, LeaseOptions options,
                 Watchdog watchdog)
    : LockSet(std::move(client), as_leases(std::move(names)), std::move(options), watchdog) {}

LockSet::LockSet(std::shared_ptr<LockClient> client, std::vector<LockSetMember> members, LeaseOptions options,
                 Watchdog watchdog)
    : client_(std::move(client)), options_(std::move(options)) {
  if (!client_) throw Error(ErrorCode::kInvalidArgument, "lock set: the lock client is null");
  init(std::move(members), watchdog);
}

LockSet::LockSet(const std::string& uri, std::vector<std::string> names, LeaseOptions options, Watchdog watchdog,
                 const ConnectOptions& connect)
    : options_(std::move(options)) {
  validate(options_);
  // The client LeaseLock handles of the same URI and ttl share.
  client_ = LockClient::shared(uri, detail::lease_connect_options(connect, options_.ttl));
  init(as_leases(std::move(names)), watchdog);
}

void LockSet::init(std::vector<LockSetMember> members, Watchdog watchdog) {
  client_->core()->check_process();
  if (members.empty()) throw Error(ErrorCode::kInvalidArgument, "lock set: no names (give 1 to 1000)");
  if (members.size() > kMaxNames)
    throw Error(ErrorCode::kInvalidArgument, "lock set: " + std::to_string(members.size()) + " names; at most " +
                                                 std::to_string(kMaxNames) + " are allowed");
  for (const auto& m : members) {
    validate_name(m.name, "lock name");
    const bool lease = m.spec.kind == LockKind::kLease && m.spec.permits == 0 && m.spec.mode == LeaseMode::kExclusive;
    const bool permit = m.spec.kind == LockKind::kSemaphore;
    if (!lease && !permit)
      throw Error(ErrorCode::kInvalidArgument, "lock set: '" + printable(m.name, 200) + "' is asked as " +
                                                   to_string(m.spec) +
                                                   "; a set holds leases and semaphore permits (lease, semaphore:N)");
    if (permit && (m.spec.permits < 1 || m.spec.permits > 1'000'000))
      throw Error(ErrorCode::kInvalidArgument, "lock set: semaphore '" + printable(m.name, 200) + "' of " +
                                                   std::to_string(m.spec.permits) +
                                                   " permits; a count is 1 to 1000000");
  }
  validate(options_);
  if (options_.fair)
    throw Error(ErrorCode::kInvalidArgument,
                "lock set: options.fair is not supported (fair leases and fair semaphores have a queue per name)");
  if (options_.watchdog_connection)
    throw Error(ErrorCode::kInvalidArgument, "lock set: options.watchdog_connection is refused (the client renews)");
  if (client_->core()->borrows())
    throw Error(ErrorCode::kNotSupported,
                "lock set: a lock client over a borrowed connection cannot hold a set (it needs the client's own "
                "work connections: LockClient::create or LockClient::shared)");
  // The canonical order: every attempt locks rows in it, so two attempts
  // that overlap queue in one order and never in a cycle.
  std::sort(members.begin(), members.end(), [](const auto& x, const auto& y) { return x.name < y.name; });
  if (auto d = std::adjacent_find(members.begin(), members.end(),
                                  [](const auto& x, const auto& y) { return x.name == y.name; });
      d != members.end())
    throw Error(ErrorCode::kInvalidArgument, "lock set: '" + printable(d->name, 200) + "' is listed twice");
  shared_ = std::make_shared<Shared>();
  shared_->on_lost = options_.on_lost;
  parts_ = std::make_shared<Parts>();
  members_.reserve(members.size());
  for (auto& m : members) {
    LeaseOptions o = options_;
    o.on_lost = [s = std::weak_ptr<Shared>(shared_), n = m.name](const LeaseLoss& l) {
      if (auto sp = s.lock()) sp->member_lost(n, l);
    };
    label_ += (label_.empty() ? "" : ",") + m.name;
    if (m.spec.kind == LockKind::kSemaphore) {
      auto sem = std::make_unique<Semaphore>(client_, m.name, m.spec.permits, std::move(o), watchdog);
      parts_->parts.push_back(sem->h_->set_part(detail::SyncMode::kPermits, 1, m.spec.permits));
      members_.push_back(std::move(sem));
    } else {
      auto lease = std::make_unique<LeaseLock>(client_, m.name, std::move(o), watchdog);
      parts_->parts.push_back(detail::SetPart{lease->lease_, {}, {}, {}});
      parts_->lease_names.push_back(m.name);
      members_.push_back(std::move(lease));
    }
    names_.push_back(std::move(m.name));
    specs_.push_back(m.spec);
  }
  // Its asynchronous waits queue in the client under the set's label; they
  // are paced by timers and by the busy holder's expiry, and (once
  // listen_after() old) woken by the release of the lease in their way where
  // the client's listener listens on channels (PostgreSQL, SQLite).
  // (Named short: a set of 1,000 names should not carry its label thrice.)
  const std::string shown = "lock set of '" + names_.front() + "'" +
                            (names_.size() > 1 ? " and " + std::to_string(names_.size() - 1) + " more" : "");
  parts_->wait_lease = detail::make_client_lease(detail::RowKind::kLease, shown, options_, false);
  // (Also its naps' key: ClientCore::sync_notify_sets wakes the keys with this prefix.)
  parts_->wait_lease->queue_key = detail::ClientCore::kSetNapPrefix + lease_wakeup_channel(label_);
}

LockSet::~LockSet() {
  if (!client_->core()->same_process()) return;
  // A pending asynchronous acquire is cancelled (what an attempt still
  // running takes is released by the waiter thread); each member releases
  // what it holds in its own destructor; sets waiting in this client try
  // again at once.
  client_->core()->cancel_acquire(parts_->wait_lease);
  const bool held = hold_count() > 0;
  members_.clear();
  if (held) client_->core()->sync_notify_sets();
}

namespace {
// How long a waiting set only naps (tries again on timers, as a barging
// lease does) before it also listens for the release of the lease in its
// way: a quarter of options.barging_limit (50 ms by default). Listening at
// once had every waiting set of every client try again at each release of a
// busy name: on PostgreSQL at 16 clients (bench lock-set, 2 cores) 190-210
// orders/s against 340-390, while only napping let some sets wait out their
// whole 2 s (timeouts); after 50 ms: 343/s, p99 189 ms, no timeouts.
milliseconds listen_after(const LeaseOptions& o) { return o.barging_limit / 4; }

// One all-or-none attempt on `conn` (a work connection of `core`), recorded
// in the set's shared state: held, or what stood in the way.
bool attempt_set(detail::ClientCore& core, Connection& conn, int slot, const std::vector<detail::SetPart>& parts,
                 LockSet::Shared& s, milliseconds* holder_remaining) {
  std::string first;  // what stood in the way last time: tried first where the dialect allows
  {
    std::lock_guard<std::mutex> lk(s.mu);
    ++s.acquisition;
    first = s.blocked_by;
  }
  detail::ClientCore::SetRefusal why;
  const bool got = core.try_acquire_set_on(conn, slot, parts, &why, first);
  std::lock_guard<std::mutex> lk(s.mu);
  if (got) {
    s.hold = 1;
    s.loss.reset();
    s.blocked_by.clear();
  } else {
    s.blocked_by = why.name;
    if (holder_remaining) *holder_remaining = milliseconds(std::max<std::int64_t>(why.holder_remaining_ms, 0));
  }
  return got;
}
}  // namespace

bool LockSet::try_acquire() {
  auto& core = *client_->core();
  core.check_process();
  if (core.waiting(*parts_->wait_lease))
    throw Error(ErrorCode::kInvalidArgument, "lock set '" + printable(label_, 200) +
                                                 "': an asynchronous acquire of this set is still pending "
                                                 "(cancel_acquire() it first)");
  if (hold_count() > 0) {
    if (!owns()) return false;  // lost (or its trust window ended): release() first
    std::lock_guard<std::mutex> lk(shared_->mu);
    ++shared_->hold;
    return true;
  }
  auto c = core.borrow();
  return attempt_set(core, *c, c.slot(), parts_->parts, *shared_, nullptr);
}

bool LockSet::acquire(milliseconds wait) {
  auto& core = *client_->core();
  core.check_process();
  check_duration(wait, "wait", milliseconds(0), std::chrono::hours(24 * 365));
  if (core.on_waiter_thread())
    throw Error(ErrorCode::kInvalidArgument,
                "lock set '" + printable(label_, 200) +
                    "': a blocking acquire() from a callback on the lock client's waiter thread would wait for that "
                    "thread itself");
  if (hold_count() > 0) return try_acquire();
  // Never past what the busy name's holder has left (it may be released or
  // taken over then): one name's wait, as a semaphore's. Where the client
  // listens on channels, once the wait is listen_after() old the release of
  // the lease that stood in the way ends a nap at once.
  const std::string& key = parts_->wait_lease->queue_key;
  struct Listen {
    detail::ClientCore& c;
    const std::string& key;
    std::string name;
    void to(const std::string& n) {
      c.set_nap_name(key, name, n);
      name = n;
    }
    ~Listen() { to(""); }
  } listen{core, key, ""};
  const auto since = steady_clock::now();
  return core.nap_wait(key, label_, wait, options_, [&](std::optional<milliseconds>* holder) {
    if (try_acquire()) return 1;
    *holder = takeover_in();
    if (wait.count() > 0 && steady_clock::now() - since >= listen_after(options_))
      listen.to(parts_->wake_name(blocked_by()));
    return 0;
  });
}

void LockSet::acquire_async(milliseconds wait, AcquireCallback done) {
  auto& core = *client_->core();
  core.check_process();
  if (!done) throw Error(ErrorCode::kInvalidArgument, "acquire_async: the completion callback is empty");
  if (hold_count() > 0) {  // re-entrant, or holding a lost set: at once, here
    done(try_acquire(), nullptr);
    return;
  }
  auto w = std::make_shared<detail::ClientWait>();
  w->lease = parts_->wait_lease;
  if (core.set_wakeups()) {
    {
      std::lock_guard<std::mutex> lk(shared_->mu);
      shared_->wait_since = steady_clock::now();
    }
    w->wake_name = [p = parts_, s = shared_, after = listen_after(options_)] {
      std::lock_guard<std::mutex> lk(s->mu);
      return steady_clock::now() - s->wait_since >= after ? p->wake_name(s->blocked_by) : std::string();
    };
  }
  // On the client's waiter thread; they keep the parts and the shared state
  // (never the set) alive.
  w->attempt = [p = parts_, s = shared_](detail::ClientCore& c, Connection& conn, milliseconds* holder,
                                         detail::ClientWait*) {
    return attempt_set(c, conn, c.slot_of(conn), p->parts, *s, holder);
  };
  // Taken by an attempt whose wait was cancelled meanwhile: given back.
  w->release = [p = parts_, s = shared_](detail::ClientCore& c) {
    c.release_set_quietly(p->parts);
    std::lock_guard<std::mutex> lk(s->mu);
    s->hold = 0;
  };
  core.acquire_async(std::move(w), wait, std::move(done));
}

bool LockSet::cancel_acquire() {
  client_->core()->check_process();
  return client_->core()->cancel_acquire(parts_->wait_lease);
}

bool LockSet::release() {
  auto& core = *client_->core();
  core.check_process();
  {
    std::lock_guard<std::mutex> lk(shared_->mu);
    if (shared_->hold == 0) return false;
    if (shared_->hold > 1) {
      --shared_->hold;
      return shared_->lost_in != shared_->acquisition;
    }
  }
  // Every member still held is released, even when one throws: a release
  // that throws keeps the set held (release() again releases the rest).
  bool all = true;
  std::exception_ptr first_error;
  for (const auto& m : members_) {
    if (m->hold_count() == 0) continue;
    try {
      if (!m->release()) all = false;
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  if (first_error) std::rethrow_exception(first_error);
  bool lost;
  {
    std::lock_guard<std::mutex> lk(shared_->mu);
    shared_->hold = 0;
    lost = shared_->lost_in == shared_->acquisition;
  }
  core.sync_notify_sets();
  return all && !lost;
}

bool LockSet::owns() const {
  if (members_.empty()) return false;
  return std::all_of(members_.begin(), members_.end(), [](const auto& m) { return m->owns(); });
}

std::int64_t LockSet::fence() const { return members_.front()->fence(); }

std::size_t LockSet::index_of(const std::string& name) const {
  const auto it = std::lower_bound(names_.begin(), names_.end(), name);
  if (it == names_.end() || *it != name)
    throw Error(ErrorCode::kInvalidArgument, "lock set: '" + printable(name, 200) + "' is not one of its names");
  return static_cast<std::size_t>(it - names_.begin());
}

std::int64_t LockSet::fence_of(const std::string& name) const { return members_[index_of(name)]->fence(); }

const LockSpec& LockSet::spec_of(const std::string& name) const { return specs_[index_of(name)]; }

std::string LockSet::owner() const { return members_.front()->owner(); }

int LockSet::hold_count() const {
  client_->core()->check_process();
  std::lock_guard<std::mutex> lk(shared_->mu);
  return shared_->hold;
}

milliseconds LockSet::remaining() const {
  milliseconds least = milliseconds::max();
  for (const auto& m : members_) least = std::min(least, m->remaining());
  return least == milliseconds::max() ? milliseconds(0) : least;
}

std::optional<LeaseLoss> LockSet::last_loss() const {
  client_->core()->check_process();
  std::lock_guard<std::mutex> lk(shared_->mu);
  return shared_->loss;
}

std::optional<milliseconds> LockSet::takeover_in() const {
  std::string blocker;
  {
    std::lock_guard<std::mutex> lk(shared_->mu);
    blocker = shared_->blocked_by;
  }
  if (blocker.empty()) return std::nullopt;
  return members_[index_of(blocker)]->takeover_in();
}

std::string LockSet::blocked_by() const {
  std::lock_guard<std::mutex> lk(shared_->mu);
  return shared_->blocked_by;
}

bool LockSet::run_guarded(const std::function<void(Transaction&)>& work) {
  auto& core = *client_->core();
  core.check_process();
  if (hold_count() == 0) return false;
  return core.run_guarded_set(parts_->parts, work);
}

}  // namespace sqlguard
