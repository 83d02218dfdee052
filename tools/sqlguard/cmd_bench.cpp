// sqlguard bench: throughput and latency per op x client count, against the
// same statements run through the native driver (the "raw" baseline).
// Method and results: docs/bench.md. This file: options and orchestration;
// the ops are in bench_ops.cpp, their statements in bench_sql.h, the runner
// in bench_run.cpp, the output in bench_report.cpp.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "bench.h"
#include "bench_comparators.h"
#include "bench_sql.h"
#include "sqlguard/admin.h"
#include "common.h"
#include "process.h"
#include "sqlguard/cleanup.h"
#include "sqlguard/history.h"
#include "sqlguard/migrate.h"
#include "sqlguard/validate.h"

namespace sqlguard::cli {
namespace {

using namespace sqlguard::bench;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr const char* kRedisHelp = "Also run the lease ops on Redis at HOST:PORT (SET NX PX + Lua release; needs the "
                                   "comparators module, package sqlguard-bench-comparators)";
constexpr const char* kEtcdHelp = "Also run the lease ops on etcd at HOST:PORT (lease + Lock/Unlock, v3 JSON gateway; "
                                  "needs the comparators module, package sqlguard-bench-comparators)";

// ---- the command -----------------------------------------------------------------------

struct Opts {
  std::string ops = "all";
  std::string clients = "1,4,16";
  std::string duration, warmup = "300ms", hold = "1ms";  // duration: empty = 2s (churn-soak: 60s)
  bool processes = false, no_raw = false, emit_sql = false, scale = false, keep = false, durable_release = false;
  bool history = false;  // record the run's names in the grant history (issue 41 item 3's cost)
  std::string plot, redis, etcd, run_id;
  std::string take_over = "watched";
  std::string barging_limit;  // empty: LeaseOptions' default
  std::int64_t scale_rows = 1000000;
  int scale_clients = 4;
  int cpu_load = 0;  // busy processes beside the cells (issue 40 item 6)
  // The lock-client ops.
  std::string held;  // empty: 100,1000,10000 (SQLite: 100,1000)
  std::string waiters = "1000";
  std::string requesters = "64,256";
  std::string held_ttl;  // empty: 3s (churn-soak: 5s)
  int per_lease = 100;
  // The synchronizer ops.
  int permits = 4;
  // churn-soak.
  int churn = 1000;
  std::string churn_kinds = "lease";
  std::string sample_every = "60s", cycle_every = "1s";
};

// --cpu-load N: N forked processes that spin on the CPU at normal priority
// for the whole run (each a tight loop on a local counter: no memory, no
// I/O, no system calls), so the clients, the lock client's threads and the
// servers on this machine share its cores with them: what the waiters and
// hand-off figures look like on a busy host. Started before the run opens
// any connection or thread (fork_call's rule); SIGKILLed and reaped when
// the run ends, and killed with us if we die (die_with_parent).
class CpuLoad {
 public:
  explicit CpuLoad(int n) {
    proc::SpawnOptions so;
    so.die_with_parent = true;
    so.out = proc::SpawnOptions::Out::kNull;
    try {
      for (int i = 0; i < n; ++i)
        spinners_.push_back(proc::fork_call(
            [](int) {
              volatile std::uint64_t x = 0;
              for (;;) x = x + 1;
              return 0;
            },
            so));
    } catch (...) {
      stop();  // (no destructor runs for a constructor that throws)
      throw;
    }
  }
  ~CpuLoad() { stop(); }
  CpuLoad(const CpuLoad&) = delete;
  CpuLoad& operator=(const CpuLoad&) = delete;

