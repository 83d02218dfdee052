// sqlguard/connection.h — connections, values, results and transactions.
//
// A Connection is ONE database session. It is not thread-safe: threads share
// a URI through sqlguard::Pool (pool.h), one borrowed connection per thread
// at a time. Every sqlguard object that takes a Connection& borrows it and
// must not outlive it.
//
// URIs (make_connection):
//   sqlite:///abs/path.db      absolute path
//   sqlite://relative.db       relative to the current directory
//   sqlite::memory:            private in-memory database
//   postgresql://user:pw@host:port/db?connect_timeout=5   (libpq syntax;
//                              postgres:// also accepted; several hosts
//                              h1:p1,h2:p2 with target_session_attrs=read-write
//                              follow a failover; `?pooler=transaction` behind
//                              PgBouncer-style transaction pooling)
//   mysql://user:pw@host:port/db   (mariadb:// also accepted)
// No part of the userinfo ever appears in messages, logs or exceptions (see
// make_connection() and mask_uri()).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "sqlguard/errors.h"

namespace sqlguard {

// A dialect is known by its name (Connection::dialect_name(): "sqlite",
// "postgresql", "mysql", or the name a dialect added later registers).
// DialectKind is kept for code that switches on the three dialects sqlguard
// started with; a dialect added since is kOther (prefer dialect_name()).
enum class DialectKind {
  kSqlite,
  kPostgresql,
  kMysql,
  kOther,  // a dialect known by name only
  kPostgres [[deprecated("spelled kPostgresql, like the dialect's name")]] = kPostgresql,
};
// "sqlite", "postgresql", "mysql"; "other" for kOther.
std::string_view to_string(DialectKind kind) noexcept;

// What a dialect can do; strategies refuse early with NotSupported otherwise.
struct Capabilities {
  bool row_locks = false;          // SELECT ... FOR UPDATE locks single rows
  bool nowait = false;             // FOR UPDATE NOWAIT
  bool skip_locked = false;        // FOR UPDATE SKIP LOCKED
  bool shared_row_locks = false;   // FOR SHARE / LOCK IN SHARE MODE
  bool listen_notify = false;      // LISTEN / NOTIFY wake-ups
  // wait_for_notify() wakes waiters on a release: PostgreSQL LISTEN/NOTIFY,
  // SQLite futex words in a sidecar file beside the database
  // (<file>-sqlguard-wake; the release of a name wakes that name's waiters;
  // one host by definition). MySQL/MariaDB waiters use the lease_wakeup_*
  // statements.
  bool wakeups = false;
  bool transactional_ddl = false;  // DDL can roll back
  // A transaction-pooling proxy is in the path (PostgreSQL URI
  // `?pooler=transaction`, e.g. PgBouncer pool_mode = transaction): the
  // connection keeps no session state (unnamed statements only, no LISTEN,
  // no session SET; listen_notify and wakeups are false, waiters poll).
  bool transaction_pooler = false;
  // A transaction can be rolled back under a statement without an error to
  // it or the next one (a MariaDB Galera node's brute-force abort, measured
  // on 10.11): the connection finds it at commit() and throws kConflict, and
  // a row the transaction wrote can be missing before that (docs/galera.md).
  bool unseen_rollbacks = false;
  // Database-wide sequences for fencing tokens (MySQL 8 has none: sqlguard
  // needs MariaDB >= 10.3 there and refuses MySQL with NotSupported).
  bool sequences = true;
  std::string server_version{};    // as the server reports it ("" for SQLite)
};

// A bound parameter or a result cell. Values are ALWAYS bound, never
// spliced into SQL text.
//
// Text vs bytes: a std::string / string_view / const char* Value is TEXT and
// must be valid UTF-8 without NUL bytes on every dialect (validate.h); every
// statement refuses one that is not with Error(kInvalidArgument) naming the
// parameter, before any driver sees it (PostgreSQL would otherwise cut the
// text at the NUL, and match or write a different row). Bytes go in
// Value::blob() and are sent and returned byte-exact.
class Value {
 public:
  struct Blob {
    std::string bytes{};
    bool operator==(const Blob&) const = default;
  };

