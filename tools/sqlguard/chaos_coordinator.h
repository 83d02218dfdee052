// The `sqlguard chaos` coordinator, split by job:
//   cmd_chaos.cpp      the command: options, setup, the fault schedule, the result
//   chaos_workers.cpp  the worker processes: spawn, reap, respawn, aim, wind down
//   chaos_faults.cpp   the faults: kill -9, SIGSTOP/SIGCONT, session kills,
//                      server restarts and crashes (the script named by
//                      SQLGUARD_DBSERVERS)
//   chaos_partition.cpp the partition fault: one fault proxy per worker slot
//                      between the worker and the server, frozen on demand
//   chaos_check.cpp    the invariant checker, and ChaosSql: every statement
//                      the coordinator sends
// The worker body is chaos_worker.cpp (chaos.h). Not a public API.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "chaos.h"
#include "fault_proxy.h"
#include "process.h"
#include "sqlguard/connection.h"
#include "sqlguard/errors.h"

namespace sqlguard::cli::chaos {

// ---- the command's options ------------------------------------------------------

// Which faults a run injects (--faults). Names: kill, pause, session-kill,
// restart, crash, partition, node-kill, failover. `failover` is never in the
// default set: it needs a topology that can fail over (--topology
// pg-ha|pg-async). Nor is `crash`: on a server that acknowledges commits
// before they reach the OS (PostgreSQL synchronous_commit=off, the test
// servers' fast settings) a crash loses them, and lost_commits says so.
struct FaultSet {
  bool kill = true, pause = true, session_kill = true, restart = true, crash = false, partition = true,
       failover = false;
  // Wall-clock steps of the server and of the workers, under libfaketime
  // (chaos_clock.cpp). Only when listed: the server must run under it.
  bool clock_step = false;
  // Galera: kill -9 one node (never node 1, the coordinator's) and rejoin it
  // (chaos_nodekill.cpp). Default on; it applies with several --db only.
  bool node_kill = true;
  bool listed = false;  // given with --faults (else: all that apply to the dialect)
  // Parses "kill,pause,..."; throws CLI::ValidationError (exit 2) for an
  // unknown name or an empty list.
  static FaultSet parse(const std::string& list);
  std::vector<std::string> names() const;
};

struct Opts {
  std::string duration = "30s", ttl = "1s";
  int workers = 4;
  std::uint64_t seed = 0;
  Control control = Control::kNone;  // --control / --no-fencing: a negative control
  std::string lock_kind = "lease";   // --lock-kind
  KindSpec kind;                     // parsed from lock_kind
  bool no_restarts = false, keep = false;
  std::string faults;  // --faults; empty: the default set
  FaultSet fault_set;  // parsed from `faults`
  // --topology: the $SQLGUARD_DBSERVERS target of restarts and failovers
  // (empty: pg / mariadb, the single servers).
  std::string topology;
};

std::int64_t wall_ms();  // system clock, ms since the epoch

// ---- what every part of the coordinator reads ------------------------------------

// One run: options, names, scale, clocks, and THE random generator. Every
// random choice (schedule, targets, worker seeds) draws from this one
// stream, in a fixed order, so --seed replays the same choices.
struct Run {
  Run(const Opts& opts, std::chrono::milliseconds run_for, std::chrono::milliseconds lease_ttl);

