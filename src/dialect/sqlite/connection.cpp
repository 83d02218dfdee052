// SQLite dialect: embedded, one writer at a time. Read-modify-write
// transactions use BEGIN IMMEDIATE so the write lock is taken up front (a
// deferred transaction upgrading to a writer can fail with SQLITE_BUSY that
// no busy timeout resolves).
#include <sqlite3.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>


#include <cerrno>
#include <climits>
#include <chrono>
#include <cstring>
#include <set>
#include <string_view>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/sql_cache.h"
#include "sqlguard/errors.h"
#include "dialect/dialect.h"
#include "core/catalog.h"
#include "core/migration_lock.h"
#include "core/schema_hint.h"
#include "dialect/registry.h"
#include "plans/plans.h"
#include "dialect/sqlite/connection.h"
#include "dialect/sqlite/errors.h"
#include "sqlguard/sqlite.h"
#include "sqlguard/validate.h"

namespace sqlguard {
namespace {

class SqliteDialect final : public Dialect {
 public:
  // An in-memory database (`in_memory`) has no file for the futex word of
  // the release wake-ups: its waiters poll.
  explicit SqliteDialect(bool in_memory)
      : Dialect("sqlite", '"',
                {&detail::read_then_update(/*returning=*/true),
                 in_memory ? &detail::polling() : &detail::connection_wakeups(),
                 &detail::exclusive_transaction_migrations(), &detail::renew_returning()}) {}
  // SQLite compares keys with BINARY unless a column declares COLLATE, which
  // no SQL query reports (sql/sqlite/strategies.sql, key_column_collation).
  bool reports_key_collation() const override { return false; }
  // No row locks: BEGIN IMMEDIATE takes the database write lock, and the
  // busy timeout bounds the wait for it (0 = NOWAIT). The connection keeps
  // it (its busy handler is sqlguard's: set_busy_timeout).
  std::optional<std::int64_t> push_session_lock_timeout(Connection& c, std::chrono::milliseconds t) const override;
  void restore_session_lock_timeout(Connection& c, std::int64_t previous) const override;
};

const SqliteDialect kDialect(false);
const SqliteDialect kMemoryDialect(true);

class SqliteConnection final : public Connection {
 public:
  SqliteConnection(std::string path, std::string description, const ConnectOptions& opt)
      : path_(std::move(path)), description_(std::move(description)), cache_(opt.statement_cache_size) {
    caps_.row_locks = false;
    caps_.transactional_ddl = true;
    caps_.wakeups = path_ != ":memory:";
    const bool create = opt.create_if_missing || path_ == ":memory:";
    int rc = sqlite3_open_v2(path_.c_str(), &db_,
                             SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
      std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
      const int sys = db_ ? sqlite3_system_errno(db_) : 0;
      sqlite3_close(db_);
      db_ = nullptr;
      // CANTOPEN: the OS said why (errno), not the message.
      ErrorCode code = sqlite_errors::classify(rc, msg);
      if (rc == SQLITE_CANTOPEN && (sys == EACCES || sys == EPERM || sys == EROFS)) code = ErrorCode::kPermissionDenied;
      if (rc == SQLITE_CANTOPEN && sys == ENOENT && !create)
        throw Error(ErrorCode::kNotFound,
                    "SQLite database file '" + printable(path_) +
                        "' does not exist (not created: opened with create_if_missing = false; check the path, or "
                        "run `sqlguard migrate` to create it)",
                    "sqlite", std::to_string(rc));
      throw Error(code, "cannot open SQLite database file '" + printable(path_) + "': " + msg +
                            (sys ? std::string(" (") + std::strerror(sys) + ")" : ""),
                  "sqlite", std::to_string(rc));
    }
    sqlite3_extended_result_codes(db_, 1);
    install_wakeup_hooks();
    // No network here: the I/O deadline, when set, bounds the wait for the
    // database lock (the one wait a statement can block on).
    const auto busy = opt.io_timeout ? std::min(opt.busy_timeout, *opt.io_timeout) : opt.busy_timeout;
    set_busy_timeout(busy);
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
          static constexpr auto kMode = detail::column(detail::Sql::session_journal_mode, "journal_mode");
          auto mode = detail::run(*this, detail::Sql::session_journal_mode);
          if (mode.rows.empty() || detail::cell(mode.rows[0], kMode).as_string() != "wal")
            detail::run(*this, detail::Sql::session_journal_wal);
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
    if (wake_words_) ::munmap(wake_words_, kWords * sizeof(std::uint32_t));
    cache_.for_each([](const std::string&, sqlite3_stmt* st) { sqlite3_finalize(st); });
    sqlite3_close_v2(db_);
  }
  std::size_t cached_statements() const noexcept override { return cache_.size(); }
  std::size_t statement_cache_capacity() const noexcept override { return cache_.capacity(); }

