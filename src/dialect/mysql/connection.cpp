// MySQL / MariaDB dialect over mysqlcppconn 1.1 (JDBC-like API).
//
// Session setup on every (re)connect: time_zone '+00:00' (so no DST or
// session zone can shift a timestamp), strict sql_mode (oversize values are
// errors, never silently truncated), READ COMMITTED (fewer gap locks, hence
// fewer deadlocks on hot keys), CLIENT_FOUND_ROWS (rows affected = rows
// matched, as on PostgreSQL and SQLite).
#include <mysql_driver.h>
#include <mysql_error.h>
#include <cppconn/connection.h>
#include <cppconn/datatype.h>
#include <cppconn/exception.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <cppconn/resultset_metadata.h>
#include <cppconn/statement.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "core/uri.h"
#include "sqlguard/backoff.h"
#include "core/sql_cache.h"
#include "dialect/dialect.h"
#include "core/catalog.h"
#include "core/metric_hooks.h"
#include "core/migration_lock.h"
#include "core/schema_hint.h"
#include "dialect/mysql/connection.h"
#include "plans/plans.h"
#include "dialect/mysql/errors.h"
#include "sqlguard/mysql.h"

namespace sqlguard {
namespace {

class MysqlDialect final : public Dialect {
 public:
  // The same catalog on a Galera node; only how an acquire is decided differs
  // (no INSERT ... RETURNING: certification can leave its answer unsent).
  explicit MysqlDialect(const detail::AcquirePlan& acquire, const detail::BatchPlan* batch)
      : Dialect("mysql", '`',
                {&acquire, &detail::wakeup_lock(), &detail::lock_row_migrations(),
                 &detail::renew_lock_then_update(), batch}) {}
  // Row-lock scopes bound their wait inside the statement (SET STATEMENT
  // innodb_lock_wait_timeout = N FOR SELECT ..., sql/mysql/strategies.sql).
};
const MysqlDialect kDialect(detail::read_then_upsert_returning(), &detail::batch_read_then_upsert());
const MysqlDialect kGaleraDialect(detail::read_then_update(/*returning=*/false), nullptr);

// Prepared statements cached by all MySQL/MariaDB connections of this
// process (connection.h: the process-wide count stays bounded).
std::atomic<long> g_cached_statements{0};
constexpr long kProcessStatementBudget = 8192;
// Statements with more placeholders than this are prepared for each
// execution, not cached: Connector/C++ 1.1 and libmariadb keep bind buffers
// of about 220 bytes per placeholder for as long as a statement stays
// prepared (a 1,000-lease renewal statement, 4,096 placeholders: about
// 900 KB, and the lock client's renewal connection would keep one per
// padded batch size). The batched statements that reach this size (lock
// client renewals and polls) run a few times per second, where a prepare
// costs far less than keeping megabytes resident.
constexpr std::size_t kMaxCachedPlaceholders = 256;

class MysqlConnection final : public Connection {
 public:
  MysqlConnection(detail::ParsedUri u, std::string description, const ConnectOptions& opt)
      : uri_(std::move(u)), description_(std::move(description)), opt_(opt), cache_(opt.statement_cache_size) {
    caps_.row_locks = caps_.nowait = caps_.skip_locked = caps_.shared_row_locks = true;
    connect();
  }
  ~MysqlConnection() override {
    drop_cache();
    if (conn_) {
      try {
        conn_->close();
      } catch (...) {
        // Closing a dead connection fails; there is nothing to report.
      }
    }
  }

  const Capabilities& capabilities() const noexcept override { return caps_; }
  const Dialect& dialect() const noexcept override { return galera_ ? kGaleraDialect : kDialect; }
  const std::string& description() const noexcept override { return description_; }
  std::size_t cached_statements() const noexcept override { return cache_.size(); }
  std::size_t statement_cache_capacity() const noexcept override { return cache_.capacity(); }

