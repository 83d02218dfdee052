// `sqlguard chaos`: the faults. kill -9 and SIGSTOP hit worker processes;
// session kills, server restarts and server crashes hit the database server
// (not SQLite).
// When to inject which is decided in cmd_chaos.cpp. See chaos_coordinator.h.
#include <signal.h>

#include <algorithm>
#include <cstdlib>

#include "chaos_coordinator.h"
#include "common.h"
#include "sqlguard/admin.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/validate.h"

namespace sqlguard::cli::chaos {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

Faults::~Faults() {
  if (restart_thread_.joinable()) restart_thread_.join();
  if (node_thread_.joinable()) node_thread_.join();
  if (failover_thread_.joinable()) failover_thread_.join();
}

void Faults::skip_fault(bool requested, const std::string& why) {
  if (requested && run_.o.fault_set.listed) throw cli::BadValue("--faults", "cannot inject: " + why);
  run_.notes.push_back(why);
}

void Faults::configure_server() {
  const FaultSet& fs = run_.o.fault_set;
  setup_clock_steps();
  if (!server()) {
    std::string na;
    for (auto [on, name] : {std::pair{fs.session_kill, "session-kill"}, {fs.restart, "restart"},
                            {fs.crash, "crash"}, {fs.partition, "partition"}, {fs.node_kill, "node-kill"},
                            {fs.failover, "failover"}})
      if (on && fs.listed) na += std::string(na.empty() ? "" : ", ") + name;
    skip_fault(!na.empty(), "sqlite: connection kills, server restarts and crashes, partitions, node kills and "
                            "failovers do not apply (no server, no sessions, no network path; file-lock stalls are "
                            "not injected); kill -9 and SIGSTOP do" +
                                (na.empty() ? std::string() : " (listed: " + na + ")"));
    return;
  }
  server_target_ = !run_.o.topology.empty() ? run_.o.topology : run_.kind == DialectKind::kPostgresql ? "pg" : "mariadb";
  const char* env = std::getenv("SQLGUARD_DBSERVERS");
  if (fs.failover) {
    if (!env || !*env)
      skip_fault(true, "failovers skipped: SQLGUARD_DBSERVERS (path of tools/dbservers.sh) is not set");
    else if (run_.o.topology != "pg-ha" && run_.o.topology != "pg-async")
      skip_fault(true, "failovers skipped: they need --topology pg-ha or pg-async (a Patroni cluster the "
                       "--db URI lists every node of)");
    else
      failover_target_ = run_.o.topology, dbservers_ = env;
  }
  setup_node_kills();
  restart_on_ = fs.restart && server_fault_applies("server restarts", env);
  if (run_.o.no_restarts) run_.notes.push_back("server restarts disabled by --no-server-restarts");
  if (fs.crash && !run_.o.topology.empty())
    skip_fault(true, "server crashes skipped: they apply to the single servers (pg, mariadb); a topology has "
                     "failover (pg-ha, pg-async) and node-kill (galera)");
  else
    crash_on_ = fs.crash && server_fault_applies("server crashes", env);
  if (fs.partition) setup_partitions();
}

bool Faults::server_fault_applies(const std::string& what, const char* env) {
  if (nodes > 1) {
    skip_fault(true, what + " skipped: several --db (a cluster); node-kill restarts one node instead");
    return false;
  }
  if (!env || !*env) {
    skip_fault(true, what + " skipped: SQLGUARD_DBSERVERS (path of tools/dbservers.sh) is not set");
    return false;
  }
  if (run_.duration < kServerFaultMinRun) {
    skip_fault(true, what + " need --duration of at least " + format_duration(kServerFaultMinRun));
    return false;
  }
  dbservers_ = env;
  return true;
}

std::vector<std::string> Faults::enabled() const {
  const FaultSet& fs = run_.o.fault_set;
  FaultSet on = fs;
  on.session_kill = can_kill_sessions();
  on.restart = can_restart();
  on.crash = can_crash();
  on.partition = can_partition();
  on.node_kill = !node_dbservers_.empty();  // also after a node was left down
  on.failover = can_failover();
  on.clock_step = clock_steps_enabled();
  return on.names();
}

void Faults::kill(int slot) {
  auto& s = w_.slot(slot);
  auto phase = s.phase.load();
  int res = s.resource.load();
  std::int64_t fence = s.fence.load();
  w_.at(slot).proc.signal(SIGKILL);
  w_.at(slot).killed_by_us = true;
  ++kills;
  std::int64_t at = run_.db_now_ms();
  // Semaphore holdings and read-write holds are not lease rows: checked at
  // the end of the run instead (chaos_check.cpp).
  if (res >= 0 && (phase == kHolding || phase == kWriting) && run_.o.kind.lease_rows())
    kill_records.push_back({slot, res, fence, at, steady_clock::now() + milliseconds(200)});
  std::string detail = std::string("kill -9 while ") + phase_name(phase);
  if (res >= 0) detail += " (lease " + run_.names.lock(res) + ", fence " + std::to_string(fence) + ")";
  w_.fault("kill", slot, detail);
}

void Faults::check_killed_leases(steady_clock::time_point now) {
  for (auto& k : kill_records)
    if (!k.checked && now >= k.check_at && !restarting_) check_killed_lease(k);
}

// Its expiry is final once read: only the dead watchdog could extend it.
void Faults::check_killed_lease(KillRecord& k) {
  try {
    auto info = lease_info(db_.conn(), run_.names.lock(k.resource));
    k.checked = true;
    if (!info || info->fence != k.fence)
      k.taken_over = true;  // someone holds a newer lease: the victim's had expired
    else
      k.expire_at_ms = info->expire_at_ms;
  } catch (const Error&) {
    try {
      db_.conn().reconnect();
    } catch (const Error&) {
    }
    // checked again at the end
  }
}

void Faults::pause(int slot) {
  auto& s = w_.slot(slot);
  auto& k = w_.at(slot);
  milliseconds len = run_.ttl * 2 + milliseconds(500);
  k.proc.signal(SIGSTOP);
  k.paused = true;
  k.last_paused_fence = s.fence.load();
  k.last_paused_wait = s.wait_seq.load();
  k.resume_at = steady_clock::now() + len;
  ++pauses;
  w_.fault("pause", slot,
           "SIGSTOP for " + format_duration(len) + " (ttl " + format_duration(run_.ttl) + ") while " +
               phase_name(s.phase.load()) + " lease " + run_.names.lock(std::max(0, s.resource.load())) +
               " fence " + std::to_string(s.fence.load()));
}

void Faults::kill_connections() {
  // Spare paused and partitioned workers' main sessions: their late write
  // must reach the database (it is what the fence and the lease re-check
  // have to stop).
  std::vector<std::int64_t> spare;
  for (int i = 0; i < w_.size(); ++i) {
    std::int64_t sid = w_.slot(i).session.load();
    // ...partitioned ones, and resumed ones until their late write is done.
    const auto& k = w_.at(i);
    if (k.proc.running() && (k.paused || k.partitioned || steady_clock::now() < k.no_kill_until) && sid > 0)
      spare.push_back(sid);
  }
  int n = 0;
  try {
    n = db_.with([&](Connection& c) { return admin::terminate_sessions(c, spare); }, milliseconds(3000));
  } catch (const Error& e) {
    run_.fault("connection-kill", -1, 0, std::string("failed: ") + e.message());
    return;
  }
  ++connection_kills;
  sessions_terminated += n;
  run_.fault("connection-kill", -1, 0, "terminated " + std::to_string(n) + " worker sessions");
}

bool Faults::run_dbservers(const std::string& action) {
  proc::SpawnOptions so;
  so.out = proc::SpawnOptions::Out::kStderr;  // keep our stdout (JSON) clean
  try {
    proc::Child c = proc::spawn({"/bin/bash", dbservers_, action, server_target_}, so);
    c.wait();
    return c.status().code() == 0;
  } catch (const Error&) {  // could not fork
    return false;
  }
}

void Faults::start_restart(bool crash) {
  restarting_ = true;
  restart_is_crash_ = crash;
  restart_result_ = -1;
  const std::string action = crash ? "crash" : "restart";
  run_.fault("server-" + action, -1, 0, "$SQLGUARD_DBSERVERS " + action + " " + server_target_);
  restart_thread_ = std::thread([this, action] {
    bool ok = run_dbservers(action);
    restart_result_ = ok ? 0 : 1;
    restarting_ = false;
  });
}

void Faults::join_restart() {
  restart_thread_.join();
  const std::string kind = restart_is_crash_ ? "server-crash" : "server-restart";
  if (restart_result_ == 0) {
    ++(restart_is_crash_ ? server_crashes : server_restarts);
    run_.fault(kind, -1, 0, restart_is_crash_ ? "server back after crash recovery" : "server back");
  } else {
    ++(restart_is_crash_ ? crash_failures : restart_failures);
    run_.fault(kind, -1, 0, "the dbservers script failed");
  }
}

void Faults::finish() {
  if (restart_thread_.joinable()) join_restart();
  while (node_cycle_running()) {  // a killed node rejoins before the checks
    poll_node_kill();
    std::this_thread::sleep_for(milliseconds(50));
  }
  if (failover_thread_.joinable()) join_failover();
  reset_clocks();
}

void Faults::restore_server() {
  if (restart_failures == 0 && crash_failures == 0 && failover_failures == 0) return;
  run_.notes.push_back("the restart, crash or failover script failed; ran `$SQLGUARD_DBSERVERS start " +
                       server_target_ + "`");
  run_dbservers("start");
}

}  // namespace sqlguard::cli::chaos