  const Capabilities& capabilities() const noexcept override { return caps_; }
  const Dialect& dialect() const noexcept override { return caps_.wakeups ? kDialect : kMemoryDialect; }
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
    // A write outside a transaction is one of its own: it may wait for the
    // write lock (note_write_count) and gives it back when it ends, failed
    // or not (write_ended).
    const bool writes = !sqlite3_stmt_readonly(st);
    const bool alone = writes && !in_tx_;
    if (alone) note_write_count();
    struct Ended {
      SqliteConnection* c;
      bool alone;
      ~Ended() {
        if (alone && sqlite3_get_autocommit(c->db_)) c->write_ended();
      }
    } ended{this, alone};
    for (;;) {
      int rc = sqlite3_step(st);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) fail(rc, sql);
      sqlguard::Row row;
      row.cells.reserve(static_cast<std::size_t>(ncol));
      for (int c = 0; c < ncol; ++c) row.cells.push_back(column(st, c));
      result.rows.push_back(std::move(row));
    }
    if (writes) result.affected = sqlite3_changes64(db_);
    return result;
  }

  void execute_script(std::string_view sql) override {
    char* err = nullptr;
    std::string s(sql);
    note_write_count();
    int rc = sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err);
    if (!in_tx_ && sqlite3_get_autocommit(db_)) write_ended();
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
    note_write_count();  // BEGIN IMMEDIATE waits for the write lock
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
      write_ended();
      throw;
    }
    in_tx_ = false;
    write_ended();
  }
  void do_rollback() override {
    in_tx_ = false;
    if (!sqlite3_get_autocommit(db_)) {
      try {
        do_execute(kDialect.catalog().text(detail::Sql::tx_rollback), {}, true);
      } catch (...) {
        write_ended();
        throw;
      }
    }
    write_ended();  // also when SQLite had rolled it back already
  }
  bool in_transaction() const noexcept override { return in_tx_; }
  void reconnect() override {}

  // Wake-ups between processes on one host: futex words in a small shared
  // file beside the database (<path>-sqlguard-wake, kWakeSlots 32-bit
  // counters, a channel hashed to one; then the write lock's words, below).
  // The release statement calls sqlguard_wake(channel) (sql/sqlite/lease.sql);
  // after its COMMIT (the WAL hook) the counter is bumped and every waiter sleeping on it is woken
  // (with lock clients, one listener per process; each checks with a read
  // whether it may take the lock, a fair lease's waiter whether it is its
  // turn); other commits wake no one. A waiter remembers the counter it last saw, so a
  // release between its attempt and its sleep is not missed (call with
  // timeout 0 before the attempt that may fail: that records it). Without
  // the file (read-only directory) it sleeps for `timeout` and returns false.
  bool wait_for_notify(const std::string& channel, std::chrono::milliseconds timeout) override {
    if (in_tx_) throw Error(ErrorCode::kInvalidArgument, "wait_for_notify() inside a transaction", "sqlite");
    if (!caps_.wakeups) dialect().not_supported("wake-ups on an in-memory database");
    std::uint32_t* w = wake_word(channel);
    if (!w) {
      if (timeout.count() > 0) std::this_thread::sleep_for(timeout);
      return false;
    }
    auto [it, first] = seen_.try_emplace(channel, __atomic_load_n(w, __ATOMIC_ACQUIRE));
    if (first) return false;  // listening from now on
    std::uint32_t now = __atomic_load_n(w, __ATOMIC_ACQUIRE);
    if (now == it->second && timeout.count() > 0) {
      timespec ts{static_cast<time_t>(timeout.count() / 1000), static_cast<long>((timeout.count() % 1000) * 1000000)};
      ::syscall(SYS_futex, w, FUTEX_WAIT, it->second, &ts, nullptr, 0);  // woken, timed out or EAGAIN: re-read
      now = __atomic_load_n(w, __ATOMIC_ACQUIRE);
    }
    const bool woke = now != it->second;
    it->second = now;
    return woke;
  }
  void unlisten(const std::string& channel) override { seen_.erase(channel); }
  // Many channels at once: one futex_waitv() over their words (at most 128
  // distinct words per wait; beyond that the first 128 are waited on and the
  // rest read when it returns).
  std::vector<std::string> wait_for_any_notify(const std::vector<std::string>& channels,
                                               std::chrono::milliseconds timeout) override {
    if (in_tx_) throw Error(ErrorCode::kInvalidArgument, "wait_for_any_notify() inside a transaction", "sqlite");
    if (!caps_.wakeups) dialect().not_supported("wake-ups on an in-memory database");
    std::vector<std::string> fired;
    std::vector<struct futex_waitv> waits;
    std::set<std::uint32_t*> words;
    // A channel this call no longer names is forgotten (PostgreSQL's
    // UNLISTEN): the listener names only the waited ones, and a counter
    // kept per channel ever waited on would grow with every new lock name.
    if (!seen_.empty()) {
      const std::set<std::string_view> named(channels.begin(), channels.end());
      for (auto it = seen_.begin(); it != seen_.end();) it = named.count(it->first) ? std::next(it) : seen_.erase(it);
    }
    for (const auto& ch : channels) {
      std::uint32_t* w = wake_word(ch);
      if (!w) break;
      auto [it, first] = seen_.try_emplace(ch, __atomic_load_n(w, __ATOMIC_ACQUIRE));
      if (first) continue;
      if (__atomic_load_n(w, __ATOMIC_ACQUIRE) != it->second) continue;  // fired: read below
      if (waits.size() < FUTEX_WAITV_MAX && words.insert(w).second) {
        struct futex_waitv fw {};
        fw.val = it->second;
        fw.uaddr = reinterpret_cast<std::uintptr_t>(w);
        fw.flags = FUTEX_32;
        waits.push_back(fw);
      }
    }
    if (!wake_words_) {
      if (timeout.count() > 0) std::this_thread::sleep_for(timeout);
      return fired;
    }
    auto read = [&] {
      for (const auto& ch : channels) {
        auto it = seen_.find(ch);
        if (it == seen_.end()) continue;
        const std::uint32_t now = __atomic_load_n(wake_word(ch), __ATOMIC_ACQUIRE);
        if (now != it->second) {
          it->second = now;
          fired.push_back(ch);
        }
      }
    };
    read();
    if (fired.empty() && timeout.count() > 0 && !waits.empty()) {
      timespec ts{};
      ::clock_gettime(CLOCK_MONOTONIC, &ts);
      ts.tv_sec += static_cast<time_t>(timeout.count() / 1000);
      ts.tv_nsec += static_cast<long>((timeout.count() % 1000) * 1000000);
      if (ts.tv_nsec >= 1000000000L) {
        ++ts.tv_sec;
        ts.tv_nsec -= 1000000000L;
      }
      // Woken, timed out, or a word already changed (EAGAIN): re-read.
      ::syscall(SYS_futex_waitv, waits.data(), static_cast<unsigned>(waits.size()), 0u, &ts, CLOCK_MONOTONIC);
      read();
    } else if (fired.empty() && timeout.count() > 0) {
      std::this_thread::sleep_for(timeout);  // only names seen for the first time: nothing to wait on yet
    }
    return fired;
  }

  std::int64_t session_id() override { return 0; }

  sqlite3* handle() const noexcept { return db_; }

  // The write lock's wait. SQLite's own busy handler sleeps 1, 2, 5, 10, 15,
  // 20, 25, 25, 25, 50, 50, 100 ms between tries whatever the holder does, so
  // on a hot lock a writer that arrives just after another often sleeps far
  // longer than the write lock stays taken (tens of µs for a lease's write).
  // Here a busy writer sleeps on a futex word of the wake-up file
  // (kWriteEnded) that every sqlguard connection bumps when it ends a
  // transaction that may have held the write lock. A bump wakes ONE sleeper,
  // and none while a woken one has not yet tried (kWriteWoken, as Go's
  // sync.Mutex "woken" flag; cleared when a bump found nobody asleep):
  // waking one per release without that flag woke a writer per commit that
  // mostly found the lock taken again by the releasing thread, and cost a
  // third of a hot lock's cycles/s. A writer
  // that is not sqlguard's (the sqlite3 shell, another library) bumps
  // nothing: its release is seen at the next bump or after at most kWriteNap.
  // Without the file (in-memory, read-only directory) SQLite's own handler
  // waits. Measured in docs/lease-lock.md ("SQLite's write lock").
  void set_busy_timeout(std::chrono::milliseconds t) {
    busy_ms_ = t;
    if (write_words()) sqlite3_busy_handler(db_, &SqliteConnection::on_busy, this);
    else sqlite3_busy_timeout(db_, static_cast<int>(t.count()));
  }
  std::chrono::milliseconds busy_timeout() const noexcept { return busy_ms_; }

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
    if (code == ErrorCode::kSchemaMismatch) msg = detail::with_migrate_hint(std::move(msg), sql);
    throw Error(code, about_file(code, msg), "sqlite", std::to_string(ext), std::string(sql));
  }

  // not_found / permission_denied name the file they are about.
  std::string about_file(ErrorCode code, std::string msg) const {
    if (code == ErrorCode::kPermissionDenied || code == ErrorCode::kNotFound)
      msg += " (SQLite database file '" + printable(path_) + "')";
    return msg;
  }

  static constexpr std::size_t kWakeSlots = 4096;
  // After the channels' words, the write lock's wait (set_busy_timeout): its
  // release counter, how many sleep on it, and whether a woken one has yet
  // to try. A process killed while sleeping leaves the count up (a wake
  // syscall per commit with nobody to wake) and may leave the flag set,
  // which the next sleeper clears when its nap (kWriteNap) ends: slower,
  // never stuck.
  static constexpr std::size_t kWriteEnded = kWakeSlots;
  static constexpr std::size_t kWriteSleepers = kWakeSlots + 1;
  static constexpr std::size_t kWriteWoken = kWakeSlots + 2;
  static constexpr std::size_t kWords = kWakeSlots + 3;
  static constexpr std::chrono::milliseconds kWriteNap{5};

  std::uint32_t* write_words() { return caps_.wakeups ? wake_file() : nullptr; }
  // Before a statement that may need the write lock: the release count it
  // waits past if it finds the lock taken.
  void note_write_count() noexcept {
    if (wake_words_) write_seen_ = __atomic_load_n(wake_words_ + kWriteEnded, __ATOMIC_SEQ_CST);
  }
  // After a transaction that may have held the write lock ended: one
  // sleeping writer of this database, in any process, tries again.
  void write_ended() noexcept {
    if (!wake_words_) return;
    __atomic_add_fetch(wake_words_ + kWriteEnded, 1, __ATOMIC_SEQ_CST);
    std::uint32_t none = 0;
    if (__atomic_load_n(wake_words_ + kWriteSleepers, __ATOMIC_SEQ_CST) != 0 &&
        __atomic_compare_exchange_n(wake_words_ + kWriteWoken, &none, 1u, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST) &&
        ::syscall(SYS_futex, wake_words_ + kWriteEnded, FUTEX_WAKE, 1, nullptr, nullptr, 0) == 0)
      __atomic_store_n(wake_words_ + kWriteWoken, 0u, __ATOMIC_SEQ_CST);  // nobody was asleep: nobody is on the way
  }
  static int on_busy(void* arg, int count) {
    auto* self = static_cast<SqliteConnection*>(arg);
    const auto now = std::chrono::steady_clock::now();
    if (count == 0) self->busy_since_ = now;
    const auto left = self->busy_ms_ - std::chrono::duration_cast<std::chrono::milliseconds>(now - self->busy_since_);
    if (left.count() <= 0) return 0;
    std::uint32_t* w = self->wake_words_ + kWriteEnded;
    const auto nap = std::min<std::chrono::milliseconds>(left, kWriteNap);
    timespec ts{0, static_cast<long>(nap.count()) * 1000000L};
    __atomic_add_fetch(self->wake_words_ + kWriteSleepers, 1, __ATOMIC_SEQ_CST);
    ::syscall(SYS_futex, w, FUTEX_WAIT, self->write_seen_, &ts, nullptr, 0);  // woken, napped or already bumped
    __atomic_sub_fetch(self->wake_words_ + kWriteSleepers, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(self->wake_words_ + kWriteWoken, 0u, __ATOMIC_SEQ_CST);
    self->write_seen_ = __atomic_load_n(w, __ATOMIC_SEQ_CST);
    return 1;
  }

  // <path>-sqlguard-wake's words, mapped on first use (null without it: a
  // directory the process may not write).
  std::uint32_t* wake_file() {
    if (!wake_words_ && !wake_failed_) {
      const std::string file = path_ + "-sqlguard-wake";
      int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
      struct stat st {};
      const off_t size = static_cast<off_t>(kWords * sizeof(std::uint32_t));
      if (fd >= 0 && ::fstat(fd, &st) == 0 && (st.st_size >= size || ::ftruncate(fd, size) == 0)) {
        void* m = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m != MAP_FAILED) wake_words_ = static_cast<std::uint32_t*>(m);
      }
      if (fd >= 0) ::close(fd);
      wake_failed_ = wake_words_ == nullptr;
      if (wake_failed_)
        log(LogLevel::kDebug, "no wake-up file '" + printable(file) + "': lease waiters poll, writers wait in SQLite's "
                                                                       "busy handler");
    }
    return wake_words_;
  }

  // The futex word of `channel` in the wake-up file.
  std::uint32_t* wake_word(const std::string& channel) {
    std::uint32_t* words = wake_file();
    if (!words) return nullptr;
    std::uint32_t h = 2166136261u;  // FNV-1a: the same slot in every process
    for (unsigned char c : channel) h = (h ^ c) * 16777619u;
    return words + (h % kWakeSlots);
  }

  // sqlguard_wake(channel) in a statement queues a wake-up; the WAL hook
  // (called after a commit, its write lock released) sends it, a rollback
  // drops it. The hook also keeps SQLite's automatic checkpoint, which
  // setting a WAL hook replaces.
  // An in-memory database has no file for the futex word: there
  // sqlguard_wake() (the release statements call it) only answers 1.
  void install_wakeup_hooks() {
    if (!caps_.wakeups) {
      sqlite3_create_function_v2(
          db_, "sqlguard_wake", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY, nullptr,
          [](sqlite3_context* ctx, int, sqlite3_value**) { sqlite3_result_int(ctx, 1); }, nullptr, nullptr, nullptr);
      return;
    }
    sqlite3_create_function_v2(
        db_, "sqlguard_wake", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY, this,
        [](sqlite3_context* ctx, int, sqlite3_value** argv) {
          auto* self = static_cast<SqliteConnection*>(sqlite3_user_data(ctx));
          if (const unsigned char* t = sqlite3_value_text(argv[0]))
            self->pending_wakes_.emplace_back(reinterpret_cast<const char*>(t),
                                              static_cast<std::size_t>(sqlite3_value_bytes(argv[0])));
          sqlite3_result_int(ctx, 1);
        },
        nullptr, nullptr, nullptr);
    sqlite3_wal_hook(
        db_,
        [](void* arg, sqlite3* db, const char* name, int pages) -> int {
          auto* self = static_cast<SqliteConnection*>(arg);
          for (const auto& ch : self->pending_wakes_) {
            if (std::uint32_t* w = self->wake_word(ch)) {
              __atomic_add_fetch(w, 1, __ATOMIC_RELEASE);
              // Every waiter of the lock on this host: with lock clients
              // that is one listener per process, and a fair lease's next
              // ticket may be any of them (each checks its turn with a read).
              ::syscall(SYS_futex, w, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
            }
          }
          self->pending_wakes_.clear();
          if (pages >= 1000) sqlite3_wal_checkpoint(db, name);  // SQLITE_DEFAULT_WAL_AUTOCHECKPOINT
          return SQLITE_OK;
        },
        this);
    sqlite3_rollback_hook(db_, [](void* arg) { static_cast<SqliteConnection*>(arg)->pending_wakes_.clear(); }, this);
  }

  std::string path_;
  std::string description_;
  Capabilities caps_;
  sqlite3* db_ = nullptr;
  bool in_tx_ = false;
  std::uint32_t* wake_words_ = nullptr;  // <path>-sqlguard-wake, mapped (wait_for_notify)
  bool wake_failed_ = false;
  std::unordered_map<std::string, std::uint32_t> seen_;  // channel -> counter last seen
  std::vector<std::string> pending_wakes_;              // sqlguard_wake() calls awaiting COMMIT
  std::chrono::milliseconds busy_ms_{0};                 // the busy timeout (set_busy_timeout)
  std::chrono::steady_clock::time_point busy_since_{};   // the current statement's first busy try
  std::uint32_t write_seen_ = 0;                         // kWriteEnded before the statement
  detail::StatementCache<sqlite3_stmt*> cache_;
};

std::optional<std::int64_t> SqliteDialect::push_session_lock_timeout(Connection& c, std::chrono::milliseconds t) const {
  auto& s = dynamic_cast<SqliteConnection&>(c);
  const auto prev = s.busy_timeout();
  s.set_busy_timeout(t);
  return prev.count();
}
void SqliteDialect::restore_session_lock_timeout(Connection& c, std::int64_t previous) const {
  dynamic_cast<SqliteConnection&>(c).set_busy_timeout(std::chrono::milliseconds(previous));
}

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
                                                 std::string(conn.dialect_name()));
  return c->handle();
}
std::chrono::milliseconds busy_timeout(Connection& conn) {
  auto* c = dynamic_cast<SqliteConnection*>(&conn);
  if (!c)
    throw Error(ErrorCode::kInvalidArgument, "sqlite::busy_timeout() needs an SQLite connection, got " +
                                                 std::string(conn.dialect_name()));
  return c->busy_timeout();
}
}  // namespace sqlite

}  // namespace sqlguard