  Result do_execute(std::string_view sql, const Params& params, bool cache) override {
    if (!in_tx_ && broken_) reconnect();
    if (!in_tx_) discard_and_restore_autocommit();
    if (session_read_committed_ && mentions_isolation(sql)) session_read_committed_ = false;
    const bool autocommit = !in_tx_;
    if (autocommit) require_live_session(sql);
    refuse_oversize(sql, params);
    bool cached = false;
    try {
      // Uncached: closed on the server (COM_STMT_CLOSE) when `once` goes.
      std::unique_ptr<sql::PreparedStatement> once;
      sql::PreparedStatement* ps = nullptr;
      if (cache && cache_.capacity() > 0 && params.size() <= kMaxCachedPlaceholders) ps = prepare(sql);
      cached = ps != nullptr;
      if (!ps) {
        once.reset(prepare_with_room(sql));
        ps = once.get();
      }
      std::vector<std::unique_ptr<std::istringstream>> blobs;
      for (std::size_t i = 0; i < params.size(); ++i) {
        const Value& v = params[i];
        auto idx = static_cast<unsigned int>(i + 1);
        if (v.is_null()) ps->setNull(idx, sql::DataType::SQLNULL);
        else if (v.is_int()) ps->setInt64(idx, v.as_int());
        else if (v.is_double()) ps->setDouble(idx, v.as_double());
        else if (v.is_blob()) {
          blobs.push_back(std::make_unique<std::istringstream>(v.as_string()));
          ps->setBlob(idx, blobs.back().get());
        } else ps->setString(idx, v.as_string());
      }
      // The server says whether rows came, not the statement's text:
      // executeUpdate() answers mysql_stmt_affected_rows(), which is -1 while
      // a result set is pending (a SELECT, a ... RETURNING; the C API
      // documents it), and then the rows are read. Connector/C++ 1.1 has no
      // getUpdateCount() for prepared statements, so execute()'s bool would
      // lose the count. Affected = matched rows (CLIENT_FOUND_ROWS).
      Result out;
      const int affected = ps->executeUpdate();
      if (affected == -1) {
        std::unique_ptr<sql::ResultSet> rs(ps->getResultSet());
        read_all(*rs, out);
      } else {
        out.affected = affected;
      }
      return out;
    } catch (...) {
      // A statement whose execution failed is not reused: after a value the
      // server refused (a packet over max_allowed_packet) its server-side
      // state kept failing every later execution, even with a 4-byte value.
      if (cached && !broken_ && may_be_poisoned(std::current_exception())) forget_statement(sql);
      rethrow(sql, false, autocommit);
    }
  }