 private:
  void stop() {
    for (auto& c : spinners_) c.signal(SIGKILL);
    for (auto& c : spinners_) c.wait();
  }
  std::vector<proc::Child> spinners_;
};

// The validated timings of every cell.
struct Timing {
  milliseconds warmup, duration, hold;
};

// The cart ops' accounting: units the catalogue lost against units the
// clients' applied orders took (threads mode only: forked clients count in
// their own memory), and rows below 0. Both must be 0.
void add_cart_fields(json& j, Connection& admin, std::int64_t base, bool processes) {
  const Result r = admin.execute(std::string("SELECT qty FROM ") + kStock + " WHERE id >= ? AND id < ?",
                                 {base, base + kCartCatalogue});
  std::int64_t lost = 0, below = 0;
  for (const auto& row : r.rows) {
    lost += kBigQty - row[0].as_int();
    below += row[0].as_int() < 0;
  }
  j["cart_skus"] = kCartSkus;
  j["cart_catalogue"] = kCartCatalogue;
  j["units_taken"] = lost;
  j["oversold_rows"] = below;
  j["units_unaccounted"] = processes ? json(nullptr) : json(lost - cart_units_sold().load());
  j["durability"] = commit_durability(admin).summary;
}

bool lease_op(const std::string& op) { return op == "lease-distinct" || op == "lease-hot" || op == "handoff"; }

// Prints one cell (a JSON line, or a row of the text table after `label`),
// tagged with --run-id.
void emit(json& j, const Opts& o, const std::string& label = "") {
  if (!o.run_id.empty()) j["run_id"] = o.run_id;
  if (o.cpu_load > 0) j["cpu_load"] = o.cpu_load;
  if (global().json) {
    print_json(j);
    return;
  }
  if (client_op(j.value("op", ""))) {
    print_client_row(j);
    return;
  }
  if (!label.empty()) std::cout << label << " ";
  print_row(j);
  if (sync_op(j.value("op", ""))) print_sync_row(j);
}

// A handoff cell of any system: the ceiling measured right before it on the
// same server by one client alone (commit latency drifts between cells),
// then `clients` contenders handing lock `lock` to each other.
json handoff_cell(const std::string& lock, int clients, const MakeContender& make, const Timing& t) {
  json j;
  std::string ceiling_error;
  Ceiling ceiling;
  try {
    ceiling = measure_ceiling(lock + ":solo", make, t.warmup, std::min(t.duration, milliseconds(1000)), t.hold);
  } catch (const std::exception& e) {
    ceiling_error = std::string("measuring the hand-off ceiling: ") + e.what();
  }
  Stats st = run_handoff(clients, lock, make, t.warmup, t.duration, t.hold);
  add_handoff_fields(j, st, ceiling);
  if (!ceiling_error.empty()) {  // no ceiling, no efficiency for this cell
    for (const char* k : {"ceiling_release_ms", "ceiling_wakeup_ms", "ceiling_acquire_ms", "ceiling_cycle_ms",
                          "ceiling_per_s", "handoff_efficiency"})
      j[k] = nullptr;
    j["hold_ms"] = t.hold.count();
    j["errors"] = j["errors"].get<std::uint64_t>() + 1;
    if (!j.contains("first_error")) j["first_error"] = ceiling_error;
  }
  return j;
}

// The lease ops of `ops` through comparator `c` at every client count, as
// sqlguard's run: lease-distinct (a lock per client), lease-hot (one lock,
// waited acquires), handoff (one lock, >= 2 clients).
std::vector<json> run_comparator(const Comparator& c, const std::vector<std::string>& ops,
                                 const std::vector<int>& clients, const std::vector<int>& requesters, const Opts& o,
                                 const Timing& t, const std::string& run_tag) {
  std::vector<json> out;
  for (const auto& op : ops) {
    if (op == "lease-coalesced" && c.pipelined) {
      // Requesters sharing two pipelined connections (lease-coalesced's
      // sqlguard side shares two work connections), a key of their own each.
      for (int n : requesters) {
        const std::string lock = run_tag + ":" + c.name + ":coalesced:" + std::to_string(n);
        json j = {{"dialect", c.name}, {"comparator", true}, {"op", op}, {"requesters", n}, {"clients", n},
                  {"mode", "threads"}, {"connections", 2}};
        const MakeContender make = c.pipelined();
        Stats st = run_clients(n, false, [&](int i) -> OpFn {
          std::shared_ptr<Contender> ct = make(lock + ":" + std::to_string(i), i);
          return [ct] {
            if (!ct->acquire(milliseconds(0))) return false;
            ct->release();
            return true;
          };
        }, t.warmup, t.duration);
        add_cell_fields(j, op, st, nullptr);
        j["statements_per_op"] = c.round_trips;
        add_durability_fields(j, c.durability);
        // A pipeline's writes share their flush (Redis fsyncs once per event
        // loop batch before it answers), as a lock client batch's do.
        j["durability"] = c.durability.summary + "; pipelined: the writes of one batch share a flush";
        j["flushes_per_cycle"] = nullptr;
        out.push_back(j);
      }
      continue;
    }
    if (!lease_op(op)) continue;
    for (int n : clients) {
      if (op == "handoff" && n < 2) continue;  // a hand-off needs a second client
      const std::string lock = run_tag + ":" + c.name + ":" + op + ":" + std::to_string(n);
      json j = {{"dialect", c.name}, {"comparator", true}, {"op", op}, {"clients", n},
                {"mode", o.processes && op != "handoff" ? "processes" : "threads"}};
      if (op == "handoff") {
        j.update(handoff_cell(lock, n, c.make, t));
      } else {
        auto make = [&](int i) {
          return contended_cycle(c.make(op == "lease-hot" ? lock : lock + ":" + std::to_string(i), i));
        };
        Stats st = run_clients(n, o.processes, make, t.warmup, t.duration);
        add_cell_fields(j, op, st, nullptr);
      }
      j["statements_per_op"] = c.round_trips;
      add_durability_fields(j, c.durability);
      out.push_back(j);
    }
  }
  return out;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, ','))
    if (!cur.empty()) out.push_back(cur);
  return out;
}

