// Connection pool; the contract is in include/sqlguard/pool.h.
#include "sqlguard/pool.h"

#include <deque>
#include <mutex>
#include <condition_variable>
#include <thread>

#include "core/catalog.h"
#include "dialect/registry.h"
#include "sqlguard/backoff.h"
#include "sqlguard/metrics.h"
#include "sqlguard/validate.h"

namespace sqlguard {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {
metrics::Histogram& borrow_seconds() {
  static metrics::Histogram& h =
      metrics::histogram("sqlguard_pool_borrow_seconds", "Time to borrow a pooled connection (health check included)");
  return h;
}
// reason: health_check | in_transaction | by_holder
void count_discard(const char* reason) noexcept {
  try {
    metrics::counter("sqlguard_pool_discarded_total", "Pooled connections closed, by reason", {{"reason", reason}}).inc();
  } catch (const std::exception& e) {
    log(LogLevel::kError, std::string("metrics: ") + e.what());
  }
}
}  // namespace

struct PooledConnection::State {
  std::string uri;
  PoolOptions options;
  std::string description;
  mutable std::mutex mu;
  std::condition_variable cv;
  struct Idle {
    std::unique_ptr<Connection> conn;
    steady_clock::time_point since;
  };
  std::deque<Idle> idle;  // most recently returned at the back (LIFO keeps few connections warm)
  std::size_t total = 0;  // idle + borrowed + being opened
  bool closed = false;    // the Pool object is gone: returned connections are closed
  PoolStats counters;

  // Called with `mu` NOT held. Closing a connection may take a round trip:
  // it happens outside the lock.
  void give_back(std::unique_ptr<Connection> conn, bool discard) noexcept {
    if (!conn) return;
    bool in_tx = conn->in_transaction();
    if (in_tx)
      log(LogLevel::kWarning, "pool " + description +
                                  ": a connection was returned with its transaction still open; it is closed "
                                  "(rolled back by the server), never handed to another borrower");
    std::unique_ptr<Connection> to_close;
    {
      std::lock_guard<std::mutex> lk(mu);
      --counters.in_use;
      if (discard || in_tx || closed) {
        if (in_tx) ++counters.returned_in_transaction;
        if (discard) ++counters.discarded_by_holder;
        if (in_tx || discard) count_discard(in_tx ? "in_transaction" : "by_holder");
        ++counters.discarded;
        --total;
        to_close = std::move(conn);
      } else {
        idle.push_back({std::move(conn), steady_clock::now()});
      }
    }
    cv.notify_one();
    close_quietly(std::move(to_close));
  }

