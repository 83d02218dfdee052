// `sqlguard chaos`: runs N worker processes (chaos_worker.cpp) against one
// database while a seeded fault injector kill -9s them, SIGSTOPs lock
// holders past their ttl, terminates their server sessions, restarts or
// crashes the server and cuts lock holders off the server (partition, through one fault
// proxy per worker), and on a Galera cluster (one --db per node, workers
// round-robin) kills and rejoins nodes (chaos_nodekill.cpp); --faults picks
// which. Then it checks invariants from what the database recorded.
//
// Bounded: every loop ends at --duration (workers stop by themselves at the
// same deadline), every paused worker is SIGCONTed, every child is reaped,
// stragglers are SIGKILLed after a grace. Workers die with the coordinator
// (PR_SET_PDEATHSIG). Traffic goes only to --db (directly, or through the
// loopback fault proxies) and the server restart script named by
// SQLGUARD_DBSERVERS.
//
// This file: the command (options, setup, the fault schedule, the result).
// The parts it drives are listed in chaos_coordinator.h.
#include <signal.h>

#include <algorithm>
#include <iostream>
#include <random>
#include <thread>
#include <utility>

#include "chaos_coordinator.h"
#include "sqlguard/admin.h"
#include "sqlguard/history.h"
#include "common.h"
#include "sqlguard/migrate.h"
#include "sqlguard/validate.h"