  void execute_script(std::string_view script) override {
    if (!in_tx_ && broken_) reconnect();
    if (!in_tx_) discard_and_restore_autocommit();
    if (session_read_committed_ && mentions_isolation(script)) session_read_committed_ = false;
    // Our migration files separate statements with ';' at end of line.
    std::string s(script);
    std::size_t start = 0;
    while (start < s.size()) {
      auto end = s.find(";\n", start);
      if (end == std::string::npos) end = s.size();
      std::string stmt = s.substr(start, end - start);
      start = end + 2;
      bool blank = std::all_of(stmt.begin(), stmt.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
      std::string no_comments;
      std::istringstream lines(stmt);
      for (std::string line; std::getline(lines, line);) {
        auto first = line.find_first_not_of(" \t");
        if (first != std::string::npos && line.compare(first, 2, "--") == 0) continue;
        no_comments += line + "\n";
      }
      if (blank || no_comments.find_first_not_of(" \t\n;") == std::string::npos) continue;
      run_plain(no_comments);
    }
  }

  void do_begin(Isolation iso) override {
    if (in_tx_) throw Error(ErrorCode::kInvalidArgument, "a transaction is already open on this connection", "mysql");
    if (broken_) reconnect();
    discard_and_restore_autocommit();
    switch (iso) {
      case Isolation::kDefault: break;
      case Isolation::kReadCommitted:
        // The session's own level is READ COMMITTED (session_isolation, at
        // connect) unless a statement sent through this connection may have
        // changed it: then START TRANSACTION alone is that level, and the
        // transaction costs one round trip less.
        if (!session_read_committed_) run_plain(sql_text(Sql::tx_isolation_read_committed));
        break;
      case Isolation::kRepeatableRead: run_plain(sql_text(Sql::tx_isolation_repeatable_read)); break;
      case Isolation::kSerializable: run_plain(sql_text(Sql::tx_isolation_serializable)); break;
    }
    if (galera_) {
      // See tx_galera_autocommit_off in sql/mysql/maintenance.sql.
      autocommit_off_ = true;
      run_plain(sql_text(Sql::tx_galera_autocommit_off));
      run_plain(sql_text(Sql::tx_galera_savepoint));
    } else {
      run_plain(sql_text(Sql::tx_begin));
    }
    in_tx_ = true;
  }
  void do_commit() override {
    if (!in_tx_) throw Error(ErrorCode::kInvalidArgument, "commit() without an open transaction", "mysql");
    in_tx_ = false;
    if (autocommit_off_) confirm_galera_transaction();
    try {
      stmt()->execute(sql_text(Sql::tx_commit));
    } catch (...) {
      try {
        rethrow("COMMIT", true);
      } catch (...) {
        // A COMMIT that failed on a live session: the transaction is rolled
        // back (certification) or, if any of it were left open, rolled back
        // here, so that turning autocommit on (an implicit commit) cannot
        // commit it after all.
        if (autocommit_off_) rollback_unseen_quietly();
        throw;
      }
    }
    restore_autocommit_quietly();
  }
  void do_rollback() override {
    if (!in_tx_) {
      restore_autocommit_quietly();
      return;
    }
    in_tx_ = false;
    if (broken_) return;  // the server rolled back when the session died
    try {
      run_plain(sql_text(Sql::tx_rollback));
    } catch (const Error& e) {
      // Galera reports a brute-force abort it kept for the next statement
      // at the ROLLBACK (1213): the transaction is rolled back either way.
      if (e.code() != ErrorCode::kConflict) throw;
    }
    restore_autocommit_quietly();
  }
  bool in_transaction() const noexcept override { return in_tx_; }

  // A new session: the old one's statements, its session and whatever it had
  // open are dropped first (mark_broken), then connect() as at construction.
  void reconnect() override {
    mark_broken();
    connect();
  }
  std::int64_t session_id() override {
    static constexpr auto kSessionId = detail::column(Sql::session_id, "session_id");
    return detail::cell(detail::run(*this, Sql::session_id).rows.at(0), kSessionId).as_int();
  }

  sql::Connection* handle() {
    if (!in_tx_ && broken_) reconnect();
    if (!in_tx_) discard_and_restore_autocommit();
    return conn_.get();
  }

 private:
  // The socket of this session, found by the client port the server sees
  // (session_client_address) and the server's port: the connector does not
  // expose it. -1 when not found (then no check before sending).
  int find_socket() {
    std::string host;
    {
      std::unique_ptr<sql::ResultSet> rs(stmt()->executeQuery(sql_text(Sql::session_client_address)));
      static constexpr auto kHost = detail::column(Sql::session_client_address, "host");
      if (rs->next()) host = std::string(rs->getString(driver_column(kHost)));
      while (rs->next()) {
      }
    }
    const auto colon = host.rfind(':');
    if (colon == std::string::npos) return -1;
    const int client_port = std::atoi(host.c_str() + colon + 1);
    const int server_port = uri_.port ? uri_.port : 3306;
    auto port_of = [](const sockaddr_storage& a) -> int {
      if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
      if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
      return -1;
    };
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
      const int fd = std::atoi(e.path().filename().c_str());
      struct stat st {};
      if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
      sockaddr_storage local{}, peer{};
      socklen_t ll = sizeof local, pl = sizeof peer;
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0 ||
          ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0)
        continue;
      if (port_of(local) == client_port && port_of(peer) == server_port) return fd;
    }
    return -1;
  }

