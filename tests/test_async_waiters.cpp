// examples/async-waiters on the dialect under test: 1,000 Boost.Asio
// coroutines on one io_context thread wait for one hot lease through one
// LockClient. Each is served exactly once (the example's own count and the
// database's counter), on at most 8 threads and 4 connections. And the
// example's Asio adapter (asio_acquire.h) on its own: result, time-out, error.
#include <catch2/catch.hpp>

#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "sqlguard/connection.h"
#include "test_context.h"

#ifdef SQLGUARD_ASYNC_WAITERS
#include <thread>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "async-waiters/asio_acquire.h"
#include "common/app_sql.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"
#endif

using sgtest::ctx;

namespace {

// The example's last line: "RESULT key=value key=value ...".
std::map<std::string, std::string> result_line(const std::string& out) {
  std::map<std::string, std::string> kv;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("RESULT ", 0) != 0) continue;
    kv.clear();
    static const std::regex pair(R"(([a-z_]+)=(\S+))");
    for (std::sregex_iterator it(line.begin(), line.end(), pair), end; it != end; ++it) kv[(*it)[1]] = (*it)[2];
  }
  return kv;
}

std::int64_t num(const std::map<std::string, std::string>& kv, const std::string& key) {
  auto it = kv.find(key);
  if (it == kv.end()) FAIL("no " << key << "= in the example's RESULT line");
  return std::stoll(it->second);
}

}  // namespace

TEST_CASE("1,000 coroutines on one io_context thread waiting for one hot lease are each served exactly once, on at "
          "most 8 threads and 4 connections",
          "[async-waiters][example]") {
#ifndef SQLGUARD_ASYNC_WAITERS
  FAIL("examples/async-waiters was not built: install libboost-dev (tools/deps.sh)");
#else
  const std::string db = ctx().fresh_database();
  std::string out;
  const int rc = sgtest::run_process({SQLGUARD_ASYNC_WAITERS, db, "--waiters", "1000"}, &out);
  INFO(out);
  REQUIRE(rc == 0);
  const auto kv = result_line(out);
  REQUIRE_FALSE(kv.empty());
  CHECK(num(kv, "waiters") == 1000);
  CHECK(num(kv, "served") == 1000);
  CHECK(num(kv, "once") == 1000);
  CHECK(num(kv, "twice") == 0);
  CHECK(num(kv, "not_acquired") == 0);
  CHECK(num(kv, "errors") == 0);
  CHECK(num(kv, "counter") == 1000);
  CHECK(num(kv, "rows") == 1000);
  CHECK(num(kv, "distinct") == 1000);
  CHECK(num(kv, "fences_increase") == 1);
  CHECK(num(kv, "threads_peak") <= 8);
  CHECK(num(kv, "connections_peak") <= 4);
  CHECK(num(kv, "ok") == 1);

  // The database says the same, read here rather than from the example.
  auto conn = sqlguard::make_connection(db);
  CHECK(conn->execute(app_sql::kAsyncCounterTotal).rows.at(0)[0].as_int() == 1000);
  const auto r = conn->execute(app_sql::kAsyncServedCount);
  CHECK(r.rows.at(0)[0].as_int() == 1000);
  CHECK(r.rows.at(0)[1].as_int() == 1000);
#endif
}

#ifdef SQLGUARD_ASYNC_WAITERS
// The example's Asio adapter on its own.
namespace {
struct AsioOutcome {
  bool finished = false, acquired = false;
  std::exception_ptr error;
  std::thread::id resumed_on;
};

// Runs one coroutine that co_awaits async_acquire on an io_context run by this thread.
AsioOutcome await_on_io(sqlguard::LeaseLock& lock, std::chrono::milliseconds wait) {
  boost::asio::io_context io(1);
  AsioOutcome o;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        try {
          o.acquired = co_await example::async_acquire(lock, wait, boost::asio::use_awaitable);
        } catch (...) {
          o.error = std::current_exception();
        }
        o.resumed_on = std::this_thread::get_id();
        o.finished = true;
      },
      boost::asio::detached);
  io.run();  // returns once the coroutine finished: the pending acquire counts as work
  return o;
}
}  // namespace

TEST_CASE("async_acquire completes on the coroutine's io_context thread with the acquire's result or error",
          "[async-waiters]") {
  using namespace std::chrono_literals;
  auto client = sqlguard::LockClient::create(ctx().uri);
  const std::string name = ctx().unique("asio");

  SECTION("acquired after the holder's release") {
    sqlguard::LeaseLock holder(client, name);
    sqlguard::LeaseLock lock(client, name);
    REQUIRE(holder.try_acquire());
    std::thread releaser([&] {
      for (int i = 0; i < 60000 && client->stats().waiters == 0; ++i) std::this_thread::sleep_for(1ms);
      holder.release();
    });
    const auto o = await_on_io(lock, 60s);
    releaser.join();
    REQUIRE(o.finished);
    CHECK(o.acquired);
    CHECK_FALSE(o.error);
    CHECK(o.resumed_on == std::this_thread::get_id());
    CHECK(lock.release());
  }
  SECTION("not acquired within the wait") {
    sqlguard::LeaseLock holder(client, name);
    sqlguard::LeaseLock lock(client, name);
    REQUIRE(holder.try_acquire());
    const auto o = await_on_io(lock, 100ms);
    REQUIRE(o.finished);
    CHECK_FALSE(o.acquired);
    CHECK_FALSE(o.error);
  }
  SECTION("an error of the call reaches the coroutine instead of ending the program") {
    auto conn = ctx().connect();
    sqlguard::LeaseLock lock(*conn, name);  // not a client's handle: kNotSupported
    const auto o = await_on_io(lock, 1s);
    REQUIRE(o.finished);
    REQUIRE(o.error);
    CHECK_THROWS_AS(std::rethrow_exception(o.error), sqlguard::Error);
    CHECK(o.resumed_on == std::this_thread::get_id());
  }
}
#endif