  const Opts& o;
  std::chrono::milliseconds duration, ttl;
  Names names;
  std::mt19937_64 rng;
  DialectKind kind = DialectKind::kSqlite;
  int resources = 1, items = 2, messages = 100;
  std::int64_t initial_qty = 0;
  std::int64_t clock_offset_ms = 0;  // db clock - wall clock, measured at start
  // --faults clock-step: wall clocks (the server's, the workers') step
  // during the run, so db_now_ms() is no estimate of the database clock and
  // the checks that rest on it (stale locks) are not judged.
  bool clock_steps = false;
  // Set in every worker's environment (libfaketime under clock-step).
  std::vector<std::pair<std::string, std::string>> worker_env;
  std::chrono::steady_clock::time_point t0, deadline;
  std::vector<std::string> notes;  // printed with the result
  nlohmann::json faults = nlohmann::json::array();

  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
  std::chrono::milliseconds jitter(std::chrono::milliseconds base, double lo, double hi) {
    return std::chrono::milliseconds(
        static_cast<long long>(base.count() * std::uniform_real_distribution<double>(lo, hi)(rng)));
  }
  std::int64_t db_now_ms() const { return wall_ms() + clock_offset_ms; }  // estimate, no round trip
  // Records a fault or event (JSON "faults", one line on stderr). slot < 0:
  // not about one worker; else `pid` is that worker's.
  void fault(const std::string& kind, int slot, pid_t pid, const std::string& detail);
};

// The coordinator's connection. with() runs f on it, reconnecting (bounded)
// when the session was killed or the server restarted.
class Db {
 public:
  void open();
  Connection& conn() { return *conn_; }

  template <typename F>
  std::invoke_result_t<F&, Connection&> with(F&& f,
                                             std::chrono::milliseconds bound = std::chrono::milliseconds(30000)) {
    auto until = std::chrono::steady_clock::now() + bound;
    for (;;) {
      try {
        return f(*conn_);
      } catch (const Error& e) {
        if (!transient(e) || std::chrono::steady_clock::now() >= until) throw;
        recover();
      }
    }
  }

 private:
  static bool transient(const Error& e);
  void recover();  // rollback, reconnect (or back off 200ms)
  std::unique_ptr<Connection> conn_;
};

// ---- every SQL statement the coordinator sends (defined in chaos_check.cpp) ----
// Gathered in one place, text unchanged, to move behind the public API later.
// The workers' own statements are in chaos_worker.cpp.
struct ChaosSql {
  ChaosSql(const Names& n, const KindSpec& kind);
  std::vector<std::string> create_tables;  // in order
  std::string insert_resource;             // id
  std::string insert_stock;                // id, qty, initial_qty
  std::vector<std::string> tables;         // the run's tables (to drop)
  static std::string drop_table(const std::string& table);
  // Session kills, per dialect. `spare`: comma-separated session ids to leave alone.
  // The checker.
  std::string insert_final_effect;  // message
  std::string select_audit;         // resource, seq, fence, worker, start_ms, end_ms, paused
  std::string select_stock;         // id, qty, initial_qty, sold
  std::string select_effects;       // message, count
  std::string count_worker_effects;  // effect rows the workers wrote (not the final redelivery's)
  // every kind: resource, mode, permits, fence, start_ms, end_ms, seen_fence, worker
  std::string select_hold;
  // --lock-kind fair: resource, worker, fence, arrive_ms, queued_ms, wait_ms, end_ms, stalled
  std::string select_wait;
};

// ---- chaos_workers.cpp ---------------------------------------------------------------

// A worker slot's current process and what the injector did to it.
struct Worker {
  proc::Child proc;  // running() == alive
  bool killed_by_us = false;
  bool paused = false;
  bool partitioned = false;  // its path to the server is frozen (chaos_partition.cpp)
  std::chrono::steady_clock::time_point resume_at{};
  std::chrono::steady_clock::time_point respawn_at{};
  bool respawn_pending = false;
  std::int64_t last_paused_fence = -1;                    // never pause the same lease twice
  std::int64_t last_paused_wait = -1;                     // nor the same wait (Slot::wait_seq)
  std::chrono::steady_clock::time_point no_kill_until{};  // let a resumed worker make its late write
};

// The workers' counters, summed over the slots.
struct WorkerTotals {
  std::int64_t acquisitions = 0, writes = 0, by_lease = 0, by_fence = 0, late = 0, late_rejected = 0, slow = 0, sales_g = 0,
               sales_c = 0, cas_conf = 0, deliveries = 0, processed = 0, dups = 0, errors = 0, reconnects = 0,
               losses = 0;
  std::int64_t holds_unconfirmed = 0;
};

class Workers {
 public:
  explicit Workers(Run& run);
  ~Workers();  // unmaps and removes the state file; never kills (see kill_all)
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;