  // Before an autocommit statement leaves: a session the server ended while
  // this connection was idle (KILL, a restart, a dropped path) has left an
  // error packet or EOF on the socket (the protocol sends nothing unasked).
  // Seen here, the statement was never sent: connection_lost, nothing
  // committed. Past this point a lost answer is commit_in_doubt (rethrow()).
  void require_live_session(std::string_view sql) {
    if (sock_fd_ < 0) return;
    pollfd p{sock_fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return;
    mark_broken();
    throw Error(ErrorCode::kConnectionLost,
                "connection lost before the statement was sent (nothing was committed): the server ended the session",
                "mysql", "2006", std::string(sql));
  }

  // A new session's setup can fail with 1213 on a Galera node (seen in CI:
  // "cannot connect ...: Deadlock found", a chaos run's first connection).
  // Measured on MariaDB 10.11.19: a server thread whose earlier session was
  // brute-force aborted keeps the abort, and the next session the thread
  // cache gives it fails its first SET with 1213 (10 of 30 new sessions on a
  // node after a conflict-heavy run; none with thread_cache_size = 0, which
  // docs/deploying-galera.md recommends). Nothing of the setup ran: tried again
  // with backoff until the connect timeout has passed (at least 3 tries).
  void connect() {
    const auto deadline = std::chrono::steady_clock::now() + opt_.connect_timeout;
    for (int attempt = 1;; ++attempt) {
      try {
        connect_once();
        return;
      } catch (const Error& e) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (e.code() != ErrorCode::kConflict || (attempt >= 3 && left.count() <= 0)) throw;
        log(LogLevel::kDebug, std::string("connecting again after a conflict during the session's setup: ") + e.what());
        std::this_thread::sleep_for(
            std::clamp(Backoff{std::chrono::milliseconds(10), std::chrono::milliseconds(250)}.delay(attempt),
                       std::chrono::milliseconds(1), std::max(left, std::chrono::milliseconds(1))));
      }
    }
  }

  void connect_once() {
    sock_fd_ = -1;
    broken_ = true;
    sql::ConnectOptionsMap o;
    std::string host = uri_.host.empty() ? "127.0.0.1" : uri_.host;
    int port = uri_.port ? uri_.port : 3306;
    o["hostName"] = sql::SQLString("tcp://" + host + ":" + std::to_string(port));
    o["userName"] = sql::SQLString(uri_.user);
    o["password"] = sql::SQLString(uri_.password);
    if (!uri_.path.empty()) o["schema"] = sql::SQLString(uri_.path);
    // Whole seconds; a URI connect_timeout was already folded in (the smaller wins).
    o["OPT_CONNECT_TIMEOUT"] = static_cast<int>(std::max<long long>(1, (opt_.connect_timeout.count() + 999) / 1000));
    if (opt_.io_timeout) {
      int io = static_cast<int>(std::max<long long>(1, (opt_.io_timeout->count() + 999) / 1000));
      o["OPT_READ_TIMEOUT"] = io;
      o["OPT_WRITE_TIMEOUT"] = io;
    }
    o["OPT_RECONNECT"] = false;
    o["CLIENT_FOUND_ROWS"] = true;
    o["OPT_CHARSET_NAME"] = sql::SQLString("utf8mb4");
    try {
      conn_.reset(sql::mysql::get_mysql_driver_instance()->connect(o));
      broken_ = false;
      run_plain(sql_text(Sql::session_time_zone));
      run_plain(sql_text(Sql::session_sql_mode));
      run_plain(sql_text(Sql::session_isolation));
      session_read_committed_ = true;
      {
        std::unique_ptr<sql::ResultSet> rs(stmt()->executeQuery(sql_text(Sql::session_server_version)));
        static constexpr auto kVersion = detail::column(Sql::session_server_version, "version");
        static constexpr auto kMaxPacket = detail::column(Sql::session_server_version, "max_allowed_packet");
        if (rs->next()) {
          caps_.server_version = std::string(rs->getString(driver_column(kVersion)));
          max_packet_ = static_cast<std::int64_t>(rs->getInt64(driver_column(kMaxPacket)));
        }
        while (rs->next()) {
        }
      }
      sock_fd_ = find_socket();
      // MariaDB >= 10.3 has SEQUENCE; MySQL 8 does not.
      caps_.sequences = caps_.server_version.find("MariaDB") != std::string::npos;
      if (caps_.sequences) {
        std::unique_ptr<sql::ResultSet> rs(stmt()->executeQuery(sql_text(Sql::session_galera)));
        static constexpr auto kWsrepOn = detail::column(Sql::session_galera, "wsrep_on");
        galera_ = rs->next() && rs->getInt(driver_column(kWsrepOn)) == 1;
        caps_.unseen_rollbacks = galera_;
        while (rs->next()) {
        }
      }
    } catch (const Error&) {
      // (A setup statement's failure, already an Error: run_plain.)
      mark_broken();
      throw;
    } catch (const sql::SQLException& e) {
      mark_broken();
      ErrorCode code = mysql::classify(e.getErrorCode());
      if (code == ErrorCode::kInternal) code = ErrorCode::kConnectionLost;
      throw Error(code, "cannot connect to " + description_ + ": " + detail::scrub_credentials(e.what(), uri_), "mysql",
                  std::to_string(e.getErrorCode()));
    }
  }

