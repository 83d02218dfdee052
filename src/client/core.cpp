// The lock client (include/sqlguard/lock_client.h): connection slots,
// process-wide clients per URI, fork detection, and the lease operations a
// client handle delegates here. The renewer is in client_renewer.cpp, the
// waiter and listener threads in client_waiters.cpp.
#include "client/client.h"

#include <limits>

#include <unistd.h>

#include <algorithm>
#include <future>
#include <sstream>

#include "core/catalog.h"
#include "core/metric_hooks.h"
#include "core/process.h"
#include "core/uri.h"
#include "dialect/dialect.h"
#include "dialect/registry.h"
#include "sqlguard/validate.h"
#include "core/reconnect.h"
#include "plans/plans.h"
#include "plans/waiter.h"
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
  if (o.batch_max < 1 || o.batch_max > detail::kMaxBatch)
    throw Error(ErrorCode::kInvalidArgument, "batch_max is " + std::to_string(o.batch_max) + "; it must be 1 .. " +
                                                 std::to_string(detail::kMaxBatch) + " (1 = every call sent alone)");
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
  pid_t pid = detail::process_id();
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
  if (s.pid != detail::process_id()) {
    // A forked child: the parent's clients are not ours (their threads do
    // not exist here, their sessions are the parent's). Forget them without
    // destroying anything.
    new std::map<std::string, std::weak_ptr<LockClient>>(std::move(s.clients));
    s.clients.clear();
    s.pid = detail::process_id();
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
    : uri_(std::move(uri)), options_(std::move(options)), description_(mask_uri(uri_)), pid_(process_id()) {
  slots_.resize(options_.max_connections - 2);
  if (!uri_.empty())
    renewal_factory_ = [uri = uri_, connect = options_.connect] { return open_connection(uri, connect, true); };
}

void ClientCore::open() {
  // One work connection first: it tells the dialect's plans.
  auto first = connect(false);
  wait_plan_ = first->dialect().plans().wait;
  session_bound_release_ = wait_plan_->release_on_acquiring_session();
  batch_plan_ = first->dialect().plans().batch;
  release_skips_flush_ = first->dialect().release_skips_commit_flush();
  slots_[0].conn = std::move(first);
  renew_conn_ = std::shared_ptr<Connection>(connect(true));
  renew_conn_open_ = true;
  std::lock_guard<std::mutex> lk(renew_mu_);
  start_renewer_locked();
}

std::shared_ptr<ClientCore> ClientCore::over(Connection& conn, ConnectionFactory renewal,
                                             std::optional<milliseconds> wait_cap) {
  LockClientOptions o;
  o.max_connections = 3;  // one work slot: the borrowed connection
  auto core = std::make_shared<ClientCore>(std::string(), o);
  core->description_ = conn.description();
  core->borrowed_ = &conn;
  core->wait_cap_ = wait_cap;
  core->renewal_factory_ = std::move(renewal);
  core->wait_plan_ = conn.dialect().plans().wait;
  core->session_bound_release_ = core->wait_plan_->release_on_acquiring_session();
  return core;
}

void ClientCore::start_renewer_locked() {
  if (renewer_.joinable() || stop_ || !renewal_factory_) return;
  renewer_ = std::thread([this] { renewer_loop(); });
  name_thread(renewer_, "sqlguard-renew");
}

ClientCore::~ClientCore() {
  if (process_id() != pid_) {
    // A forked child: the threads are the parent's (they do not run here) and
    // closing a session would end the parent's. Leave everything as it is.
    new std::thread(std::move(renewer_));
    new std::thread(std::move(waiter_));
    new std::thread(std::move(listener_));
    for (auto& t : senders_) new std::thread(std::move(t));
    for (auto& s : slots_) (void)s.conn.release();
    new std::shared_ptr<Connection>(std::move(renew_conn_));
    return;
  }
  {
    std::lock_guard<std::mutex> a(renew_mu_);
    std::lock_guard<std::mutex> b(wait_mu_);
    std::lock_guard<std::mutex> c(slot_mu_);
    stop_ = true;
    if (listener_conn_) listener_conn_->interrupt_wait();  // its wait ends now, not at its slice's end
  }
  renew_cv_.notify_all();
  wait_cv_.notify_all();
  slot_cv_.notify_all();
  sender_cv_.notify_all();
  // The sender threads first: they finish the asynchronous calls still
  // queued (connections, waiter queue and renewer still there).
  for (auto& t : senders_)
    if (t.joinable()) t.join();
  if (renewer_.joinable()) renewer_.join();
  if (waiter_.joinable()) waiter_.join();
  if (listener_.joinable()) listener_.join();
}

bool ClientCore::same_process() const noexcept { return process_id() == pid_; }

void ClientCore::check_process() const {
  if (process_id() != pid_)
    throw Error(ErrorCode::kInvalidArgument,
                "this lock client (" + description_ + ") was created in process " + std::to_string(pid_) +
                    " and this is a forked child (" + std::to_string(process_id()) +
                    "): its sessions and threads belong to the parent. Create a LockClient in the child "
                    "(LockClient::shared() and the LeaseLock URI constructor do)");
}

std::shared_ptr<ClientLease> make_client_lease(RowKind kind, std::string name, const LeaseOptions& o, bool renew) {
  auto l = std::make_shared<ClientLease>();
  l->kind = kind;
  l->name = std::move(name);
  l->options.ttl = o.ttl;
  l->options.min_hold = o.min_hold;
  l->options.backoff_initial = o.backoff_initial;
  l->options.backoff_max = o.backoff_max;
  l->options.owner = o.owner;
  l->options.fair = o.fair;
  l->options.take_over = o.take_over;
  // Bounded barging: a default lease's waits ask for the next turn (not a
  // fair lease's: it has its queue).
  if (!o.fair) l->options.barging_limit = o.barging_limit;
  l->options.place_ttl = o.place_ttl.value_or(std::clamp<milliseconds>(o.ttl, milliseconds(300), std::chrono::seconds(10)));
  l->margin = o.safety_margin.value_or(std::min<milliseconds>(o.ttl / 10, std::chrono::seconds(2)));
  l->period = o.renew_period.value_or(o.ttl / 3);
  l->renew = renew;
  l->state->on_lost = o.on_lost;
  return l;
}

milliseconds ClientCore::renewal_io_timeout(const ConnectOptions& o) {
  return std::min<milliseconds>(o.io_timeout.value_or(std::chrono::seconds(10)), std::chrono::seconds(10));
}

std::unique_ptr<Connection> ClientCore::open_connection(const std::string& uri, ConnectOptions o, bool renewal) {
  const milliseconds io = renewal_io_timeout(o);
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
  // A client over a borrowed connection opens one of its own at most (renewals).
  s.connections_max = borrowed_ ? (renewal_factory_ ? 1 : 0) : options_.max_connections;
  {
    std::lock_guard<std::mutex> lk(slot_mu_);
    for (const auto& sl : slots_) s.connections_open += sl.conn ? 1 : 0;
    s.batches = batches_;
    s.batched_calls = batched_calls_;
    s.calls_queued = pending_.size();
    s.threads += senders_.size();
  }
  {
    std::lock_guard<std::mutex> lk(renew_mu_);
    s.connections_open += renew_conn_open_ ? 1 : 0;
    s.threads += (renewer_.joinable() ? 1 : 0) + (renewer_worker_ ? 1 : 0);
    s.queue_places = places_registered_locked();
    s.held_leases = renewals_.size() - s.queue_places;
    s.renewal_rounds = renewal_rounds_;
    s.clock_steps = clock_steps_;
    s.last_clock_step_ms = last_clock_step_ms_;
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
    s.waiters += first_tries_.size();  // (their first try in a batch)
    s.names_tracked += first_try_names_.size();
    s.names_tracked += queues_.size();
    s.wakeups = wakeups_;
    s.stray_wakeups = stray_wakeups_;
    s.polls = polls_;
    s.attempts = attempts_;
    s.next_turns = turns_asked_;
    s.named_handoffs = named_handoffs_;
    s.granted_handoffs = granted_handoffs_;
    s.turn_grants = turn_grants_;
  }
  {
    std::lock_guard<std::mutex> lk(sync_mu_);
    s.names_tracked += sync_naps_.size();
  }
  s.exhausted = exhausted_;
  s.renewal_behind = renewal_behind_.load();
  return s;
}

}  // namespace detail
}  // namespace sqlguard
