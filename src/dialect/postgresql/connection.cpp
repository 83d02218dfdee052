// PostgreSQL dialect over libpqxx 6.4. Statements are prepared once per
// connection and kept in a bounded LRU cache (evicted ones are DEALLOCATEd);
// values travel as text-format parameters (bytea as \x hex).
//
// Connecting goes through sqlguard's own libpqxx connection policy
// (SgConnectPolicy): libpq's non-blocking connect with a deadline, and
// verbose errors, so a failure is classified by the SQLSTATE the server sent
// (28P01 unauthenticated, 3D000 not found, 42501 permission denied...) or,
// when the server never answered, as connection_lost -- never by searching
// the message for words.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <libpq-fe.h>
#include <pqxx/pqxx>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <atomic>
#include <limits>
#include <map>
#include <set>
#include <random>
#include <unordered_map>

#include "core/io_deadline.h"
#include "core/uri.h"
#include "core/placeholders.h"
#include "core/sql_cache.h"
#include "dialect/dialect.h"
#include "core/catalog.h"
#include "core/migration_lock.h"
#include "core/schema_hint.h"
#include "dialect/postgresql/connection.h"
#include "plans/plans.h"
#include "dialect/postgresql/errors.h"
#include "sqlguard/postgresql.h"

namespace sqlguard {
namespace {
struct PgParam {
  bool null = true;
  std::string text;
};
}  // namespace
}  // namespace sqlguard

namespace pqxx {
template <>
struct string_traits<sqlguard::PgParam> {
  static constexpr const char* name() noexcept { return "sqlguard::PgParam"; }
  static constexpr bool has_null() noexcept { return true; }
  static bool is_null(const sqlguard::PgParam& p) { return p.null; }
  static sqlguard::PgParam null() { return {}; }
  static void from_string(const char s[], sqlguard::PgParam& p) { p = {false, s}; }
  static std::string to_string(const sqlguard::PgParam& p) { return p.text; }
};
}  // namespace pqxx

namespace sqlguard {
namespace {

class PgDialect final : public Dialect {
 public:
  // Behind a transaction pooler (`pooler`) nothing may stay in a server
  // session: no LISTEN, no session advisory lock (waiters poll), no session
  // SET (watchdog statements are bounded client-side only).
  explicit PgDialect(bool pooler)
      : Dialect("postgresql", '"',
                {&detail::one_statement_takeover(), pooler ? &detail::polling() : &detail::notify_queue_head(),
                 &detail::transaction_lock_migrations(), &detail::renew_returning(),
                 &detail::batch_one_statement()}),
        pooler_(pooler) {}
  void bound_session_statements(Connection& c, std::chrono::milliseconds bound) const override {
    if (!pooler_) detail::run(c, detail::Sql::session_statement_timeout, {std::to_string(bound.count())});
  }
  bool release_skips_commit_flush() const noexcept override { return true; }
  // A data-modifying WITH: guarded_apply_many (sql/postgresql/strategies.sql).
  bool guards_many_keys_in_one_statement() const noexcept override { return true; }
  // Quoted identifiers are case-sensitive, and sqlguard quotes every one.
  bool same_identifier(std::string_view a, std::string_view b) const override { return a == b; }
  // SET cannot take parameters; set_config(..., true) is SET LOCAL with a
  // bound value. 0 would mean "wait forever", so callers pass >= 1 ms.
  void set_local_lock_timeout(Connection& c, std::chrono::milliseconds t) const override {
    detail::run(c, detail::Sql::lock_timeout_local, {std::to_string(t.count()) + "ms"});
  }

