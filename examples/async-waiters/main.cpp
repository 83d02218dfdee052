// async-waiters: 1,000 coroutines on ONE io_context thread each wait for a
// lease on one hot name (or a few), through ONE LockClient: no thread and
// no connection per waiter. Each, once served, does a tiny piece of work
// under the lease — one guarded transaction that records it and bumps a
// counter — and releases. The program then checks that every waiter was
// served exactly once (its own count and the database's) and prints how many
// threads and connections the process used.
//
//   async-waiters [URI] [--waiters N] [--names N] [--wait SECONDS]
//
// URI: as sqlguard::make_connection() (default: an SQLite file in a new
// temporary directory, removed at the end). Defaults: 1000 waiters, 1 name,
// a wait of 300 s per waiter (they are served one after another).
//
// Output: a few lines for people, then one line for scripts and the test
// (tests/test_async_waiters.cpp):
//   RESULT waiters=1000 served=1000 once=1000 ... ok=1
// Exit status: 0 when every check held, 1 when one did not (or an error),
// 2 on a bad command line.
//
// The Asio side is asio_acquire.h: async_acquire(lock, wait, token), built
// with asio::async_initiate, completes on the coroutine's executor.
#include <dirent.h>
#include <stdlib.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sqlguard/connection.h>
#include <sqlguard/lease_lock.h>
#include <sqlguard/lock_client.h>
#include <sqlguard/migrate.h>

#include "../common/app_sql.h"
#include "asio_acquire.h"

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

std::size_t process_threads() {
  std::size_t n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n;
}

// Everything below is touched from the io_context's one thread only.
struct Run {
  std::shared_ptr<sqlguard::LockClient> client;
  std::vector<std::string> names;
  sqlguard::LeaseOptions lease;
  std::chrono::milliseconds wait{};
  int waiters = 0;

  std::vector<int> served;                         // per waiter: how many times it was served
  std::map<std::string, std::vector<int>> order;   // per name: waiters, in serving order
  std::map<std::string, std::vector<std::int64_t>> fences;
  int finished = 0, not_acquired = 0, lost = 0, errors = 0;
  std::string first_error;

  std::size_t peak_process_threads = 0, peak_client_threads = 0, peak_connections = 0, peak_waiters = 0;
  void sample() {
    const auto s = client->stats();
    peak_process_threads = std::max(peak_process_threads, process_threads());
    peak_client_threads = std::max(peak_client_threads, s.threads);
    peak_connections = std::max(peak_connections, s.connections_open);
    peak_waiters = std::max(peak_waiters, s.waiters);
  }
};

asio::awaitable<void> waiter(Run& run, int id) {
  const std::string& name = run.names[static_cast<std::size_t>(id) % run.names.size()];
  // A handle: no connection, no thread, no round trip. The client renews the
  // lease while it is held (Watchdog::kOn).
  sqlguard::LeaseLock lock(run.client, name, run.lease, sqlguard::Watchdog::kOn);
  try {
    if (!co_await example::async_acquire(lock, run.wait, asio::use_awaitable)) {
      ++run.not_acquired;
    } else {
      // The work under the lease. sqlguard's calls are synchronous: they run
      // on this io_context thread (a service with slow work would hand it to
      // a thread pool and co_await that). Nobody else holds the name now, so
      // the other coroutines lose nothing by it.
      const std::int64_t fence = lock.fence();
      const bool held = lock.run_guarded([&](sqlguard::Transaction& tx) {
        tx.execute(app_sql::kAsyncServedInsert, {std::int64_t{id}, name, fence});
        tx.execute(app_sql::kAsyncCounterBump, {name});
      });
      lock.release();
      if (held) {
        ++run.served[static_cast<std::size_t>(id)];
        run.order[name].push_back(id);
        run.fences[name].push_back(fence);
      } else {
        ++run.lost;
      }
    }
  } catch (const std::exception& e) {
    if (run.errors++ == 0) run.first_error = e.what();
  }
  ++run.finished;
}

asio::awaitable<void> sampler(Run& run) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (run.finished < run.waiters) {
    run.sample();
    timer.expires_after(20ms);
    co_await timer.async_wait(asio::use_awaitable);
  }
  run.sample();
}

int usage(const char* msg) {
  std::cerr << "async-waiters: " << msg << "\nusage: async-waiters [URI] [--waiters N] [--names N] [--wait SECONDS]\n";
  return 2;
}

