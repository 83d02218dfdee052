// `sqlguard chaos --faults clock-step`: wall-clock steps under libfaketime
// (Debian package faketime). The workers are started with it preloaded and
// one offset file (FAKETIME_TIMESTAMP_FILE, read at every clock reading:
// FAKETIME_NO_CACHE), their monotonic clock left real; the server (pg,
// mariadb, pgbouncer's pg) when `SQLGUARD_SERVER_CLOCK=faketime
// tools/dbservers.sh start|restart` started it so, stepped through
// `$SQLGUARD_DBSERVERS clock TARGET OFFSET`. What the steps must not break is
// what the checker checks (fences, overlap, permits, exclusion, FIFO); the
// control database-clock-takeover shows the rule a forward step fools.
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "chaos_coordinator.h"
#include "common.h"
#include "process.h"

namespace sqlguard::cli::chaos {

namespace {

// The schedule of one clock, in seconds from the real time: every move
// between neighbours is a step of +-30 s or +-1 h, and the first six (a
// short run's) hold each of the four.
constexpr std::array<std::int64_t, 8> kOffsets = {30, 0, 3600, 0, -30, 0, -3600, 0};

std::string offset_text(std::int64_t seconds) {
  return (seconds < 0 ? "-" : "+") + std::to_string(seconds < 0 ? -seconds : seconds);
}

std::string find_faketime() {
  if (const char* e = std::getenv("SQLGUARD_FAKETIME_LIB"); e && *e) return e;
  for (const char* p : {"/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
                        "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
                        "/usr/lib/faketime/libfaketimeMT.so.1"})
    if (::access(p, R_OK) == 0) return p;
  return "";
}

}  // namespace

void Faults::setup_clock_steps() {
  const FaultSet& fs = run_.o.fault_set;
  if (!fs.clock_step) return;
  const std::string lib = find_faketime();
  if (lib.empty() || ::access(lib.c_str(), R_OK) != 0) {
    skip_fault(true, "clock steps need libfaketime (Debian package faketime; tools/deps.sh installs it) or "
                     "SQLGUARD_FAKETIME_LIB naming it");
    return;
  }
  if (run_.duration < std::chrono::milliseconds(2000)) {
    skip_fault(true, "clock steps need --duration of at least 2s");
    return;
  }
  if (server()) {
    const std::string& topo = run_.o.topology;
    if (!topo.empty() && topo != "pgbouncer") {
      skip_fault(true, "clock steps apply to the single servers (pg, mariadb), to pgbouncer's pg and to a "
                       "Galera cluster (one --db per node), not to --topology " + topo);
      return;
    }
    const char* env = std::getenv("SQLGUARD_DBSERVERS");
    if (!env || !*env) {
      skip_fault(true, "server clock steps need SQLGUARD_DBSERVERS (the path of tools/dbservers.sh)");
      return;
    }
    dbservers_ = env;
    const int n = static_cast<int>(db_uris().size());
    clock_server_ = n > 1 ? "galera" : run_.kind == DialectKind::kPostgresql ? "pg" : "mariadb";
    if (n > 1)
      for (int i = 1; i <= n; ++i) clock_targets_.push_back({"galera", std::to_string(i)});
    else
      clock_targets_.push_back({clock_server_});
    for (const auto& t : clock_targets_) {
      if (step_server(t, 0)) continue;
      skip_fault(true, "the " + clock_server_ + " server does not run under libfaketime: restart it with "
                       "`SQLGUARD_SERVER_CLOCK=faketime tools/dbservers.sh restart " + clock_server_ + "`");
      clock_server_.clear();
      clock_targets_.clear();
      return;
    }
  }
  clients_rc_ = (std::filesystem::temp_directory_path() / ("sqlguard-chaos-" + run_.names.run + ".clock")).string();
  if (!write_clients_offset(0)) {
    skip_fault(true, "cannot write the workers' clock file " + clients_rc_);
    return;
  }
  std::string preload = lib;
  if (const char* p = std::getenv("LD_PRELOAD"); p && *p) preload += std::string(":") + p;
  run_.worker_env = {{"LD_PRELOAD", preload},
                     {"FAKETIME_TIMESTAMP_FILE", clients_rc_},
                     {"FAKETIME_NO_CACHE", "1"},
                     {"FAKETIME_DONT_FAKE_MONOTONIC", "1"}};
  run_.clock_steps = true;
  clock_on_ = true;
  run_.notes.push_back("clock-step: stale_lock is not judged (it reads expiries on the database clock, which "
                       "steps); the workers' journals are on this host's CLOCK_MONOTONIC");
}

bool Faults::write_clients_offset(std::int64_t seconds) {
  const std::string tmp = clients_rc_ + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!(f << offset_text(seconds) << "\n")) return false;
  }
  return std::rename(tmp.c_str(), clients_rc_.c_str()) == 0;
}

bool Faults::step_server(const std::vector<std::string>& target, std::int64_t seconds) {
  proc::SpawnOptions so;
  so.out = proc::SpawnOptions::Out::kStderr;  // keep our stdout (JSON) clean
  std::vector<std::string> argv = {"/bin/bash", dbservers_, "clock"};
  argv.insert(argv.end(), target.begin(), target.end());
  argv.push_back(offset_text(seconds) + "s");
  try {
    proc::Child c = proc::spawn(argv, so);
    c.wait();
    return c.status().code() == 0;
  } catch (const Error&) {  // could not fork
    return false;
  }
}

// Each clock moves one place along kOffsets per turn; Galera node i starts
// 2 i places on, so the nodes' clocks disagree (by 30 s, an hour).
void Faults::step_clock() {
  const bool server_turn = !clock_server_.empty() && clock_event_ % 2 == 0;
  ++clock_event_;
  int& phase = server_turn ? server_phase_ : client_phase_;
  auto at = [](std::size_t i) { return kOffsets[i % kOffsets.size()]; };
  bool ok = true;
  std::string what;
  const std::size_t clocks = server_turn ? clock_targets_.size() : 1;
  for (std::size_t i = 0; i < clocks; ++i) {
    const std::size_t p = static_cast<std::size_t>(phase) + 2 * i;
    const std::int64_t from = at(p + kOffsets.size() - 1), to = at(p);
    ok = (server_turn ? step_server(clock_targets_[i], to) : write_clients_offset(to)) && ok;
    what += std::string(what.empty() ? "" : "; ") +
            (server_turn ? (clock_targets_.size() > 1 ? "Galera node " + clock_targets_[i][1] + "'s"
                                                       : "the " + clock_server_ + " server's")
                         : std::string("the workers'")) +
            " wall clock stepped " + offset_text(to - from) + " s (now real " + offset_text(to) + " s)";
  }
  ++phase;
  if (ok) {
    ++clock_steps;
    run_.fault("clock-step", -1, 0, what);
  } else {
    ++clock_step_failures;
    run_.fault("clock-step", -1, 0, "failed: " + what);
  }
}

void Faults::reset_clocks() {
  if (!clock_on_ || clock_reset_) return;
  clock_reset_ = true;
  for (const auto& t : clock_targets_)
    if (!step_server(t, 0))
      run_.notes.push_back("could not set a " + clock_server_ + " server's clock back: run `$SQLGUARD_DBSERVERS "
                           "clock " + t.back() + " 0`");
  write_clients_offset(0);
  std::remove(clients_rc_.c_str());
}

}  // namespace sqlguard::cli::chaos