 private:
  bool pooler_;
};
const PgDialect kDialect(false);
const PgDialect kPoolerDialect(true);

using detail::number_placeholders;

class Receiver final : public pqxx::notification_receiver {
 public:
  Receiver(pqxx::connection_base& c, const std::string& ch) : pqxx::notification_receiver(c, ch) {}
  void operator()(const std::string& payload, int) override {
    fired = true;
    // Bounded: past 64, one "" stands for "woken, payloads unknown".
    if (payloads.size() < 64) payloads.push_back(payload);
    else payloads.assign(1, std::string());
  }
  bool fired = false;
  std::vector<std::string> payloads;
};

// A failed connect, classified; PgConnection::connect() adds the masked URI
// and scrubs the credentials before it becomes a sqlguard::Error.
struct ConnectFailure : std::runtime_error {
  ConnectFailure(ErrorCode c, std::string state, const std::string& msg)
      : std::runtime_error(msg), code(c), sqlstate(std::move(state)) {}
  ErrorCode code;
  std::string sqlstate;
};

// The SQLSTATE in a verbose libpq message ("FATAL:  28P01: password ..."):
// the last one, as libpq reports the last host it tried last.
std::string sqlstate_of(const std::string& msg) {
  std::string found;
  for (std::size_t i = msg.find(":  "); i != std::string::npos; i = msg.find(":  ", i + 1)) {
    std::size_t p = i + 3;
    if (p + 6 > msg.size() || msg[p + 5] != ':') continue;
    bool ok = true;
    for (std::size_t k = 0; k < 5; ++k)
      ok = ok && ((msg[p + k] >= '0' && msg[p + k] <= '9') || (msg[p + k] >= 'A' && msg[p + k] <= 'Z'));
    if (ok) found = msg.substr(p, 5);
  }
  return found;
}

// One line: drops the SQLSTATE that verbose mode inserts (it goes to
// native_code) and the LOCATION lines.
std::string connect_message(std::string msg, const std::string& state) {
  if (!state.empty()) {
    std::string tag = ":  " + state + ": ";
    for (auto p = msg.find(tag); p != std::string::npos; p = msg.find(tag, p)) msg.replace(p, tag.size(), ":  ");
  }
  std::string out;
  std::size_t start = 0;
  while (start < msg.size()) {
    auto nl = msg.find('\n', start);
    std::string line = msg.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    start = nl == std::string::npos ? msg.size() : nl + 1;
    auto b = line.find_first_not_of(" \t");
    if (b == std::string::npos || line.compare(b, 9, "LOCATION:") == 0) continue;
    out += (out.empty() ? "" : "; ") + line.substr(b);
  }
  return out;
}

// libpq's non-blocking connect under a deadline of the conninfo's
// connect_timeout (whole seconds), with verbose errors for the SQLSTATE.
PGconn* connect_libpq(const std::string& conninfo) {
  long timeout_s = 10;
  char* err = nullptr;
  if (PQconninfoOption* opts = PQconninfoParse(conninfo.c_str(), &err)) {
    for (auto* o = opts; o->keyword; ++o)
      if (std::string_view(o->keyword) == "connect_timeout" && o->val) timeout_s = std::max(1L, std::atol(o->val));
    PQconninfoFree(opts);
  } else {
    std::string m = err ? err : "cannot parse the connection parameters";
    PQfreemem(err);
    throw ConnectFailure(ErrorCode::kInvalidArgument, "", m);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  PGconn* c = PQconnectStart(conninfo.c_str());
  if (!c) throw std::bad_alloc();
  if (PQstatus(c) == CONNECTION_BAD && PQsocket(c) < 0 && !PQconnectionNeedsPassword(c)) {
    // Refused before any I/O: libpq's own check of the parameters (a value
    // it does not accept). The factory refuses the enumerated ones first.
    std::string m = PQerrorMessage(c);
    PQfinish(c);
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    if (m.rfind("invalid ", 0) == 0 || m.find(" value") != std::string::npos)
      throw ConnectFailure(ErrorCode::kInvalidArgument, "", m);
    throw ConnectFailure(ErrorCode::kConnectionLost, "08001", m);
  }
  PQsetErrorVerbosity(c, PQERRORS_VERBOSE);
  PostgresPollingStatusType st = PGRES_POLLING_WRITING;
  bool timed_out = false;
  while (PQstatus(c) != CONNECTION_BAD && st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED) {
    const int fd = PQsocket(c);
    if (fd < 0) break;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fd, static_cast<short>(st == PGRES_POLLING_READING ? POLLIN : POLLOUT), 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 60'000)));
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0) continue;  // the deadline check above decides
    st = PQconnectPoll(c);
  }
  if (!timed_out && st == PGRES_POLLING_OK && PQstatus(c) == CONNECTION_OK) return c;
  std::string msg = PQerrorMessage(c);
  const bool needs_password = PQconnectionNeedsPassword(c);
  PQfinish(c);
  if (timed_out)
    throw ConnectFailure(ErrorCode::kConnectionLost, "08001",
                         "no answer within connect_timeout (" + std::to_string(timeout_s) + " s)");
  std::string state = sqlstate_of(msg);
  ErrorCode code = ErrorCode::kConnectionLost;  // the server never answered: unreachable, refused, no such host
  if (needs_password) code = ErrorCode::kUnauthenticated;
  else if (!state.empty()) code = pg::classify_state(state);
  if (code == ErrorCode::kInternal) code = ErrorCode::kConnectionLost;
  // No SQLSTATE from a server: the standard ones for the client's view.
  if (state.empty()) state = needs_password ? "28000" : "08001";
  throw ConnectFailure(code, state, connect_message(msg, state));
}

// libpqxx 6.4's hook for how a connection is opened (pqxx::connect_direct
// would call the blocking PQconnectdb, whose errors carry no SQLSTATE).
class SgConnectPolicy final : public pqxx::connectionpolicy {
 public:
  explicit SgConnectPolicy(const std::string& opts) : pqxx::connectionpolicy(opts) {}
  handle do_startconnect(handle orig) override { return orig ? orig : connect_libpq(options()); }
};
using PqConnection = pqxx::basic_connection_base<SgConnectPolicy>;

class PgConnection final : public Connection {
 public:
  PgConnection(std::string conninfo, detail::ParsedUri uri, std::string description, const ConnectOptions& o,
               detail::PgPooler declared)
      : connstr_(std::move(conninfo)), uri_(std::move(uri)), description_(std::move(description)),
        io_timeout_(o.io_timeout),
        prepared_(declared == detail::PgPooler::kTransaction ? 0 : o.statement_cache_size),
        name_prefix_(statement_name_prefix()),
        declared_(declared),
        refuse_undeclared_(o.refuse_undeclared_pooler),
        pooler_(declared == detail::PgPooler::kTransaction) {
    const bool pooler = pooler_;
    caps_.row_locks = caps_.nowait = caps_.skip_locked = caps_.shared_row_locks = true;
    caps_.transactional_ddl = true;
    // Behind a transaction pooler a LISTEN stays on a server session this
    // client no longer has: waiters poll with backoff instead.
    caps_.listen_notify = caps_.wakeups = !pooler;
    caps_.transaction_pooler = pooler;
    connect();
    // interrupt_wait()'s signal (none: waits run to their timeout).
    if (!pooler) wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  }
  ~PgConnection() override {
    receivers_.clear();
    tx_.reset();
    if (wake_fd_ >= 0) ::close(wake_fd_);
  }

