// `sqlguard chaos`: the partition fault. Every worker slot connects to the
// server through its own fault proxy (tools/faultproxy), so one worker can
// be cut off while the others go on: its main and watchdog connections (and
// any reconnect) hear nothing for 2*ttl+500ms, its lease runs out, another
// worker takes it over, and when the path heals its late write must be
// refused (by the lease re-check of run_guarded, or the fence). SQLite has
// no network path: no partitions there. See chaos_coordinator.h.
#include <algorithm>

#include "chaos_coordinator.h"
#include "common.h"
#include "sqlguard/validate.h"

namespace sqlguard::cli::chaos {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

void Faults::setup_partitions() {
  faultproxy::ProxyOptions po;
  const auto nodes = db_uris();  // worker i talks to node i mod nodes (Workers)
  auto node_of = [&](int i) { return nodes[static_cast<std::size_t>(i) % nodes.size()]; };
  try {
    // Bounded: the proxies outlive the run (and its wind-down) by a margin only.
    po.lifetime = run_.duration + std::max(run_.ttl * 3, milliseconds(5000)) + milliseconds(60000);
    for (int i = 0; i < w_.size(); ++i) {
      std::tie(po.target_host, po.target_port) = faultproxy::uri_endpoint(node_of(i));
      proxies_.push_back(std::make_unique<faultproxy::FaultProxy>(po));
      w_.set_uri(i, faultproxy::uri_via(node_of(i), proxies_.back()->port()));
    }
  } catch (const std::exception& e) {  // a non-loopback or multi-host URI, no free port
    proxies_.clear();
    for (int i = 0; i < w_.size(); ++i) w_.set_uri(i, node_of(i));
    skip_fault(true, std::string("partitions skipped: ") + e.what());
    return;
  }
  heal_at_.assign(proxies_.size(), steady_clock::time_point{});
  run_.notes.push_back("workers reach the server through one fault proxy each (127.0.0.1:" +
                       std::to_string(proxies_.front()->port()) + ".." + std::to_string(proxies_.back()->port()) +
                       "); the coordinator connects directly");
}

void Faults::partition(int slot) {
  auto& s = w_.slot(slot);
  auto& k = w_.at(slot);
  const milliseconds len = run_.ttl * 2 + milliseconds(500);
  proxies_[static_cast<std::size_t>(slot)]->freeze();
  k.partitioned = true;
  k.last_paused_fence = s.fence.load();  // never cut off the same lease twice
  heal_at_[static_cast<std::size_t>(slot)] = steady_clock::now() + len;
  ++partitions;
  w_.fault("partition", slot,
           "path to the server frozen for " + format_duration(len) + " (ttl " + format_duration(run_.ttl) +
               ") while " + phase_name(s.phase.load()) + " lease " + run_.names.lock(std::max(0, s.resource.load())) +
               " fence " + std::to_string(s.fence.load()));
}

void Faults::heal(int slot, const std::string& why) {
  proxies_[static_cast<std::size_t>(slot)]->pass();
  w_.at(slot).partitioned = false;
  w_.at(slot).no_kill_until = steady_clock::now() + milliseconds(500);  // let its late write happen
  w_.fault("heal", slot, why);
}

void Faults::heal_partitions(steady_clock::time_point now) {
  for (int i = 0; i < static_cast<int>(proxies_.size()); ++i)
    if (w_.at(i).partitioned && now >= heal_at_[static_cast<std::size_t>(i)]) heal(i, "path to the server restored");
}

void Faults::heal_all_partitions() {
  for (int i = 0; i < static_cast<int>(proxies_.size()); ++i)
    if (w_.at(i).partitioned) heal(i, "path to the server restored at the end of the run");
}

}  // namespace sqlguard::cli::chaos