  void create_state();  // the shared-memory slots, one per worker
  // The database URI slot `slot`'s workers connect to (default: --db).
  void set_uri(int slot, std::string uri) { uris_[static_cast<std::size_t>(slot)] = std::move(uri); }
  void spawn(int slot);
  // Reaps exited workers: ours (killed) respawn after 50..250ms, others are
  // reported as unexpected and respawn after 200ms, while before the deadline.
  void reap();
  // SIGCONTs workers whose pause is over; starts due replacements.
  void resume_and_respawn(std::chrono::steady_clock::time_point now);
  // A live, running (not paused, not partitioned) worker in one of `phases`, or -1.
  int pick_target(std::initializer_list<std::int32_t> phases, bool need_lease, bool for_pause = false);
  // A live, running worker waiting for a fair lease (kAcquiring) whose wait
  // was not paused yet, or -1.
  int pick_waiter();
  int paused_count() const;
  int partitioned_count() const;
  // End of the run: wake paused workers, wait for all to exit by themselves
  // until a grace period, then SIGKILL the stragglers.
  void finish();
  void kill_all();  // on an error: SIGCONT + SIGKILL + reap every live worker
  WorkerTotals totals() const;

  int size() const { return static_cast<int>(kids_.size()); }
  Slot& slot(int i) { return slots_[i]; }
  Worker& at(int i) { return kids_[static_cast<std::size_t>(i)]; }
  void fault(const std::string& kind, int slot, const std::string& detail) {
    run_.fault(kind, slot, kids_[static_cast<std::size_t>(slot)].proc.pid(), detail);
  }

  std::int64_t last_exit_db_ms = 0;
  int unexpected_exits = 0, stragglers = 0;

 private:
  Run& run_;
  std::string exe_;
  std::string state_path_;
  Slot* slots_ = nullptr;
  std::size_t state_size_ = 0;
  std::vector<Worker> kids_;
  std::vector<std::string> uris_;
};

// ---- chaos_faults.cpp ----------------------------------------------------------------

// A kill -9 of a lease holder, to check that its lease expires in time.
struct KillRecord {
  int slot;
  int resource;
  std::int64_t fence;
  std::int64_t kill_db_ms;
  std::chrono::steady_clock::time_point check_at;
  bool checked = false;
  bool taken_over = false;
  std::int64_t expire_at_ms = 0;  // of the victim's lease, read after the kill
};

// A server restart or crash needs time to happen and recover inside the run.
inline constexpr std::chrono::milliseconds kServerFaultMinRun{3000};

class Faults {
 public:
  Faults(Run& run, Db& db, Workers& workers) : run_(run), db_(db), w_(workers) {}
  ~Faults();  // joins a restart still running
  Faults(const Faults&) = delete;
  Faults& operator=(const Faults&) = delete;

  // Which faults apply (notes say why not); reads SQLGUARD_DBSERVERS; sets
  // up the partition proxies (before any worker starts).
  void configure_server();
  bool server() const { return run_.kind != DialectKind::kSqlite; }
  bool can_restart() const { return restart_on_; }
  bool can_crash() const { return crash_on_; }
  bool can_kill_sessions() const { return server() && run_.o.fault_set.session_kill; }
  bool can_partition() const { return !proxies_.empty(); }
  // The --faults names this run really injects (JSON "faults_enabled").
  std::vector<std::string> enabled() const;

  void kill(int slot);   // kill -9
  void pause(int slot);  // SIGSTOP for 2*ttl+500ms; Workers resumes it
  void kill_connections();
  // Reads the leases of killed holders once their last renewal can no longer be in flight.
  void check_killed_leases(std::chrono::steady_clock::time_point now);

  // chaos_failover.cpp. `$SQLGUARD_DBSERVERS failover <topology>` on a
  // thread: kill -9 the primary (postgres and its Patroni), wait for the
  // standby's promotion, rejoin the old primary as a standby.
  bool can_failover() const { return !failover_target_.empty(); }
  void start_failover();
  bool failing_over() const { return failing_over_; }
  bool failover_started() const { return failover_thread_.joinable(); }
  void join_failover();  // counts the result

