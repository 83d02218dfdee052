// sqlguard demo flash-sale | duplicate-submit | consumer-dedup
//
// Each scenario runs real OS processes (the "8 pods": this binary re-executed
// as the hidden `demo-worker` command), shows progress, ends with a table,
// and with --json prints one object per strategy/run. A scenario whose
// invariant fails exits 4 and says so.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "common.h"
#include "process.h"
#include "sqlguard/idempotency.h"
#include "sqlguard/inbox.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/migrate.h"
#include "sqlguard/retry.h"
#include "sqlguard/row_lock.h"
#include "sqlguard/transition.h"
#include "sqlguard/validate.h"
#include "sqlguard/version_cas.h"

namespace sqlguard::cli {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using nlohmann::json;

const std::vector<std::string> kStrategies = {"naive", "lease-lock", "row-lock", "cas", "guarded-update"};

double seconds_since(steady_clock::time_point t0) {
  return std::chrono::duration<double>(steady_clock::now() - t0).count();
}

// 8 writers on one SQLite file: a longer busy_timeout than the default.
std::unique_ptr<Connection> open_demo_db() {
  ConnectOptions o;
  o.busy_timeout = std::chrono::seconds(60);
  return open_db(o);
}

// What a scenario starts from: its connection, with sqlguard's tables in
// place, and the dialect's name for the JSON.
struct Scenario {
  std::unique_ptr<Connection> conn;
  std::string dialect;
};

Scenario start_scenario() {
  auto conn = open_demo_db();
  migrate(*conn);
  std::string dialect(to_string(conn->kind()));
  return {std::move(conn), dialect};
}

struct Child {
  proc::Child proc;
  std::string out_file;
};

// Starts `SQLGUARD_DB=URI sqlguard demo-worker ARGS...` with stdout to a file.
Child spawn_worker(const std::vector<std::string>& args, const std::string& out_file) {
  std::vector<std::string> argv = {proc::self_exe(), "--connect-timeout", global().connect_timeout, "demo-worker"};
  argv.insert(argv.end(), args.begin(), args.end());
  proc::SpawnOptions so;
  // The URI travels in the environment (SQLGUARD_DB), not on the command
  // line where `ps` would show a server URI's password.
  so.env = {{"SQLGUARD_DB", single_db()}};
  so.out = proc::SpawnOptions::Out::kFile;
  so.out_file = out_file;
  return {proc::spawn(argv, so), out_file};
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A worker that ended: its exit code and what it printed.
struct Finished {
  int code = -1;
  std::string out;
};

// Waits for all children while printing progress; returns how each ended
// (and removes their output files).
std::vector<Finished> wait_all(std::vector<Child>& kids, const std::function<std::string()>& progress) {
  std::size_t left = kids.size();
  bool tty = isatty(2);
  auto last = steady_clock::now();
  while (left > 0) {
    for (auto& k : kids)
      if (k.proc.running() && k.proc.wait(milliseconds(0))) --left;
    if (left > 0 && steady_clock::now() - last > (tty ? milliseconds(200) : milliseconds(1000))) {
      last = steady_clock::now();
      try {
        std::string p = progress();
        if (tty) std::cerr << "\r  " << p << "          " << std::flush;
        else std::cerr << "  " << p << "\n";
      } catch (const std::exception&) {
        // Progress is cosmetic; a busy database must not stop the demo.
      }
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  if (tty) std::cerr << "\r" << std::string(70, ' ') << "\r";
  std::vector<Finished> done;
  for (auto& k : kids) {
    done.push_back({k.proc.status().code(), slurp(k.out_file)});
    std::remove(k.out_file.c_str());
  }
  return done;
}

std::string tmp_file(const std::string& tag, int i) {
  return "/tmp/sqlguard-demo-" + std::to_string(getpid()) + "-" + tag + "-" + std::to_string(i);
}

std::string run_id() { return random_hex(8); }

// ---- flash sale ---------------------------------------------------------------

struct SaleResult {
  std::string strategy;
  std::int64_t sold = 0, stock_left = 0;
  double elapsed = 0;
  bool ok = true;
};

SaleResult flash_sale_one(Connection& conn, const std::string& strategy, int workers, int stock, int orders,
                          int think_ms) {
  std::string id = run_id();
  std::string stock_t = "sgdemo_stock_" + id, orders_t = "sgdemo_orders_" + id;
  conn.execute_script("CREATE TABLE " + stock_t +
                      " (id INTEGER NOT NULL PRIMARY KEY, qty INTEGER NOT NULL, version INTEGER NOT NULL)");
  conn.execute_script("CREATE TABLE " + orders_t + " (order_no INTEGER NOT NULL PRIMARY KEY, worker INTEGER NOT NULL)");
  conn.execute("INSERT INTO " + stock_t + " (id, qty, version) VALUES (1, ?, 0)", {stock});
  std::vector<Child> kids;
  auto t0 = steady_clock::now();
  for (int w = 0; w < workers; ++w)
    kids.push_back(spawn_worker({"flash-sale", strategy, stock_t, orders_t, std::to_string(w), std::to_string(workers),
                                 std::to_string(orders), std::to_string(think_ms)},
                                tmp_file("sale", w)));
  auto done = wait_all(kids, [&] {
    auto sold = conn.execute("SELECT COUNT(*) FROM " + orders_t).rows[0][0].as_int();
    return "[flash-sale/" + strategy + "] sold " + std::to_string(sold) + " of stock " + std::to_string(stock);
  });
  SaleResult r;
  r.strategy = strategy;
  r.elapsed = seconds_since(t0);
  r.sold = conn.execute("SELECT COUNT(*) FROM " + orders_t).rows[0][0].as_int();
  r.stock_left = conn.execute("SELECT qty FROM " + stock_t + " WHERE id = 1").rows[0][0].as_int();
  for (std::size_t i = 0; i < done.size(); ++i) {
    if (done[i].code != 0) {
      r.ok = false;
      std::cerr << "  worker " << i << " failed (exit " << done[i].code << "): " << done[i].out << "\n";
    }
  }
  conn.execute_script("DROP TABLE " + stock_t);
  conn.execute_script("DROP TABLE " + orders_t);
  return r;
}

// One order attempt by a worker. Returns true if it sold an item.
bool buy(Connection& conn, const std::string& strategy, const std::string& stock_t, const std::string& orders_t,
         int order_no, int worker, milliseconds think) {
  const std::string insert_order = "INSERT INTO " + orders_t + " (order_no, worker) VALUES (?, ?)";
  if (strategy == "naive") {
    // The classic bug: read, think, write back what was read minus one.
    auto qty = conn.execute("SELECT qty FROM " + stock_t + " WHERE id = 1").rows[0][0].as_int();
    if (qty <= 0) return false;
    std::this_thread::sleep_for(think);
    conn.execute("UPDATE " + stock_t + " SET qty = ? WHERE id = 1", {qty - 1});
    conn.execute(insert_order, {order_no, worker});
    return true;
  }
  if (strategy == "lease-lock") {
    LeaseOptions o;
    o.ttl = std::chrono::seconds(30);
    LeaseLock lock(conn, "flash-sale:" + stock_t, o);
    if (!lock.acquire(std::chrono::seconds(120))) throw Error(ErrorCode::kLockBusy, "lease not acquired in 120 s");
    bool sold = false;
    lock.run_guarded([&](Transaction& tx) {
      auto qty = tx.execute("SELECT qty FROM " + stock_t + " WHERE id = 1").rows[0][0].as_int();
      if (qty <= 0) return;
      std::this_thread::sleep_for(think);
      tx.execute("UPDATE " + stock_t + " SET qty = ? WHERE id = 1", {qty - 1});
      tx.execute(insert_order, {order_no, worker});
      sold = true;
    });
    lock.release();
    return sold;
  }
  if (strategy == "row-lock") {
    RowLocker locker(conn, {.table = stock_t, .key_column = "id", .columns = {"qty"}, .claim_filter = {}});
    RowLockOptions o;
    o.lock_timeout = std::chrono::seconds(60);
    auto scope = locker.lock(1, o);
    if (!scope) throw Error(ErrorCode::kLockBusy, "row lock not acquired");
    auto qty = scope.rows().at(0)[1].as_int();
    if (qty <= 0) return false;  // the scope rolls back
    std::this_thread::sleep_for(think);
    scope.execute("UPDATE " + stock_t + " SET qty = ? WHERE id = 1", {qty - 1});
    scope.execute(insert_order, {order_no, worker});
    scope.commit();
    return true;
  }
  if (strategy == "cas") {
    VersionCas cas(conn, {.table = stock_t, .key_column = "id", .version_column = "version", .columns = {"qty"}});
    RetryPolicy p;
    p.max_attempts = 10000;
    p.initial_backoff = milliseconds(1);
    p.max_backoff = milliseconds(50);
    auto r = with_retry(conn, p, [&](Transaction& tx) {
      auto cur = cas.read(1);
      auto qty = cur->values.at(0).as_int();
      if (qty <= 0) return false;
      std::this_thread::sleep_for(think);
      if (!cas.compare_and_set(1, cur->version, {qty - 1}))
        throw Error(ErrorCode::kConflict, "version changed since the read");  // retried
      tx.execute(insert_order, {order_no, worker});
      return true;
    });
    if (!r) throw r.last_error.value_or(Error(ErrorCode::kConflict, "CAS attempts exhausted"));
    return *r.value;
  }
  if (strategy == "guarded-update") {
    // No read-modify-write at all: the condition travels with the UPDATE.
    GuardedUpdate dec(conn, {.table = stock_t,
                             .key_column = "id",
                             .assignments = {{"qty", AssignOp::kSubtract}},
                             .guards = {{"qty", Compare::kGe}}});
    std::this_thread::sleep_for(think);
    Transaction tx(conn);
    if (!dec.apply(1, {1, 1})) return false;
    tx.execute(insert_order, {order_no, worker});
    tx.commit();
    return true;
  }
  throw Error(ErrorCode::kInvalidArgument, "unknown strategy '" + strategy + "'");
}

int flash_sale_worker(const std::vector<std::string>& a) {
  const std::string& strategy = a.at(0);
  const std::string &stock_t = a.at(1), &orders_t = a.at(2);
  validate_identifier(stock_t, "table");
  validate_identifier(orders_t, "table");
  int worker = std::stoi(a.at(3)), workers = std::stoi(a.at(4)), orders = std::stoi(a.at(5));
  milliseconds think(std::stoi(a.at(6)));
  auto conn = open_demo_db();
  for (int order = worker; order < orders; order += workers) {
    for (int attempt = 0;; ++attempt) {
      try {
        buy(*conn, strategy, stock_t, orders_t, order, worker, think);
        break;
      } catch (const Error& e) {
        // Contention the strategy surfaces (SQLite BUSY under 8 writers,
        // deadlock victims) is retried like a real client would.
        if (!is_retryable(e.code()) || attempt >= 50) throw;
        if (conn->in_transaction()) conn->rollback();
        std::this_thread::sleep_for(milliseconds(5 + attempt));
      }
    }
  }
  return 0;
}

int run_flash_sale(const std::vector<std::string>& strategies, int workers, int stock, int orders, int think_ms) {
  auto [conn, dialect] = start_scenario();
  std::vector<SaleResult> results;
  bool failed = false;
  if (!global().json)
    std::cout << "flash sale on " << conn->description() << ": " << workers << " processes place " << orders
              << " orders against stock " << stock << " (think " << think_ms << " ms)\n";
  for (const auto& s : strategies) {
    auto r = flash_sale_one(*conn, s, workers, stock, orders, think_ms);
    std::int64_t expect = std::min(stock, orders);
    std::int64_t oversold = std::max<std::int64_t>(0, r.sold - stock);
    bool invariant = r.sold == expect && oversold == 0 && r.stock_left == stock - r.sold;
    if (s != "naive" && (!invariant || !r.ok)) failed = true;
    if (global().json)
      print_json({{"scenario", "flash-sale"}, {"dialect", dialect}, {"strategy", s}, {"workers", workers},
                  {"stock", stock}, {"orders", orders}, {"sold", r.sold}, {"stock_left", r.stock_left},
                  {"oversold", oversold}, {"elapsed_s", r.elapsed},
                  {"orders_per_s", r.elapsed > 0 ? orders / r.elapsed : 0.0}});
    r.ok = r.ok && invariant;
    results.push_back(r);
  }
  if (!global().json) {
    std::printf("\n%-16s %6s %10s %9s %10s %11s  %s\n", "strategy", "sold", "stock_left", "oversold", "elapsed_s",
                "orders/s", "verdict");
    for (const auto& r : results) {
      std::int64_t oversold = std::max<std::int64_t>(0, r.sold - stock);
      const char* verdict = r.ok ? "correct" : (r.strategy == "naive" ? "OVERSOLD (expected: no lock)" : "WRONG");
      if (r.strategy == "naive" && r.ok) verdict = "correct this time (race not hit; try more --think-ms)";
      std::printf("%-16s %6lld %10lld %9lld %10.2f %11.1f  %s\n", r.strategy.c_str(), static_cast<long long>(r.sold),
                  static_cast<long long>(r.stock_left), static_cast<long long>(oversold), r.elapsed,
                  r.elapsed > 0 ? orders / r.elapsed : 0.0, verdict);
    }
  }
  if (failed) std::cerr << "sqlguard demo: flash-sale invariant violated (sold != min(stock, orders))\n";
  return failed ? kExitInvariant : kExitOk;
}

// ---- duplicate submit ---------------------------------------------------------

int duplicate_submit_worker(const std::vector<std::string>& a) {
  const std::string& scope = a.at(0);
  const std::string& exec_t = a.at(1);
  validate_identifier(exec_t, "table");
  int requests = std::stoi(a.at(2)), keys = std::stoi(a.at(3));
  std::uint64_t seed = std::stoull(a.at(4));
  auto conn = open_demo_db();
  IdempotencyKeys idem(*conn);
  std::mt19937_64 rng(seed);
  int executed = 0, replayed = 0, in_progress = 0, mismatches = 0, bad_replays = 0;
  std::set<std::string> used;
  for (int i = 0; i < requests; ++i) {
    std::string key = "order-" + std::to_string(rng() % static_cast<std::uint64_t>(keys));
    // 3% of clients send a different body under a reused key: 422.
    bool tampered = rng() % 100 < 3;
    std::string fp = request_fingerprint({"POST", "/orders", key, tampered ? "qty=999" : "qty=1"});
    for (int attempt = 0;; ++attempt) {
      auto r = idem.execute(scope, key, fp, [&](IdempotencyExecution&) {
        std::string body = "order " + key + " accepted #" + random_hex(8);
        conn->execute("INSERT INTO " + exec_t + " (idem_key, body) VALUES (?, ?)", {key, body});
        std::this_thread::sleep_for(milliseconds(3));  // the "payment call"
        return StoredResponse{201, body};
      });
      if (r.outcome == IdempotencyOutcome::kInProgress) {
        ++in_progress;  // a real client backs off and retries (HTTP 409)
        if (attempt > 200) throw Error(ErrorCode::kTimeout, "key stayed in progress");
        std::this_thread::sleep_for(milliseconds(2));
        continue;
      }
      if (r.outcome == IdempotencyOutcome::kMismatch) {
        ++mismatches;
        break;
      }
      used.insert(key);
      if (r.outcome == IdempotencyOutcome::kExecuted) ++executed;
      else if (r.outcome == IdempotencyOutcome::kReplayed) {
        ++replayed;
        auto first = conn->execute("SELECT body FROM " + exec_t + " WHERE idem_key = ?", {key});
        if (first.rows.size() != 1 || first.rows[0][0].as_string() != r.response.body) ++bad_replays;
      }
      break;
    }
  }
  json keys_used = json::array();
  for (const auto& k : used) keys_used.push_back(k);
  print_json({{"executed", executed}, {"replayed", replayed}, {"in_progress", in_progress},
              {"mismatches", mismatches}, {"bad_replays", bad_replays}, {"keys", keys_used}});
  return 0;
}

int run_duplicate_submit(int workers, int requests, int keys) {
  auto [conn, dialect] = start_scenario();
  std::string id = run_id();
  std::string scope = "demo-" + id, exec_t = "sgdemo_exec_" + id;
  conn->execute_script("CREATE TABLE " + exec_t + " (idem_key VARCHAR(255) NOT NULL, body VARCHAR(255) NOT NULL)");
  if (!global().json)
    std::cout << "duplicate submit on " << conn->description() << ": " << workers << " client processes send "
              << requests << " requests over " << keys << " idempotency keys, with retries\n";
  std::vector<Child> kids;
  auto t0 = steady_clock::now();
  std::random_device rd;
  for (int w = 0; w < workers; ++w) {
    int share = requests / workers + (w < requests % workers ? 1 : 0);
    kids.push_back(spawn_worker({"duplicate-submit", scope, exec_t, std::to_string(share), std::to_string(keys),
                                 std::to_string((static_cast<std::uint64_t>(rd()) << 32) ^ rd())},
                                tmp_file("dup", w)));
  }
  auto done = wait_all(kids, [&] {
    return "[duplicate-submit] executions " +
           std::to_string(conn->execute("SELECT COUNT(*) FROM " + exec_t).rows[0][0].as_int());
  });
  double elapsed = seconds_since(t0);
  std::int64_t executed = 0, replayed = 0, in_progress = 0, mismatches = 0, bad_replays = 0;
  std::set<std::string> used;
  bool ok = true;
  for (std::size_t i = 0; i < done.size(); ++i) {
    if (done[i].code != 0) {
      ok = false;
      std::cerr << "  client " << i << " failed (exit " << done[i].code << ")\n";
      continue;
    }
    auto j = json::parse(done[i].out);
    executed += j["executed"].get<std::int64_t>();
    replayed += j["replayed"].get<std::int64_t>();
    in_progress += j["in_progress"].get<std::int64_t>();
    mismatches += j["mismatches"].get<std::int64_t>();
    bad_replays += j["bad_replays"].get<std::int64_t>();
    for (const auto& k : j["keys"]) used.insert(k.get<std::string>());
  }
  std::int64_t executions = conn->execute("SELECT COUNT(*) FROM " + exec_t).rows[0][0].as_int();
  auto distinct = static_cast<std::int64_t>(used.size());
  ok = ok && executions == distinct && executed == distinct && bad_replays == 0;
  if (global().json) {
    print_json({{"scenario", "duplicate-submit"}, {"dialect", dialect}, {"requests", requests},
                {"distinct_keys", distinct}, {"executions", executions}, {"replays", replayed},
                {"in_progress", in_progress}, {"mismatches", mismatches}, {"elapsed_s", elapsed}});
  } else {
    std::printf("\n%9s %14s %11s %8s %12s %11s %10s  %s\n", "requests", "distinct_keys", "executions", "replays",
                "in_progress", "mismatches", "elapsed_s", "verdict");
    std::printf("%9d %14lld %11lld %8lld %12lld %11lld %10.2f  %s\n", requests, static_cast<long long>(distinct),
                static_cast<long long>(executions), static_cast<long long>(replayed),
                static_cast<long long>(in_progress), static_cast<long long>(mismatches), elapsed,
                ok ? "correct: one execution per key, identical replays" : "WRONG");
  }
  conn->execute_script("DROP TABLE " + exec_t);
  if (!ok)
    std::cerr << "sqlguard demo: duplicate-submit invariant violated (executions " << executions << " != distinct keys "
              << distinct << ", bad replays " << bad_replays << ")\n";
  return ok ? kExitOk : kExitInvariant;
}

// ---- consumer dedup -------------------------------------------------------------

int consumer_dedup_worker(const std::vector<std::string>& a) {
  const std::string& consumer = a.at(0);
  const std::string& effects_t = a.at(1);
  validate_identifier(effects_t, "table");
  const std::string& deliveries_file = a.at(2);
  int worker = std::stoi(a.at(3));
  auto conn = open_demo_db();
  Inbox inbox(*conn);
  int processed = 0, duplicates = 0;
  std::ifstream in(deliveries_file);
  for (std::string msg; std::getline(in, msg);) {
    if (msg.empty()) continue;
    auto r = inbox.process(consumer, msg, [&](Transaction& tx) {
      // The business effect, committed atomically with the dedup row.
      tx.execute("INSERT INTO " + effects_t + " (message_id, worker) VALUES (?, ?)", {msg, worker});
    });
    ++(r.outcome == InboxOutcome::kProcessed ? processed : duplicates);
  }
  print_json({{"processed", processed}, {"duplicates", duplicates}});
  return 0;
}

int run_consumer_dedup(int workers, int messages, double redeliver) {
  auto [conn, dialect] = start_scenario();
  std::string id = run_id();
  std::string consumer = "demo-consumer-" + id, effects_t = "sgdemo_effects_" + id;
  conn->execute_script("CREATE TABLE " + effects_t + " (message_id VARCHAR(255) NOT NULL, worker INTEGER NOT NULL)");
  // At-least-once delivery: every message once, a share of them again
  // (sometimes twice), shuffled and spread over the consumers, so copies of
  // one message often run concurrently on different processes.
  std::mt19937_64 rng{std::random_device{}()};
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::string> deliveries;
  for (int m = 0; m < messages; ++m) {
    std::string msg = "msg-" + id + "-" + std::to_string(m);
    deliveries.push_back(msg);
    if (u(rng) < redeliver) {
      deliveries.push_back(msg);
      if (u(rng) < 0.2) deliveries.push_back(msg);
    }
  }
  std::shuffle(deliveries.begin(), deliveries.end(), rng);
  if (!global().json)
    std::cout << "consumer dedup on " << conn->description() << ": " << deliveries.size() << " deliveries of "
              << messages << " messages (" << static_cast<int>(redeliver * 100) << "% redelivered) to " << workers
              << " consumer processes\n";
  std::vector<std::string> files;
  for (int w = 0; w < workers; ++w) {
    files.push_back(tmp_file("deliveries", w));
    std::ofstream out(files.back());
    for (std::size_t i = static_cast<std::size_t>(w); i < deliveries.size(); i += static_cast<std::size_t>(workers))
      out << deliveries[i] << "\n";
  }
  std::vector<Child> kids;
  auto t0 = steady_clock::now();
  for (int w = 0; w < workers; ++w)
    kids.push_back(spawn_worker({"consumer-dedup", consumer, effects_t, files[w], std::to_string(w)},
                                tmp_file("consumer", w)));
  auto done = wait_all(kids, [&] {
    return "[consumer-dedup] effects " +
           std::to_string(conn->execute("SELECT COUNT(*) FROM " + effects_t).rows[0][0].as_int());
  });
  double elapsed = seconds_since(t0);
  bool ok = true;
  std::int64_t skipped = 0;
  for (std::size_t i = 0; i < done.size(); ++i) {
    std::remove(files[i].c_str());
    if (done[i].code != 0) {
      ok = false;
      std::cerr << "  consumer " << i << " failed (exit " << done[i].code << ")\n";
      continue;
    }
    skipped += json::parse(done[i].out)["duplicates"].get<std::int64_t>();
  }
  std::int64_t effects = conn->execute("SELECT COUNT(*) FROM " + effects_t).rows[0][0].as_int();
  std::int64_t distinct = conn->execute("SELECT COUNT(DISTINCT message_id) FROM " + effects_t).rows[0][0].as_int();
  ok = ok && effects == messages && distinct == messages;
  if (global().json) {
    print_json({{"scenario", "consumer-dedup"}, {"dialect", dialect}, {"messages", messages},
                {"deliveries", deliveries.size()}, {"distinct", messages}, {"effects", effects},
                {"duplicates_skipped", skipped}, {"elapsed_s", elapsed}});
  } else {
    std::printf("\n%9s %11s %9s %8s %19s %10s  %s\n", "messages", "deliveries", "distinct", "effects",
                "duplicates_skipped", "elapsed_s", "verdict");
    std::printf("%9d %11zu %9d %8lld %19lld %10.2f  %s\n", messages, deliveries.size(), messages,
                static_cast<long long>(effects), static_cast<long long>(skipped), elapsed,
                ok ? "correct: exactly one effect per message" : "WRONG");
  }
  conn->execute_script("DROP TABLE " + effects_t);
  if (!ok) std::cerr << "sqlguard demo: consumer-dedup invariant violated (effects " << effects << " != " << messages << ")\n";
  return ok ? kExitOk : kExitInvariant;
}

}  // namespace

void add_demo(CLI::App& app) {
  // Bad numbers are refused while parsing: exit 2 before anything starts.
  constexpr int kIntMax = std::numeric_limits<int>::max();
  const CLI::Validator kPositive = whole_number(1, kIntMax);
  auto* demo = app.add_subcommand("demo", "Show the three use cases with real processes (default: all of them)");
  struct Sale {
    std::string strategy = "all";
    int workers = 8, stock = 100, orders = 300, think_ms = 2;
  };
  struct Dup {
    int workers = 8, requests = 400, keys = 50;
  };
  struct Dedup {
    int workers = 4, messages = 500;
    double redeliver = 0.3;
  };
  auto sale = std::make_shared<Sale>();
  auto dup = std::make_shared<Dup>();
  auto dedup = std::make_shared<Dedup>();

  auto* fs = demo->add_subcommand("flash-sale", "N processes place M orders against stock K, per strategy");
  fs->add_option("--strategy", sale->strategy, "naive|lease-lock|row-lock|cas|guarded-update|all")
      ->check(CLI::IsMember({"naive", "lease-lock", "row-lock", "cas", "guarded-update", "all"}))
      ->capture_default_str();
  fs->add_option("--workers", sale->workers, "Processes")->check(kPositive)->capture_default_str();
  fs->add_option("--stock", sale->stock, "Initial stock")->check(kPositive)->capture_default_str();
  fs->add_option("--orders", sale->orders, "Orders placed in total")->check(kPositive)->capture_default_str();
  fs->add_option("--think-ms", sale->think_ms, "Business logic time between read and write")
      ->check(whole_number(0, kIntMax))
      ->capture_default_str();
  auto run_sale = [sale] {
    std::vector<std::string> strategies =
        sale->strategy == "all" ? kStrategies : std::vector<std::string>{sale->strategy};
    return run_flash_sale(strategies, sale->workers, sale->stock, sale->orders, sale->think_ms);
  };
  fs->callback([run_sale] { exit_code() = run_sale(); });

  auto* ds = demo->add_subcommand("duplicate-submit", "Clients retry submissions with idempotency keys");
  ds->add_option("--workers", dup->workers, "Client processes")->check(kPositive)->capture_default_str();
  ds->add_option("--requests", dup->requests, "Requests in total")->check(kPositive)->capture_default_str();
  ds->add_option("--keys", dup->keys, "Distinct idempotency keys")->check(kPositive)->capture_default_str();
  auto run_dup = [dup] { return run_duplicate_submit(dup->workers, dup->requests, dup->keys); };
  ds->callback([run_dup] { exit_code() = run_dup(); });

  auto* cd = demo->add_subcommand("consumer-dedup", "At-least-once delivery to N consumers, deduplicated by the inbox");
  cd->add_option("--workers", dedup->workers, "Consumer processes")->check(kPositive)->capture_default_str();
  cd->add_option("--messages", dedup->messages, "Distinct messages")->check(kPositive)->capture_default_str();
  cd->add_option("--redeliver", dedup->redeliver, "Share of messages delivered again (0..1)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  auto run_dedup = [dedup] { return run_consumer_dedup(dedup->workers, dedup->messages, dedup->redeliver); };
  cd->callback([run_dedup] { exit_code() = run_dedup(); });

  demo->callback([demo, run_sale, run_dup, run_dedup] {
    if (!demo->get_subcommands().empty()) return;  // a scenario ran
    int worst = run_sale();
    if (!global().json) std::cout << "\n";
    worst = std::max(worst, run_dup());
    if (!global().json) std::cout << "\n";
    worst = std::max(worst, run_dedup());
    exit_code() = worst;
  });

  // Hidden: the worker processes of the scenarios.
  auto* worker = app.add_subcommand("demo-worker", "")->group("");
  auto args = std::make_shared<std::vector<std::string>>();
  worker->add_option("ARGS", *args)->required();
  worker->callback([args] {
    const std::string kind = args->at(0);
    std::vector<std::string> rest(args->begin() + 1, args->end());
    if (kind == "flash-sale") exit_code() = flash_sale_worker(rest);
    else if (kind == "duplicate-submit") exit_code() = duplicate_submit_worker(rest);
    else if (kind == "consumer-dedup") exit_code() = consumer_dedup_worker(rest);
    else throw Error(ErrorCode::kInvalidArgument, "unknown demo worker '" + kind + "'");
  });
}

}  // namespace sqlguard::cli