  Value() = default;  // SQL NULL
  Value(std::nullptr_t) {}
  template <typename T,
            std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Value(T v) : v_(static_cast<std::int64_t>(v)) {}
  Value(bool v) : v_(static_cast<std::int64_t>(v ? 1 : 0)) {}
  Value(double v) : v_(v) {}
  Value(std::string v) : v_(std::move(v)) {}
  Value(std::string_view v) : v_(std::string(v)) {}
  Value(const char* v) : v_(std::string(v)) {}
  Value(Blob b) : v_(std::move(b)) {}
  template <typename T>
  Value(const std::optional<T>& v) {
    if (v) *this = Value(*v);
  }
  static Value blob(std::string bytes) { return Value(Blob{std::move(bytes)}); }

  bool is_null() const noexcept { return std::holds_alternative<std::monostate>(v_); }
  bool is_int() const noexcept { return std::holds_alternative<std::int64_t>(v_); }
  bool is_double() const noexcept { return std::holds_alternative<double>(v_); }
  bool is_text() const noexcept { return std::holds_alternative<std::string>(v_); }
  bool is_blob() const noexcept { return std::holds_alternative<Blob>(v_); }
  // The text of a text value without copying it; nullptr for other kinds.
  const std::string* text_if() const noexcept { return std::get_if<std::string>(&v_); }

  // Conversions used by result readers. Integers stored as text (drivers
  // that return decimals as strings) are parsed. Throws Error(kInternal) on
  // NULL or an unconvertible value.
  std::int64_t as_int() const;
  double as_double() const;
  // Text or blob bytes; integers are formatted.
  std::string as_string() const;
  std::optional<std::int64_t> as_opt_int() const;
  std::optional<std::string> as_opt_string() const;

  bool operator==(const Value&) const = default;