  void interrupt_wait() noexcept override {
    if (wake_fd_ < 0) return;
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(wake_fd_, &one, sizeof one);
  }

  std::size_t cached_statements() const noexcept override { return prepared_.size(); }
  std::size_t statement_cache_capacity() const noexcept override { return prepared_.capacity(); }

  const Capabilities& capabilities() const noexcept override { return caps_; }
  const Dialect& dialect() const noexcept override { return pooler_ ? kPoolerDialect : kDialect; }
  const std::string& description() const noexcept override { return description_; }

  Result do_execute(std::string_view sql, const Params& params, bool cache) override {
    if (!tx_ && (!conn_ || !conn_->is_open())) reconnect();
    const bool autocommit = !tx_;
    if (autocommit) require_live_session(sql);
    try {
      if (!tx_) deallocate_evicted();
      std::vector<PgParam> pp;
      pp.reserve(params.size());
      for (const auto& v : params) pp.push_back(to_param(v));
      auto dyn = pqxx::prepare::make_dynamic_params(pp);
      pqxx::result r;
      auto deadline = arm();
      if (!cache || prepared_.capacity() == 0) {
        // The unnamed statement: parsed, run and gone; nothing stays on the server.
        const std::string text = number_placeholders(sql);
        if (tx_) {
          r = tx_->exec_params(text, dyn);
        } else {
          pqxx::nontransaction nt(*conn_);
          r = nt.exec_params(text, dyn);
        }
      } else {
        const std::string& name = prepared(sql);
        if (tx_) {
          r = tx_->exec_prepared(name, dyn);
        } else {
          pqxx::nontransaction nt(*conn_);
          r = nt.exec_prepared(name, dyn);
        }
      }
      return convert(r);
    } catch (...) {
      rethrow(sql, false, autocommit);
    }
  }

  void execute_script(std::string_view sql) override {
    if (!tx_ && (!conn_ || !conn_->is_open())) reconnect();
    const bool autocommit = !tx_;
    if (autocommit) require_live_session(sql);
    try {
      auto deadline = arm();
      if (tx_) {
        tx_->exec(std::string(sql));
      } else {
        pqxx::nontransaction nt(*conn_);
        nt.exec(std::string(sql));
      }
    } catch (...) {
      rethrow(sql.substr(0, 200), false, autocommit);
    }
  }