namespace sqlguard::cli {
namespace chaos {

void add_chaos_worker(CLI::App& app);

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using nlohmann::json;

std::int64_t wall_ms() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Run::Run(const Opts& opts, milliseconds run_for, milliseconds lease_ttl)
    : o(opts), duration(run_for), ttl(lease_ttl), names(random_hex(8)), rng(opts.seed) {}

void Run::fault(const std::string& kind, int slot, pid_t pid, const std::string& detail) {
  auto t = std::chrono::duration_cast<milliseconds>(steady_clock::now() - t0).count();
  json f = {{"t_ms", t}, {"kind", kind}, {"detail", detail}};
  if (slot >= 0) {
    f["worker"] = slot;
    f["pid"] = pid;
  }
  faults.push_back(f);
  std::cerr << "chaos: +" << t << "ms " << kind;
  if (slot >= 0) std::cerr << " worker " << slot << " (pid " << pid << ")";
  std::cerr << ": " << detail << std::endl;
}

FaultSet FaultSet::parse(const std::string& list) {
  if (list.empty()) throw CLI::ValidationError("--faults", "needs at least one fault");
  FaultSet f;
  f.listed = true;
  f.kill = f.pause = f.session_kill = f.restart = f.crash = f.partition = f.node_kill = f.failover = false;
  f.clock_step = false;
  std::size_t begin = 0;
  while (begin <= list.size()) {
    auto end = std::min(list.find(',', begin), list.size());
    std::string name = list.substr(begin, end - begin);
    bool* flag = name == "kill"           ? &f.kill
                 : name == "pause"        ? &f.pause
                 : name == "session-kill" ? &f.session_kill
                 : name == "restart"      ? &f.restart
                 : name == "crash"        ? &f.crash
                 : name == "partition"    ? &f.partition
                 : name == "node-kill"    ? &f.node_kill
                 : name == "failover"     ? &f.failover
                 : name == "clock-step"   ? &f.clock_step
                                          : nullptr;
    if (!flag)
      throw CLI::ValidationError("--faults", "unknown fault '" + name +
                                                 "'; known: kill, pause, session-kill, restart, crash, partition, "
                                                 "node-kill, failover, clock-step");
    *flag = true;
    begin = end + 1;
  }
  return f;
}

std::vector<std::string> FaultSet::names() const {
  std::vector<std::string> n;
  for (auto [on, name] : {std::pair{kill, "kill"}, {pause, "pause"}, {session_kill, "session-kill"},
                          {restart, "restart"}, {crash, "crash"}, {partition, "partition"}, {node_kill, "node-kill"},
                          {failover, "failover"}, {clock_step, "clock-step"}})
    if (on) n.emplace_back(name);
  return n;
}

void Db::open() { conn_ = make_connection(db_uris().front(), connect_options()); }  // node 1 of a cluster

bool Db::transient(const Error& e) {
  return e.code() == ErrorCode::kConnectionLost || e.code() == ErrorCode::kCommitInDoubt ||
         e.code() == ErrorCode::kTimeout || e.code() == ErrorCode::kLockBusy || e.code() == ErrorCode::kConflict;
}

void Db::recover() {
  try {
    if (conn_->in_transaction()) conn_->rollback();
  } catch (const Error&) {
  }
  try {
    conn_->reconnect();
  } catch (const Error&) {
    std::this_thread::sleep_for(milliseconds(200));
  }
}

namespace {

volatile sig_atomic_t g_stop = 0;
void on_stop_signal(int) { g_stop = 1; }

void create_tables(const Run& run, Connection& c) {
  const ChaosSql sql(run.names, run.o.kind);
  for (const auto& ddl : sql.create_tables) c.execute_script(ddl);
  for (int r = 0; r < run.resources; ++r) c.execute(sql.insert_resource, {r});
  for (int i = 0; i < run.items; ++i) c.execute(sql.insert_stock, {i, run.initial_qty, run.initial_qty});
}

void drop_tables(Run& run, Db& db) {
  const ChaosSql sql(run.names, run.o.kind);
  for (const auto& t : sql.tables) {
    try {
      db.with([&](Connection& c) { c.execute_script(ChaosSql::drop_table(t)); return 0; });
    } catch (const Error& e) {
      run.notes.push_back("could not drop " + t + ": " + e.message());
    }
  }
  try {
    db.with([&](Connection& c) {
      // Every row of the run's names, of any kind (a semaphore's or
      // read-write lease's reservation, holdings and queue places too).
      admin::delete_by_prefix(c, run.names.prefix);
      for (int r = 0; r < run.resources; ++r) admin::delete_fenced_resource(c, run.names.lock(r));
      admin::delete_inbox_consumer(c, run.names.consumer);
      return 0;
    });
  } catch (const Error& e) {
    run.notes.push_back(std::string("could not delete the run's lock/inbox rows: ") + e.message());
  }
}

// The second checker: `verify` over the grant history the database recorded
// for the run's names (every grant, hand-over, release and take-over, on the
// database clock). Skipped when the run steps the database clock: the record
// is ordered in that clock's time, which a step bends (the journal checker,
// on the workers' monotonic clocks, still runs).
void check_history(Run& run, Db& db, Faults& f, Verdict& v) {
  if (f.clock_steps_enabled()) {
    run.notes.push_back("history check skipped: this run steps the database clock, in whose time the record is kept");
    return;
  }
  try {
    VerifyOptions vo;
    vo.prefix = run.names.prefix;
    const VerifyReport r = db.with([&](Connection& c) { return verify_history(c, vo); });
    v.invariants["history_overlaps"] = static_cast<std::int64_t>(r.violations.size());
    v.violations += static_cast<int>(r.violations.size());
    for (const auto& x : r.violations)
      if (v.examples.size() < 10) v.examples.push_back("history " + x.rule + ": " + x.detail);
    v.holds["history"] = {{"events", r.events}, {"grants", r.grants}, {"takeovers", r.takeovers},
                          {"releases", r.releases}, {"renewal_gaps", r.renewal_gaps}, {"unmatched", r.unmatched}};
  } catch (const Error& e) {
    run.notes.push_back("history check failed to run: " + e.message());
    v.invariants["history_overlaps"] = -1;
    ++v.violations;
  }
}

// The fault schedule, until the deadline or a signal. Each kind of fault
// has its own jittered period; every choice draws from run.rng in a fixed
// order (a kind left out by --faults draws nothing).
void inject(Run& run, Workers& w, Faults& f) {
  const FaultSet& fs = run.o.fault_set;
  const milliseconds pause_len = run.ttl * 2 + milliseconds(500);  // also the length of a partition
  const milliseconds kill_every = std::max(run.ttl, milliseconds(800));
  const milliseconds conn_kill_every = std::max(run.ttl, milliseconds(1000)) * 3 / 2;
  auto next_pause = run.t0 + std::max(milliseconds(300), run.duration / 10);
  auto next_kill = run.t0 + run.jitter(kill_every, 0.5, 1.0);
  auto next_conn_kill = run.t0 + run.jitter(conn_kill_every, 0.5, 1.0);
  auto next_restart = run.t0 + run.duration * 45 / 100;
  bool pause_waiter_next = run.o.kind.kind == LockKind::kFair;
  auto next_crash = run.t0 + run.duration * 25 / 100;
  auto next_partition = run.t0 + std::max(milliseconds(500), run.duration / 6);
  auto next_node_kill = run.t0 + std::max(milliseconds(2000), run.duration / 10);
  // Failovers: the first after a tenth of the run, each next one 3 s after
  // the previous cycle ended; only while one can still finish its promotion
  // (~20-25 s: Patroni's minimum ttl) inside the run.
  auto next_failover = run.t0 + std::max(milliseconds(3000), run.duration / 10);
  // Clock steps: a dozen in a run, at least the ttl apart (take-overs and
  // renewals happen between them), at most 10 s.
  const milliseconds step_every = std::clamp(run.duration / 12, std::max(run.ttl, milliseconds(200)), milliseconds(10000));
  auto next_step = run.t0 + step_every;
  const milliseconds failover_needs(25000);
  // Paused and partitioned workers together: at most half of them.
  int max_out = std::max(1, run.o.workers / 2);

  while (!g_stop) {
    auto now = steady_clock::now();
    if (now >= run.deadline) break;
    w.reap();
    w.resume_and_respawn(now);
    f.heal_partitions(now);
    int out_now = w.paused_count() + w.partitioned_count();
    // Pauses and partitions past the ttl: only while one still ends before
    // the deadline, so the late write happens inside the run.
    bool long_fault_fits = now + pause_len + milliseconds(300) <= run.deadline;
    if (fs.pause && long_fault_fits && now >= next_pause && out_now < max_out) {
      // --lock-kind fair: every other pause stops a waiter in the queue (its
      // place lapses and the others must be served past it).
      int t = pause_waiter_next ? w.pick_waiter() : -1;
      bool waiter = t >= 0;
      if (t < 0) t = w.pick_target({kHolding}, true, /*for_pause=*/true);
      if (t < 0 && run.o.kind.kind == LockKind::kFair) waiter = (t = w.pick_waiter()) >= 0;
      if (t >= 0) {
        if (run.o.kind.kind == LockKind::kFair) pause_waiter_next = !waiter;
        f.pause(t);
        ++out_now;
        next_pause = now + run.jitter(pause_len, 0.6, 1.2);
      }
      // else: nobody holds a lease this instant; try again next tick
    }
    if (f.can_partition() && long_fault_fits && now >= next_partition && out_now < max_out) {
      int t = w.pick_target({kHolding}, true, /*for_pause=*/true);
      if (t >= 0) {
        f.partition(t);
        next_partition = now + run.jitter(pause_len, 0.8, 1.5);
      }
    }
    if (f.can_step_clock() && now >= next_step && now + milliseconds(500) < run.deadline) {
      f.step_clock();
      next_step = now + run.jitter(step_every, 0.8, 1.2);
    }
    if (fs.kill && now >= next_kill) {
      // Prefer a worker holding a lease or inside a transaction; fall back
      // to anyone after a while.
      int t = w.pick_target({kHolding, kWriting, kInventoryTx, kInboxTx}, false);
      if (t < 0 && now >= next_kill + milliseconds(300)) t = w.pick_target({kIdle, kAcquiring}, false);
      if (t >= 0) {
        f.kill(t);
        next_kill = now + run.jitter(kill_every, 0.5, 1.5);
      }
    }
    f.check_killed_leases(now);
    if (f.can_failover() && now >= next_failover && !f.failover_started() && !f.restart_started() &&
        now + failover_needs <= run.deadline)
      f.start_failover();
    if (f.failover_started() && !f.failing_over()) {
      f.join_failover();
      next_failover = now + milliseconds(3000);
    }
    if (f.can_kill_sessions() && now >= next_conn_kill && !f.restarting() && !f.failing_over()) {
      f.kill_connections();
      next_conn_kill = now + run.jitter(conn_kill_every, 0.7, 1.3);
    }
    // Server crashes (first, at a quarter of the run) and restarts (at 45 %):
    // one at a time, then every 20 s in long runs.
    const bool server_idle = !f.restart_started() && !f.failover_started() && now + milliseconds(1500) < run.deadline;
    const milliseconds server_every = std::max(milliseconds(20000), run.duration / 3);
    if (f.can_crash() && server_idle && now >= next_crash) {
      f.start_restart(/*crash=*/true);
      next_crash = now + server_every;
    } else if (f.can_restart() && server_idle && now >= next_restart) {
      f.start_restart(/*crash=*/false);
      next_restart = now + server_every;
    }
    if (f.restart_started() && !f.restarting()) f.join_restart();
    // Galera: one node down at a time; the next one 2..6 s after it rejoined.
    if (f.poll_node_kill()) next_node_kill = now + run.jitter(milliseconds(4000), 0.5, 1.5);
    if (f.can_node_kill() && !f.node_cycle_running() && now >= next_node_kill &&
        now + milliseconds(8000) <= run.deadline)
      f.start_node_kill();
    std::this_thread::sleep_for(milliseconds(5));
  }
}

// ", NEGATIVE CONTROL name (...)" when --control runs one, else "".
std::string control_banner(const Opts& o) {
  if (o.control == Control::kNone) return "";
  return std::string(", NEGATIVE CONTROL ") + control_name(o.control) + " (the checker must catch it)";
}

// Prints the result: one JSON object, or the text summary.
void report(const Run& run, const Workers& w, const Faults& f, const Verdict& v, const WriteProbe& probe) {
  const Opts& o = run.o;
  const WorkerTotals t = w.totals();
  double secs = std::chrono::duration_cast<milliseconds>(run.duration).count() / 1000.0;
  json j = {
      {"dialect", std::string(to_string(run.kind))},
      {"run_id", run.names.run},
      {"duration_s", secs},
      {"workers", o.workers},
      {"seed", o.seed},
      {"ttl_ms", run.ttl.count()},
      {"lock_kind", o.kind.name()},
      {"fencing", o.control != Control::kNoFencing},
      {"control", o.control == Control::kNone ? json(nullptr) : json(control_name(o.control))},
      {"acquisitions", t.acquisitions},
      {"fenced_writes_accepted", v.accepted},
      {"stale_writes_rejected", t.by_lease + t.by_fence},
      {"stale_rejected_by_lease_check", t.by_lease},
      {"stale_rejected_by_fence", t.by_fence},
      {"late_writes_after_pause", t.late},
      {"late_writes_rejected", t.late_rejected},
      {"late_writes_accepted", v.paused_accepted},
      {"slow_holds_past_ttl", t.slow},
      {"lease_losses", t.losses},
      {"kills", f.kills},
      {"pauses", f.pauses},
      {"connection_kills", f.connection_kills},
      {"sessions_terminated", f.sessions_terminated},
      {"server_restarts", f.server_restarts},
      {"server_restart_failures", f.restart_failures},
      {"server_crashes", f.server_crashes},
      {"server_crash_failures", f.crash_failures},
      {"partitions", f.partitions},
      {"nodes", f.nodes},
      {"node_kills", f.node_kills},
      {"node_rejoins", f.node_rejoins},
      {"node_kill_failures", f.node_kill_failures},
      {"failovers", f.failovers},
      {"failover_failures", f.failover_failures},
      {"failover_cycle_ms", f.failover_cycle_ms},
      {"clock_steps", f.clock_steps},
      {"clock_step_failures", f.clock_step_failures},
      // Longest time without a successful write of the probe (null: no probe,
      // it runs only with failovers).
      {"max_unavailable_ms", probe.started() ? json(probe.max_unavailable_ms()) : json(nullptr)},
      {"probe_writes", probe.writes()},
      {"faults_enabled", f.enabled()},
      {"unexpected_worker_exits", w.unexpected_exits},
      {"stragglers_killed", w.stragglers},
      {"worker_errors", t.errors},
      {"reconnects", t.reconnects},
      {"stock", {{"items", run.items}, {"initial", v.initial_total}, {"sold", v.sold_total}, {"left", v.left_total},
                 {"sold_guarded", t.sales_g}, {"sold_cas", t.sales_c}, {"cas_conflicts", t.cas_conf}}},
      {"inbox", {{"messages", run.messages}, {"deliveries", t.deliveries}, {"processed", t.processed},
                 {"duplicates", t.dups}, {"drained_at_end", v.drained}, {"effect_rows", v.effect_rows}}},
      {"stale_lock_checks", {{"killed_holders", f.kill_records.size()}, {"still_in_row", v.verified_in_row},
                             {"taken_over", v.verified_by_takeover}, {"max_orphan_ms", v.max_orphan_ms}}},
      {"holds", v.holds},
      {"violations", v.violations},
      {"invariants", v.invariants},
      {"violation_examples", v.examples},
      {"notes", run.notes},
      {"faults", run.faults},
  };
  if (global().json) {
    print_json(j);
  } else {
    auto& out = std::cout;
    out << "sqlguard chaos: " << j["dialect"].get<std::string>() << ", " << secs << " s, " << o.workers
        << " workers, " << o.kind.name() << ", ttl " << format_duration(run.ttl) << ", seed " << o.seed
        << control_banner(o) << "\n";
    out << "  faults:     " << f.kills << " kill -9, " << f.pauses << " pauses past ttl, " << f.connection_kills
        << " connection kills (" << f.sessions_terminated << " sessions), " << f.server_restarts
        << " server restarts, " << f.server_crashes << " server crashes, " << f.partitions << " partitions, "
        << f.failovers << " failovers, " << f.clock_steps << " clock steps";
    if (f.nodes > 1)
      out << ", " << f.node_kills << " node kills (" << f.node_rejoins << " rejoined) over " << f.nodes << " nodes";
    out << "\n";
    if (probe.started())
      out << "  failover:   longest write unavailability " << probe.max_unavailable_ms() << " ms ("
          << probe.writes() << " probe writes)\n";
    out << "  leases:     " << t.acquisitions << " acquisitions, " << v.accepted << " fenced writes accepted, "
        << (t.by_lease + t.by_fence) << " stale writes rejected (" << t.by_lease << " by the lease re-check, "
        << t.by_fence << " by the fence); late writes after a pause: " << t.late << " (" << t.late_rejected
        << " rejected)\n";
    if (!v.holds.empty()) {
      out << "  " << o.kind.name() << ":";
      for (auto& [k, n] : v.holds.items()) out << " " << k << "=" << n.dump();
      out << "\n";
    }
    out << "  stock:      initial " << v.initial_total << ", sold " << v.sold_total << ", left " << v.left_total
        << "\n";
    out << "  inbox:      " << run.messages << " messages, " << t.deliveries << " deliveries, " << t.dups
        << " duplicates skipped, " << v.effect_rows << " effects\n";
    out << "  invariants: ";
    bool first = true;
    for (auto& [k, n] : v.invariants.items()) {
      out << (first ? "" : ", ") << k << "=" << n.get<int>();
      first = false;
    }
    out << "\n";
    for (const auto& e : v.examples) out << "    " << e.get<std::string>() << "\n";
    for (const auto& n : run.notes) out << "  note: " << n << "\n";
    out << (v.violations == 0 ? "OK: no invariant violated\n"
                              : "VIOLATED: " + std::to_string(v.violations) + " invariant violations\n");
  }
}

int run_chaos(const Opts& o, milliseconds duration, milliseconds ttl) {
  Run run(o, duration, ttl);
  Db db;
  db.open();
  run.kind = db.conn().kind();
  migrate(db.conn());  // the lock, fence and inbox tables; idempotent
  // Scale: one protected resource per 4 workers (contention is the point),
  // stock and messages sized so that a run sells out and redelivers a lot.
  run.resources = std::max(1, o.workers / 4);
  // multi:K: more resources than a set takes, so that sets overlap in part.
  if (o.kind.set_size > 0) run.resources = std::max(run.resources, o.kind.set_size + 1);
  run.items = 2;
  auto secs = std::max<long long>(1, duration.count() / 1000);
  run.initial_qty = std::max<long long>(20, 3LL * o.workers * secs);  // sells out in most runs
  run.messages = static_cast<int>(std::min<long long>(20000, std::max<long long>(50, 8LL * o.workers * secs)));
  create_tables(run, db.conn());
  // The grant history of the run's names: a second checker (below). Its
  // recording stops however the run ends: a scope left behind would keep the
  // triggers installed, and every lock write of the database paying for them.
  enable_history(db.conn(), run.names.prefix, std::chrono::hours(24));
  struct RunHistory {
    Db& db;
    const std::string& prefix;
    std::vector<std::string>& notes;
    bool on = true;
    void stop() noexcept {
      if (!std::exchange(on, false)) return;
      try {
        db.with([&](Connection& c) { return disable_history(c, prefix); });
      } catch (const std::exception& e) {
        notes.push_back(std::string("could not stop recording the run's names: ") + e.what());
      }
    }
    ~RunHistory() { stop(); }
  } history{db, run.names.prefix, run.notes};
  run.clock_offset_ms = db.conn().db_now_ms() - wall_ms();

  Workers w(run);  // from here on, its destructor removes the state file
  w.create_state();
  Faults f(run, db, w);  // from here on, its destructor joins a running restart
  f.configure_server();
  WriteProbe probe(run);  // its destructor stops it (declared after f: stopped first)

  struct sigaction sa {}, old_int{}, old_term{};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);

