// SQLite dialect: embedded, one writer at a time. Read-modify-write
// transactions use BEGIN IMMEDIATE so the write lock is taken up front (a
// deferred transaction upgrading to a writer can fail with SQLITE_BUSY that
// no busy timeout resolves).
#include <poll.h>
#include <sqlite3.h>
#include <sys/inotify.h>
#include <unistd.h>


#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <unordered_map>

#include "core/sql_cache.h"
#include "dialect/dialect.h"
#include "core/catalog.h"
#include "dialect/registry.h"
#include "dialect/sqlite/connection.h"
#include "dialect/sqlite/errors.h"
#include "sqlguard/sqlite.h"
#include "sqlguard/validate.h"

namespace sqlguard {
namespace {

class SqliteDialect final : public Dialect {
 public:
  SqliteDialect() : Dialect(DialectKind::kSqlite, "sqlite", '"') {}
  // No row locks: BEGIN IMMEDIATE takes the database write lock, and the
  // busy timeout bounds the wait for it (0 = NOWAIT). PRAGMA takes no
  // parameters, so the new value is set through the C API.
  std::optional<std::int64_t> push_session_lock_timeout(Connection& c, std::chrono::milliseconds t) const override {
    auto prev = detail::run(c, detail::Sql::lock_timeout_get).rows.at(0)[0].as_int();
    sqlite3_busy_timeout(sqlite::native_handle(c), static_cast<int>(t.count()));
    return prev;
  }
  void restore_session_lock_timeout(Connection& c, std::int64_t previous) const override {
    sqlite3_busy_timeout(sqlite::native_handle(c), static_cast<int>(previous));
  }
};

const SqliteDialect kDialect;

class SqliteConnection final : public Connection {
 public:
  SqliteConnection(std::string path, std::string description, const ConnectOptions& opt)
      : path_(std::move(path)), description_(std::move(description)), cache_(opt.statement_cache_size) {
    caps_.row_locks = false;
    caps_.transactional_ddl = true;
    caps_.wakeups = path_ != ":memory:";
    int rc = sqlite3_open_v2(path_.c_str(), &db_,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
      std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
      const int sys = db_ ? sqlite3_system_errno(db_) : 0;
      sqlite3_close(db_);
      db_ = nullptr;
      // CANTOPEN: the OS said why (errno), not the message.
      ErrorCode code = sqlite_errors::classify(rc, msg);
      if (rc == SQLITE_CANTOPEN && (sys == EACCES || sys == EPERM || sys == EROFS)) code = ErrorCode::kPermissionDenied;
      throw Error(code, "cannot open SQLite database file '" + printable(path_) + "': " + msg +
                            (sys ? std::string(" (") + std::strerror(sys) + ")" : ""),
                  "sqlite", std::to_string(rc));
    }
    sqlite3_extended_result_codes(db_, 1);
    // No network here: the I/O deadline, when set, bounds the wait for the
    // database lock (the one wait a statement can block on).
    const auto busy = opt.io_timeout ? std::min(opt.busy_timeout, *opt.io_timeout) : opt.busy_timeout;
    sqlite3_busy_timeout(db_, static_cast<int>(busy.count()));
    // A file the process may not write is opened read-only: reads still
    // work (lock list), writes fail as permission_denied naming the file.
    if (path_ != ":memory:" && sqlite3_db_readonly(db_, "main") != 1) {
      // WAL lets readers run beside the single writer; NORMAL sync is
      // durable against process crashes (the demo's kill -9), not power loss.
      // WAL is persistent in the file, so only the first opener switches it;
      // that switch needs an exclusive lock and can report BUSY without
      // consulting the busy handler while other processes open the same new
      // file, so it is retried within the busy timeout.
      auto deadline = std::chrono::steady_clock::now() + opt.busy_timeout;
      for (int attempt = 0;; ++attempt) {
        try {
          auto mode = detail::run(*this, detail::Sql::session_journal_mode);
          if (mode.rows.empty() || mode.rows[0][0].as_string() != "wal") detail::run(*this, detail::Sql::session_journal_wal);
          break;
        } catch (const Error& e) {
          if (e.code() != ErrorCode::kLockBusy || std::chrono::steady_clock::now() >= deadline) throw;
          std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50, 2 + attempt * 2)));
        }
      }
      detail::run(*this, detail::Sql::session_synchronous);
    }
  }

  ~SqliteConnection() override {
    if (watch_fd_ >= 0) ::close(watch_fd_);
    cache_.for_each([](const std::string&, sqlite3_stmt* st) { sqlite3_finalize(st); });
    sqlite3_close_v2(db_);
  }
  std::size_t cached_statements() const noexcept override { return cache_.size(); }
  std::size_t statement_cache_capacity() const noexcept override { return cache_.capacity(); }

  DialectKind kind() const noexcept override { return DialectKind::kSqlite; }
  const Capabilities& capabilities() const noexcept override { return caps_; }
  const Dialect& dialect() const noexcept override { return kDialect; }
  const std::string& description() const noexcept override { return description_; }

  Result do_execute(std::string_view sql, const Params& params, bool cache) override {
    const bool once = !cache || cache_.capacity() == 0;
    sqlite3_stmt* st = once ? compile(sql, 0) : prepare(sql);
    struct Reset {
      sqlite3_stmt* s;
      bool finalize;
      ~Reset() {
        if (finalize) {
          sqlite3_finalize(s);
          return;
        }
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
      }
    } reset{st, once};
    int expected = sqlite3_bind_parameter_count(st);
    if (expected != static_cast<int>(params.size()))
      throw Error(ErrorCode::kInternal,
                  "statement expects " + std::to_string(expected) + " parameters, got " +
                      std::to_string(params.size()),
                  "sqlite", "", std::string(sql));
    for (std::size_t i = 0; i < params.size(); ++i) bind(st, static_cast<int>(i + 1), params[i], sql);
    Result result;
    int ncol = sqlite3_column_count(st);
    for (;;) {
      int rc = sqlite3_step(st);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) fail(rc, sql);
      sqlguard::Row row;
      row.cells.reserve(static_cast<std::size_t>(ncol));
      for (int c = 0; c < ncol; ++c) row.cells.push_back(column(st, c));
      result.rows.push_back(std::move(row));
    }
    if (!sqlite3_stmt_readonly(st)) result.affected = sqlite3_changes64(db_);
    return result;
  }

  void execute_script(std::string_view sql) override {
    char* err = nullptr;
    std::string s(sql);
    int rc = sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
      std::string msg = err ? err : sqlite3_errmsg(db_);
      sqlite3_free(err);
      int ext = sqlite3_extended_errcode(db_);
      ErrorCode code = sqlite_errors::classify(ext, msg);
      throw Error(code, about_file(code, msg), "sqlite", std::to_string(ext), s.substr(0, 200));
    }
  }

  void do_begin(Isolation) override {
    if (in_tx_) throw Error(ErrorCode::kInvalidArgument, "a transaction is already open on this connection", "sqlite");
    do_execute(kDialect.catalog().text(detail::Sql::tx_begin), {}, true);
    in_tx_ = true;
  }
  void do_commit() override {
    if (!in_tx_) throw Error(ErrorCode::kInvalidArgument, "commit() without an open transaction", "sqlite");
    try {
      do_execute(kDialect.catalog().text(detail::Sql::tx_commit), {}, true);
    } catch (...) {
      // A failed COMMIT leaves the transaction open (e.g. BUSY); roll back
      // so the connection is usable, then report the original error.
      if (!sqlite3_get_autocommit(db_))
        sqlite3_exec(db_, kDialect.catalog().text(detail::Sql::tx_rollback).c_str(), nullptr, nullptr, nullptr);
      in_tx_ = false;
      throw;
    }
    in_tx_ = false;
  }
  void do_rollback() override {
    in_tx_ = false;
    if (sqlite3_get_autocommit(db_)) return;  // already rolled back by SQLite
    do_execute(kDialect.catalog().text(detail::Sql::tx_rollback), {}, true);
  }
  bool in_transaction() const noexcept override { return in_tx_; }
  void reconnect() override {}

  // Wake-ups between processes on one host: every commit appends to the WAL
  // file, so an inotify watch on it wakes a waiter on any commit (the lease
  // waiter then re-reads; a release is one of those commits). The watch is
  // set on the first call (call with timeout 0 before the attempt that may
  // fail, so no commit after it is missed). Without a WAL file yet, or
  // without inotify, it sleeps for `timeout` and returns false.
  bool wait_for_notify(const std::string&, std::chrono::milliseconds timeout) override {
    if (in_tx_) throw Error(ErrorCode::kInvalidArgument, "wait_for_notify() inside a transaction", "sqlite");
    if (!caps_.wakeups) dialect().not_supported("wake-ups on an in-memory database");
    if (watch_fd_ < 0 && !watch_failed_) {
      watch_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
      if (watch_fd_ >= 0 && inotify_add_watch(watch_fd_, (path_ + "-wal").c_str(), IN_MODIFY | IN_DELETE_SELF) < 0) {
        ::close(watch_fd_);
        watch_fd_ = -1;
      }
      watch_failed_ = watch_fd_ < 0;
    }
    if (watch_fd_ < 0) {
      if (timeout.count() > 0) std::this_thread::sleep_for(timeout);
      watch_failed_ = false;  // the WAL file may exist by the next call
      return false;
    }
    pollfd p{watch_fd_, POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(timeout.count(), 1 << 30)));
    if (n <= 0) return false;
    alignas(inotify_event) char buf[4096];
    bool gone = false;  // the WAL file was removed (last connection closed): watch it anew next time
    for (ssize_t len; (len = ::read(watch_fd_, buf, sizeof buf)) > 0;) {
      for (char* e = buf; e < buf + len; e += sizeof(inotify_event) + reinterpret_cast<inotify_event*>(e)->len)
        if (reinterpret_cast<inotify_event*>(e)->mask & (IN_IGNORED | IN_DELETE_SELF)) gone = true;
    }
    if (gone) unlisten({});
    return true;
  }
  void unlisten(const std::string&) override {
    if (watch_fd_ >= 0) ::close(watch_fd_);
    watch_fd_ = -1;
  }
  std::int64_t session_id() override { return 0; }

  sqlite3* handle() const noexcept { return db_; }

 private:
  sqlite3_stmt* compile(std::string_view sql, unsigned flags) {
    sqlite3_stmt* st = nullptr;
    int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), flags, &st, nullptr);
    if (rc != SQLITE_OK) fail(rc, sql);
    return st;
  }

  sqlite3_stmt* prepare(std::string_view sql) {
    if (sqlite3_stmt** cached = cache_.find(sql)) return *cached;
    sqlite3_stmt* st = compile(sql, SQLITE_PREPARE_PERSISTENT);
    return cache_.insert(sql, st, [](const std::string&, sqlite3_stmt* old) { sqlite3_finalize(old); });
  }

  void bind(sqlite3_stmt* st, int i, const Value& v, std::string_view sql) {
    int rc;
    if (v.is_null()) rc = sqlite3_bind_null(st, i);
    else if (v.is_int()) rc = sqlite3_bind_int64(st, i, v.as_int());
    else if (v.is_double()) rc = sqlite3_bind_double(st, i, v.as_double());
    else if (v.is_blob()) {
      std::string b = v.as_string();
      rc = sqlite3_bind_blob64(st, i, b.data(), b.size(), SQLITE_TRANSIENT);
    } else {
      std::string s = v.as_string();
      rc = sqlite3_bind_text64(st, i, s.data(), s.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
    }
    if (rc != SQLITE_OK) fail(rc, sql);
  }

  static Value column(sqlite3_stmt* st, int c) {
    switch (sqlite3_column_type(st, c)) {
      case SQLITE_NULL: return Value();
      case SQLITE_INTEGER: return Value(static_cast<std::int64_t>(sqlite3_column_int64(st, c)));
      case SQLITE_FLOAT: return Value(sqlite3_column_double(st, c));
      case SQLITE_BLOB: {
        const void* p = sqlite3_column_blob(st, c);
        int n = sqlite3_column_bytes(st, c);
        return Value::blob(std::string(static_cast<const char*>(p), static_cast<std::size_t>(n)));
      }
      default: {
        const unsigned char* p = sqlite3_column_text(st, c);
        int n = sqlite3_column_bytes(st, c);
        return Value(std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n)));
      }
    }
  }

  [[noreturn]] void fail(int rc, std::string_view sql) {
    int ext = sqlite3_extended_errcode(db_);
    if ((ext & 0xff) != (rc & 0xff)) ext = rc;
    std::string msg = sqlite3_errmsg(db_);
    ErrorCode code = sqlite_errors::classify(ext, msg);
    if (code == ErrorCode::kSchemaMismatch) msg += " (run `sqlguard migrate` first?)";
    throw Error(code, about_file(code, msg), "sqlite", std::to_string(ext), std::string(sql));
  }

  // not_found / permission_denied name the file they are about.
  std::string about_file(ErrorCode code, std::string msg) const {
    if (code == ErrorCode::kPermissionDenied || code == ErrorCode::kNotFound)
      msg += " (SQLite database file '" + printable(path_) + "')";
    return msg;
  }

  std::string path_;
  std::string description_;
  Capabilities caps_;
  sqlite3* db_ = nullptr;
  bool in_tx_ = false;
  int watch_fd_ = -1;         // inotify on <path>-wal (wait_for_notify)
  bool watch_failed_ = false;
  detail::StatementCache<sqlite3_stmt*> cache_;
};

}  // namespace

namespace detail {
std::unique_ptr<Connection> make_sqlite_connection(std::string path, std::string description, const ConnectOptions& options) {
  return std::make_unique<SqliteConnection>(std::move(path), std::move(description), options);
}
}  // namespace detail

namespace sqlite {
sqlite3* native_handle(Connection& conn) {
  auto* c = dynamic_cast<SqliteConnection*>(&conn);
  if (!c)
    throw Error(ErrorCode::kInvalidArgument, "sqlite::native_handle() needs an SQLite connection, got " +
                                                 std::string(to_string(conn.kind())));
  return c->handle();
}
}  // namespace sqlite

}  // namespace sqlguard