  using Sql = detail::Sql;
  static const std::string& sql_text(Sql id) { return kDialect.catalog().text(id); }
  // The driver's 1-based index of a declared result column.
  static constexpr unsigned int driver_column(detail::Column c) { return static_cast<unsigned int>(c.index + 1); }

  sql::Statement* stmt() {
    if (!stmt_) stmt_.reset(conn_->createStatement());
    return stmt_.get();
  }

  // A Galera transaction (do_begin): before its COMMIT, the savepoint it
  // began with must still be there. Missing (1305), the transaction was
  // rolled back without an error to any statement, and the statements since
  // ran in a new one (autocommit is off): that one is rolled back, nothing
  // this transaction wrote is committed, and it ends as a conflict, as a
  // deadlock would.
  void confirm_galera_transaction() {
    try {
      stmt()->execute(sql_text(Sql::tx_galera_release_savepoint));
      return;
    } catch (const sql::SQLException& e) {
      if (e.getErrorCode() != 1305) {
        try {
          rethrow(sql_text(Sql::tx_galera_release_savepoint), false);
        } catch (...) {
          rollback_unseen_quietly();
          throw;
        }
      }
    } catch (...) {
      rollback_unseen_quietly();
      rethrow(sql_text(Sql::tx_galera_release_savepoint), false);
    }
    rollback_unseen_quietly();
    ++detail::metric::galera_unseen_rollbacks();
    throw Error(ErrorCode::kConflict,
                "the transaction ended before its commit without an error to its statements: rolled back by the "
                "Galera cluster (a conflicting write from another node), and then nothing it wrote is committed, "
                "or ended by a statement of it that commits implicitly (DDL, LOCK TABLES), and then what ran "
                "before that statement is committed; what ran after it was rolled back",
                "mysql", "1305", sql_text(Sql::tx_galera_release_savepoint));
  }
  // Rolls back whatever the session has open and turns autocommit on; a
  // session that refuses is closed (the server rolls back what it had open).
  void rollback_unseen_quietly() noexcept {
    if (broken_) return;
    try {
      stmt()->execute(sql_text(Sql::tx_rollback));
    } catch (const sql::SQLException& e) {
      // 1213: Galera kept a brute-force abort for this statement; rolled back.
      if (e.getErrorCode() != 1213) mark_broken();
    } catch (...) {
      mark_broken();
    }
    restore_autocommit_quietly();
  }
  // After a Galera transaction: statements commit one by one again.
  void restore_autocommit() {
    if (!autocommit_off_ || broken_) return;
    run_plain(sql_text(Sql::tx_galera_autocommit_on));
    autocommit_off_ = false;
  }
  // Before a statement outside a transaction, when autocommit is still off
  // (an error ended the transaction: rethrow() clears in_tx_ on 1213, or its
  // rollback failed): whatever the session may have open is rolled back
  // first, so that turning autocommit on (an implicit commit) commits
  // nothing of it.
  void discard_and_restore_autocommit() {
    if (autocommit_off_ && !broken_) {
      rollback_unseen_quietly();
      if (broken_) reconnect();
    }
    if (heal_trigger_tables_ && !broken_) heal_trigger_tables();
  }

