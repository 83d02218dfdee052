// `sqlguard chaos`: the worker processes. Each slot of the shared state file
// has one live worker at a time; one that dies (by our kill -9 or not) is
// replaced while the run lasts. A death we did not cause is counted
// (unexpected_exits: the checker's worker_exits). See chaos_coordinator.h.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <new>
#include <thread>

#include "chaos_coordinator.h"
#include "common.h"

namespace sqlguard::cli::chaos {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

Workers::Workers(Run& run)
    : run_(run), kids_(static_cast<std::size_t>(run.o.workers)) {
  // One --db per cluster node: worker i connects to node i mod nodes.
  const auto nodes = db_uris();
  for (std::size_t i = 0; i < kids_.size(); ++i) uris_.push_back(nodes[i % nodes.size()]);
}

Workers::~Workers() {
  if (slots_) munmap(slots_, state_size_);
  if (!state_path_.empty()) unlink(state_path_.c_str());
}

void Workers::create_state() {
  exe_ = proc::self_exe();
  char tmpl[] = "/tmp/sqlguard-chaos-XXXXXX";
  int fd = mkostemp(tmpl, O_CLOEXEC);
  if (fd < 0) throw Error(ErrorCode::kInternal, "cannot create the chaos state file in /tmp");
  state_path_ = tmpl;
  state_size_ = sizeof(Slot) * static_cast<std::size_t>(run_.o.workers);
  if (ftruncate(fd, static_cast<off_t>(state_size_)) != 0) {
    ::close(fd);
    throw Error(ErrorCode::kInternal, "cannot size the chaos state file");
  }
  void* mem = mmap(nullptr, state_size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (mem == MAP_FAILED) throw Error(ErrorCode::kInternal, "mmap of the chaos state file failed");
  slots_ = static_cast<Slot*>(mem);
  for (int i = 0; i < run_.o.workers; ++i) new (&slots_[i]) Slot();
}

void Workers::spawn(int slot) {
  std::vector<std::string> args = {exe_,
                                   "--connect-timeout",
                                   "2s",
                                   "chaos-worker",
                                   "--run",
                                   run_.names.run,
                                   "--state",
                                   state_path_,
                                   "--slot",
                                   std::to_string(slot),
                                   "--deadline-ns",
                                   std::to_string(run_.deadline.time_since_epoch().count()),
                                   "--ttl-ms",
                                   std::to_string(run_.ttl.count()),
                                   "--resources",
                                   std::to_string(run_.resources),
                                   "--items",
                                   std::to_string(run_.items),
                                   "--messages",
                                   std::to_string(run_.messages),
                                   "--seed",
                                   std::to_string(run_.o.seed + 1000003ULL * slot + run_.pick(0, 1 << 20))};
  if (run_.o.control != Control::kNone) {
    args.push_back("--control");
    args.push_back(control_name(run_.o.control));
  }
  if (run_.o.kind.kind != LockKind::kLease || run_.o.kind.set_size > 0) {
    args.push_back("--lock-kind");
    args.push_back(run_.o.kind.name());
  }
  proc::SpawnOptions so;
  // The URI travels in the environment (SQLGUARD_DB), not on the command
  // line where `ps` would show its password.
  so.env = {{"SQLGUARD_DB", uris_[static_cast<std::size_t>(slot)]}};
  so.env.insert(so.env.end(), run_.worker_env.begin(), run_.worker_env.end());  // libfaketime (clock-step)
  so.out = proc::SpawnOptions::Out::kNull;  // stdout is the coordinator's JSON
  so.own_group = true;        // a terminal's Ctrl-C reaches only the coordinator, which winds the run down
  so.die_with_parent = true;  // no worker outlives a crashed coordinator
  so.unblock_signals = true;
  slots_[slot].phase = kIdle;
  slots_[slot].resource = -1;
  slots_[slot].pid = 0;
  proc::Child child = proc::spawn(args, so);
  auto& k = kids_[static_cast<std::size_t>(slot)];
  k = Worker{};
  k.proc = std::move(child);
}

void Workers::reap() {
  for (std::size_t i = 0; i < kids_.size(); ++i) {
    auto& k = kids_[i];
    if (!k.proc.running()) continue;
    if (!k.proc.wait(milliseconds(0))) continue;
    k.paused = false;
    last_exit_db_ms = run_.db_now_ms();
    bool before_deadline = steady_clock::now() < run_.deadline - milliseconds(300);
    if (k.killed_by_us) {
      if (before_deadline) {
        k.respawn_pending = true;
        k.respawn_at = steady_clock::now() + milliseconds(run_.pick(50, 250));
      }
      continue;
    }
    if (k.proc.status().code() != 0) {
      ++unexpected_exits;
      fault("worker-died", static_cast<int>(i),
            "unexpected " + k.proc.status().describe() + (before_deadline ? "; respawning" : ""));
      if (before_deadline) {
        k.respawn_pending = true;
        k.respawn_at = steady_clock::now() + milliseconds(200);
      }
    }
  }
}

void Workers::resume_and_respawn(steady_clock::time_point now) {
  for (std::size_t i = 0; i < kids_.size(); ++i) {
    auto& k = kids_[i];
    if (k.proc.running() && k.paused && now >= k.resume_at) {
      k.proc.signal(SIGCONT);
      k.paused = false;
      k.no_kill_until = now + milliseconds(500);
      fault("resume", static_cast<int>(i), "SIGCONT");
    }
    if (!k.proc.running() && k.respawn_pending && now >= k.respawn_at) {
      spawn(static_cast<int>(i));
      fault("respawn", static_cast<int>(i), "replacement worker started");
    }
  }
}

int Workers::pick_target(std::initializer_list<std::int32_t> phases, bool need_lease, bool for_pause) {
  std::vector<int> c;
  auto now = steady_clock::now();
  for (std::size_t i = 0; i < kids_.size(); ++i) {
    const auto& k = kids_[i];
    if (!k.proc.running() || k.paused || k.partitioned || slots_[i].pid.load() != k.proc.pid()) continue;
    if (for_pause ? slots_[i].fence.load() == k.last_paused_fence : now < k.no_kill_until) continue;
    auto ph = slots_[i].phase.load();
    if (std::find(phases.begin(), phases.end(), ph) == phases.end()) continue;
    if (need_lease && slots_[i].resource.load() < 0) continue;
    c.push_back(static_cast<int>(i));
  }
  if (c.empty()) return -1;
  return c[run_.pick(0, static_cast<int>(c.size()) - 1)];
}

int Workers::pick_waiter() {
  std::vector<int> c;
  for (std::size_t i = 0; i < kids_.size(); ++i) {
    const auto& k = kids_[i];
    if (!k.proc.running() || k.paused || k.partitioned || slots_[i].pid.load() != k.proc.pid()) continue;
    if (slots_[i].phase.load() != kAcquiring || slots_[i].wait_seq.load() == k.last_paused_wait) continue;
    c.push_back(static_cast<int>(i));
  }
  if (c.empty()) return -1;
  return c[run_.pick(0, static_cast<int>(c.size()) - 1)];
}

int Workers::paused_count() const {
  return static_cast<int>(std::count_if(kids_.begin(), kids_.end(), [](const Worker& k) { return k.paused; }));
}

int Workers::partitioned_count() const {
  return static_cast<int>(std::count_if(kids_.begin(), kids_.end(), [](const Worker& k) { return k.partitioned; }));
}

void Workers::finish() {
  // Wake every paused worker first: a SIGSTOPped child never outlives us.
  for (std::size_t i = 0; i < kids_.size(); ++i)
    if (kids_[i].proc.running() && kids_[i].paused) {
      kids_[i].proc.signal(SIGCONT);
      kids_[i].paused = false;
      fault("resume", static_cast<int>(i), "SIGCONT at the end of the run");
    }
  auto grace = run_.deadline + std::max(run_.ttl * 3, milliseconds(5000)) + milliseconds(10000);
  for (;;) {
    reap();
    bool any = std::any_of(kids_.begin(), kids_.end(), [](const Worker& k) { return k.proc.running(); });
    if (!any) break;
    if (steady_clock::now() >= grace) {
      for (std::size_t i = 0; i < kids_.size(); ++i)
        if (kids_[i].proc.running()) {
          ++stragglers;
          fault("straggler", static_cast<int>(i), "still running after the grace period; SIGKILL");
          kids_[i].proc.signal(SIGCONT);
          kids_[i].proc.signal(SIGKILL);
          kids_[i].killed_by_us = true;
        }
      for (auto& k : kids_) k.proc.wait();
      last_exit_db_ms = run_.db_now_ms();
      break;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
}

void Workers::kill_all() {
  for (auto& k : kids_)
    if (k.proc.running()) {
      k.proc.signal(SIGCONT);
      k.proc.signal(SIGKILL);
      k.proc.wait();
    }
}

WorkerTotals Workers::totals() const {
  WorkerTotals t;
  for (int i = 0; i < run_.o.workers; ++i) {
    auto& s = slots_[i];
    t.acquisitions += s.acquisitions;
    t.writes += s.writes_committed;
    t.by_lease += s.rejected_by_lease;
    t.by_fence += s.rejected_by_fence;
    t.late += s.late_attempts;
    t.late_rejected += s.late_rejected;
    t.slow += s.slow_holds;
    t.sales_g += s.sales_guarded;
    t.sales_c += s.sales_cas;
    t.cas_conf += s.cas_conflicts;
    t.deliveries += s.deliveries;
    t.processed += s.inbox_processed;
    t.dups += s.inbox_duplicates;
    t.errors += s.errors;
    t.reconnects += s.reconnects;
    t.losses += s.lease_losses;
    t.holds_unconfirmed += s.holds_unconfirmed;
  }
  return t;
}

}  // namespace sqlguard::cli::chaos