 private:
  std::variant<std::monostate, std::int64_t, double, std::string, Blob> v_;
};

using Params = std::vector<Value>;

struct Row {
  std::vector<Value> cells{};
  const Value& operator[](std::size_t i) const { return cells.at(i); }
  std::size_t size() const noexcept { return cells.size(); }
};

struct Result {
  std::vector<Row> rows{};
  std::int64_t affected = 0;  // rows affected by INSERT/UPDATE/DELETE
  bool empty() const noexcept { return rows.empty(); }
};

enum class Isolation {
  kDefault,         // the server's default
  kReadCommitted,
  kRepeatableRead,
  kSerializable,
};

struct ConnectOptions {
  // Bound on establishing a connection (TCP + auth). Default: 10 s.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  // SQLite: how long a writer waits for the database lock. Default: 5 s.
  std::chrono::milliseconds busy_timeout{std::chrono::seconds(5)};
  // Client-side I/O deadline of every statement, BEGIN and COMMIT, whatever
  // the server or the network does (a frozen server, a silent partition):
  // PostgreSQL — TCP keepalives and tcp_user_timeout derived from it, plus a
  // deadline that drops the connection when a call is still waiting
  // (Error kTimeout inside a transaction; kCommitInDoubt at COMMIT and for a
  // statement outside a transaction, which commits itself); MySQL/MariaDB — the
  // driver's read/write timeouts (whole seconds); SQLite — no network: the
  // busy timeout bounds waits. The connection reconnects on next use.
  // Default: unset (none), except for the connections a LeaseLock opens from
  // a URI (ttl/3, at least 1 s). URIs may set it (`?io_timeout=S`, whole
  // seconds); the smaller wins. Range 1 ms .. 24 h.
  std::optional<std::chrono::milliseconds> io_timeout{};
  // Prepared statements kept per connection, least recently used evicted
  // first; an evicted statement is deallocated on the server at once
  // (PostgreSQL DEALLOCATE — after the open transaction, if any —, MariaDB
  // statement close, sqlite3_finalize), so memory and the server-wide
  // MariaDB max_prepared_stmt_count stay bounded whatever the caller sends.
  // MySQL/MariaDB: that count is server-wide, so a process also keeps at most
  // 8192 statements cached over all its connections (a connection past the
  // budget evicts its own, or prepares for one execution); should the server
  // still refuse (1461, other clients), the connection closes its cached
  // statements and retries once. A statement whose values exceed the
  // server's max_allowed_packet is refused before it is sent
  // (kInvalidArgument naming the limit); one that failed with an error the
  // dialect does not classify is closed, not reused.
  // 0 = cache nothing: every statement is prepared, run and deallocated
  // (PostgreSQL: the unnamed statement, which also works behind PgBouncer's
  // transaction pooling). Default: 256. Range 0 .. 10000. PostgreSQL and
  // MySQL URIs may set it too (`?statement_cache_size=N`); the smaller wins.
  std::size_t statement_cache_size = 256;
  // PostgreSQL: at every (re)connect sqlguard compares the backend pid libpq
  // got with the server session's pg_backend_pid(). When they differ a pooler
  // (PgBouncer...) is in the path, and a URI that does not say which kind
  // (`?pooler=transaction` or `?pooler=session`) is refused with
  // kInvalidArgument naming both: behind a transaction pooler, named prepared
  // statements and session settings land on server sessions other clients
  // get. false = connect anyway (sqlguard doctor does, to report the pooler).
  // Default: true.
  bool refuse_undeclared_pooler = true;
  // SQLite: create the database file when it does not exist. false = open
  // an existing file only (no SQLITE_OPEN_CREATE): a missing file is
  // Error(kNotFound) naming the path, so a mistyped path is reported instead
  // of silently becoming a new, empty database. `sqlguard doctor`,
  // `lock list` and `migrate --status` open with false. Ignored for
  // sqlite::memory: and for server dialects (they never create a database).
  // Default: true.
  bool create_if_missing = true;
};

class Dialect;  // quoting + SQL catalog, internal
namespace detail {
struct ConnectionAccess;
}

// What a connection sends, for audits, tracing and `sqlguard bench
// --emit-sql` (see set_statement_observer()).
enum class StatementKind { kStatement, kBegin, kCommit, kRollback };
struct StatementEvent {
  std::string_view dialect{};     // "sqlite", "postgresql", "mysql"
  StatementKind kind = StatementKind::kStatement;
  std::string_view sql{};         // as sent, `?` placeholders (empty for begin/commit/rollback)
  std::string_view catalog_name{};  // sql/<dialect>/ entry it came from; empty for the caller's own SQL
};
using StatementObserver = std::function<void(const StatementEvent&)>;

// Process-wide observer, called for every statement of every connection
// (after the connection's own observer). Set it before connections are used
// concurrently; the callback must be thread-safe. Empty = none (default).
void set_global_statement_observer(StatementObserver observer);

class Connection {
 public:
  virtual ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // The dialect's name: "sqlite", "postgresql", "mysql", or a later one's.
  std::string_view dialect_name() const noexcept;
  // The same as DialectKind (kOther for a dialect added since the three).
  DialectKind kind() const noexcept;
  virtual const Capabilities& capabilities() const noexcept = 0;
  // Internal SQL builder of this dialect (src/dialect/dialect.h).
  virtual const Dialect& dialect() const noexcept = 0;
  // The URI with the password masked.
  virtual const std::string& description() const noexcept = 0;

  // Runs one of YOUR statements with `?` placeholders and bound parameters
  // (sqlguard's own statements come from its SQL catalog, see catalog.h);
  // the statement is prepared once per connection and kept in the bounded
  // statement cache (ConnectOptions::statement_cache_size). Outside an open
  // transaction the statement autocommits. Text parameters must be valid
  // UTF-8 without NUL (Error kInvalidArgument naming the parameter).
  Result execute(std::string_view sql, const Params& params = {});
  // execute() for a text that will not be run again (ad-hoc, generated):
  // prepared, run and deallocated, never cached and never evicting a cached
  // statement.
  Result execute_once(std::string_view sql, const Params& params = {});
  // Statements in this connection's cache now, and its bound.
  virtual std::size_t cached_statements() const noexcept = 0;
  virtual std::size_t statement_cache_capacity() const noexcept = 0;
  // Runs a parameterless multi-statement script (migrations, DDL).
  virtual void execute_script(std::string_view sql) = 0;