  // After a statement failed on a lock table copy whose triggers did not
  // parse (rethrow): the node's cached copies are closed, outside any
  // transaction (FLUSH commits), before this connection's next statement.
  void heal_trigger_tables() noexcept {
    heal_trigger_tables_ = false;
    try {
      run_plain(sql_text(Sql::galera_heal_trigger_tables));
      log(LogLevel::kInfo, "closed the cached copies of sqlguard_lock and sqlguard_sync_holder on " + description_ +
                               " after a statement found their triggers unparseable (docs/deploying-galera.md)");
    } catch (const std::exception& e) {
      log(LogLevel::kWarning,
          "could not close the cached copies of sqlguard_lock and sqlguard_sync_holder on " + description_ +
              " after a statement found their triggers unparseable: " + e.what() +
              "; statements that open such a copy fail until the server evicts it: grant RELOAD to this user, or "
              "run FLUSH LOCAL TABLES sqlguard_lock, sqlguard_sync_holder on that node (docs/deploying-galera.md)");
    }
  }
  // At the end of a transaction whose outcome is already decided: a failure
  // here must not change it, so the session is dropped instead (the next use
  // reconnects, and the new session commits each statement).
  void restore_autocommit_quietly() noexcept {
    try {
      restore_autocommit();
    } catch (...) {
      mark_broken();
    }
  }
  // The session is gone or not trusted: the next use reconnects (a new
  // session, autocommit on, no statements prepared).
  void mark_broken() noexcept {
    broken_ = true;
    in_tx_ = false;
    autocommit_off_ = false;
    drop_cache();
    stmt_.reset();
    sock_fd_ = -1;
    // Closed now, not at the next use: a session still alive (a read-only
    // or not-ready node's refusal, a failed rollback) would otherwise keep
    // what it had open, and its row locks, while it sits idle.
    if (conn_) {
      try {
        conn_->close();
      } catch (...) {
        // Closing a dead session fails; there is nothing to report.
      }
      conn_.reset();
    }
  }

  void run_plain(const std::string& sql) {
    try {
      // true: a result set came; it is read to the end so the session can
      // take the next statement.
      if (stmt()->execute(sql)) {
        std::unique_ptr<sql::ResultSet> rs(stmt()->getResultSet());
        while (rs->next()) {
        }
      }
    } catch (...) {
      rethrow(sql.substr(0, 200), false);
    }
  }

  // Destroying an evicted statement closes it on the server (COM_STMT_CLOSE).
  static void close_statement(const std::string&, std::unique_ptr<sql::PreparedStatement>& old) noexcept {
    g_cached_statements.fetch_sub(1);
    try {
      old.reset();
    } catch (const std::exception& e) {
      log(LogLevel::kDebug, std::string("closing an evicted prepared statement failed: ") + e.what());
    }
  }

  void forget_statement(std::string_view sql) noexcept { cache_.erase(sql, &close_statement); }

  // Errors after which a prepared statement is not trusted again: those
  // the dialect table does not know (1105 ER_UNKNOWN_ERROR was the oversize
  // value's), packet errors, and anything that is not a server error. The
  // expected outcomes (a duplicate key, a deadlock, a lock wait timeout, a
  // value a column refuses) keep it: they are frequent and leave it clean.
  static bool may_be_poisoned(std::exception_ptr ep) noexcept {
    try {
      std::rethrow_exception(ep);
    } catch (const sql::SQLException& e) {
      const int n = e.getErrorCode();
      return n == 1153 || n == 2020 || mysql::classify(n) == ErrorCode::kInternal;
    } catch (...) {
      return true;
    }
  }

  // Forgets every cached statement (a dead session's are gone with it).
  void drop_cache() noexcept {
    g_cached_statements.fetch_sub(static_cast<long>(cache_.size()));
    cache_.clear();
  }

  // The cached statement for `sql`, prepared on first use; nullptr when the
  // process-wide budget is spent and this connection has nothing of its own
  // to evict (the caller then prepares it for this one execution).
  sql::PreparedStatement* prepare(std::string_view sql) {
    if (auto* cached = cache_.find(sql)) return cached->get();
    // The server's max_prepared_stmt_count is server-wide: every session's
    // cache counts against it. The process keeps at most
    // kProcessStatementBudget cached across its connections.
    while (g_cached_statements.load() >= kProcessStatementBudget)
      if (!cache_.evict_oldest(&close_statement)) return nullptr;
    std::unique_ptr<sql::PreparedStatement> ps(prepare_with_room(sql));
    g_cached_statements.fetch_add(1);
    return cache_.insert(sql, std::move(ps), &close_statement).get();
  }