// A comma-separated list of counts in lo..hi (--clients, --held, --waiters).
std::vector<int> counts_flag(const std::string& flag, const std::string& text, int lo, int hi, const char* what) {
  std::vector<int> out;
  for (const auto& c : split(text)) {
    int n = 0;
    try {
      std::size_t used = 0;
      n = std::stoi(c, &used);
      if (used != c.size()) n = -1;
    } catch (const std::exception&) {
      n = -1;
    }
    if (n < lo || n > hi)
      throw BadValue(flag, "'" + c + "' is not " + what + " in " + std::to_string(lo) + ".." + std::to_string(hi));
    out.push_back(n);
  }
  if (out.empty()) throw BadValue(flag, "is empty");
  return out;
}

// churn-soak releases --churn of its --held holdings every cycle.
void check_churn(int churn, int held) {
  if (churn > held)
    throw BadValue("--churn", std::to_string(churn) + " is more than the " + std::to_string(held) +
                                  " held leases it releases from (--held)");
}

// The lock-client ops' settings, validated before the database is touched.
struct ClientPlan {
  std::vector<int> held;  // empty: the dialect's default
  std::vector<int> waiters;
  std::vector<int> requesters;
  std::vector<int> clients;  // lock-set: one cell per --clients value
  milliseconds held_ttl{3000};
  int per_lease = 100;
  SoakPlan soak;  // churn-soak (its held: the --held values)
};

// The cells of one lock-client op (held-leases: one per --held value with
// the lock client, then today's per-lease model at --per-lease leases, as
// many as the server has room for; waiters: one per --waiters value).
// What each comparator's cells measured: name -> (op, clients) -> ops/s.
using ComparatorOps = std::map<std::string, std::map<std::pair<std::string, int>, double>>;

void run_client_op(const std::string& op, const ClientPlan& plan, const Opts& o, Connection& admin,
                   const std::string& dialect, const std::string& run_tag, int& cell_no, const Timing& t,
                   const ComparatorOps& comparator_ops) {
  auto bench = [&] {
    ++cell_no;
    const std::string tag = random_hex(10);
    return ClientBench{single_db(), connect_options(), &admin, run_tag + ":" + std::to_string(cell_no), tag};
  };
  // A cell that fails (the server ended the bench's session, ...) is
  // reported as one with its error; the next cells still run.
  auto emit_cell = [&](json head, const std::function<json()>& measure) {
    json cell = {{"dialect", dialect}, {"op", op}, {"mode", "threads"}};
    cell.update(head);
    try {
      cell.update(measure());
    } catch (const std::exception& e) {
      cell["errors"] = 1;
      cell["first_error"] = e.what();
      // The bench's own session may be the one that broke: the next cells need it.
      try {
        admin.reconnect();
      } catch (const std::exception& r) {
        cell["first_error"] = std::string(e.what()) + "; reconnecting the bench's session failed too: " + r.what();
      }
    }
    if (!cell.contains("clients")) cell["clients"] = 1;
    emit(cell, o);
  };
  if (op == kSoakOp) {
    std::vector<int> held = plan.held;
    if (held.empty()) held = {admin.kind() == DialectKind::kSqlite ? 1000 : 10000};
    for (int n : held) check_churn(static_cast<int>(plan.soak.churn), n);
    // Progress as it goes: each sample a line (stderr under --json, whose
    // stdout is the cell's one JSON line).
    auto on_sample = [](const json& s) { print_soak_sample(global().json ? std::cerr : std::cout, s); };
    for (int n : held)
      emit_cell({{"held", n}}, [&] {
        SoakPlan p = plan.soak;
        p.held = static_cast<std::size_t>(n);
        return churn_soak_cell(bench(), p, on_sample);
      });
    return;
  }
  if (op == "takeover") {
    // Both rules in one run, on the same servers (issue 38 item 2).
    for (TakeOver rule : {TakeOver::kWatched, TakeOver::kDatabaseClock})
      emit_cell({{"rule", to_string(rule)}, {"clients", 2}},
                [&] { return takeover_cell(bench(), rule, std::chrono::seconds(2), 5); });
    return;
  }
  if (op == "lease-coalesced") {
    for (int n : plan.requesters)
      emit_cell({{"requesters", n}, {"clients", n}}, [&] {
        json j = coalesced_cell(bench(), static_cast<std::size_t>(n), t.warmup, t.duration);
        for (const auto& [name, by_cell] : comparator_ops) {
          auto it = by_cell.find({op, n});
          if (it != by_cell.end() && it->second > 0 && j["ops_per_s"].is_number())
            j["vs_" + name] = r3(j["ops_per_s"].get<double>() / it->second);
        }
        return j;
      });
    return;
  }
  if (op == "lock-set") {
    for (int n : plan.clients)
      emit_cell({{"clients", n}}, [&] {
        json j = lock_set_cell(bench(), n, t.hold, t.warmup, t.duration);
        j["durability"] = commit_durability(admin).summary;
        return j;
      });
    return;
  }
  if (op == "waiters") {
    for (int n : plan.waiters)
      emit_cell({{"waiters", n}, {"clients", n + 1}}, [&] {
        return waiters_cell(bench(), static_cast<std::size_t>(n), t.hold, t.warmup, t.duration);
      });
    return;
  }
  std::vector<int> held = plan.held;
  if (held.empty())
    held = admin.kind() == DialectKind::kSqlite ? std::vector<int>{100, 1000} : std::vector<int>{100, 1000, 10000};
  for (int n : held)
    emit_cell({{"model", "lock-client"}, {"held", n}},
              [&] { return held_leases_client(bench(), static_cast<std::size_t>(n), plan.held_ttl); });
  if (plan.per_lease == 0) return;
  // Today's model last, so that the hundreds of threads and connections it
  // starts and stops cannot disturb the lock client's baselines.
  emit_cell({{"model", "per-lease"}, {"held", plan.per_lease}}, [&] {
    std::string why;
    const std::size_t fit = per_lease_fit(admin, static_cast<std::size_t>(plan.per_lease), &why);
    json j = fit > 0 ? held_leases_per_lease(bench(), fit, plan.held_ttl) : json{{"held", 0}, {"errors", 0}};
    if (fit < static_cast<std::size_t>(plan.per_lease)) {
      j["per_lease_requested"] = plan.per_lease;
      j["per_lease_limited_by"] = why;
    }
    return j;
  });
}