  static void close_quietly(std::unique_ptr<Connection> conn) noexcept {
    try {
      conn.reset();
    } catch (const std::exception& e) {  // destructors should not throw; a driver might
      log(LogLevel::kWarning, std::string("closing a pooled connection failed: ") + e.what());
    }
  }
};

void validate(const PoolOptions& o) {
  if (o.max_size < 1 || o.max_size > 1000)
    throw Error(ErrorCode::kInvalidArgument,
                "pool max_size is " + std::to_string(o.max_size) + "; it must be 1..1000");
  if (o.min_size > o.max_size)
    throw Error(ErrorCode::kInvalidArgument, "pool min_size (" + std::to_string(o.min_size) +
                                                 ") must not exceed max_size (" + std::to_string(o.max_size) + ")");
  check_duration(o.borrow_timeout, "borrow_timeout", milliseconds(0), std::chrono::hours(1));
  check_duration(o.health_check_after, "health_check_after", milliseconds(0), std::chrono::hours(1));
}

// ---- PooledConnection --------------------------------------------------------

PooledConnection::PooledConnection(std::shared_ptr<State> pool, std::unique_ptr<Connection> conn)
    : pool_(std::move(pool)), conn_(std::move(conn)) {}

PooledConnection::PooledConnection(PooledConnection&& o) noexcept
    : pool_(std::move(o.pool_)), conn_(std::move(o.conn_)) {}

PooledConnection& PooledConnection::operator=(PooledConnection&& o) noexcept {
  if (this != &o) {
    release();
    pool_ = std::move(o.pool_);
    conn_ = std::move(o.conn_);
  }
  return *this;
}

PooledConnection::~PooledConnection() { release(); }

void PooledConnection::release() noexcept {
  if (pool_ && conn_) pool_->give_back(std::move(conn_), false);
  pool_.reset();
  conn_.reset();
}

void PooledConnection::discard() noexcept {
  if (pool_ && conn_) pool_->give_back(std::move(conn_), true);
  pool_.reset();
  conn_.reset();
}

// ---- Pool --------------------------------------------------------------------

Pool::Pool(std::string uri, PoolOptions options)
    : options_(std::move(options)), description_(mask_uri(uri)), state_(std::make_shared<PooledConnection::State>()) {
  validate(options_);
  std::string scheme = uri.substr(0, uri.find(':'));
  for (auto& ch : scheme) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const auto* dialect = detail::find_dialect_by_scheme(scheme);
  if (dialect && dialect->private_to_connection && dialect->private_to_connection(uri) && options_.max_size > 1)
    throw Error(ErrorCode::kInvalidArgument,
                "pool of " + description_ + " with max_size > 1: every connection to it is its own in-memory "
                "database; use a file URI");
  state_->uri = std::move(uri);
  state_->options = options_;
  state_->description = description_;
  std::vector<std::unique_ptr<Connection>> opened;
  for (std::size_t i = 0; i < options_.min_size; ++i) opened.push_back(make_connection(state_->uri, options_.connect));
  std::lock_guard<std::mutex> lk(state_->mu);
  for (auto& c : opened) state_->idle.push_back({std::move(c), steady_clock::now()});
  state_->total = opened.size();
  state_->counters.opened = opened.size();
}

Pool::~Pool() {
  std::deque<PooledConnection::State::Idle> idle;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->closed = true;
    idle.swap(state_->idle);
    state_->total -= idle.size();
    state_->counters.discarded += idle.size();
  }
  state_->cv.notify_all();
  for (auto& i : idle) PooledConnection::State::close_quietly(std::move(i.conn));
}

PooledConnection Pool::borrow() { return borrow(options_.borrow_timeout); }

PooledConnection Pool::borrow(milliseconds timeout) {
  check_duration(timeout, "borrow timeout", milliseconds(0), std::chrono::hours(1));
  auto r = borrow_until(steady_clock::now() + timeout, true);
  return std::move(*r);
}

std::optional<PooledConnection> Pool::try_borrow() { return borrow_until(steady_clock::now(), false); }

