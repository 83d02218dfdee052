// The lock client (include/sqlguard/lock_client.h): connection slots,
// process-wide clients per URI, fork detection, and the lease operations a
// client handle delegates here. The renewer is in client_renewer.cpp, the
// waiter and listener threads in client_waiters.cpp.
#include "strategies/lease/client_core.h"

#include <limits>

#include <unistd.h>

#include <algorithm>
#include <future>
#include <sstream>

#include "core/catalog.h"
#include "core/metric_hooks.h"
#include "core/uri.h"
#include "dialect/dialect.h"
#include "dialect/registry.h"
#include "sqlguard/validate.h"
#include "strategies/lease/lease_util.h"
#include "strategies/lease/plans.h"
#include "strategies/sync/sync_ops.h"

namespace sqlguard {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

void validate(const LockClientOptions& o) {
  if (o.max_connections < 3 || o.max_connections > 64)
    throw Error(ErrorCode::kInvalidArgument,
                "max_connections is " + std::to_string(o.max_connections) +
                    "; it must be 3 .. 64 (one reserved for renewals, one for the wake-up listener, at least one "
                    "for acquires and releases)");
  check_duration(o.borrow_timeout, "borrow_timeout", milliseconds(0), std::chrono::minutes(10));
  if (o.connect.io_timeout) check_duration(*o.connect.io_timeout, "connect.io_timeout", milliseconds(1), std::chrono::hours(24));
}

LockClient::LockClient(std::shared_ptr<detail::ClientCore> core) : core_(std::move(core)) {}
LockClient::~LockClient() = default;

bool detail::private_to_connection(const std::string& uri) {
  std::string scheme = uri.substr(0, uri.find(':'));
  for (auto& ch : scheme) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const auto* dialect = detail::find_dialect_by_scheme(scheme);
  return dialect && dialect->private_to_connection && dialect->private_to_connection(uri);
}

std::shared_ptr<LockClient> LockClient::create(const std::string& uri, LockClientOptions options) {
  validate(options);
  if (detail::private_to_connection(uri))
    throw Error(ErrorCode::kInvalidArgument,
                "lock client of " + mask_uri(uri) +
                    ": every connection to it is its own in-memory database (the renewal connection would not see "
                    "the leases); use a file URI");
  auto core = std::make_shared<detail::ClientCore>(uri, std::move(options));
  core->open();
  return std::make_shared<LockClient>(std::move(core));
}

namespace {
struct SharedClients {
  std::mutex mu;
  pid_t pid = ::getpid();
  std::map<std::string, std::weak_ptr<LockClient>> clients;
};
SharedClients& shared_clients() {
  static auto* s = new SharedClients();  // never destroyed: handles may outlive static destruction
  return *s;
}
std::string shared_key(const std::string& uri, const ConnectOptions& c) {
  std::ostringstream k;
  k << c.connect_timeout.count() << '|' << c.busy_timeout.count() << '|' << (c.io_timeout ? c.io_timeout->count() : -1)
    << '|' << c.statement_cache_size << '|' << c.refuse_undeclared_pooler << '|' << c.create_if_missing << '|'
    << detail::canonical_uri(uri);  // one client per server, whatever the URI's spelling
  return k.str();
}
}  // namespace

std::shared_ptr<LockClient> LockClient::shared(const std::string& uri, const ConnectOptions& connect) {
  auto& s = shared_clients();
  std::lock_guard<std::mutex> lk(s.mu);
  if (s.pid != ::getpid()) {
    // A forked child: the parent's clients are not ours (their threads do
    // not exist here, their sessions are the parent's). Forget them without
    // destroying anything.
    new std::map<std::string, std::weak_ptr<LockClient>>(std::move(s.clients));
    s.clients.clear();
    s.pid = ::getpid();
  }
  const std::string key = shared_key(uri, connect);
  if (auto c = s.clients[key].lock()) return c;
  LockClientOptions o;
  o.connect = connect;
  auto c = create(uri, o);
  s.clients[key] = c;
  return c;
}

LockClientStats LockClient::stats() const {
  core_->check_process();
  return core_->stats();
}
const std::string& LockClient::description() const noexcept { return core_->description(); }
const LockClientOptions& LockClient::options() const noexcept { return core_->options(); }

namespace detail {

ClientCore::ClientCore(std::string uri, LockClientOptions options)
    : uri_(std::move(uri)), options_(std::move(options)), description_(mask_uri(uri_)), pid_(::getpid()) {
  slots_.resize(options_.max_connections - 2);
}

void ClientCore::open() {
  // One work connection first: it tells the dialect's plans.
  auto first = connect(false);
  wait_plan_ = first->dialect().plans().wait;
  session_bound_release_ = wait_plan_->release_on_acquiring_session();
  slots_[0].conn = std::move(first);
  renew_conn_ = std::shared_ptr<Connection>(connect(true));
  renew_conn_open_ = true;
  renewer_ = std::thread([this] { renewer_loop(); });
}

ClientCore::~ClientCore() {
  if (::getpid() != pid_) {
    // A forked child: the threads are the parent's (they do not run here) and
    // closing a session would end the parent's. Leave everything as it is.
    new std::thread(std::move(renewer_));
    new std::thread(std::move(waiter_));
    new std::thread(std::move(listener_));
    for (auto& s : slots_) (void)s.conn.release();
    new std::shared_ptr<Connection>(std::move(renew_conn_));
    return;
  }
  {
    std::lock_guard<std::mutex> a(renew_mu_);
    std::lock_guard<std::mutex> b(wait_mu_);
    std::lock_guard<std::mutex> c(slot_mu_);
    stop_ = true;
  }
  renew_cv_.notify_all();
  wait_cv_.notify_all();
  slot_cv_.notify_all();
  if (renewer_.joinable()) renewer_.join();
  if (waiter_.joinable()) waiter_.join();
  if (listener_.joinable()) listener_.join();
}

bool ClientCore::same_process() const noexcept { return ::getpid() == pid_; }

void ClientCore::check_process() const {
  if (::getpid() != pid_)
    throw Error(ErrorCode::kInvalidArgument,
                "this lock client (" + description_ + ") was created in process " + std::to_string(pid_) +
                    " and this is a forked child (" + std::to_string(::getpid()) +
                    "): its sessions and threads belong to the parent. Create a LockClient in the child "
                    "(LockClient::shared() and the LeaseLock URI constructor do)");
}

std::unique_ptr<Connection> ClientCore::open_connection(const std::string& uri, ConnectOptions o, bool renewal) {
  const milliseconds io = std::min<milliseconds>(o.io_timeout.value_or(std::chrono::seconds(10)), std::chrono::seconds(10));
  if (!o.io_timeout || renewal) o.io_timeout = io;
  auto c = make_connection(uri, o);
  if (renewal) c->dialect().bound_session_statements(*c, io);
  return c;
}

std::unique_ptr<Connection> ClientCore::connect(bool renewal) const {
  try {
    return open_connection(uri_, options_.connect, renewal);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kResourceExhausted) ++exhausted_;
    throw;
  }
}

LockClientStats ClientCore::stats() const {
  LockClientStats s;
  s.connections_max = options_.max_connections;
  {
    std::lock_guard<std::mutex> lk(slot_mu_);
    for (const auto& sl : slots_) s.connections_open += sl.conn ? 1 : 0;
  }
  {
    std::lock_guard<std::mutex> lk(renew_mu_);
    s.connections_open += renew_conn_open_ ? 1 : 0;
    s.threads += 1 + (renewer_worker_ ? 1 : 0);
    s.queue_places = places_registered_locked();
    s.held_leases = renewals_.size() - s.queue_places;
    s.renewal_rounds = renewal_rounds_;
    s.renewal_statements = renewal_statements_;
    s.leases_renewed = leases_renewed_;
    s.leases_lost = leases_lost_;
    if (!lag_ms_.empty()) {
      std::vector<double> v = lag_ms_;
      std::sort(v.begin(), v.end());
      s.renewal_lag_p99_ms = v[std::min(v.size() - 1, static_cast<std::size_t>(0.99 * static_cast<double>(v.size())))];
      s.renewal_lag_max_ms = v.back();
    }
  }
  {
    std::lock_guard<std::mutex> lk(wait_mu_);
    s.connections_open += listener_open_ ? 1 : 0;
    s.listening = listening_;
    s.threads += waiter_threads_ ? 2 : 0;
    for (const auto& [name, q] : queues_) s.waiters += q.waits.size();
    s.names_tracked += queues_.size();
    s.wakeups = wakeups_;
    s.polls = polls_;
    s.attempts = attempts_;
  }
  {
    std::lock_guard<std::mutex> lk(sync_mu_);
    s.names_tracked += sync_naps_.size();
  }
  s.exhausted = exhausted_;
  s.renewal_behind = renewal_behind_.load();
  return s;
}

// ---- work connections ----------------------------------------------------------

ClientCore::Borrowed::~Borrowed() {
  if (!core_) return;
  {
    std::lock_guard<std::mutex> lk(core_->slot_mu_);
    core_->slots_[static_cast<std::size_t>(slot_)].busy = false;
  }
  core_->slot_cv_.notify_all();
}

Connection& ClientCore::Borrowed::operator*() const { return *core_->slots_[static_cast<std::size_t>(slot_)].conn; }

void ClientCore::Borrowed::discard() noexcept {
  std::unique_ptr<Connection> gone;
  std::lock_guard<std::mutex> lk(core_->slot_mu_);
  gone = std::move(core_->slots_[static_cast<std::size_t>(slot_)].conn);
}

ClientCore::Borrowed ClientCore::borrow(int slot) {
  check_process();
  const auto deadline = steady_clock::now() + options_.borrow_timeout;
  std::unique_lock<std::mutex> lk(slot_mu_);
  int got = -1;
  auto pick = [&] {
    if (stop_) return true;
    if (slot >= 0) {
      got = slots_[static_cast<std::size_t>(slot)].busy ? -1 : slot;
      return got >= 0;
    }
    for (int pass = 0; pass < 2 && got < 0; ++pass)  // an open connection first
      for (std::size_t i = 0; i < slots_.size(); ++i)
        if (!slots_[i].busy && (pass == 1 || slots_[i].conn)) {
          got = static_cast<int>(i);
          break;
        }
    return got >= 0;
  };
  if (!slot_cv_.wait_until(lk, deadline, pick) || got < 0) {
    ++exhausted_;
    throw Error(ErrorCode::kResourceExhausted,
                "lock client of " + description_ + ": " +
                    (slot >= 0 ? std::string("the work connection that holds this lease's session lock")
                               : "all " + std::to_string(slots_.size()) + " work connections") +
                    " stayed busy for borrow_timeout (" + format_duration(options_.borrow_timeout) +
                    "); held leases are still renewed. Raise LockClientOptions::max_connections or borrow_timeout");
  }
  auto& s = slots_[static_cast<std::size_t>(got)];
  s.busy = true;
  if (!s.conn) {
    lk.unlock();
    try {
      auto c = connect(false);
      lk.lock();
      s.conn = std::move(c);
    } catch (...) {
      if (!lk.owns_lock()) lk.lock();
      s.busy = false;
      slot_cv_.notify_all();
      throw;
    }
  }
  return Borrowed(this, got);
}

// ---- leases ---------------------------------------------------------------------

std::shared_ptr<ClientLease> ClientCore::take_place(Connection& conn, const ClientLease& l) {
  admit(l);  // a place is renewed as a lease is
  auto p = std::make_shared<ClientLease>();
  p->kind = RowKind::kPlace;
  p->name = l.name;
  p->options.ttl = l.options.place_ttl;
  p->margin = l.options.place_ttl / 10;
  p->period = l.options.place_ttl / 3;
  const std::string owner = make_owner_token();
  const auto start = steady_clock::now();
  const std::int64_t ticket = with_reconnect(conn, std::max<milliseconds>(l.options.place_ttl, milliseconds(1000)),
                                             "joining the queue of fair lease '" + l.name + "'",
                                             [&](int) {
                                               return fair_enqueue(conn, l.name, owner, l.options.place_ttl,
                                                                   l.options.queue_kind, l.options.queue_permits);
                                             });
  {
    std::lock_guard<std::mutex> lk(p->state->mu);
    p->key = ticket;
    p->state->hold = 1;
    p->state->owner = owner;
    p->state->fence = ticket;
    ++p->state->acquisition;
    p->state->valid_until = start + p->options.ttl - p->margin;
  }
  renew_register(p);
  return p;
}

void ClientCore::leave_place(const std::shared_ptr<ClientLease>& p, Connection* held, bool wake) noexcept {
  if (!p) return;
  renew_unregister(p.get());
  std::string owner;
  std::int64_t ticket;
  {
    std::lock_guard<std::mutex> lk(p->state->mu);
    if (p->state->hold == 0) return;
    p->state->hold = 0;
    owner = p->state->owner;
    ticket = p->key;
  }
  try {
    // Idempotent: retried on a fresh connection (a killed session, a
    // restart), or the place would hold up the queue until it expires.
    // On the caller's connection when it holds one (an attempt: borrowing a
    // second could wait for the only work connection, its own).
    std::optional<Borrowed> own;
    if (!held) own.emplace(borrow());
    Connection& c = held ? *held : **own;
    with_reconnect(c, std::clamp<milliseconds>(p->options.ttl / 3, milliseconds(100), milliseconds(2000)),
                   "leaving the queue of fair lease '" + p->name + "'",
                   [&](int) { fair_leave(c, p->name, ticket, owner, wake); });
  } catch (const std::exception& e) {
    log(LogLevel::kDebug, "leaving the queue of fair lease '" + p->name + "' failed (the place expires by itself): " +
                              e.what());
  }
}

bool ClientCore::fair_turn_on(Connection& conn, const ClientLease& l, ClientWait* w, milliseconds budget,
                              milliseconds* holder_remaining, std::int64_t* lease_left_ms) {
  // Only the lowest live ticket may take it. A waiter whose place lapsed (it
  // was gone longer than place_ttl) queues again at the tail; a try without
  // a place (try_acquire) goes only when nobody waits.
  std::shared_ptr<ClientLease> place;
  if (w) {
    std::lock_guard<std::mutex> lk(wait_mu_);
    place = w->place;
  }
  std::int64_t ticket = std::numeric_limits<std::int64_t>::max();
  std::string place_owner;
  if (place) {
    std::lock_guard<std::mutex> lk(place->state->mu);
    ticket = place->key;
    place_owner = place->state->owner;
  }
  const FairTurn turn = with_reconnect(conn, std::max(budget, milliseconds(1)), "reading the queue of '" + l.name + "'",
                                       [&](int) { return fair_turn(conn, l.name, ticket, place_owner); });
  // A fair lease of a name a semaphore or read-write lease reserved: refused.
  if (lease_left_ms && turn.reserved) refuse_if_reserved(conn, l.name, kReservedExpireAt, "fair");
  if (place && !turn.place_live) {
    leave_place(place, &conn, false);
    auto fresh = take_place(conn, l);
    std::lock_guard<std::mutex> lk(wait_mu_);
    w->place = fresh;
    w->ahead = -1;
    *holder_remaining = l.options.backoff_initial;
    return false;
  }
  if (w) {
    std::lock_guard<std::mutex> lk(wait_mu_);
    const auto now = steady_clock::now();
    if (w->ahead > turn.ahead) {
      // The fastest turn seen since its last check: a check paced by it is
      // seldom late (a late one leaves the turn unused with nobody woken).
      const auto per = std::chrono::duration_cast<std::chrono::microseconds>(now - w->ahead_since) /
                       (w->ahead - turn.ahead);
      w->fastest_turn = w->fastest_turn.count() > 0 ? std::min(w->fastest_turn, per) : per;
      w->lease->fair_turn = w->fastest_turn;
    }
    w->ahead = turn.ahead;
    w->ahead_since = now;
    w->not_turn = turn.ahead > 0;
  }
  if (turn.ahead > 0) {
    *holder_remaining = l.options.ttl;  // paced by the waiter thread; a release wakes it
    return false;
  }
  if (lease_left_ms) *lease_left_ms = turn.holder_left_ms;
  return true;
}

void ClientCore::fair_acquired(Connection& conn, ClientWait* w) noexcept {
  if (!w) return;
  std::shared_ptr<ClientLease> place;
  {
    std::lock_guard<std::mutex> lk(wait_mu_);
    place = std::move(w->place);
    w->place.reset();
  }
  leave_place(place, &conn, false);
}

bool ClientCore::attempt_on(Borrowed& c, const std::shared_ptr<ClientLease>& l, milliseconds budget,
                            milliseconds* holder_remaining, ClientWait* w) {
  if (l->renew) admit(*l);
  Connection& conn = *c;
  const auto& o = l->options;
  bool seen_free = false;
  if (o.fair) {
    std::int64_t lease_left = 0;
    if (!fair_turn_on(conn, *l, w, budget, holder_remaining, &lease_left)) return false;
    if (lease_left > 0) {
      // Its turn, but the lease is still held: the same read said so.
      *holder_remaining = milliseconds(lease_left);
      return false;
    }
    seen_free = true;
  }
  const std::string owner = o.owner.empty() ? make_owner_token() : o.owner;
  const auto start = steady_clock::now();
  budget = std::max(std::min<milliseconds>(o.ttl - l->margin, budget), milliseconds(1));
  auto r = with_reconnect(conn, budget, "acquiring lease '" + l->name + "'", [&](int attempt) {
    if (attempt > 1) {
      // A retry after an unanswered attempt first asks whether that attempt
      // took the lease (the owner token is ours alone).
      auto mine = run(conn, Sql::lease_read_mine, {l->name, owner, l->channel()});
      if (!mine.rows.empty()) {
        static constexpr auto kFence = column(Sql::lease_read_mine, "fence");
        static constexpr auto kExpireAt = column(Sql::lease_read_mine, "expire_at");
        if (cell(mine.rows[0], kExpireAt).as_int() > conn.db_now_ms())
          return AcquireResult{true, cell(mine.rows[0], kFence).as_int(), cell(mine.rows[0], kExpireAt).as_int(), owner};
      }
    }
    return acquire_lease_seated(conn, l->name, owner, o.ttl, o.min_hold, nullptr, seen_free && attempt == 1);
  });
  if (!r.acquired) {
    *holder_remaining = r.holder_remaining_ms > 0 ? milliseconds(r.holder_remaining_ms) : o.ttl;
    return false;
  }
  {
    std::lock_guard<std::mutex> lk(l->state->mu);
    l->state->hold = 1;
    l->state->owner = owner;
    l->state->fence = r.fence;
    ++l->state->acquisition;
    l->state->expire_at = r.expire_at_ms;
    l->state->valid_until = start + o.ttl - l->margin;
    l->state->lost = false;
    l->state->loss.reset();
    l->state->stop = false;
    l->slot = session_bound_release_ ? c.slot() : -1;
    l->held_place = HeldPlace{};
  }
  if (l->renew) renew_register(l);
  if (o.fair && w) {
    // The place stays until the release removes it in its own commit: the
    // next waiter is still behind it, and the hand-off costs no commit of
    // its own. It is not renewed any more: a holder that dies leaves it to
    // expire at its last renewal + place_ttl, as a waiter's. Where place_ttl
    // is longer than the lease's ttl, its expiry is first brought down to
    // the lease's (one statement, after the take-over committed): a dead
    // holder then holds up the queue for ttl at most, not place_ttl.
    std::shared_ptr<ClientLease> place;
    {
      std::lock_guard<std::mutex> lk(wait_mu_);
      place = std::move(w->place);
      w->place.reset();
    }
    HeldPlace kept;
    if (place) {
      renew_unregister(place.get());
      std::lock_guard<std::mutex> lk(place->state->mu);
      if (place->state->hold > 0) kept = HeldPlace{place->key, place->state->owner};
      place->state->hold = 0;
    }
    if (!kept.owner.empty() && o.place_ttl > o.ttl) {
      try {
        const RowRenewal row{l->name, kept.ticket, kept.owner, kept.ticket, o.ttl};
        renew_places(conn, std::span<const RowRenewal>(&row, 1));
      } catch (const std::exception& e) {
        log(LogLevel::kDebug, "shortening the held queue place of fair lease '" + l->name +
                                  "' failed (it expires at its place_ttl): " + e.what());
      }
    }
    std::lock_guard<std::mutex> lk(l->state->mu);
    l->held_place = std::move(kept);
  }
  return true;
}

bool ClientCore::try_acquire(const std::shared_ptr<ClientLease>& l) {
  check_process();
  {
    std::lock_guard<std::mutex> lk(l->state->mu);
    if (l->state->hold > 0) {
      if (!l->state->valid_locked()) return false;  // lost: release() first
      ++l->state->hold;
      return true;
    }
  }
  {
    std::lock_guard<std::mutex> lk(wait_mu_);
    if (l->waiting)
      throw Error(ErrorCode::kInvalidArgument,
                  "lease '" + l->name + "': an asynchronous acquire of this handle is still pending (cancel_acquire() "
                  "it first)");
  }
  auto c = borrow();
  milliseconds holder{0};
  return attempt_on(c, l, l->options.ttl, &holder);
}

bool ClientCore::acquire(const std::shared_ptr<ClientLease>& l, milliseconds wait) {
  check_duration(wait, "wait", milliseconds(0), std::chrono::hours(24 * 365));
  if (wait.count() == 0) return try_acquire(l);
  if (std::this_thread::get_id() == waiter_thread_id_.load())
    throw Error(ErrorCode::kInvalidArgument,
                "lease '" + l->name + "': a blocking acquire() from a callback on the lock client's waiter thread "
                "would wait for that thread itself; use acquire_async()");
  const auto deadline = steady_clock::now() + wait;
  bool queued;
  {
    std::lock_guard<std::mutex> lk(wait_mu_);
    queued = queues_.count(l->name) > 0;
  }
  if (!queued) {  // nobody of this process waits for it: try at once on this thread
    try {
      if (try_acquire(l)) return true;
    } catch (const Error& e) {
      if (!is_outage(e) && e.code() != ErrorCode::kResourceExhausted) throw;
    }
  }
  {
    std::lock_guard<std::mutex> lk(l->state->mu);
    if (l->state->hold > 0) return false;  // holding a lost lease: waiting cannot help
  }
  auto [done, f] = completion_future();
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
  acquire_async(l, std::max(left, milliseconds(1)), std::move(done));
  return f.get();
}

}  // namespace detail
}  // namespace sqlguard