// --scale: cells continue the numbering at `cell_no`.
void run_scale(const Opts& o, Connection& admin, const std::string& dialect, const std::string& run_tag, int& cell_no,
               milliseconds warmup, milliseconds duration) {
  auto& g = global();
  auto open = [] { return open_db(); };
  // Acquire latency before/after 1M rows in each table, then during cleanup.
  const auto rows = o.scale_rows;
  const int sc = o.scale_clients;
  auto measure = [&](const std::string& op, const std::string& phase) {
    ++cell_no;
    Cell cell{op, sc, run_tag + ":" + std::to_string(cell_no), static_cast<std::int64_t>(cell_no) * 100000};
    Stats st = run_clients(sc, false, [&](int i) { return sg_op(cell, i, open); }, warmup, duration);
    json j = lat_json(phase, op, st);
    j["dialect"] = dialect;
    j["scale"] = true;
    j["clients"] = sc;
    j["rows"] = rows;
    if (!o.run_id.empty()) j["run_id"] = o.run_id;
    if (o.cpu_load > 0) j["cpu_load"] = o.cpu_load;
    if (g.json) print_json(j);
    else print_scale_row(op + " " + phase, st);
    return j;
  };
  const std::string fill_tag = run_tag + ":fill";
  measure("lease-distinct", "before_fill");
  auto t0 = Clock::now();
  bulk_fill(admin, "sqlguard_lock", fill_tag, rows);
  double fill_s = std::chrono::duration<double>(Clock::now() - t0).count();
  measure("lease-distinct", "after_fill_lock_rows");
  measure("idem-first", "before_fill");
  t0 = Clock::now();
  bulk_fill(admin, "sqlguard_idempotency", fill_tag, rows);
  fill_s += std::chrono::duration<double>(Clock::now() - t0).count();
  measure("idem-first", "after_fill_idempotency_rows");
  // Cleanup of all expired rows (2 x rows) on its own connection while
  // lease-distinct acquirers run; their latency is measured only while it runs.
  std::atomic<bool> done{false};
  CleanupReport rep;
  std::string cleanup_error;
  double cleanup_s = 0;
  ++cell_no;
  Cell cell{"lease-distinct", sc, run_tag + ":" + std::to_string(cell_no), 0};
  std::thread cleaner;
  auto start_cleanup = [&] {
    cleaner = std::thread([&] {
      auto t = Clock::now();
      try {
        auto c = open_db();
        CleanupOptions co;
        co.inbox = false;
        co.history = false;
        rep = cleanup(*c, co);
      } catch (const std::exception& e) {
        cleanup_error = e.what();
      }
      cleanup_s = std::chrono::duration<double>(Clock::now() - t).count();
      done = true;
    });
  };
  // Measure in slices until cleanup ends (bounded by 10 minutes).
  Stats during;
  start_cleanup();
  auto deadline = Clock::now() + std::chrono::minutes(10);
  while (!done && Clock::now() < deadline) {
    Stats s = run_clients(sc, false, [&](int i) { return sg_op(cell, i, open); }, milliseconds(0),
                          std::min<milliseconds>(duration, milliseconds(1000)));
    during.ops += s.ops;
    during.errors += s.errors;
    during.elapsed_s += s.elapsed_s;
    during.lat_ns.insert(during.lat_ns.end(), s.lat_ns.begin(), s.lat_ns.end());
  }
  cleaner.join();
  json j = lat_json("during_cleanup", "lease-distinct", during);
  j["dialect"] = dialect;
  j["scale"] = true;
  j["clients"] = sc;
  j["rows"] = rows;
  j["fill_s"] = r3(fill_s);
  j["cleanup_s"] = r3(cleanup_s);
  j["locks_deleted"] = rep.locks_deleted;
  j["idempotency_deleted"] = rep.idempotency_deleted;
  j["cleanup_batches"] = rep.batches;
  if (!cleanup_error.empty()) j["cleanup_error"] = cleanup_error;
  if (!o.run_id.empty()) j["run_id"] = o.run_id;
  if (o.cpu_load > 0) j["cpu_load"] = o.cpu_load;
  if (g.json) print_json(j);
  else print_cleanup_row(during, rep.locks_deleted, rep.idempotency_deleted, cleanup_s, fill_s);
}

