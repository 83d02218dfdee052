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
      skip_fault(true, "clock steps apply to the single servers (pg, mariadb) and to pgbouncer's pg "
                       "(tools/dbservers.sh clock), not to --topology " + topo);
      return;
    }
    const char* env = std::getenv("SQLGUARD_DBSERVERS");
    if (!env || !*env) {
      skip_fault(true, "server clock steps need SQLGUARD_DBSERVERS (the path of tools/dbservers.sh)");
      return;
    }
    dbservers_ = env;
    clock_server_ = run_.kind == DialectKind::kPostgresql ? "pg" : "mariadb";
    if (!step_server(0)) {
      skip_fault(true, "the " + clock_server_ + " server does not run under libfaketime: restart it with "
                       "`SQLGUARD_SERVER_CLOCK=faketime tools/dbservers.sh restart " + clock_server_ + "`");
      clock_server_.clear();
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

bool Faults::step_server(std::int64_t seconds) {
  proc::SpawnOptions so;
  so.out = proc::SpawnOptions::Out::kStderr;  // keep our stdout (JSON) clean
  try {
    proc::Child c = proc::spawn({"/bin/bash", dbservers_, "clock", clock_server_, offset_text(seconds) + "s"}, so);
    c.wait();
    return c.status().code() == 0;
  } catch (const Error&) {  // could not fork
    return false;
  }
}

void Faults::step_clock() {
  const bool server_turn = !clock_server_.empty() && clock_event_ % 2 == 0;
  ++clock_event_;
  int& phase = server_turn ? server_phase_ : client_phase_;
  const std::int64_t from = kOffsets[static_cast<std::size_t>((phase + kOffsets.size() - 1) % kOffsets.size())];
  const std::int64_t to = kOffsets[static_cast<std::size_t>(phase % kOffsets.size())];
  ++phase;
  const bool ok = server_turn ? step_server(to) : write_clients_offset(to);
  const std::string what = std::string(server_turn ? "the " + clock_server_ + " server's" : "the workers'") +
                           " wall clock stepped " + offset_text(to - from) + " s (now real " + offset_text(to) + " s)";
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
  if (!clock_server_.empty() && !step_server(0))
    run_.notes.push_back("could not set the " + clock_server_ + " server's clock back: run `$SQLGUARD_DBSERVERS "
                         "clock " + clock_server_ + " 0`");
  write_clients_offset(0);
  std::remove(clients_rc_.c_str());
}

}  // namespace sqlguard::cli::chaos