bool parse_int(const char* s, int lo, int hi, int* out) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (!*s || *end || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string uri;
  int waiters = 1000, names = 1, wait_s = 300;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--waiters" || a == "--names" || a == "--wait") && i + 1 < argc) {
      const char* v = argv[++i];
      if (a == "--waiters" && !parse_int(v, 1, 100000, &waiters)) return usage("--waiters: 1 .. 100000");
      if (a == "--names" && !parse_int(v, 1, 1000, &names)) return usage("--names: 1 .. 1000");
      if (a == "--wait" && !parse_int(v, 1, 86400, &wait_s)) return usage("--wait: 1 .. 86400 seconds");
    } else if (a.rfind("--", 0) == 0 || !uri.empty()) {
      return usage(("unexpected argument: " + a).c_str());
    } else {
      uri = a;
    }
  }
  std::string tmpdir;
  if (uri.empty()) {
    char dir[] = "/tmp/sqlguard-async-XXXXXX";
    if (!mkdtemp(dir)) return usage("cannot create a temporary directory");
    tmpdir = dir;
    uri = "sqlite://" + tmpdir + "/async.db";
  }
  int rc = 1;
  try {
    Run run;
    run.waiters = waiters;
    run.wait = std::chrono::seconds(wait_s);
    run.lease.ttl = 10s;
    run.served.assign(static_cast<std::size_t>(waiters), 0);
    for (int n = 0; n < names; ++n) run.names.push_back("async-hot-" + std::to_string(n));
    {  // schema and a clean slate for this run's tables
      auto conn = sqlguard::make_connection(uri);
      sqlguard::migrate(*conn);
      for (const char* ddl : app_sql::kAsyncSchema) conn->execute_once(ddl);
      conn->execute(app_sql::kAsyncResetServed);
      conn->execute(app_sql::kAsyncResetCounters);
      for (const auto& n : run.names) conn->execute(app_sql::kAsyncCounterInsert, {n});
    }
    run.client = sqlguard::LockClient::create(uri);
    std::cout << "async-waiters: " << waiters << " coroutines on one io_context thread wait for " << names
              << " lock name(s) on " << run.client->description() << std::endl;

    asio::io_context io(1);
    for (int i = 0; i < waiters; ++i) asio::co_spawn(io, waiter(run, i), asio::detached);
    asio::co_spawn(io, sampler(run), asio::detached);
    const auto t0 = std::chrono::steady_clock::now();
    io.run();  // returns when every coroutine has finished
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    run.sample();
    const auto stats = run.client->stats();

    int once = 0, twice = 0, never = 0;
    for (int s : run.served) {
      if (s == 1) ++once;
      else if (s == 0) ++never;
      else ++twice;
    }
    bool fifo = true, fences_increase = true;
    for (const auto& [n, ids] : run.order)
      for (std::size_t i = 1; i < ids.size(); ++i) {
        if (ids[i] < ids[i - 1]) fifo = false;
        if (run.fences[n][i] <= run.fences[n][i - 1]) fences_increase = false;
      }
    std::int64_t counter = 0, rows = 0, distinct = 0;
    {
      auto conn = sqlguard::make_connection(uri);
      counter = conn->execute(app_sql::kAsyncCounterTotal).rows.at(0)[0].as_int();
      const auto r = conn->execute(app_sql::kAsyncServedCount);
      rows = r.rows.at(0)[0].as_int();
      distinct = r.rows.at(0)[1].as_int();
    }
    const int served = waiters - never;
    const bool ok = once == waiters && counter == waiters && rows == waiters && distinct == waiters &&
                    run.errors == 0 && run.not_acquired == 0 && run.lost == 0 && fences_increase;

    std::cout << "served " << served << " of " << waiters << " (exactly once: " << once << ", more than once: " << twice
              << "), not acquired " << run.not_acquired << ", lost before the work committed " << run.lost
              << ", errors " << run.errors << ", in " << seconds << " s" << std::endl;
    if (!run.first_error.empty()) std::cout << "first error: " << run.first_error << std::endl;
    std::cout << "database: counter " << counter << ", served rows " << rows << " (" << distinct
              << " distinct waiters); fences increase in serving order: " << (fences_increase ? "yes" : "NO")
              << "; served in arrival order per name: " << (fifo ? "yes" : "no") << std::endl;
    std::cout << "threads: peak " << run.peak_process_threads << " in the process (/proc/self/task), of which "
              << run.peak_client_threads << " the lock client's (LockClient::stats()); the io_context runs on main"
              << std::endl;
    std::cout << "connections: peak " << run.peak_connections << " open (LockClient max " << stats.connections_max
              << "); pending acquires peak " << run.peak_waiters << std::endl;
    std::cout << "client: " << stats.attempts << " attempts by the waiter thread, " << stats.wakeups << " wake-ups, "
              << stats.polls << " polls, " << stats.exhausted << " refused for lack of a connection" << std::endl;
    std::cout << "RESULT waiters=" << waiters << " served=" << served << " once=" << once << " twice=" << twice
              << " not_acquired=" << run.not_acquired << " lost=" << run.lost << " errors=" << run.errors
              << " counter=" << counter << " rows=" << rows << " distinct=" << distinct
              << " fences_increase=" << fences_increase << " fifo=" << fifo
              << " threads_peak=" << run.peak_process_threads << " client_threads_peak=" << run.peak_client_threads
              << " connections_peak=" << run.peak_connections << " connections_max=" << stats.connections_max
              << " attempts=" << stats.attempts << " wakeups=" << stats.wakeups << " polls=" << stats.polls
              << " seconds=" << seconds << " ok=" << ok << std::endl;
    rc = ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "async-waiters: " << e.what() << std::endl;
    rc = 1;
  }
  if (!tmpdir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(tmpdir, ec);
  }
  return rc;
}