  void do_begin(Isolation iso) override {
    if (tx_) throw Error(ErrorCode::kInvalidArgument, "a transaction is already open on this connection", "postgresql");
    if (!conn_ || !conn_->is_open()) reconnect();
    try {
      auto deadline = arm();
      switch (iso) {
        case Isolation::kDefault:
        case Isolation::kReadCommitted:
          tx_ = std::make_unique<pqxx::transaction<pqxx::read_committed>>(*conn_);
          break;
        case Isolation::kRepeatableRead:
          tx_ = std::make_unique<pqxx::transaction<pqxx::repeatable_read>>(*conn_);
          break;
        case Isolation::kSerializable:
          tx_ = std::make_unique<pqxx::transaction<pqxx::serializable>>(*conn_);
          break;
      }
    } catch (...) {
      tx_.reset();
      rethrow("BEGIN", false);
    }
  }
  void do_commit() override {
    if (!tx_) throw Error(ErrorCode::kInvalidArgument, "commit() without an open transaction", "postgresql");
    try {
      auto deadline = arm();
      tx_->commit();
      tx_.reset();
    } catch (...) {
      tx_.reset();
      rethrow("COMMIT", true);
    }
    deallocate_evicted();
  }
  void do_rollback() override {
    if (!tx_) return;
    auto tx = std::move(tx_);
    try {
      auto deadline = arm();
      tx->abort();
    } catch (...) {
      tx.reset();
      rethrow("ROLLBACK", false);
    }
    tx.reset();
    deallocate_evicted();
  }
  bool in_transaction() const noexcept override { return tx_ != nullptr; }

  void reconnect() override {
    tx_.reset();
    receivers_.clear();
    prepared_.clear();  // the session and its prepared statements are gone
    evicted_.clear();
    conn_.reset();
    connect();
  }
  std::int64_t session_id() override {
    if (!conn_ || !conn_->is_open()) reconnect();
    return conn_->backendpid();
  }

  pqxx::transaction_base* tx() noexcept { return tx_.get(); }
  pqxx::connection_base& conn() {
    if (!conn_ || !conn_->is_open()) reconnect();
    return *conn_;
  }

