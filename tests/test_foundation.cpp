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
#include "sqlguard/validate.h"
#include "test_context.h"
#include "test_helpers.h"
#ifdef SQLGUARD_TEST_SQLITE
#include <sqlite3.h>
#include "sqlguard/sqlite.h"
#endif
#ifdef SQLGUARD_TEST_POSTGRES
#include <pqxx/pqxx>
#include "sqlguard/postgres.h"
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
std::string scratch_table(Connection& c, const std::string& extra_cols = "") {
  std::string t = ctx().unique("t");
  c.execute_script("CREATE TABLE " + t + " (id INTEGER NOT NULL PRIMARY KEY, v INTEGER NOT NULL" + extra_cols + ")");
  return t;
}
}  // namespace

TEST_CASE("a connection opens from the context URI and reports its dialect", "[foundation]") {
  auto c = ctx().connect();
  CHECK(c->kind() == ctx().kind);
  CHECK(to_string(c->kind()) == ctx().name);
  CHECK_THAT(c->description(), !Contains("sqlguard:sqlguard@"));  // password masked
}

TEST_CASE("values round-trip through bound parameters, including NULL, blobs and injection text", "[foundation]") {
  auto c = ctx().connect();
  std::string t = ctx().unique("vals");
  c->execute_script("CREATE TABLE " + t + " (id INTEGER NOT NULL PRIMARY KEY, i BIGINT, s VARCHAR(200), b " +
                    std::string(ctx().is(DialectKind::kPostgres) ? "BYTEA" : ctx().is(DialectKind::kMysql) ? "LONGBLOB" : "BLOB") + ")");
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
}

TEST_CASE("every isolation level can be opened", "[foundation]") {
  auto c = ctx().connect();
  for (auto iso : {Isolation::kDefault, Isolation::kReadCommitted, Isolation::kRepeatableRead, Isolation::kSerializable}) {
    Transaction tx(*c, iso);
    CHECK(c->in_transaction());
    tx.commit();
  }
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

TEST_CASE("durations parse with units and bad ones are refused", "[foundation][validate]") {
  using std::chrono::milliseconds;
  CHECK(parse_duration("500ms") == milliseconds(500));
  CHECK(parse_duration("30s") == milliseconds(30000));
  CHECK(parse_duration("5m") == milliseconds(300000));
  CHECK(parse_duration("2h") == milliseconds(7200000));
  CHECK(parse_duration("7") == milliseconds(7000));
  for (std::string bad : {"", "-1s", "abc", "5x", "1.5s", "99999999999999999999d", "s"}) {
    INFO(bad);
    CHECK(code_of([&] { parse_duration(bad); }) == ErrorCode::kInvalidArgument);
  }
  CHECK(format_duration(milliseconds(30000)) == "30s");
  CHECK(format_duration(milliseconds(1500)) == "1500ms");
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
  CHECK(mask_uri("postgresql://alice:s3cret@db:5432/x?password=s3cret") == "postgresql://alice:***@db:5432/x?password=***");
  ConnectOptions bad;
  bad.connect_timeout = std::chrono::milliseconds(0);
  CHECK(code_of([&] { make_connection("sqlite::memory:", bad); }) == ErrorCode::kInvalidArgument);
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
  CHECK(code_of([&] { make_connection(wrong_pw); }) == ErrorCode::kUnauthenticated);
  CHECK_THAT(e1, !Contains("definitely-wrong-pw"));

  auto slash = base.find('/', at);
  std::string missing_db = base.substr(0, slash) + "/no_such_db_sqlguard";
  CHECK(code_of([&] { make_connection(missing_db); }) == ErrorCode::kNotFound);

  // A port nobody listens on: refused at once.
  std::string host_part = base.substr(0, base.find(':', at)) + ":1" + base.substr(slash);
  CHECK(code_of([&] { make_connection(host_part); }) == ErrorCode::kConnectionLost);

  // A listener that accepts TCP but never speaks: the connect timeout bounds it.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(listen(fd, 16) == 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  std::string silent = base.substr(0, base.find(':', at)) + ":" + std::to_string(ntohs(addr.sin_port)) + base.substr(slash);
  ConnectOptions o;
  o.connect_timeout = std::chrono::seconds(2);
  auto t0 = std::chrono::steady_clock::now();
  CHECK(code_of([&] { make_connection(silent, o); }) == ErrorCode::kConnectionLost);
  auto took = std::chrono::steady_clock::now() - t0;
  close(fd);
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
      case DialectKind::kPostgres:
#ifdef SQLGUARD_TEST_POSTGRES
        postgres::native_transaction(*c).exec0(ins);
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
  auto id = victim->session_id();
  if (ctx().is(DialectKind::kPostgres)) killer->execute("SELECT pg_terminate_backend(?)", {id});
  else killer->execute_script("KILL " + std::to_string(id));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(code_of([&] { victim->execute("SELECT 1"); }) == ErrorCode::kConnectionLost);
  CHECK(victim->execute("SELECT 1").rows[0][0].as_int() == 1);
  CHECK(victim->session_id() != id);
}