  // conn_->prepareStatement(), and on 1461 (the server's
  // max_prepared_stmt_count reached by all its clients together) this
  // connection's cached statements are closed to make room, then one retry.
  sql::PreparedStatement* prepare_with_room(std::string_view sql) {
    try {
      return conn_->prepareStatement(std::string(sql));
    } catch (const sql::SQLException& e) {
      if (e.getErrorCode() != 1461 || cache_.size() == 0) throw;
      log(LogLevel::kWarning, "the server's max_prepared_stmt_count is reached (all its clients together); closing "
                              "this connection's " + std::to_string(cache_.size()) + " cached statements and retrying");
      while (cache_.evict_oldest(&close_statement)) {
      }
      return conn_->prepareStatement(std::string(sql));
    }
  }

  // A statement with its values larger than the server's max_allowed_packet
  // would be refused by the server mid-way: refused here, before anything is
  // sent, naming the limit (the connection and the statement stay usable).
  void refuse_oversize(std::string_view sql, const Params& params) const {
    if (max_packet_ <= 0) return;
    // Blobs travel as long data, in chunks of their own: the server takes a
    // value of up to max_allowed_packet bytes that way (its limit is on the
    // value, no header counts), so 16 MiB fits a 16 MiB limit. The other
    // values travel inline with the execute, whose one packet holds them,
    // their length prefixes and its headers.
    std::int64_t total = static_cast<std::int64_t>(sql.size()), largest = 0, largest_blob = 0;
    for (const auto& v : params) {
      const std::int64_t n = (v.is_null() || v.is_int() || v.is_double()) ? 8 : static_cast<std::int64_t>(v.as_string().size());
      if (v.is_blob()) largest_blob = std::max(largest_blob, n);
      else total += n + 9;  // a length prefix per value
      largest = std::max(largest, n);
    }
    if (total + 1024 <= max_packet_ && largest_blob <= max_packet_) return;  // headers
    throw Error(ErrorCode::kInvalidArgument,
                "the statement's values are up to " + std::to_string(std::max(total, largest)) + " bytes (the largest " +
                    std::to_string(largest) + "), more than the server accepts in one packet (max_allowed_packet = " +
                    std::to_string(max_packet_) + " bytes, less 1 KiB of headers): nothing was sent; store less, or "
                    "raise max_allowed_packet on the server",
                "mysql", "1153", std::string(sql));
  }

  static void read_all(sql::ResultSet& rs, Result& out) {
    sql::ResultSetMetaData* md = rs.getMetaData();
    unsigned int ncol = md->getColumnCount();
    std::vector<int> types(ncol);
    for (unsigned int c = 0; c < ncol; ++c) types[c] = md->getColumnType(c + 1);
    while (rs.next()) {
      sqlguard::Row row;
      row.cells.reserve(ncol);
      for (unsigned int c = 1; c <= ncol; ++c) {
        if (rs.isNull(c)) {
          row.cells.emplace_back();
          continue;
        }
        switch (types[c - 1]) {
          case sql::DataType::BIT: case sql::DataType::TINYINT: case sql::DataType::SMALLINT:
          case sql::DataType::MEDIUMINT: case sql::DataType::INTEGER: case sql::DataType::BIGINT:
          case sql::DataType::YEAR:
            row.cells.emplace_back(static_cast<std::int64_t>(rs.getInt64(c)));
            break;
          case sql::DataType::REAL: case sql::DataType::DOUBLE:
            row.cells.emplace_back(static_cast<double>(rs.getDouble(c)));
            break;
          case sql::DataType::BINARY: case sql::DataType::VARBINARY: case sql::DataType::LONGVARBINARY: {
            std::unique_ptr<std::istream> in(rs.getBlob(c));
            std::string bytes((std::istreambuf_iterator<char>(*in)), std::istreambuf_iterator<char>());
            row.cells.push_back(Value::blob(std::move(bytes)));
            break;
          }
          default:
            row.cells.emplace_back(std::string(rs.getString(c)));
        }
      }
      out.rows.push_back(std::move(row));
    }
  }

