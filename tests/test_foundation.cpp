// Foundation: URIs, connections, values, transactions, the database clock,
// identifier/name/duration validation, the native escape hatches.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "sqlguard/connection.h"
#include "core/uri.h"
#include "sqlguard/validate.h"
#include "test_context.h"
#include "test_helpers.h"
#ifdef SQLGUARD_TEST_SQLITE
#include <sqlite3.h>
#include "sqlguard/sqlite.h"
#endif
#ifdef SQLGUARD_TEST_POSTGRESQL
#include <pqxx/pqxx>
#include "sqlguard/postgresql.h"
#endif
#ifdef SQLGUARD_TEST_MYSQL
#include <cppconn/connection.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>
#include "sqlguard/mysql.h"
#endif

using namespace sqlguard;
using sgtest::code_of;
using sgtest::ctx;
using sgtest::message_of;
using Catch::Matchers::Contains;

namespace {
// A loopback listener that accepts TCP connections but never speaks.
struct SilentListener {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int port = 0;
  SilentListener() {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(listen(fd, 16) == 0);
    socklen_t len = sizeof addr;
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
  }
  ~SilentListener() { close(fd); }
};

std::string scratch_table(Connection& c, const std::string& extra_cols = "") {
  std::string t = ctx().unique("t");
  c.execute_script("CREATE TABLE " + t + " (id INTEGER NOT NULL PRIMARY KEY, v INTEGER NOT NULL" + extra_cols + ")");
  return t;
}
}  // namespace

TEST_CASE("a dialect not built in is not_supported, naming its build option", "[foundation][build]") {
  const struct {
    sqlguard::DialectKind kind;
    const char* uri;
    const char* option;
  } dialects[] = {{sqlguard::DialectKind::kSqlite, "sqlite::memory:", "-DSQLGUARD_WITH_SQLITE=ON"},
                  {sqlguard::DialectKind::kPostgresql, "postgresql://u:secret@127.0.0.1:1/db",
                   "-DSQLGUARD_WITH_POSTGRESQL=ON (needs libpqxx-dev)"},
                  {sqlguard::DialectKind::kMysql, "mysql://u:secret@127.0.0.1:1/db", "-DSQLGUARD_WITH_MYSQL=ON"}};
  int missing = 0;
  for (const auto& d : dialects) {
    if (sqlguard::dialect_available(d.kind)) continue;
    ++missing;
    INFO(d.uri);
    try {
      sqlguard::make_connection(d.uri);
      FAIL("a connection to a dialect not compiled in opened");
    } catch (const sqlguard::Error& e) {
      CHECK(e.code() == sqlguard::ErrorCode::kNotSupported);
      CHECK_THAT(e.what(), Catch::Contains(d.option) && Catch::Contains("not compiled into this build"));
    }
  }
  if (missing == 0) SUCCEED("every dialect is built in");
}

TEST_CASE("a connection opens from the context URI and reports its dialect", "[foundation]") {
  auto c = ctx().connect();
  CHECK(c->kind() == ctx().kind);
  CHECK(to_string(c->kind()) == ctx().name);
  // A dialect is known by its name; the enum is a deprecated alias.
  CHECK(c->dialect_name() == ctx().name);
  CHECK(dialect_available(c->dialect_name()));
  CHECK_FALSE(dialect_available("duckdb"));
  CHECK(to_string(DialectKind::kOther) == "other");
  CHECK_THAT(c->description(), !Contains("sqlguard:sqlguard@"));  // password masked
}

TEST_CASE("values round-trip through bound parameters, including NULL, blobs and injection text", "[foundation]") {
  auto c = ctx().connect();
  std::string t = ctx().unique("vals");
  c->execute_script("CREATE TABLE " + t + " (id INTEGER NOT NULL PRIMARY KEY, i BIGINT, s VARCHAR(200), b " +
                    std::string(ctx().is(DialectKind::kPostgresql) ? "BYTEA" : ctx().is(DialectKind::kMysql) ? "LONGBLOB" : "BLOB") + ")");
  std::string evil = "x'); DROP TABLE " + t + "; --";
  std::string bytes("\0\x01\xff'\"\\", 6);
  auto ins = c->execute("INSERT INTO " + t + " (id, i, s, b) VALUES (?, ?, ?, ?)", {1, std::int64_t(1) << 53, evil, Value::blob(bytes)});
  CHECK(ins.affected == 1);
  c->execute("INSERT INTO " + t + " (id, i, s, b) VALUES (?, ?, ?, ?)", {2, Value(), Value(), Value()});
  auto r = c->execute("SELECT i, s, b FROM " + t + " WHERE id = ?", {1});
  REQUIRE(r.rows.size() == 1);
  CHECK(r.rows[0][0].as_int() == (std::int64_t(1) << 53));
  CHECK(r.rows[0][1].as_string() == evil);
  CHECK(r.rows[0][2].as_string() == bytes);
  auto n = c->execute("SELECT i, s, b FROM " + t + " WHERE id = ?", {2});
  CHECK(n.rows[0][0].is_null());
  CHECK(n.rows[0][1].is_null());
  CHECK(n.rows[0][2].is_null());
  CHECK(c->execute("SELECT COUNT(*) FROM " + t).rows[0][0].as_int() == 2);
}