  // `$SQLGUARD_DBSERVERS restart <target>` (graceful: fast shutdown, start)
  // or, crash = true, `... crash <target>` (SIGKILL of every server process,
  // then a start with crash recovery) on a thread.
  void start_restart(bool crash);
  bool restarting() const { return restarting_; }
  bool restart_started() const { return restart_thread_.joinable(); }
  void join_restart();  // counts the result
  void finish();        // joins a restart still running
  // After a failed restart, crash or failover: one `$SQLGUARD_DBSERVERS start`,
  // not to leave the server down.
  void restore_server();

  // chaos_partition.cpp. A partition freezes one worker's path to the server
  // (its main and watchdog connections, new connects too) for 2*ttl+500ms.
  void setup_partitions();
  // A fault that cannot be injected here: a usage error (BadValue --faults,
  // exit 2, before the run starts) when --faults listed it, otherwise a note
  // in the report.
  void skip_fault(bool requested, const std::string& why);
  void partition(int slot);
  void heal_partitions(std::chrono::steady_clock::time_point now);  // those whose time is over
  void heal_all_partitions();                                       // end of the run, or an error

  // chaos_nodekill.cpp. Galera (several --db, one per node): kill -9 one node
  // (2..N, never node 1: the coordinator's) and rejoin it, one at a time,
  // through `$SQLGUARD_DBSERVERS node-kill|node-start galera N` on a thread.
  void setup_node_kills();
  // chaos_clock.cpp. --faults clock-step: the workers run under libfaketime
  // with one offset file; the server (pg, mariadb, pgbouncer's pg) too when
  // tools/dbservers.sh started it so (a Galera cluster: every node, each
  // on its own offset). Each step moves one of the two wall
  // clocks (server and workers take turns; SQLite: the workers', which is
  // its database clock) through +30 s, 0, +1 h, 0, -30 s, 0, -1 h, 0 from the
  // real time: every step is one of +-30 s, +-1 h.
  void setup_clock_steps();
  bool can_step_clock() const { return clock_on_ && !clock_reset_; }
  bool clock_steps_enabled() const { return clock_on_; }
  void step_clock();
  void reset_clocks();  // both back to the real time (end of the run, errors)
  int clock_steps = 0, clock_step_failures = 0;
  // No further node is killed once one was left down (its kill or rejoin
  // failed): a second node down out of three ends the primary component.
  bool can_node_kill() const { return !node_dbservers_.empty() && !node_left_down_; }
  bool node_cycle_running() const { return node_thread_.joinable(); }
  void start_node_kill();
  // Records what the cycle's thread did (faults are recorded on this thread
  // only); joins it once the node is back. True when a cycle just ended.
  bool poll_node_kill();
  int nodes = 1;

  std::vector<KillRecord> kill_records;
  int kills = 0, pauses = 0, connection_kills = 0, sessions_terminated = 0, server_restarts = 0,
      restart_failures = 0, server_crashes = 0, crash_failures = 0, partitions = 0, node_kills = 0, node_rejoins = 0,
      node_kill_failures = 0, failovers = 0, failover_failures = 0;
  std::vector<std::int64_t> failover_cycle_ms;  // each failover script run (kill .. old primary rejoined)

 private:
  void check_killed_lease(KillRecord& k);
  // Whether `what` (server restarts, crashes) can run here; else skip_fault.
  bool server_fault_applies(const std::string& what, const char* env);
  bool run_dbservers(const std::string& action);
  void heal(int slot, const std::string& why);