  void begin(Isolation isolation = Isolation::kDefault);
  void commit();
  void rollback();
  virtual bool in_transaction() const noexcept = 0;

  // Calls `observer` for every statement, BEGIN, COMMIT and ROLLBACK this
  // connection sends, before it is sent (same thread). Empty = none.
  void set_statement_observer(StatementObserver observer) { observer_ = std::move(observer); }

  // The database clock in milliseconds since the Unix epoch (UTC), read
  // fresh by this call (never a transaction-start timestamp).
  std::int64_t db_now_ms();

  // Re-establishes a broken connection (no-op if healthy and SQLite).
  // Statements prepared before are prepared again on use.
  virtual void reconnect() = 0;
  // Opaque server-side session id (PostgreSQL backend pid, MySQL
  // CONNECTION_ID()); 0 for SQLite. Used by tests/chaos to kill sessions.
  virtual std::int64_t session_id() = 0;

  // Wake-ups (capabilities().wakeups). PostgreSQL: waits up to `timeout` for
  // a NOTIFY on `channel`, LISTENing on first use. SQLite: waits up to
  // `timeout` for a release that wakes `channel` (its futex word in
  // <file>-sqlguard-wake), counting from the first call. True if one arrived. Must not be called
  // inside a transaction. Elsewhere: throws Error(kNotSupported).
  virtual bool wait_for_notify(const std::string& channel, std::chrono::milliseconds timeout);
  // wait_for_notify() answering what the wake-ups said: PostgreSQL each
  // NOTIFY's payload, in order (at most 64; more collapse into one ""),
  // elsewhere one "" when woken. Empty: none arrived.
  virtual std::vector<std::string> wait_for_notify_payloads(const std::string& channel,
                                                            std::chrono::milliseconds timeout);
  // Stops LISTENing on `channel` (no-op if not listening).
  virtual void unlisten(const std::string& channel);
  // Waits up to `timeout` for a wake-up on any of `channels` and answers the
  // channels that fired (the lock client's listener). PostgreSQL: LISTENs to
  // each channel from the first call that names it and UNLISTENs those a call
  // no longer names. SQLite: watches the channels' futex words together
  // (futex_waitv) and forgets those a call no longer names. Either way the
  // connection keeps state only for the channels of the last call. A channel
  // named for the first time counts wake-ups from this call on. Must not be called inside a transaction. Other connections:
  // asks wait_for_notify() of each channel (kNotSupported where it is).
  virtual std::vector<std::string> wait_for_any_notify(const std::vector<std::string>& channels,
                                                       std::chrono::milliseconds timeout);
  // A channel that fired and what its wake-ups said: PostgreSQL each
  // NOTIFY's payload, in order (at most 64; more collapse into one ""),
  // elsewhere one "".
  struct Wakeup {
    std::string channel{};
    std::vector<std::string> payloads{};
  };
  // wait_for_any_notify() answering the payloads too.
  virtual std::vector<Wakeup> wait_for_any_wakeup(const std::vector<std::string>& channels,
                                                  std::chrono::milliseconds timeout);
  // Ends a wait_for_any_notify() / wait_for_any_wakeup() / wait_for_notify()
  // that another thread is in on this connection early (it answers what has
  // fired so far, perhaps nothing), or the next one if none is in progress:
  // the caller wants it to wait on other channels now. The one call of a
  // Connection that may be made from another thread while the connection is
  // in use; never blocks. PostgreSQL only (an eventfd beside the socket);
  // elsewhere a no-op and the wait runs to its timeout.
  virtual void interrupt_wait() noexcept;