void run_bench(const Opts& o) {
  auto& g = global();
  // ---- validate everything before touching the database
  std::vector<std::string> ops;
  for (const auto& op : split(o.ops)) {
    if (op == "all") {
      ops.assign(std::begin(kAllOps), std::end(kAllOps));
      continue;
    }
    if (op != kSoakOp && std::find(std::begin(kAllOps), std::end(kAllOps), op) == std::end(kAllOps)) {
      std::string known;
      for (auto* k : kAllOps) known += std::string(known.empty() ? "" : ", ") + k;
      throw BadValue("--ops", "unknown op '" + op + "' (known: " + known + ", " + kSoakOp + ", all)");
    }
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
  }
  if (ops.empty()) throw BadValue("--ops", "is empty");
  const std::vector<int> clients = counts_flag("--clients", o.clients, 1, 512, "a client count");
  ClientPlan plan;
  if (!o.held.empty()) plan.held = counts_flag("--held", o.held, 1, 100000, "a lease count");
  plan.waiters = counts_flag("--waiters", o.waiters, 1, 100000, "a waiter count");
  plan.requesters = counts_flag("--requesters", o.requesters, 1, 1024, "a requester count");
  plan.clients = clients;
  const bool soak = std::find(ops.begin(), ops.end(), kSoakOp) != ops.end();
  const DurationRange ttl_range{milliseconds(300), std::chrono::minutes(10)};
  plan.held_ttl = o.held_ttl.empty() ? milliseconds(3000) : duration_flag("--held-ttl", o.held_ttl, ttl_range);
  plan.per_lease = o.per_lease;
  // The matrix's cells run up to an hour each; a soak up to a day.
  auto duration = o.duration.empty() ? milliseconds(2000)
                                     : duration_flag("--duration", o.duration, {milliseconds(50), std::chrono::hours(24)});
  if (duration > std::chrono::hours(1) && std::any_of(ops.begin(), ops.end(), [](const auto& op) { return op != kSoakOp; }))
    throw BadValue("--duration", "'" + o.duration + "' is over 1h: only " + kSoakOp + " runs longer (up to 24h)");
  plan.soak.churn = static_cast<std::size_t>(o.churn);
  plan.soak.all_kinds = o.churn_kinds == "all";
  plan.soak.ttl = o.held_ttl.empty() ? milliseconds(5000) : plan.held_ttl;
  plan.soak.duration = o.duration.empty() ? milliseconds(60000) : duration;
  plan.soak.sample_every = duration_flag("--sample-every", o.sample_every, {milliseconds(100), std::chrono::hours(1)});
  plan.soak.cycle_every = duration_flag("--cycle-every", o.cycle_every, {milliseconds(0), std::chrono::minutes(10)});
  if (soak)
    for (int n : plan.held) check_churn(o.churn, n);  // the default --held is checked once the dialect is known
  auto warmup = duration_flag("--warmup", o.warmup, {milliseconds(0), std::chrono::minutes(10)});
  auto hold = duration_flag("--hold", o.hold, {milliseconds(0), std::chrono::seconds(1)});
  const Timing timing{warmup, duration, hold};
  if (!o.redis.empty())
    if (auto why = redis_unavailable(); !why.empty()) throw BadValue("--redis", why);
  if (!o.etcd.empty())
    if (auto why = etcd_unavailable(); !why.empty()) throw BadValue("--etcd", why);
  const auto commit = o.durable_release ? ReleaseCommit::kDurable : ReleaseCommit::kCoveredByNextAcquire;
  bench_take_over() = o.take_over == "database-clock" ? TakeOver::kDatabaseClock : TakeOver::kWatched;
  if (!o.barging_limit.empty())
    bench_barging_limit() = duration_flag("--barging-limit", o.barging_limit, {milliseconds(0), std::chrono::hours(1)});
  const CpuLoad cpu_load(o.cpu_load);
  // Comparators connect before the database is touched: an unreachable one
  // fails the run at once, naming its address.
  std::vector<Comparator> comparators;
  if (!o.redis.empty()) comparators.push_back(redis_comparator(o.redis));
  if (!o.etcd.empty()) comparators.push_back(etcd_comparator(o.etcd));

  auto admin = open_db();
  const std::string dialect(to_string(admin->kind()));
  migrate(*admin);
  create_stock(*admin);
  const std::string run_tag = "bench:" + random_hex(10);
  // --history: every write of the run's names recorded (history.h), its
  // triggers in every cell's statements; stopped again at the end.
  struct HistoryScope {
    Connection* conn = nullptr;
    std::string prefix;
    ~HistoryScope() {
      if (!conn) return;
      try {
        disable_history(*conn, prefix);
      } catch (const Error&) {
      }
    }
  } history_scope;
  if (o.history) {
    enable_history(*admin, run_tag, std::chrono::hours(1));
    history_scope.conn = admin.get();
    history_scope.prefix = run_tag;
  }
  // Each op once, recorded: --emit-sql prints it, every cell reports its
  // statements_per_op (round trips, BEGIN/COMMIT included).
  std::map<std::string, Recorded> recorded;
  fill_stock(*admin, 0, kCartCatalogue);  // (row 0: the single-row ops'; the cart ops' catalogue)
  std::vector<std::string> matrix_ops;  // the ops measured per client count
  for (const auto& op : ops) {
    if (client_op(op)) continue;
    matrix_ops.push_back(op);
    Cell cell{op, 1, run_tag + ":record:" + op, 0};
    cell.release_commit = commit;
    cell.permits = o.permits;
    recorded[op] = record_op(op, cell);
  }
  if (o.emit_sql) {
    emit_sql(dialect, admin->kind() == DialectKind::kPostgresql, matrix_ops, recorded);
    admin::delete_by_prefix(*admin, run_tag);
    return;
  }
  const Durability durability = lease_cycle_durability(*admin, commit);
  auto open = [] { return open_db(); };
  std::vector<json> cells;
  if (!g.json) {
    std::cout << "sqlguard bench: " << mask_uri(g.db) << " (" << dialect << "), " << (o.processes ? "processes" : "threads")
              << ", " << format_duration(duration) << " per cell after " << format_duration(warmup) << " warm-up\n"
              << "lease cycle: " << durability.summary << "\n";
    if (o.cpu_load > 0)
      std::cout << "cpu load: " << o.cpu_load << " spinning process" << (o.cpu_load == 1 ? "" : "es") << " on "
                << std::thread::hardware_concurrency() << " cores, all run long\n";
    if (!matrix_ops.empty()) print_table_header();
  }
  // Comparators first (same run, same client counts): every lease cell then
  // reports vs_<name> = its ops/s over the comparator's for the same op and clients.
  ComparatorOps comparator_ops;
  for (const auto& c : comparators) {
    for (auto& j : run_comparator(c, ops, clients, plan.requesters, o, timing, run_tag)) {
      comparator_ops[c.name][{j["op"].get<std::string>(), j["clients"].get<int>()}] = j["ops_per_s"].get<double>();
      emit(j, o, c.name);
      cells.push_back(j);
    }
  }
  // How close the hot lock gets to the disk: the database's own commit rate
  // with one client, measured in the same run before the matrix (issue 40).
  double commit_rate = 0;
  // (Through the native driver, as the raw path: not with --no-raw, which
  // is what a transaction pooler needs.)
  if (!o.no_raw && std::find(ops.begin(), ops.end(), "lease-hot") != ops.end()) {
    constexpr std::int64_t kCommitRow = 50000;  // below the first cell's rows (cell_no * 100000)
    fill_stock(*admin, kCommitRow, 1);
    Cell cc{"commit-rate", 1, run_tag + ":commit-rate", kCommitRow};
    Stats st = run_clients(1, false, [&](int) { return commit_op(cc, open); }, warmup, duration);
    json j = {{"dialect", dialect}, {"op", "commit-rate"}, {"clients", 1}, {"mode", "threads"}};
    add_cell_fields(j, "commit-rate", st, nullptr);
    const Durability cd = commit_durability(*admin);
    j["durability"] = cd.summary;
    j["flushes_per_commit"] = cd.flushes_per_cycle ? json(*cd.flushes_per_cycle) : json(nullptr);
    j["statement"] = kInboxEffect;
    if (st.errors == 0) commit_rate = st.ops_per_s();
    emit(j, o);
    cells.push_back(j);
  }
  std::map<std::string, double> one_client;  // op -> ops/s with 1 client (contention_ratio)
  int cell_no = 0;
  for (const auto& op : ops) {
    if (client_op(op)) {
      run_client_op(op, plan, o, *admin, dialect, run_tag, cell_no, timing, comparator_ops);
      continue;
    }
    for (int n : clients) {
      ++cell_no;
      Cell cell{op, n, run_tag + ":" + std::to_string(cell_no), 0};
      cell.key_base = static_cast<std::int64_t>(cell_no) * 100000;
      cell.release_commit = commit;
      json j = {{"dialect", dialect}, {"op", op}, {"clients", n}, {"mode", o.processes ? "processes" : "threads"}};
      if (op == "handoff") {
        if (n < 2) continue;  // a hand-off needs a second client
        j["mode"] = "threads";
        j.update(handoff_cell(cell.prefix + ":handoff", n, sg_contender(open, commit), timing));
      } else if (sync_op(op)) {
        if (op == "fair-lease" && n < 2) continue;  // a queue needs a second client
        j["mode"] = "threads";  // a LockClient per thread (bench_sync.cpp)
        j.update(sync_cell(op, SyncBench{single_db(), connect_options(), cell.prefix, n, o.permits, warmup, duration,
                                         hold}));
      } else {
        fill_stock(*admin, cell.key_base, cart_op(op) ? kCartCatalogue : n);
        fill_stock(*admin, cell.key_base + 10000, n);
        Stats raw_st;
        bool have_raw = !o.no_raw && !cart_op(op);  // (the cart ops' comparison is each other)
        // raw first, then sqlguard: both see the same warm server
        if (have_raw)
          raw_st = run_clients(n, o.processes, [&](int i) { return raw_op(cell, i, open); }, warmup, duration);
        cart_units_sold() = 0;
        Stats st = run_clients(n, o.processes, [&](int i) { return sg_op(cell, i, open); }, warmup, duration);
        add_cell_fields(j, op, st, have_raw ? &raw_st : nullptr);
        if (cart_op(op)) add_cart_fields(j, *admin, cell.key_base, o.processes);
      }
      j["statements_per_op"] = recorded[op].round_trips;
      if (recorded[op].round_trips_exclusive >= 0) j["statements_per_exclusive_op"] = recorded[op].round_trips_exclusive;
      if (lease_op(op)) {
        add_durability_fields(j, durability);
        j["release_commit"] = o.durable_release ? "durable" : "covered_by_next_acquire";
        j["take_over"] = to_string(bench_take_over());
        j["barging_limit_ms"] = bench_barging_limit().value_or(LeaseOptions{}.barging_limit).count();
        j["history"] = o.history;
      }
      if (lease_op(op) && j["ops_per_s"].is_number()) {
        const double ops_s = j["ops_per_s"].get<double>();
        if (n == 1 && op != "handoff") one_client[op] = ops_s;
        if (one_client.count(op) && one_client[op] > 0) j["contention_ratio"] = r3(ops_s / one_client[op]);
        if (op == "lease-hot" && commit_rate > 0) j["vs_commit_rate"] = r3(ops_s / commit_rate);
        for (const auto& [name, by_cell] : comparator_ops) {
          auto it = by_cell.find({op, n});
          if (it != by_cell.end() && it->second > 0) j["vs_" + name] = r3(ops_s / it->second);
        }
      }
      emit(j, o);
      cells.push_back(j);
    }
  }
  if (o.scale) run_scale(o, *admin, dialect, run_tag, cell_no, warmup, duration);
  if (!o.plot.empty()) {
    write_svg(o.plot, "sqlguard bench: " + dialect + " (" + (o.processes ? "processes" : "threads") + ")", cells);
    if (!g.json) std::cout << "plot: " << o.plot << "\n";
  }
  if (!o.keep) {
    // Our rows only: everything this run created carries its tag.
    admin::delete_by_prefix(*admin, run_tag);
    admin->execute_script(std::string("DROP TABLE IF EXISTS ") + kStock);
  }
}

}  // namespace