namespace {
using PoolState = PooledConnection::State;

// What waiting for a connection gave: an idle one (and since when it was
// idle), or (conn null) a slot reserved for a new one, opened outside the lock.
struct Taken {
  std::unique_ptr<Connection> conn;
  steady_clock::time_point idle_since{};
};

Error borrow_timeout(const std::string& description, const PoolState& s, const std::string& last_error) {
  return Error(ErrorCode::kTimeout, "pool " + description + ": no connection within the borrow timeout (all " +
                                        std::to_string(s.options.max_size) + " in use" +
                                        (last_error.empty() ? std::string(")") : "; last connect error: " + last_error + ")"));
}

// Waits (until `deadline`; not at all unless `wait`) for an idle connection
// or room for a new one. nullopt: none, and not waiting. Throws kTimeout.
std::optional<Taken> take(PoolState& s, const std::string& description, steady_clock::time_point deadline, bool wait,
                          const std::string& last_error) {
  std::unique_lock<std::mutex> lk(s.mu);
  auto ready = [&] { return !s.idle.empty() || s.total < s.options.max_size; };
  if (!ready() && (!wait || !s.cv.wait_until(lk, deadline, ready))) {
    ++s.counters.borrow_timeouts;
    if (!wait) return std::nullopt;
    throw borrow_timeout(description, s, last_error);
  }
  Taken t;
  if (!s.idle.empty()) {
    t.conn = std::move(s.idle.back().conn);
    t.idle_since = s.idle.back().since;
    s.idle.pop_back();
  } else {
    ++s.total;  // reserve the slot while connecting outside the lock
  }
  ++s.counters.in_use;
  return t;
}

// Gives a borrowed or reserved slot back (its connection failed or was
// discarded), counting why, and wakes a waiter.
void give_slot_back(PoolState& s, std::initializer_list<std::uint64_t PoolStats::*> why) {
  {
    std::lock_guard<std::mutex> lk(s.mu);
    --s.total;
    --s.counters.in_use;
    for (auto counter : why) ++(s.counters.*counter);
  }
  s.cv.notify_one();
}

enum class Opened { kYes, kRetry, kGiveUp };

// Opens a connection in a reserved slot. A connect failure worth retrying
// naps (kRetry) while the deadline allows; kGiveUp: not waiting; throws
// kTimeout past the deadline, and any other error as it is.
Opened open_in_slot(PoolState& s, const std::string& description, steady_clock::time_point deadline, bool wait,
                    std::unique_ptr<Connection>& conn, std::string& last_error, int& retry, Backoff& backoff) {
  try {
    conn = make_connection(s.uri, s.options.connect);
  } catch (const Error& e) {
    give_slot_back(s, {&PoolStats::connect_failures});
    if (e.code() != ErrorCode::kConnectionLost && e.code() != ErrorCode::kTimeout) throw;
    last_error = e.what();
    const auto nap = backoff.delay(++retry);
    if (!wait || steady_clock::now() + nap >= deadline) {
      std::lock_guard<std::mutex> lk(s.mu);
      ++s.counters.borrow_timeouts;
      if (!wait) return Opened::kGiveUp;
      throw Error(ErrorCode::kTimeout,
                  "pool " + description + ": no connection within the borrow timeout; last connect error: " + last_error);
    }
    std::this_thread::sleep_for(nap);
    return Opened::kRetry;
  } catch (...) {  // not a database error (e.g. out of memory): give the slot back, let it propagate
    give_slot_back(s, {});
    throw;
  }
  std::lock_guard<std::mutex> lk(s.mu);
  ++s.counters.opened;
  return Opened::kYes;
}

// An idle connection passes its health check (one round trip) unless it was
// returned just now; one that fails it is closed and its slot given back.
bool healthy(PoolState& s, const std::string& description, std::unique_ptr<Connection>& conn,
             steady_clock::time_point idle_since) {
  if (steady_clock::now() - idle_since < s.options.health_check_after) return true;
  try {
    detail::run(*conn, detail::Sql::pool_ping);
    return true;
  } catch (const std::exception& e) {
    log(LogLevel::kInfo, "pool " + description + ": an idle connection failed its health check (" +
                             std::string(e.what()) + "); discarded");
  }
  give_slot_back(s, {&PoolStats::discarded, &PoolStats::health_failures});
  count_discard("health_check");
  PoolState::close_quietly(std::move(conn));
  return false;
}
}  // namespace

std::optional<PooledConnection> Pool::borrow_until(steady_clock::time_point deadline, bool wait) {
  auto& s = *state_;
  const auto t0 = steady_clock::now();
  std::string last_error;  // why the last connect failed, for the time-out message
  int connect_retry = 0;
  Backoff backoff{milliseconds(20), milliseconds(500)};
  for (;;) {
    auto taken = take(s, description_, deadline, wait, last_error);
    if (!taken) return std::nullopt;
    std::unique_ptr<Connection> conn = std::move(taken->conn);
    if (!conn) {  // a slot reserved for a new connection
      const Opened o = open_in_slot(s, description_, deadline, wait, conn, last_error, connect_retry, backoff);
      if (o == Opened::kGiveUp) return std::nullopt;
      if (o == Opened::kRetry) continue;
    } else if (!healthy(s, description_, conn, taken->idle_since)) {
      continue;  // the next idle one, or a replacement
    }
    {
      std::lock_guard<std::mutex> lk(s.mu);
      ++s.counters.borrows;
    }
    borrow_seconds().observe(std::chrono::duration<double>(steady_clock::now() - t0).count());
    return PooledConnection(state_, std::move(conn));
  }
}

PoolStats Pool::stats() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  PoolStats st = state_->counters;
  st.idle = state_->idle.size();
  st.total = state_->total;
  return st;
}

}  // namespace sqlguard
