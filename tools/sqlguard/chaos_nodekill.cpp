// `sqlguard chaos` on a Galera cluster: the node-kill fault. With one --db
// per node (in the order of tools/dbservers.sh's galera nodes 1..N), workers
// are spread round-robin over the nodes (chaos_workers.cpp) and this fault
// kill -9s one node at a time, lets the survivors notice, and rejoins it
// (IST/SST) through `$SQLGUARD_DBSERVERS node-kill|node-start galera N`.
// Node 1 is never killed: the coordinator's own connection and the final
// checks use it. One node down out of three keeps a primary component.
#include <cstdlib>
#include <thread>

#include "chaos_coordinator.h"
#include "common.h"

namespace sqlguard::cli::chaos {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

void Faults::setup_node_kills() {
  nodes = static_cast<int>(db_uris().size());
  const FaultSet& fs = run_.o.fault_set;
  if (!fs.node_kill) return;
  if (nodes < 3) {
    if (fs.listed) skip_fault(true, "node-kill skipped: it needs a cluster of at least 3 nodes, one --db per node");
    return;
  }
  const char* env = std::getenv("SQLGUARD_DBSERVERS");
  if (!env || !*env) {
    skip_fault(true, "node-kill skipped: SQLGUARD_DBSERVERS (path of tools/dbservers.sh) is not set");
    return;
  }
  node_dbservers_ = env;
  run_.notes.push_back("node-kill: one Galera node at a time (2.." + std::to_string(nodes) +
                       "; node 1 carries the coordinator), kill -9 then rejoin via $SQLGUARD_DBSERVERS");
}

bool Faults::topology(const std::string& action, int node) {
  proc::SpawnOptions so;
  so.out = proc::SpawnOptions::Out::kStderr;  // keep our stdout (JSON) clean
  try {
    proc::Child c = proc::spawn({"/bin/bash", node_dbservers_, action, "galera", std::to_string(node)}, so);
    c.wait();
    return c.status().code() == 0;
  } catch (const Error&) {  // could not fork
    return false;
  }
}

void Faults::start_node_kill() {
  node_victim_ = 2 + next_victim_++ % (nodes - 1);
  node_stage_ = 1;
  node_stage_seen_ = 1;
  run_.fault("node-kill", -1, 0, "kill -9 Galera node " + std::to_string(node_victim_));
  node_thread_ = std::thread([this, node = node_victim_] {
    if (!topology("node-kill", node)) {
      node_stage_ = 3;
      return;
    }
    node_stage_ = 2;
    // Down long enough for the survivors to evict it (evs.suspect_timeout
    // 5 s in tools/topologies.sh) and for its workers to fail over to errors.
    std::this_thread::sleep_for(milliseconds(6000));
    node_stage_ = topology("node-start", node) ? 4 : 5;
  });
}

bool Faults::poll_node_kill() {
  if (!node_thread_.joinable()) return false;
  const int st = node_stage_.load();
  if (st == node_stage_seen_) return false;
  node_stage_seen_ = st;
  const std::string n = "Galera node " + std::to_string(node_victim_);
  switch (st) {
    case 2:
      ++node_kills;
      node_killed_at_ = steady_clock::now();
      run_.fault("node-kill", -1, 0, n + " killed");
      return false;
    case 3:
      ++node_kill_failures;
      node_left_down_ = true;
      run_.fault("node-kill", -1, 0, n + ": the kill script failed; no further node kills in this run");
      break;
    case 4:
      ++node_rejoins;
      run_.fault("node-kill", -1, 0,
                 n + " rejoined and synced, " +
                     std::to_string(std::chrono::duration_cast<milliseconds>(steady_clock::now() - node_killed_at_)
                                        .count()) +
                     " ms after the kill");
      break;
    case 5:
      ++node_kill_failures;
      node_left_down_ = true;
      run_.fault("node-kill", -1, 0, n + ": node-start failed (left down); no further node kills in this run");
      break;
    default:
      return false;
  }
  node_thread_.join();
  node_stage_ = 0;
  node_stage_seen_ = 0;
  return true;
}

}  // namespace sqlguard::cli::chaos