void add_bench(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("bench", "Throughput/latency per op and client count, against the raw driver baseline");
  cmd->add_option("--ops", o->ops,
                  "Comma-separated: lease-distinct, lease-hot, handoff, guarded-decrement, rowlock-decrement, "
                  "cas-decrement, idem-first, idem-replay, inbox, held-leases, waiters, fair-lease, semaphore-hot, "
                  "rw-mixed, takeover, lease-coalesced, cart-decrement, cart-per-row, lock-set, or all; and churn-soak (never "
                  "part of all)")
      ->capture_default_str();
  cmd->add_option("--clients", o->clients, "Comma-separated client counts (one connection each; lock-set: a lock client each)")->capture_default_str();
  cmd->add_option("--duration", o->duration,
                  "Measured time per cell and path (default 2s, at most 1h); churn-soak: the soak's length "
                  "(default 60s, at most 24h)");
  cmd->add_option("--warmup", o->warmup, "Unmeasured warm-up per cell and path")->capture_default_str();
  cmd->add_option("--hold", o->hold,
                  "handoff, waiters, lock-set and the synchronizer ops: how long each owner holds the lock (the "
                  "synchronizer ops also pause this long before asking again)")
      ->capture_default_str();
  cmd->add_option("--permits", o->permits, "semaphore-hot: the semaphore's permits")
      ->check(whole_number(1, 1000))
      ->capture_default_str();
  cmd->add_flag("--processes", o->processes, "One forked process per client instead of threads");
  cmd->add_option("--cpu-load", o->cpu_load,
                  "Run every cell beside N processes that spin on the CPU at normal priority (a busy host; each "
                  "cell's JSON says cpu_load N)")
      ->check(whole_number(0, 256))
      ->capture_default_str();
  cmd->add_flag("--no-raw", o->no_raw, "Skip the raw driver baseline");
  cmd->add_flag("--emit-sql", o->emit_sql, "Print the exact statements per op and exit");
  cmd->add_option("--plot", o->plot, "Write an SVG of ops/s against clients to this file");
  auto* redis = cmd->add_option("--redis", o->redis, kRedisHelp);
  auto* etcd = cmd->add_option("--etcd", o->etcd, kEtcdHelp);
  // Whether the comparators module is there is asked only when `bench` is
  // the command (the other commands never load it): its help then says so.
  cmd->preparse_callback([redis, etcd](std::size_t) {
    if (auto why = redis_unavailable(); !why.empty()) redis->description(std::string(kRedisHelp) + " [unavailable: " + why + "]");
    if (auto why = etcd_unavailable(); !why.empty()) etcd->description(std::string(kEtcdHelp) + " [unavailable: " + why + "]");
  });
  cmd->add_flag("--durable-release", o->durable_release,
                "Lease releases wait for their commit's flush (ReleaseCommit::kDurable; PostgreSQL: 2 WAL flushes "
                "per cycle instead of 1)");
  cmd->add_option("--take-over", o->take_over,
                  "The lease handles' take-over rule in lease-hot and handoff (LeaseOptions::take_over): watched "
                  "(the default) or database-clock; `takeover` measures both")
      ->check(CLI::IsMember({"watched", "database-clock"}))
      ->capture_default_str();
  cmd->add_option("--barging-limit", o->barging_limit,
                  "The lease handles' LeaseOptions::barging_limit in lease-hot, handoff and fair-lease's default row "
                  "(bounded barging: how long a waiter barges before it takes the lease's next turn), 0 .. 1h; "
                  "default: the library's (200ms)");
  cmd->add_flag("--history", o->history,
                "Record the run's lock names in the grant history (sqlguard history --enable) while it runs: "
                "what recording costs (tools/bench_history.sh)");
  cmd->add_option("--run-id", o->run_id, "Copied into every cell's JSON (run_id): tools/bench.sh's run, so tables "
                                         "can check their cells come from one run");
  cmd->add_flag("--scale", o->scale, "Scale checks: latency with 1M rows in the lock / idempotency tables and during cleanup");
  cmd->add_option("--scale-rows", o->scale_rows, "Rows filled per table by --scale")
      ->check(whole_number(1, 100000000))
      ->capture_default_str();
  cmd->add_option("--scale-clients", o->scale_clients, "Clients of the --scale measurements")
      ->check(whole_number(1, 512))
      ->capture_default_str();
  cmd->add_option("--held", o->held,
                  "held-leases: comma-separated counts of leases one lock client holds (default 100,1000,10000; "
                  "SQLite 100,1000); churn-soak: the leases it holds all the time (default 10000; SQLite 1000)");
  cmd->add_option("--held-ttl", o->held_ttl,
                  "held-leases: the leases' ttl (default 3s); they are held 3 ttl, renewed every ttl/3. "
                  "churn-soak: the holdings' ttl (default 5s)");
  cmd->add_option("--churn", o->churn,
                  "churn-soak: holdings released and acquired on new names every cycle (at most --held)")
      ->check(whole_number(1, 100000))
      ->capture_default_str();
  cmd->add_option("--churn-kinds", o->churn_kinds,
                  "churn-soak: lease (the new names as leases), or all (spread over a lease, a fair lease, a "
                  "semaphore permit, read-write shared and exclusive, acquire_async, a wait that times out and one "
                  "that is cancelled)")
      ->check(CLI::IsMember({"lease", "all"}))
      ->capture_default_str();
  cmd->add_option("--cycle-every", o->cycle_every,
                  "churn-soak: a cycle (release --churn, acquire --churn new names) starts this often, back to back "
                  "when one takes longer; 0s = always back to back. Each holding lives about --held / --churn cycles, "
                  "renewed every ttl/3 meanwhile")
      ->capture_default_str();
  cmd->add_option("--sample-every", o->sample_every,
                  "churn-soak: a sample (acquisitions, losses, RSS, heap, the client's stats) this often, besides "
                  "the start, the baseline (the first minute, or half a shorter run) and the end")
      ->capture_default_str();
  cmd->add_option("--per-lease", o->per_lease,
                  "held-leases: leases held the per-lease way (a watchdog connection and thread each) for "
                  "comparison, fewer if the server has no room; 0 = none")
      ->check(whole_number(0, 2000))
      ->capture_default_str();
  cmd->add_option("--waiters", o->waiters,
                  "waiters: comma-separated counts of handles of one lock client waiting with acquire_async() on "
                  "one name")
      ->capture_default_str();
  cmd->add_option("--requesters", o->requesters,
                  "lease-coalesced: comma-separated counts of threads on one lock client (4 connections), each "
                  "taking and releasing a name of its own")
      ->capture_default_str();
  cmd->add_flag("--keep", o->keep, "Keep the rows and the bench table afterwards");
  cmd->callback([o] {
    run_bench(*o);
    exit_code() = kExitOk;
  });
}

}  // namespace sqlguard::cli