 protected:
  Connection() = default;
  // The driver work behind execute/begin/commit/rollback. `cache`: keep the
  // prepared statement in the connection's statement cache (false:
  // execute_once(), or a cache of size 0).
  virtual Result do_execute(std::string_view sql, const Params& params, bool cache) = 0;
  virtual void do_begin(Isolation isolation) = 0;
  virtual void do_commit() = 0;
  virtual void do_rollback() = 0;

 private:
  friend struct detail::ConnectionAccess;
  void notify(StatementKind kind, std::string_view sql, std::string_view catalog_name);
  Result execute_named(std::string_view catalog_name, std::string_view sql, const Params& params);
  StatementObserver observer_;
};

namespace detail {
// Lets the SQL catalog runner name the entry a statement came from.
struct ConnectionAccess {
  static Result execute_named(Connection& c, std::string_view name, std::string_view sql, const Params& params) {
    return c.execute_named(name, sql, params);
  }
};
}  // namespace detail

// Opens a connection; the URI scheme picks the dialect. Throws Error with
// kInvalidArgument (bad URI / unknown scheme / bad options; dialect not
// compiled in: kNotSupported), kConnectionLost (unreachable, refused, timed
// out), kUnauthenticated (wrong user or password), kPermissionDenied (no
// right to connect to that database; SQLite file not writable), kNotFound
// (missing database or SQLite directory).
//
// URI rules, the same for every server dialect: userinfo is everything
// before the last '@' of the authority, percent-decoded; a '/', '?' or '#'
// inside a password must be percent-encoded (an '@' after the host is
// refused rather than guessed at). `connect_timeout` in a URI is whole
// seconds, 1..3600 (0 or negative would mean "wait forever" to libpq and is
// refused); the smaller of it and ConnectOptions::connect_timeout applies.
// A query parameter given twice (`pooler=transaction&pooler=session`, also
// spelled differently: `%73slmode`) is refused naming it, not "last wins".
// PostgreSQL URIs may list hosts (`h1:5432,h2:5433`) and pass any libpq
// keyword as a query parameter; sqlguard hands libpq the parsed values, never
// the raw URI. SQLite URIs are file paths: no query parameters (a '?' is
// refused, not silently cut) and no credentials.
//
// Whatever the URI looks like, no part of its userinfo (user or password)
// appears in any message, log line or exception: URIs are masked on the raw
// text before any driver sees them, and driver messages are scrubbed.
std::unique_ptr<Connection> make_connection(std::string_view uri,
                                            const ConnectOptions& options = {});

// Throws Error(kInvalidArgument) "<what> must not run inside a transaction:
// the connection is already in a transaction[ (<why>)]" when `conn` is in one: for
// operations that open their own transactions or must commit on their own.
void require_no_transaction(const Connection& conn, std::string_view what, std::string_view why = {});

// Which dialects this build of sqlguard has compiled in.
bool dialect_available(DialectKind kind) noexcept;
bool dialect_available(std::string_view dialect_name) noexcept;

// The URI for messages: the whole userinfo (user and password) becomes ***,
// and so do the values of password-like query parameters or libpq keywords
// (password=, passwd=, pwd=, sslpassword=). Works on malformed text too: an
// unencoded '@', '/' or '?' in the password, bad percent-escapes, an
// unclosed '[', "scheme:/" typos and multi-host lists are all masked up to
// the last '@'. When in doubt it masks more.
std::string mask_uri(std::string_view uri);

// RAII transaction: rolls back in the destructor unless committed. The
// destructor never throws; a failed rollback is reported to the log hook.
class Transaction {
 public:
  explicit Transaction(Connection& conn, Isolation isolation = Isolation::kDefault);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  void commit();
  void rollback();
  bool active() const noexcept { return active_; }
  Connection& connection() noexcept { return conn_; }
  Result execute(std::string_view sql, const Params& params = {}) {
    return conn_.execute(sql, params);
  }

 private:
  Connection& conn_;
  bool active_ = true;
};

}  // namespace sqlguard