TEST_CASE("rows affected counts matched rows, even when a value does not change", "[foundation]") {
  auto c = ctx().connect();
  auto t = scratch_table(*c);
  c->execute("INSERT INTO " + t + " (id, v) VALUES (1, 5)");
  CHECK(c->execute("UPDATE " + t + " SET v = 5 WHERE id = 1").affected == 1);
  CHECK(c->execute("UPDATE " + t + " SET v = 6 WHERE id = 2").affected == 0);
}

TEST_CASE("a transaction rolls back unless committed", "[foundation]") {
  auto c = ctx().connect();
  auto t = scratch_table(*c);
  {
    Transaction tx(*c);
    tx.execute("INSERT INTO " + t + " (id, v) VALUES (1, 1)");
  }
  CHECK(c->execute("SELECT COUNT(*) FROM " + t).rows[0][0].as_int() == 0);
  {
    Transaction tx(*c, Isolation::kReadCommitted);
    tx.execute("INSERT INTO " + t + " (id, v) VALUES (1, 1)");
    tx.commit();
  }
  auto other = ctx().connect();
  CHECK(other->execute("SELECT COUNT(*) FROM " + t).rows[0][0].as_int() == 1);
  CHECK_FALSE(c->in_transaction());
  // One server: a transaction rolled back under it fails its statement (a
  // Galera node says true: tests/test_galera.cpp).
  CHECK_FALSE(c->capabilities().unseen_rollbacks);
}

TEST_CASE("every isolation level can be opened", "[foundation]") {
  auto c = ctx().connect();
  for (auto iso : {Isolation::kDefault, Isolation::kReadCommitted, Isolation::kRepeatableRead, Isolation::kSerializable}) {
    Transaction tx(*c, iso);
    CHECK(c->in_transaction());
    tx.commit();
  }
}

TEST_CASE("on MariaDB a read-committed transaction sends no SET TRANSACTION while the session is at sqlguard's level, "
          "and sets its own level again once a statement changed the session's",
          "[foundation]") {
  if (!ctx().is(sqlguard::DialectKind::kMysql)) {
    SUCCEED("PostgreSQL names the level in its BEGIN; SQLite has one level");
    return;
  }
  auto c = ctx().connect();
  // SET statements this session sent (the server's own count).
  auto sets = [&] {
    return std::stoll(c->execute("SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS "
                                 "WHERE VARIABLE_NAME = 'COM_SET_OPTION'").rows.at(0)[0].as_string());
  };
  auto read_committed_tx = [&] {
    Transaction tx(*c, Isolation::kReadCommitted);
    c->execute("SELECT 1");
    tx.commit();
  };
  auto before = sets();
  read_committed_tx();
  CHECK(sets() - before == 0);  // START TRANSACTION alone: the session is at READ COMMITTED
  // A statement through the connection changes the session's level: the
  // next read-committed transaction names its level again (control: the
  // count above can move).
  c->execute("SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE");
  before = sets();
  read_committed_tx();
  CHECK(sets() - before == 1);
}

TEST_CASE("the database clock is UTC milliseconds and advances inside one long transaction", "[foundation][clock]") {
  auto c = ctx().connect();
  auto client_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  auto db_ms = c->db_now_ms();
  // Same machine: the DB clock is the host clock, in UTC epoch ms.
  CHECK(std::llabs(db_ms - client_ms) < 5000);
  Transaction tx(*c);
  auto t1 = c->db_now_ms();
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  auto t2 = c->db_now_ms();
  // PostgreSQL now() would be frozen here; clock_timestamp() is not.
  CHECK(t2 - t1 >= 50);
  tx.commit();
}

TEST_CASE("identifiers are validated: injection, empty and oversize names are refused", "[foundation][validate]") {
  CHECK_NOTHROW(validate_identifier("orders"));
  CHECK_NOTHROW(validate_identifier("shop.orders_2024"));
  CHECK_NOTHROW(validate_identifier(std::string(63, 'a')));
  for (std::string bad : std::vector<std::string>{"orders; DROP TABLE x", "", "1abc", "a-b", "a b", "a.b.c", "\"x\"", "`x`",
                                                  "x'--", std::string(64, 'a'), ".a", "a."}) {
    INFO(bad);
    CHECK(code_of([&] { validate_identifier(bad, "table"); }) == ErrorCode::kInvalidArgument);
  }
  CHECK_THAT(message_of([] { validate_identifier("orders; DROP TABLE x", "table"); }),
             Contains("table 'orders; DROP TABLE x' is not a valid SQL identifier"));
}