  // `committing`: the failure is COMMIT's. `autocommit`: a statement outside
  // a transaction, which commits itself: when the session ended after it was
  // sent (CR_SERVER_LOST, a KILL or a shutdown mid-statement — a procedure's
  // earlier statements may have committed), its outcome is unknown. Not so
  // for CR_SERVER_GONE_ERROR (the client could not send it), the refusals
  // of a read-only or not-ready server (1290, 1836, 1047) and MySQL 8's
  // idle-session timeout notice (4031): nothing ran.
  [[noreturn]] void rethrow(std::string_view sql, bool committing, bool autocommit = false) {
    std::string st(sql);
    try {
      throw;
    } catch (const Error&) {
      throw;
    } catch (const sql::SQLException& e) {
      int n = e.getErrorCode();
      ErrorCode code = mysql::classify(n);
      std::string msg = detail::scrub_credentials(e.what(), uri_);
      if (code == ErrorCode::kConnectionLost) {
        mark_broken();
        if (committing)
          throw Error(ErrorCode::kCommitInDoubt,
                      "connection lost during COMMIT; the transaction may or may not have committed: " + msg, "mysql",
                      std::to_string(n), st);
        if (autocommit && n != 2006 && n != 1290 && n != 1836 && n != 1047 && n != 4031)
          throw Error(ErrorCode::kCommitInDoubt,
                      "connection lost after the statement was sent; it may or may not have committed: " + msg,
                      "mysql", std::to_string(n), st);
      }
      // A deadlock rolls back the whole transaction on the server.
      if (n == 1213) in_tx_ = false;
      // A packet too large: the driver closed the session's socket.
      if (n == 1153 || n == 2020) mark_broken();
      if (code == ErrorCode::kSchemaMismatch) msg = detail::with_migrate_hint(std::move(msg), st);
      if (mysql::unparsed_trigger_copy(n, msg, galera_)) {
        // Nothing of the statement ran (its table could not be opened):
        // contention to retry, once the copy is gone (heal_trigger_tables).
        heal_trigger_tables_ = true;
        code = ErrorCode::kConflict;
        msg = "this Galera node's cached copy of the table has triggers that failed to parse (a MariaDB fault "
              "seen when a session is brute-force aborted while it reads them; the statement did not run): " + msg;
      }
      throw Error(code, msg, "mysql", std::to_string(n), st);
    } catch (const std::exception& e) {
      throw Error(ErrorCode::kInternal, detail::scrub_credentials(e.what(), uri_), "mysql", "", st);
    }
  }

  detail::ParsedUri uri_;
  std::string description_;
  ConnectOptions opt_;
  Capabilities caps_;
  std::unique_ptr<sql::Connection> conn_;
  std::unique_ptr<sql::Statement> stmt_;
  detail::StatementCache<std::unique_ptr<sql::PreparedStatement>> cache_;
  bool in_tx_ = false;
  // A Galera transaction set autocommit = 0 (do_begin) and it is not back
  // to 1 yet (restore_autocommit).
  bool autocommit_off_ = false;
  // A statement met a cached lock table copy with unparseable triggers.
  bool heal_trigger_tables_ = false;
  bool broken_ = true;
  // The session's isolation level is READ COMMITTED as session_isolation set
  // it at connect: no statement sent since mentioned an isolation level (SET
  // SESSION TRANSACTION ISOLATION LEVEL ..., tx_isolation). do_begin then
  // sends no SET TRANSACTION for kReadCommitted.
  bool session_read_committed_ = false;
  static bool mentions_isolation(std::string_view sql) {
    static constexpr std::string_view kWord = "isolation";
    auto it = std::search(sql.begin(), sql.end(), kWord.begin(), kWord.end(), [](char a, char b) {
      return std::tolower(static_cast<unsigned char>(a)) == b;
    });
    return it != sql.end();
  }
  bool galera_ = false;  // a Galera node: kGaleraDialect's plans
  int sock_fd_ = -1;     // this session's socket (find_socket()), or -1
  std::int64_t max_packet_ = 0;  // the server's max_allowed_packet (0 = unknown)
};

}  // namespace

namespace detail {
std::unique_ptr<Connection> make_mysql_connection(ParsedUri uri, std::string description, const ConnectOptions& options) {
  return std::make_unique<MysqlConnection>(std::move(uri), std::move(description), options);
}
}  // namespace detail

namespace mysql {
sql::Connection* native_handle(Connection& conn) {
  auto* c = dynamic_cast<MysqlConnection*>(&conn);
  if (!c)
    throw Error(ErrorCode::kInvalidArgument,
                "mysql::native_handle() needs a MySQL/MariaDB connection, got " + std::string(conn.dialect_name()));
  return c->handle();
}
}  // namespace mysql

}  // namespace sqlguard