  Run& run_;
  Db& db_;
  Workers& w_;
  std::string dbservers_, server_target_, failover_target_;
  std::thread restart_thread_, failover_thread_;
  bool restart_on_ = false, crash_on_ = false;
  bool restart_is_crash_ = false;  // of the restart thread running or last run
  std::atomic<bool> failing_over_{false};
  std::atomic<int> failover_result_{-1};  // -1 none, 0 ok, 1 failed
  std::atomic<std::int64_t> failover_took_ms_{0};
  std::atomic<bool> restarting_{false};
  std::atomic<int> restart_result_{-1};  // -1 none, 0 ok, 1 failed
  // One proxy per worker slot (empty: no partitions), and when each heals.
  std::vector<std::unique_ptr<faultproxy::FaultProxy>> proxies_;
  std::vector<std::chrono::steady_clock::time_point> heal_at_;
  // clock-step (chaos_clock.cpp)
  bool clock_on_ = false, clock_reset_ = false;
  std::string clock_server_, clients_rc_;  // dbservers target ("": workers only), the workers' offset file
  // `clock` arguments of each server clock: {"pg"}, {"mariadb"}, or {"galera", "N"} per node
  std::vector<std::vector<std::string>> clock_targets_;
  int clock_event_ = 0, server_phase_ = 0, client_phase_ = 0;
  bool write_clients_offset(std::int64_t seconds);
  bool step_server(const std::vector<std::string>& target, std::int64_t seconds);
  // node-kill (chaos_nodekill.cpp)
  bool topology(const std::string& action, int node);
  std::string node_dbservers_;
  std::thread node_thread_;
  int node_victim_ = 0, next_victim_ = 0;
  std::atomic<int> node_stage_{0};  // 0 idle, 1 killing, 2 down (kill ok), 3 kill failed, 4 back, 5 rejoin failed
  int node_stage_seen_ = 0;
  bool node_left_down_ = false;
  std::chrono::steady_clock::time_point node_killed_at_{};
};

// ---- chaos_failover.cpp: the write probe --------------------------------------------

// While failovers run: one client that writes every 100 ms (acquire + release
// of a lease of its own, on its own connection to --db, reconnecting at once
// on an error) and measures the longest time between two successful writes
// (max_unavailable_ms), and records every fence it got, which must strictly
// increase across promotions (one database-wide sequence).
class WriteProbe {
 public:
  explicit WriteProbe(Run& run) : run_(run) {}
  ~WriteProbe() { stop(); }
  WriteProbe(const WriteProbe&) = delete;
  WriteProbe& operator=(const WriteProbe&) = delete;
  void start();
  void stop();
  bool started() const { return started_; }
  std::int64_t max_unavailable_ms() const { return max_gap_ms_; }
  std::int64_t writes() const { return writes_; }
  int fence_regressions() const { return regressions_; }
  std::vector<std::string> regression_examples;
  // The probe's lease names (one per connection it opened): deleted after the run.
  int generations() const { return generation_; }
  std::string lease_name(int generation) const;

 private:
  void loop();
  int generation_ = 0;
  Run& run_;
  bool started_ = false;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::int64_t max_gap_ms_ = 0, writes_ = 0, last_fence_ = 0;
  int regressions_ = 0;
};

// ---- chaos_check.cpp -----------------------------------------------------------------

// What the checker found. `invariants` maps each invariant to its violations.
struct Verdict {
  nlohmann::json invariants;
  nlohmann::json examples = nlohmann::json::array();  // at most 10
  int violations = 0;
  std::int64_t accepted = 0, paused_accepted = 0, drained = 0;
  std::int64_t sold_total = 0, left_total = 0, initial_total = 0, effect_rows = 0;
  int verified_in_row = 0, verified_by_takeover = 0;
  std::int64_t max_orphan_ms = 0;
  // --lock-kind other than lease: what the kind's checks saw (JSON "holds").
  nlohmann::json holds = nlohmann::json::object();
};

// Runs once every worker has exited: redelivers every inbox message once
// more, then checks fence order, overlap, stock, exactly-one effect and
// stale locks from what the database recorded, lost commits (rows the
// workers saw commit that are not there), and counts the workers' unexpected
// exits. Unchecked kill records are read here. Per --lock-kind also:
// permit_limit (semaphore:N: never more than N permits held at an instant,
// from the journaled hold intervals; replaces overlap), rw_exclusion (rw:
// never an exclusive hold with another hold; no reader saw a write of a
// later exclusive holder), fifo_order (fair: no grant overtook an earlier
// arrival whose queue place was live). See docs/chaos-summary.md.
Verdict check(Run& run, Db& db, std::vector<KillRecord>& kills, const Workers& w);

}  // namespace sqlguard::cli::chaos