TEST_CASE("names are refused when empty, oversize (never truncated), with NUL or invalid UTF-8", "[foundation][validate]") {
  CHECK_NOTHROW(validate_name("order-42"));
  CHECK_NOTHROW(validate_name(std::string(255, 'x')));
  CHECK_NOTHROW(validate_name("заказ-7"));
  CHECK(code_of([] { validate_name(""); }) == ErrorCode::kInvalidArgument);
  CHECK_THAT(message_of([] { validate_name(std::string(256, 'x'), "lock name"); }),
             Contains("lock name is 256 bytes; the limit is 255"));
  CHECK(code_of([] { validate_name(std::string("a\0b", 3)); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([] { validate_name("\xff\xfe"); }) == ErrorCode::kInvalidArgument);
}

TEST_CASE("the text rule refuses every class of invalid UTF-8 and NUL, and names the parameter", "[foundation][validate]") {
  // Valid: ASCII, 2/3/4-byte forms at their edges.
  for (std::string ok : {"", "plain", "\xc2\x80", "\xdf\xbf", "\xe0\xa0\x80", "\xed\x9f\xbf", "\xee\x80\x80",
                         "\xef\xbf\xbf", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf", "\xe2\x80\xae ltr override"}) {
    INFO(printable(ok));
    CHECK(is_valid_utf8(ok));
    CHECK_NOTHROW(validate_text(ok, "value"));
  }
  struct Bad {
    std::string text, why;
  };
  for (const auto& b : std::vector<Bad>{{"\xc0\xaf", "overlong"},         // '/' in 2 bytes
                                        {"\xc1\xbf", "overlong"},
                                        {"\xe0\x80\xaf", "overlong"},     // '/' in 3 bytes
                                        {"\xf0\x80\x80\xaf", "overlong"}, // '/' in 4 bytes
                                        {"\xed\xa0\x80", "surrogate"},    // U+D800
                                        {"\xed\xbf\xbf", "surrogate"},    // U+DFFF
                                        {"\xf4\x90\x80\x80", "above U+10FFFF"},
                                        {"\xf5\x80\x80\x80", "above U+10FFFF"},
                                        {"\xff", "invalid byte"},
                                        {"a\x80", "continuation"},
                                        {"\xe2\x82", "truncated"},
                                        {"\xe2\x28\xa1", "truncated"}}) {
    INFO(printable(b.text));
    CHECK_FALSE(is_valid_utf8(b.text));
    std::string what = message_of([&] { validate_text(b.text, "GuardedUpdate::apply() key"); });
    CHECK_THAT(what, Contains("GuardedUpdate::apply() key is not valid UTF-8"));
    CHECK_THAT(what, Contains(b.why));
    CHECK(is_valid_utf8(what));  // the message itself is always safe to print
  }
  std::string nul("alice\0-not-alice", 16);
  CHECK(is_valid_utf8(nul));
  CHECK_THAT(message_of([&] { validate_text(nul, "key"); }), Contains("key contains a NUL byte at byte 5"));
  // Every statement applies it to its text parameters, naming them.
  auto c = ctx().connect();
  CHECK_THAT(message_of([&] { c->execute("SELECT ?", {nul}); }), Contains("parameter 1 (of Connection::execute())"));
  CHECK(code_of([&] { c->execute_once("SELECT ?", {"\xed\xa0\x80"}); }) == ErrorCode::kInvalidArgument);
  // Bytes are bytes: a blob with the same content is fine.
  CHECK(c->execute("SELECT ?", {Value::blob(nul)}).rows.size() == 1);
}

TEST_CASE("printable() and error messages are one line of valid UTF-8 whatever the input", "[foundation][validate]") {
  CHECK(printable("plain name") == "plain name");
  CHECK(printable("заказ-7") == "заказ-7");
  CHECK(printable("a\nb\tc\r") == "a\\nb\\tc\\r");
  CHECK(printable("\x1b[31mred") == "\\x1b[31mred");
  CHECK(printable("back\\slash") == "back\\\\slash");
  CHECK(printable("\xff\xfe") == "\\xff\\xfe");
  CHECK(printable("\xc2\x85 \xe2\x80\xae") == "\\u0085 \\u202e");
  CHECK(printable(std::string("a\0b", 3)) == "a\\x00b");
  CHECK(printable("abcdef", 3) == "abc...");
  CHECK(printable("\xd0\xb7\xd0\xb0", 1) == "\xd0\xb7...");  // never cuts a character
  Error e(ErrorCode::kInternal, "line one\nline two \x1b[2J \xff");
  CHECK(std::string(e.what()).find('\n') == std::string::npos);
  CHECK(std::string(e.what()).find('\x1b') == std::string::npos);
  CHECK(is_valid_utf8(e.what()));
  CHECK(e.message() == "line one\\nline two \\x1b[2J \\xff");
}

TEST_CASE("durations parse with units and bad ones are refused", "[foundation][validate]") {
  using std::chrono::milliseconds;
  CHECK(parse_duration("500ms") == milliseconds(500));
  CHECK(parse_duration("30s") == milliseconds(30000));
  CHECK(parse_duration("5m") == milliseconds(300000));
  CHECK(parse_duration("2h") == milliseconds(7200000));
  CHECK(parse_duration("1.5s") == milliseconds(1500));
  CHECK(parse_duration("0.25h") == milliseconds(900000));
  CHECK(parse_duration("1h30m") == milliseconds(5400000));
  CHECK(parse_duration("1d2h3m4s5ms") == milliseconds(93784005));
  CHECK(parse_duration("2m0.5s") == milliseconds(120500));
  for (std::string bad : {"", "-1s", "abc", "5x", "7", "1.5", "0.5ms", "1.s5", ".s", "1h30", "99999999999999999999d",
                          "s", "1..5s"}) {
    INFO(bad);
    CHECK(code_of([&] { parse_duration(bad); }) == ErrorCode::kInvalidArgument);
  }
  // A bare number is refused with the accepted forms listed.
  CHECK_THAT(message_of([] { parse_duration("5"); }), Contains("has no unit"));
  CHECK_THAT(message_of([] { parse_duration("5"); }), Contains("1h30m"));
  CHECK(format_duration(milliseconds(30000)) == "30s");
  CHECK(format_duration(milliseconds(1500)) == "1500ms");
  // Whole days as days: the bound of a ttl reads as the docs write it (issue 39: "168h").
  CHECK(format_duration(std::chrono::hours(24 * 7)) == "7d");
  CHECK(format_duration(std::chrono::hours(36)) == "36h");
  CHECK(parse_duration(format_duration(std::chrono::hours(24 * 365))) == std::chrono::hours(24 * 365));
  CHECK_THAT(message_of([] { check_duration(std::chrono::hours(24 * 8), "ttl", milliseconds(10), std::chrono::hours(24 * 7)); }),
             Contains("between 10ms and 7d"));
  // Database times as the history, verify and the CLI write them (UTC, ms).
  CHECK(format_db_time(0) == "1970-01-01T00:00:00.000Z");
  CHECK(format_db_time(1796564491250) == "2026-12-06T13:41:31.250Z");
  CHECK(format_db_time(-1) == "1969-12-31T23:59:59.999Z");
}

TEST_CASE("bad URIs get a clear error naming the problem, with the password masked", "[foundation][uri]") {
  CHECK(code_of([] { make_connection("redis://localhost:6379"); }) == ErrorCode::kInvalidArgument);
  CHECK_THAT(message_of([] { make_connection("redis://u:hunter2@localhost"); }), Contains("unknown URI scheme 'redis'"));
  CHECK_THAT(message_of([] { make_connection("redis://u:hunter2@localhost"); }), !Contains("hunter2"));
  CHECK(code_of([] { make_connection("nonsense"); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([] { make_connection(""); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([] { make_connection("sqlite://"); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([] { make_connection("mysql://u:p@127.0.0.1:notaport/db"); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([] { make_connection("mysql://u:p@127.0.0.1:3306"); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([] { make_connection("postgresql://u:p@127.0.0.1:notaport/db"); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([] { make_connection("sqlite:///no/such/dir/x.db"); }) == ErrorCode::kNotFound);
  CHECK_THAT(message_of([] { make_connection("sqlite:///no/such/dir/x.db"); }), Contains("'/no/such/dir/x.db'"));
  // The whole userinfo is masked, and password-like parameters.
  CHECK(mask_uri("postgresql://alice:s3cret@db:5432/x?password=s3cret") == "postgresql://***@db:5432/x?password=***");
  CHECK(mask_uri("postgresql://u:Wr@ngPw9@host/db") == "postgresql://***@host/db");
  CHECK(mask_uri("postgresql:/u:pw@host/db") == "postgresql:/***@host/db");
  CHECK(mask_uri("postgresql://u:pw@h1:1,h2:2/db") == "postgresql://***@h1:1,h2:2/db");
  CHECK(mask_uri("host=h user=u password='se cret' dbname=d") == "host=h user=u password=*** dbname=d");
  CHECK(mask_uri("sqlite:///tmp/me@home/x.db") == "sqlite:///tmp/me@home/x.db");  // a path, not credentials
  ConnectOptions bad;
  bad.connect_timeout = std::chrono::milliseconds(0);
  CHECK(code_of([&] { make_connection("sqlite::memory:", bad); }) == ErrorCode::kInvalidArgument);
  ConnectOptions huge_cache;
  huge_cache.statement_cache_size = 10001;
  CHECK(code_of([&] { make_connection("sqlite::memory:", huge_cache); }) == ErrorCode::kInvalidArgument);
  // A URI connect_timeout that libpq / the MariaDB client would read as
  // "wait forever" is refused, never passed on.
  for (std::string q : {"0", "-1", "abc", "3601"}) {
    INFO(q);
    CHECK(code_of([&] { make_connection("postgresql://u:p@127.0.0.1:1/db?connect_timeout=" + q); }) ==
          ErrorCode::kInvalidArgument);
    CHECK(code_of([&] { make_connection("mysql://u:p@127.0.0.1:1/db?connect_timeout=" + q); }) ==
          ErrorCode::kInvalidArgument);
  }
  CHECK_THAT(message_of([] { make_connection("mysql://u:p@127.0.0.1:1/db?connect_timeout=0"); }),
             Contains("wait forever"));
  // libpq keywords, host lists and IPv6 hosts pass; only the unreachable
  // servers fail (connection_lost, not invalid_argument).
  ConnectOptions quick;
  quick.connect_timeout = std::chrono::seconds(3);
  CHECK(code_of([&] {
          make_connection("postgresql://u:p@127.0.0.1:1,127.0.0.1:2/db?target_session_attrs=read-write&sslmode=disable",
                          quick);
        }) == ErrorCode::kConnectionLost);
  CHECK(code_of([&] { make_connection("postgresql://u:p@[::1]:1/db", quick); }) == ErrorCode::kConnectionLost);
  CHECK(code_of([&] { make_connection("postgresql://u:p@127.0.0.1:1/db?no_such_keyword=1", quick); }) ==
        ErrorCode::kInvalidArgument);
  // SQLite paths are literal: a '?' is refused instead of opening another file.
  CHECK_THAT(message_of([] { make_connection("sqlite:///tmp/a?b.db"); }), Contains("'?'"));
  CHECK(code_of([] { make_connection("sqlite://u:pw@host/db"); }) == ErrorCode::kInvalidArgument);
}

TEST_CASE("a URI connect_timeout can shorten the connect timeout but never lengthen it into a hang", "[foundation][uri]") {
  if (ctx().is_sqlite()) {
    SUCCEED("SQLite has no connect timeout");
    return;
  }
  SilentListener listener;
  std::string scheme = ctx().is(DialectKind::kPostgresql) ? "postgresql" : "mysql";
  std::string silent = scheme + "://u:p@127.0.0.1:" + std::to_string(listener.port) + "/db?connect_timeout=3600";
  ConnectOptions o;
  o.connect_timeout = std::chrono::seconds(1);
  auto t0 = std::chrono::steady_clock::now();
  CHECK(code_of([&] { make_connection(silent, o); }) == ErrorCode::kConnectionLost);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60));  // bounded by the API's 1 s, not 3600 s
}

TEST_CASE("20,000 distinct statements keep the statement cache and the server's prepared statements bounded", "[foundation][cache]") {
  auto c = ctx().connect();
  if (ctx().pooler) {
    // Behind a transaction pooler nothing is prepared server-side: every
    // statement is the unnamed one, whatever the cache size asked for.
    CHECK(c->statement_cache_capacity() == 0);
    for (int i = 0; i < 2000; ++i) REQUIRE(c->execute("SELECT ? + " + std::to_string(i), {1}).rows[0][0].as_int() == i + 1);
    CHECK(c->cached_statements() == 0);
    CHECK(c->execute("SELECT COUNT(*) FROM pg_prepared_statements").rows[0][0].as_int() == 0);
    return;
  }
  CHECK(c->statement_cache_capacity() == 256);
  // Prepared statements this session holds on the server.
  auto server_side = [&]() -> std::int64_t {
    switch (ctx().kind) {
      case DialectKind::kPostgresql: return c->execute("SELECT COUNT(*) FROM pg_prepared_statements").rows[0][0].as_int();
      case DialectKind::kMysql: return c->execute("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'").rows[0][1].as_int();
      case DialectKind::kSqlite: {
#ifdef SQLGUARD_TEST_SQLITE
        std::int64_t n = 0;
        for (sqlite3_stmt* st = sqlite3_next_stmt(sqlite::native_handle(*c), nullptr); st;
             st = sqlite3_next_stmt(sqlite::native_handle(*c), st))
          ++n;
        return n;
#endif
      }
    }
    return 0;
  };
  const std::int64_t before = server_side();
  std::int64_t peak = before;
  for (int i = 0; i < 20000; ++i) {
    auto r = c->execute("SELECT ? + " + std::to_string(i), {1});
    REQUIRE(r.rows[0][0].as_int() == i + 1);
    if (i % 1000 == 999) {
      CHECK(c->cached_statements() <= 256);
      peak = std::max(peak, server_side());
    }
  }
  INFO("server-side prepared statements: before " << before << ", peak " << peak);
  CHECK(c->cached_statements() == 256);
  // MariaDB's count is server-wide (other sessions may hold some); without
  // the bound this connection alone would hit max_prepared_stmt_count.
  CHECK(peak <= before + 256 + (ctx().is(DialectKind::kMysql) ? 1000 : 2));
  // Inside a transaction, evicted statements are deallocated at its end
  // (PostgreSQL refuses DEALLOCATE in an aborted transaction).
  c->begin();
  for (int i = 0; i < 300; ++i) c->execute("SELECT ? * " + std::to_string(i), {1});
  CHECK(code_of([&] { c->execute("SELECT * FROM no_such_table_in_cache_test"); }) == ErrorCode::kSchemaMismatch);
  c->rollback();
  CHECK(c->execute("SELECT 1").rows.size() == 1);
  CHECK(server_side() <= before + 256 + (ctx().is(DialectKind::kMysql) ? 1000 : 2));
  // Ad-hoc texts bypass the cache: nothing is cached or evicted.
  auto cached = c->cached_statements();
  for (int i = 0; i < 500; ++i) CHECK(c->execute_once("SELECT ? - " + std::to_string(i), {i}).rows[0][0].as_int() == 0);
  CHECK(c->cached_statements() == cached);
  // A cache of size 0 prepares and drops every statement; a URI may set it too.
  ConnectOptions none;
  none.statement_cache_size = 0;
  auto c0 = ctx().connect(none);
  for (int i = 0; i < 50; ++i) CHECK(c0->execute("SELECT ? + 0", {i}).rows[0][0].as_int() == i);
  CHECK(c0->cached_statements() == 0);
  if (!ctx().is_sqlite()) {
    auto c8 = make_connection(ctx().uri + "?statement_cache_size=8");
    CHECK(c8->statement_cache_capacity() == 8);
  }
}

TEST_CASE("sqlite URI forms open the expected database", "[foundation][uri]") {
  auto mem = make_connection("sqlite::memory:");
  CHECK(mem->kind() == DialectKind::kSqlite);
  char dir[] = "/tmp/sgtest-uri-XXXXXX";
  REQUIRE(mkdtemp(dir));
  auto abs = make_connection(std::string("sqlite://") + dir + "/a.db");
  abs->execute_script("CREATE TABLE x (id INTEGER)");
  auto again = make_connection(std::string("sqlite:///") + (dir + 1) + "/a.db");
  CHECK(again->execute("SELECT COUNT(*) FROM x").rows[0][0].as_int() == 0);
  std::string cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  auto rel = make_connection("sqlite://rel.db");
  rel->execute_script("CREATE TABLE y (id INTEGER)");
  std::filesystem::current_path(cwd);
  CHECK(std::filesystem::exists(std::string(dir) + "/rel.db"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("server connections fail clearly: wrong password, missing database, refused port, silent server", "[foundation][uri]") {
  if (ctx().is_sqlite()) {
    SUCCEED("SQLite has no server; its open errors are covered by the URI test");
    return;
  }
  const std::string base = ctx().base_uri;
  auto scheme_end = base.find("://") + 3;
  auto at = base.find('@');
  auto colon = base.find(':', scheme_end);
  std::string wrong_pw = base.substr(0, colon + 1) + "definitely-wrong-pw" + base.substr(at);
  auto e1 = message_of([&] { make_connection(wrong_pw); });
  // Behind PgBouncer the pooler refuses the login itself, with the SQLSTATE
  // it chooses (measured: not 28P01): refused either way, never accepted.
  if (ctx().pooler)
    CHECK((code_of([&] { make_connection(wrong_pw); }) == ErrorCode::kUnauthenticated ||
           code_of([&] { make_connection(wrong_pw); }) == ErrorCode::kConnectionLost));
  else
    CHECK(code_of([&] { make_connection(wrong_pw); }) == ErrorCode::kUnauthenticated);
  CHECK_THAT(e1, !Contains("definitely-wrong-pw"));

  auto slash = base.find('/', at);
  std::string missing_db = base.substr(0, slash) + "/no_such_db_sqlguard" +
                           (base.find('?') == std::string::npos ? "" : base.substr(base.find('?')));
  if (ctx().pooler)  // PgBouncer reports the server's refusal as its own connect failure
    CHECK((code_of([&] { make_connection(missing_db); }) == ErrorCode::kNotFound ||
           code_of([&] { make_connection(missing_db); }) == ErrorCode::kConnectionLost));
  else
    CHECK(code_of([&] { make_connection(missing_db); }) == ErrorCode::kNotFound);

  // A port nobody listens on: refused at once.
  std::string host_part = base.substr(0, base.find(':', at)) + ":1" + base.substr(slash);
  CHECK(code_of([&] { make_connection(host_part); }) == ErrorCode::kConnectionLost);

  // A listener that accepts TCP but never speaks: the connect timeout bounds it.
  SilentListener listener;
  std::string silent = base.substr(0, base.find(':', at)) + ":" + std::to_string(listener.port) + base.substr(slash);
  ConnectOptions o;
  o.connect_timeout = std::chrono::seconds(2);
  auto t0 = std::chrono::steady_clock::now();
  CHECK(code_of([&] { make_connection(silent, o); }) == ErrorCode::kConnectionLost);
  auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took < std::chrono::seconds(30));  // bounded, not hung
}

TEST_CASE("the native escape hatch runs user statements inside the sqlguard transaction", "[foundation][native]") {
  auto c = ctx().connect();
  auto t = scratch_table(*c);
  for (bool commit : {false, true}) {
    Transaction tx(*c);
    std::string ins = "INSERT INTO " + t + " (id, v) VALUES (" + std::to_string(commit ? 2 : 1) + ", 7)";
    switch (c->kind()) {
      case DialectKind::kSqlite:
#ifdef SQLGUARD_TEST_SQLITE
        REQUIRE(sqlite3_exec(sqlite::native_handle(*c), ins.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
#endif
        break;
      case DialectKind::kPostgresql:
#ifdef SQLGUARD_TEST_POSTGRESQL
        postgresql::native_transaction(*c).exec0(ins);
#endif
        break;
      case DialectKind::kMysql:
#ifdef SQLGUARD_TEST_MYSQL
      {
        std::unique_ptr<sql::Statement> st(mysql::native_handle(*c)->createStatement());
        st->execute(ins);
      }
#endif
        break;
    }
    if (commit) tx.commit();
  }
  auto r = c->execute("SELECT id FROM " + t);
  REQUIRE(r.rows.size() == 1);
  CHECK(r.rows[0][0].as_int() == 2);
}

TEST_CASE("a connection killed on the server reports ConnectionLost and reconnects on next use", "[foundation][faults]") {
  if (ctx().is_sqlite()) {
    SUCCEED("SQLite has no server session to kill");
    return;
  }
  auto victim = ctx().connect();
  auto killer = ctx().connect();
  if (ctx().pooler) {
    // An idle client behind a transaction pooler owns no server session:
    // kill every server session of the database; the client sees at most one
    // ConnectionLost (the pooler hands it a dead server connection), then works.
    REQUIRE(victim->execute("SELECT 1").rows[0][0].as_int() == 1);
    killer->execute(
        "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() AND pid <> "
        "pg_backend_pid()");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ErrorCode code = ErrorCode::kConnectionLost;
    bool threw = false;
    try {
      victim->execute("SELECT 1");
    } catch (const Error& e) {
      threw = true;
      code = e.code();
    }
    CHECK((!threw || code == ErrorCode::kConnectionLost));
    CHECK(victim->execute("SELECT 1").rows[0][0].as_int() == 1);
    return;
  }
  auto id = victim->session_id();
  if (ctx().is(DialectKind::kPostgresql)) killer->execute("SELECT pg_terminate_backend(?)", {id});
  else killer->execute_script("KILL " + std::to_string(id));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(code_of([&] { victim->execute("SELECT 1"); }) == ErrorCode::kConnectionLost);
  CHECK(victim->execute("SELECT 1").rows[0][0].as_int() == 1);
  CHECK(victim->session_id() != id);
}

TEST_CASE("masking hides secrets and only secrets: quotes and identifiers around them survive", "[foundation][uri]") {
  // A URI quoted in a message keeps its closing quote and what follows.
  CHECK(mask_uri("cannot connect to 'postgresql://h/db?password=abc' (refused)") ==
        "cannot connect to 'postgresql://h/db?password=***' (refused)");
  CHECK(mask_uri("see \"postgresql://h/db?sslpassword=k3y&sslmode=require\" now") ==
        "see \"postgresql://h/db?sslpassword=***&sslmode=require\" now");
  // A password that is also part of an identifier: the identifier stays,
  // the password itself (as a token of its own) goes.
  auto u = sqlguard::detail::parse_uri("postgresql://app:sqlguard@h/db");
  CHECK(sqlguard::detail::scrub_credentials("relation \"sqlguard_fence_seq\" does not exist", u) ==
        "relation \"sqlguard_fence_seq\" does not exist");
  CHECK(sqlguard::detail::scrub_credentials("table mysqlguard missing", u) == "table mysqlguard missing");
  CHECK(sqlguard::detail::scrub_credentials("password sqlguard: rejected", u) == "password ***: rejected");
  CHECK(sqlguard::detail::scrub_credentials("conninfo password='sqlguard'", u) == "conninfo password='***'");
  // The user name is not a secret: an auth error keeps it.
  CHECK(sqlguard::detail::scrub_credentials("password authentication failed for user \"app\"", u) ==
        "password authentication failed for user \"app\"");
  CHECK(sqlguard::detail::scrub_credentials("Access denied for user 'app'@'h' (app:sqlguard)", u) ==
        "Access denied for user 'app'@'h' (***)");
  // A password of symbols is masked wherever it appears.
  auto v = sqlguard::detail::parse_uri("postgresql://app:%21%40xyz@h/db");
  CHECK(sqlguard::detail::scrub_credentials("got !@xyz here and a!@xyzb", v) == "got *** here and a***b");
}

TEST_CASE("a whole URI with a raw quote in its password parameter is masked to the end of the value",
          "[foundation][uri]") {
  CHECK(mask_uri("postgresql://h/db?password=ab'cd&sslmode=require") == "postgresql://h/db?password=***&sslmode=require");
}

TEST_CASE("one server and database has one canonical URI: scheme alias, parameter order, a trailing '?', an explicit "
          "default port and the host's case do not matter; another host spelling or port does",
          "[foundation][uri]") {
  using sqlguard::detail::canonical_uri;
  const std::string pg = canonical_uri("postgresql://app:pw@db.example/shop?sslmode=require&application_name=x");
  CHECK(canonical_uri("postgres://app:pw@DB.example/shop?application_name=x&sslmode=require") == pg);
  CHECK(canonical_uri("postgresql://app:pw@db.example:5432/shop?sslmode=require&application_name=x&") == pg);
  CHECK(canonical_uri("postgresql://app:p%77@db.example/shop?sslmode=require&application_name=x") == pg);
  CHECK(canonical_uri("postgresql://app:pw@db.example:5433/shop?sslmode=require&application_name=x") != pg);
  CHECK(canonical_uri("postgresql://app:other@db.example/shop?sslmode=require&application_name=x") != pg);
  CHECK(canonical_uri("postgresql://app:pw@db.example/shop?sslmode=disable&application_name=x") != pg);
  CHECK(canonical_uri("postgresql://app:pw@h/db?") == canonical_uri("postgresql://app:pw@h/db"));
  const std::string my = canonical_uri("mysql://app:pw@127.0.0.1/shop");
  CHECK(canonical_uri("mariadb://app:pw@127.0.0.1:3306/shop?") == my);
  // localhost is not 127.0.0.1: libpq resolves it (::1 may come first, a
  // different listener), the MySQL client library may take it for its socket.
  CHECK(canonical_uri("mysql://app:pw@localhost/shop") != my);
  CHECK(canonical_uri("postgresql://app:pw@localhost/db") != canonical_uri("postgresql://app:pw@127.0.0.1/db"));
  CHECK(canonical_uri("sqlite3:///tmp/x.db") == canonical_uri("sqlite:///tmp/x.db"));
  CHECK(canonical_uri("sqlite:///tmp/x.db") != canonical_uri("sqlite:///tmp/y.db"));
}

TEST_CASE("a URI parameter given twice is refused naming it, on every server dialect", "[foundation][uri]") {
  std::string what;
  for (const std::string uri : {"postgresql://u@127.0.0.1:1/db?pooler=transaction&pooler=session",
                                "postgresql://u@127.0.0.1:1/db?sslmode=disable&%73slmode=require",
                                "mysql://u@127.0.0.1:1/db?connect_timeout=5&connect_timeout=50"}) {
    INFO(uri);
    CHECK(code_of([&] { make_connection(uri); }, &what) == ErrorCode::kInvalidArgument);
    CHECK(what.find("twice") != std::string::npos);
    CHECK((what.find("'pooler'") != std::string::npos || what.find("'sslmode'") != std::string::npos ||
           what.find("'connect_timeout'") != std::string::npos));
  }
}

TEST_CASE("masking a message that quotes an already masked URI changes nothing: the text after the password stays",
          "[foundation][uri]") {
  const std::string masked = "cannot connect to postgresql://***@127.0.0.1:1/db?sslmode=disable&password=***: "
                             "connection refused";
  CHECK(mask_uri(masked) == masked);
  CHECK(mask_uri("x postgresql://h/db?password=***, then y") == "x postgresql://h/db?password=***, then y");
  // A real secret is still masked (in free text up to the next space).
  CHECK(mask_uri("cannot connect to postgresql://u@h/db?password=s3cret: refused").find("s3cret") == std::string::npos);
  // Through a real connect error: the driver's message after the URI is kept.
  std::string what;
  CHECK(code_of([&] { make_connection("postgresql://u@127.0.0.1:1/db?password=s3cret&connect_timeout=2"); }, &what) ==
        ErrorCode::kConnectionLost);
  INFO(what);
  CHECK(what.find("s3cret") == std::string::npos);
  CHECK(mask_uri(what) == what);
}

TEST_CASE("interrupt_wait() from another thread ends a wake-up wait at once, or the next one, and the session still "
          "hears NOTIFYs after it",
          "[foundation][notify]") {
  if (!ctx().is(DialectKind::kPostgresql) || ctx().pooler) {
    SUCCEED("interrupt_wait() is a no-op where no wake-up wait blocks on a socket (SQLite's futex words, MariaDB's "
            "wake-up locks) or nothing is listened to (a transaction pooler)");
    return;
  }
  using namespace std::chrono_literals;
  auto c = ctx().connect();
  auto notifier = ctx().connect();
  const std::string ch = ctx().unique("wake");
  auto timed_wait = [&](std::chrono::milliseconds d) {
    const auto t0 = std::chrono::steady_clock::now();
    auto got = c->wait_for_any_wakeup({ch}, d);
    return std::make_pair(got, std::chrono::steady_clock::now() - t0);
  };
  // Control: with nothing to wake it, a wait runs to its timeout.
  auto [none, waited] = timed_wait(300ms);
  CHECK(none.empty());
  CHECK(waited >= 250ms);
  // Interrupted from another thread: it ends long before its 20 s.
  std::pair<std::vector<Connection::Wakeup>, std::chrono::steady_clock::duration> r;
  std::thread t([&] { r = timed_wait(20s); });
  std::this_thread::sleep_for(200ms);
  c->interrupt_wait();
  t.join();
  CHECK(r.first.empty());
  CHECK(r.second < 10s);
  // An interrupt with no wait in progress ends the next one, and only it.
  c->interrupt_wait();
  CHECK(timed_wait(20s).second < 10s);
  CHECK(timed_wait(300ms).second >= 250ms);
  // The session still listens: a NOTIFY is answered with its payload.
  notifier->execute("SELECT pg_notify(?, 'after')", {ch});
  auto heard = c->wait_for_any_wakeup({ch}, 10s);
  REQUIRE(heard.size() == 1);
  CHECK(heard[0].channel == ch);
  CHECK(heard[0].payloads == std::vector<std::string>{"after"});
}