  // Up to `timeout` for the session's socket to have something to read (a
  // notification) or for interrupt_wait(); then whatever arrived goes to the
  // receivers. (pqxx's await_notification() waits on the socket alone.)
  void await_wakeup(pqxx::connection_base& c, std::chrono::milliseconds timeout) {
    pollfd fds[2] = {{c.sock(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    const int ready = ::poll(fds, wake_fd_ >= 0 ? 2 : 1, static_cast<int>(std::min<std::int64_t>(timeout.count(), std::numeric_limits<int>::max())));
    if (ready > 0 && wake_fd_ >= 0 && (fds[1].revents & POLLIN)) {
      std::uint64_t n;
      [[maybe_unused]] const auto r = ::read(wake_fd_, &n, sizeof n);  // consumed: the next wait blocks again
    }
    c.get_notifs();
  }

  void unlisten(const std::string& channel) override {
    if (tx_) return;  // pqxx issues UNLISTEN outside transactions only; it goes with the session
    try {
      receivers_.erase(channel);
    } catch (...) {
      rethrow("UNLISTEN", false);
    }
  }

  std::vector<std::string> wait_for_any_notify(const std::vector<std::string>& channels,
                                               std::chrono::milliseconds timeout) override {
    std::vector<std::string> fired;
    for (auto& w : wait_for_any_wakeup(channels, timeout)) fired.push_back(std::move(w.channel));
    return fired;
  }

  std::vector<Wakeup> wait_for_any_wakeup(const std::vector<std::string>& channels,
                                          std::chrono::milliseconds timeout) override {
    if (pooler_) dialect().not_supported("LISTEN behind a transaction pooler (?pooler=transaction)");
    if (tx_) throw Error(ErrorCode::kInvalidArgument, "wait_for_any_notify() inside a transaction", "postgresql");
    try {
      auto& c = conn();
      const std::set<std::string> want(channels.begin(), channels.end());
      for (auto it = receivers_.begin(); it != receivers_.end();)
        it = want.count(it->first) ? std::next(it) : receivers_.erase(it);  // UNLISTEN
      for (const auto& ch : want)
        if (!receivers_.count(ch)) receivers_.emplace(ch, std::make_unique<Receiver>(c, ch));
      auto collect = [&] {
        std::vector<Wakeup> fired;
        for (auto& [ch, r] : receivers_)
          if (r->fired) {
            r->fired = false;
            fired.push_back(Wakeup{ch, std::exchange(r->payloads, {})});
          }
        return fired;
      };
      c.get_notifs();
      auto fired = collect();
      if (fired.empty() && timeout.count() > 0) {
        await_wakeup(c, timeout);
        fired = collect();
      }
      return fired;
    } catch (...) {
      rethrow("LISTEN", false);
    }
  }

  bool wait_for_notify(const std::string& channel, std::chrono::milliseconds timeout) override {
    return !wait_for_notify_payloads(channel, timeout).empty();
  }

  std::vector<std::string> wait_for_notify_payloads(const std::string& channel,
                                                    std::chrono::milliseconds timeout) override {
    if (pooler_) dialect().not_supported("LISTEN behind a transaction pooler (?pooler=transaction)");
    if (tx_) throw Error(ErrorCode::kInvalidArgument, "wait_for_notify() inside a transaction", "postgresql");
    try {
      auto& c = conn();
      auto it = receivers_.find(channel);
      if (it == receivers_.end()) it = receivers_.emplace(channel, std::make_unique<Receiver>(c, channel)).first;
      Receiver& r = *it->second;
      c.get_notifs();
      if (!r.fired && timeout.count() > 0) await_wakeup(c, timeout);
      if (!std::exchange(r.fired, false)) return {};
      auto payloads = std::exchange(r.payloads, {});
      if (payloads.empty()) payloads.emplace_back();
      return payloads;
    } catch (...) {
      rethrow("LISTEN", false);
    }
  }

 private:
  void connect() {
    try {
      conn_ = std::make_unique<PqConnection>(connstr_);
      // libpqxx would otherwise reconnect by itself inside a call (and send
      // the statement again on the new session: a second write), on a session
      // that skipped session_setup and the pre-send check. sqlguard
      // reconnects itself (reconnect()). Deprecated in 6.4, still honoured.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
      conn_->inhibit_reactivation(true);
#pragma GCC diagnostic pop
    } catch (const ConnectFailure& f) {
      conn_.reset();
      throw Error(f.code, "cannot connect to " + description_ + ": " + detail::scrub_credentials(f.what(), uri_),
                  "postgresql", f.sqlstate);
    } catch (const std::exception& e) {
      conn_.reset();
      throw Error(ErrorCode::kConnectionLost, "cannot connect to " + description_ + ": " + clean(e.what()), "postgresql",
                  "08001");
    }
    if (!pooler_) setup_session();
  }

  // sql/postgresql/maintenance.sql session_setup: the server session's pid,
  // and READ COMMITTED as the session default when that session is ours. A
  // pooler in the path answers with another pid than the one libpq got.
  void setup_session() {
    const std::string& sql = kDialect.catalog().text(detail::Sql::session_setup);
    std::int64_t backend = 0;
    try {
      auto deadline = arm();
      pqxx::nontransaction nt(*conn_);
      // Behind a declared session pooler the pids differ but the server
      // session is this client's until it disconnects: set it there too.
      std::vector<PgParam> pp{to_param(Value(static_cast<std::int64_t>(conn_->backendpid()))),
                              to_param(Value(std::int64_t{declared_ == detail::PgPooler::kSession ? 1 : 0}))};
      pqxx::result r = nt.exec_params(number_placeholders(sql), pqxx::prepare::make_dynamic_params(pp));
      static constexpr auto kBackendPid = detail::column(detail::Sql::session_setup, "backend_pid");
      backend = r.at(0).at(static_cast<pqxx::row::size_type>(kBackendPid.index)).as<std::int64_t>();
    } catch (...) {
      try {
        rethrow(sql, false);
      } catch (const Error& e) {
        conn_.reset();
        throw e.with_context("connecting to " + description_);
      }
    }
    if (backend == conn_->backendpid() || declared_ == detail::PgPooler::kSession || !refuse_undeclared_) return;
    conn_.reset();
    throw Error(ErrorCode::kInvalidArgument,
                "a connection pooler is between sqlguard and " + description_ + " (the server session's pid " +
                    std::to_string(backend) + " is not the pid " + "the connection got at connect): add "
                    "?pooler=transaction to the URI behind a transaction pooler (PgBouncer pool_mode = transaction), "
                    "or ?pooler=session behind a session pooler",
                "postgresql");
  }

  // Before an autocommit statement leaves: a session the server already
  // ended while this connection was idle (pg_terminate_backend, a restart,
  // a dropped path) has left its FATAL message or EOF on the socket. Seen
  // here, the statement was never sent: connection_lost, nothing committed,
  // retryable. Past this point a lost answer is commit_in_doubt (rethrow()).
  void require_live_session(std::string_view sql) {
    try {
      // Whatever is pending is read: notifications (for the receivers), the
      // FATAL message of a terminated session, then its end of file. A few
      // rounds: the message and the end may arrive apart.
      for (int round = 0; round < 4; ++round) {
        const int fd = conn_->sock();
        if (fd < 0) break;
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 0) <= 0) return;  // nothing (more) pending: the usual case
        conn_->get_notifs();
        if (!conn_->is_open()) break;
      }
      if (conn_->is_open()) return;
    } catch (const std::exception& e) {
      receivers_.clear();
      throw Error(ErrorCode::kConnectionLost,
                  "connection lost before the statement was sent (nothing was committed): " + clean(e.what()),
                  "postgresql", "08006", std::string(sql));
    }
    throw Error(ErrorCode::kConnectionLost, "connection lost before the statement was sent (nothing was committed)",
                "postgresql", "08006", std::string(sql));
  }

  // Unique per connection object: behind a pooler nobody declared, a name
  // this connection prepared on one server session can never run another
  // client's statement of the same name on another session; the server
  // answers 26000 instead, which rethrow() turns into the pooler error.
  static std::string statement_name_prefix() {
    static std::atomic<std::uint64_t> seq{0};
    std::random_device rd;
    std::uint64_t r = (static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^ (++seq * 0x9E3779B97F4A7C15ULL);
    char buf[32];
    std::snprintf(buf, sizeof buf, "sg%016llx_", static_cast<unsigned long long>(r));
    return buf;
  }

  // A statement evicted from the cache is deallocated at once outside a
  // transaction; inside one, after it ends (an aborted transaction would
  // refuse the DEALLOCATE, and its statements stay valid until then).
  void deallocate_evicted() noexcept {
    while (!evicted_.empty() && conn_ && conn_->is_open()) {
      std::string name = std::move(evicted_.back());
      evicted_.pop_back();
      try {
        conn_->unprepare(name);
      } catch (const std::exception& e) {
        // The session is probably gone, and its statements with it.
        log(LogLevel::kDebug, "DEALLOCATE of an evicted statement failed: " + clean(e.what()));
      }
    }
  }

  const std::string& prepared(std::string_view sql) {
    if (const std::string* name = prepared_.find(sql)) return *name;
    std::string name = name_prefix_ + std::to_string(++counter_);
    conn_->prepare(name, number_placeholders(sql));
    return prepared_.insert(sql, std::move(name), [&](const std::string&, std::string& old) {
      evicted_.push_back(std::move(old));
      if (!tx_) deallocate_evicted();
    });
  }

  static PgParam to_param(const Value& v) {
    if (v.is_null()) return {};
    if (v.is_blob()) {
      static const char* hex = "0123456789abcdef";
      std::string b = v.as_string();
      std::string out = "\\x";
      out.reserve(2 + b.size() * 2);
      for (unsigned char c : b) {
        out += hex[c >> 4];
        out += hex[c & 15];
      }
      return {false, std::move(out)};
    }
    if (v.is_double()) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", v.as_double());
      return {false, buf};
    }
    return {false, v.as_string()};
  }

  static Result convert(const pqxx::result& r) {
    Result out;
    out.affected = static_cast<std::int64_t>(r.affected_rows());
    const auto ncol = r.columns();
    std::vector<pqxx::oid> types(ncol);
    for (pqxx::row::size_type c = 0; c < ncol; ++c) types[c] = r.column_type(c);
    out.rows.reserve(r.size());
    for (const auto& row : r) {
      sqlguard::Row o;
      o.cells.reserve(ncol);
      for (pqxx::row::size_type c = 0; c < ncol; ++c) {
        const auto& f = row[c];
        if (f.is_null()) {
          o.cells.emplace_back();
          continue;
        }
        switch (types[c]) {
          case 20: case 21: case 23: case 26:  // int8 int2 int4 oid
            o.cells.emplace_back(f.as<std::int64_t>());
            break;
          case 16:  // bool
            o.cells.emplace_back(static_cast<std::int64_t>(f.c_str()[0] == 't'));
            break;
          case 700: case 701:  // float4 float8
            o.cells.emplace_back(f.as<double>());
            break;
          case 17: {  // bytea
            pqxx::binarystring b(f);
            o.cells.push_back(Value::blob(b.str()));
            break;
          }
          default:
            o.cells.emplace_back(std::string(f.c_str(), f.size()));
        }
      }
      out.rows.push_back(std::move(o));
    }
    return out;
  }

  // Arms the client-side I/O deadline (ConnectOptions::io_timeout) around
  // one driver call; a call still blocked when it passes has its socket
  // shut down, and rethrow() reports why.
  detail::IoDeadline::Guard arm() {
    deadline_.disarm();
    if (io_timeout_ && conn_) deadline_.arm(conn_->sock(), *io_timeout_);
    return {deadline_};
  }

  // `committing`: the failure is COMMIT's. `autocommit`: a statement outside
  // a transaction, which commits itself: once sent, a lost answer leaves its
  // outcome unknown too (require_live_session() caught the lost sessions
  // before sending).
  [[noreturn]] void rethrow(std::string_view sql, bool committing, bool autocommit = false) {
    std::string stmt(sql);
    const bool deadline_fired = deadline_.take_fired();
    // SQLSTATEs of client-detected failures: 08006 connection_failure,
    // 08007 transaction_resolution_unknown.
    auto lost = [&](const std::string& msg) -> Error {
      tx_.reset();
      if (deadline_fired) {
        const std::string why = "no answer within io_timeout (" + std::to_string(io_timeout_->count()) +
                                " ms); the connection was dropped";
        if (committing)
          return Error(ErrorCode::kCommitInDoubt, why + " during COMMIT; the transaction may or may not have committed",
                       "postgresql", "08007", stmt);
        if (autocommit)
          return Error(ErrorCode::kCommitInDoubt, why + "; the statement was sent and may or may not have committed",
                       "postgresql", "08007", stmt);
        return Error(ErrorCode::kTimeout, why, "postgresql", "08006", stmt);
      }
      if (committing)
        return Error(ErrorCode::kCommitInDoubt,
                     "connection lost during COMMIT; the transaction may or may not have committed: " + msg,
                     "postgresql", "08007", stmt);
      if (autocommit)
        return Error(ErrorCode::kCommitInDoubt,
                     "connection lost after the statement was sent; it may or may not have committed: " + msg,
                     "postgresql", "08007", stmt);
      return Error(ErrorCode::kConnectionLost, "connection lost: " + msg, "postgresql", "08006", stmt);
    };
    try {
      throw;
    } catch (const Error&) {
      throw;
    } catch (const ConnectFailure& f) {  // libpqxx reconnecting on its own
      tx_.reset();
      throw Error(f.code, "cannot connect to " + description_ + ": " + detail::scrub_credentials(f.what(), uri_),
                  "postgresql", f.sqlstate, stmt);
    } catch (const pqxx::in_doubt_error& e) {
      throw Error(ErrorCode::kCommitInDoubt, clean(e.what()), "postgresql", "08007", stmt);
    } catch (const pqxx::statement_completion_unknown& e) {
      throw Error(ErrorCode::kCommitInDoubt, clean(e.what()), "postgresql", "40003", stmt);
    } catch (const pqxx::serialization_failure& e) {
      throw Error(ErrorCode::kConflict, clean(e.what()), "postgresql", "40001", stmt);
    } catch (const pqxx::deadlock_detected& e) {
      throw Error(ErrorCode::kConflict, clean(e.what()), "postgresql", "40P01", stmt);
    } catch (const pqxx::transaction_rollback& e) {
      std::string state = sqlstate_of(e.what());
      throw Error(ErrorCode::kConflict, clean(e.what()), "postgresql", state.empty() ? "40000" : state, stmt);
    } catch (const pqxx::broken_connection& e) {
      throw lost(clean(e.what()));
    } catch (const pqxx::sql_error& e) {
      // libpqxx 6.4 leaves sqlstate() empty for its subclasses
      // (insufficient_privilege, undefined_table...); the verbose message
      // carries it.
      std::string state = e.sqlstate().empty() ? sqlstate_of(e.what()) : e.sqlstate();
      // A prepared statement of this connection missing from the server
      // session, or a name already taken there: a transaction pooler moved
      // the client to another session. Nothing ran (the server refused the
      // Bind or the Parse).
      if (!pooler_ && (state == "26000" || state == "42P05"))
        throw Error(ErrorCode::kInvalidArgument,
                    "the server session changed under this connection (" + clean(e.what()) +
                        "): a transaction pooler is between sqlguard and " + description_ +
                        "; add ?pooler=transaction to the URI (PgBouncer pool_mode = transaction)",
                    "postgresql", state, stmt);
      ErrorCode code = pg::classify_state(state);
      // A standby refusing a write (after a failover) answered: nothing ran,
      // the session is open; retry on another connection, never in doubt.
      if (state == "25006") throw Error(ErrorCode::kConnectionLost, clean(e.what()), "postgresql", state, stmt);
      if (code == ErrorCode::kConnectionLost) throw lost(clean(e.what()));
      std::string msg = clean(e.what());
      if (code == ErrorCode::kSchemaMismatch) msg = detail::with_migrate_hint(std::move(msg), stmt);
      if (code == ErrorCode::kPermissionDenied)  // the user is not a secret (the password is)
        msg += uri_.user.empty() ? " (connected as the default user to " + description_ + ")"
                                 : " (connected as user \"" + uri_.user + "\" to " + description_ + ")";
      throw Error(code, msg, "postgresql", state, stmt);
    } catch (const std::exception& e) {
      if (!conn_ || !conn_->is_open()) throw lost(clean(e.what()));
      throw Error(ErrorCode::kInternal, clean(e.what()), "postgresql", "", stmt);
    }
  }

  // The first line of a driver message (no LINE/caret context, no
  // LOCATION), without the SQLSTATE tag verbose mode inserts (it travels in
  // native_code), credentials scrubbed.
  std::string clean(const char* what) const {
    std::string m = detail::scrub_credentials(what, uri_);
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    auto nl = m.find('\n');
    if (nl != std::string::npos) m = m.substr(0, nl);
    return connect_message(m, sqlstate_of(m));
  }

  std::string connstr_;
  detail::ParsedUri uri_;  // credentials to scrub from driver messages
  std::string description_;
  Capabilities caps_;
  std::optional<std::chrono::milliseconds> io_timeout_;
  detail::IoDeadline deadline_;  // of the call in progress (see arm())
  std::unique_ptr<PqConnection> conn_;
  std::unique_ptr<pqxx::transaction_base> tx_;
  detail::StatementCache<std::string> prepared_;  // SQL -> prepared statement name
  std::vector<std::string> evicted_;              // names still to DEALLOCATE
  std::map<std::string, std::unique_ptr<Receiver>> receivers_;
  int wake_fd_ = -1;  // eventfd of interrupt_wait()
  int counter_ = 0;
  std::string name_prefix_;  // of this connection's prepared statements (statement_name_prefix())
  detail::PgPooler declared_;
  bool refuse_undeclared_ = true;
  bool pooler_ = false;  // ?pooler=transaction: no session state (see the constructor)
};

PgConnection& as_pg(Connection& conn, const char* fn) {
  auto* c = dynamic_cast<PgConnection*>(&conn);
  if (!c)
    throw Error(ErrorCode::kInvalidArgument,
                std::string("postgresql::") + fn + "() needs a PostgreSQL connection, got " + std::string(conn.dialect_name()));
  return *c;
}

}  // namespace

namespace detail {
std::unique_ptr<Connection> make_pg_connection(std::string conninfo, ParsedUri uri, std::string description,
                                               const ConnectOptions& options, PgPooler pooler) {
  return std::make_unique<PgConnection>(std::move(conninfo), std::move(uri), std::move(description), options,
                                        pooler);
}
}  // namespace detail

namespace postgresql {
pqxx::transaction_base& native_transaction(Connection& conn) {
  auto& pg = as_pg(conn, "native_transaction");
  if (!pg.tx())
    throw Error(ErrorCode::kInvalidArgument, "postgresql::native_transaction(): no sqlguard transaction is open",
                "postgresql");
  return *pg.tx();
}
pqxx::connection_base& native_connection(Connection& conn) { return as_pg(conn, "native_connection").conn(); }
std::string numbered_placeholders(std::string_view sql) { return detail::number_placeholders(sql); }
}  // namespace postgresql

}  // namespace sqlguard