  run.t0 = steady_clock::now();
  run.deadline = run.t0 + duration;
  try {
    for (int i = 0; i < o.workers; ++i) w.spawn(i);
    run.fault("start", -1, 0,
              std::to_string(o.workers) + " workers, ttl " + format_duration(ttl) + ", run " + run.names.run +
                  control_banner(o));
    if (f.can_failover()) probe.start();
    inject(run, w, f);
    if (g_stop) run.notes.push_back("interrupted by a signal before --duration ended");
    f.heal_all_partitions();  // a worker cut off from the server could not wind down
    w.finish();
    f.finish();
    probe.stop();
  } catch (...) {
    f.heal_all_partitions();
    f.reset_clocks();
    w.kill_all();  // never leave stopped or running children behind
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    throw;
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  f.restore_server();

  Verdict v = check(run, db, f.kill_records, w);
  if (probe.started()) {
    // Fences strictly increase across every promotion (the probe's, in the
    // order it got them).
    v.invariants["failover_fences"] = probe.fence_regressions();
    v.violations += probe.fence_regressions();
    for (const auto& e : probe.regression_examples)
      if (v.examples.size() < 10) v.examples.push_back(e);
  }
  check_history(run, db, f, v);
  history.stop();  // before the report, which prints the notes
  report(run, w, f, v, probe);
  if (!o.keep) {
    drop_tables(run, db);
    try {
      db.with([&](Connection& c) {
        for (int g = 1; g <= probe.generations(); ++g) admin::delete_lease(c, probe.lease_name(g));
        return 0;
      });
    } catch (const Error& e) {
      run.notes.push_back("could not delete the probe's leases: " + e.message());
    }
  }
  return v.violations > 0 ? kExitInvariant : kExitOk;
}

}  // namespace
}  // namespace chaos

using chaos::Opts;
using std::chrono::milliseconds;

void add_chaos(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "chaos", "Fault injection (kill -9, pauses past the ttl, killed sessions, server restarts and crashes, "
               "network partitions) with an invariant checker; exits 4 when an invariant is violated");
  cmd->add_option("--duration", o->duration, "How long to inject faults (workers stop at the same time)")
      ->capture_default_str();
  cmd->add_option("--workers", o->workers, "Worker processes (1..64)")->capture_default_str();
  auto* seed = cmd->add_option("--seed", o->seed, "Seed of the fault schedule (default: random, printed)");
  cmd->add_option("--ttl", o->ttl, "Lease ttl of the workers (100ms..60s); pauses last 2*ttl+500ms")
      ->capture_default_str();
  auto* no_fencing = cmd->add_flag("--no-fencing")->description(
      "Negative control: write without re-checking the lease or the fencing token (= --control no-fencing; must "
      "report violations)");
  auto control = std::make_shared<std::string>();
  cmd->add_option("--control", *control,
                  "Negative control, for tests: a worker mode that breaks one guarantee so the checker must report "
                  "it (exit 4): no-fencing (fence_order, overlap), unguarded-decrement (stock), "
                  "effects-outside-inbox (inbox_effects), long-lease (stale_lock), worker-crash (worker_exits); "
                  "with --lock-kind semaphore:N semaphore-ignores-owns (permit_limit), rw rw-writer-shares "
                  "(rw_exclusion), fair fair-queue-jump (fifo_order); with --faults clock-step "
                  "database-clock-takeover (take-overs by the database clock, which a forward step fools: overlap, "
                  "permit_limit or rw_exclusion)")
      ->excludes(no_fencing);
  cmd->add_flag("--no-server-restarts", o->no_restarts, "Do not restart the database server (= leave out restart)");
  cmd->add_option("--lock-kind", o->lock_kind,
                  "What the workers hold: lease (the mutex), fair (the fair lease: FIFO checked), semaphore:N (N "
                  "permits, 1..1000: never more than N holders checked) or rw (a read-write lease, 1 in 3 holds "
                  "exclusive: never a writer with another holder checked) or multi:K (a lock set of K resources' leases, "
                  "2..8, all or none: every lease invariant checked per resource across overlapping sets)")
      ->capture_default_str();
  auto* faults = cmd->add_option("--faults", o->faults,
                  "Comma-separated faults to inject: kill, pause, session-kill, restart, crash, partition, node-kill, "
                  "failover, clock-step (default: all that apply to the dialect, except crash, failover and "
                  "clock-step; crash is a SIGKILL of the server (pg or mariadb) and its restart; node-kill needs one "
                  "--db per Galera node, failover --topology pg-ha|pg-async; clock-step steps the wall clocks of "
                  "the workers and of a server started with SQLGUARD_SERVER_CLOCK=faketime tools/dbservers.sh by "
                  "+-30s and +-1h, under libfaketime)");
  cmd->add_flag("--keep-tables", o->keep, "Keep the run's chaos_<run>_* tables for inspection");
  cmd->add_option("--topology", o->topology,
                  "tools/dbservers.sh target of server restarts and failovers (default: pg or mariadb; "
                  "pg-ha / pg-async for --faults ...,failover)");
  cmd->callback([o, seed, faults, no_fencing, control] {
    auto duration = duration_flag("--duration", o->duration, {milliseconds(1), std::chrono::hours(24)});
    auto ttl = duration_flag("--ttl", o->ttl, {milliseconds(100), milliseconds(60000)});
    if (o->workers < 1 || o->workers > 64)
      throw BadValue("--workers", "is " + std::to_string(o->workers) + "; it must be between 1 and 64");
    if (seed->count() == 0) o->seed = std::random_device{}() & 0xFFFFFFFFu;
    if (faults->count() > 0) o->fault_set = chaos::FaultSet::parse(o->faults);
    if (o->no_restarts) o->fault_set.restart = false;
    if (no_fencing->count() > 0) o->control = chaos::Control::kNoFencing;
    if (!control->empty()) o->control = chaos::parse_control(*control);
    o->kind = chaos::parse_lock_kind(o->lock_kind);
    if (o->control == chaos::Control::kDatabaseClockTakeover && !o->fault_set.clock_step)
      throw BadValue("--control", "database-clock-takeover needs --faults ...,clock-step: only a step of the "
                                  "database clock makes take-overs by that clock overlap a holder");
    const chaos::LockKind needs = chaos::control_kind(o->control);
    if (needs != chaos::LockKind::kLease && needs != o->kind.kind)
      throw BadValue("--control", std::string(chaos::control_name(o->control)) + " needs --lock-kind " +
                                      (needs == chaos::LockKind::kSemaphore ? "semaphore:N"
                                       : needs == chaos::LockKind::kReadWrite ? "rw"
                                                                               : "fair"));
    exit_code() = chaos::run_chaos(*o, duration, ttl);
  });
  chaos::add_chaos_worker(app);
}

}  // namespace sqlguard::cli
