// `run` and `elect`: CMD's process tree runs while the lease is held (see
// leased_command.h and run_supervisor.h).
#include "leased_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>

#include "common.h"
#include "sqlguard/lock_set.h"
#include "sqlguard/read_write_lease.h"
#include "sqlguard/semaphore.h"
#include "run_supervisor.h"
#include "text.h"

namespace sqlguard::cli {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// The signals of `run`/`elect`. While it connects and waits for the lease
// nothing has started, so SIGTERM/SIGINT/SIGHUP end it at once (128 +
// signal) from the handler itself: a library call that blocks (a wait, a
// frozen server) cannot delay that. Should the acquire have just committed,
// the lease expires after its ttl with nobody renewing it. Once the lease is
// held, the handler only hands the signal to the main loop through a pipe
// (any thread may take it: the renewals run on their own).
volatile sig_atomic_t g_waiting = 1;
int g_wake[2] = {-1, -1};
// The handler's message, made before it is installed: "<prefix>SIGTERM<suffix>".
char g_wait_prefix[64];
char g_wait_suffix[1400];  // a name escaped for the terminal is at most 4 * 255 bytes

void write_all(int fd, const char* s) {
  ssize_t n = ::write(fd, s, std::strlen(s));
  (void)n;  // nothing to do about a failed diagnostic
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
  }
  return "a signal";
}

void on_signal(int sig) {
  if (g_waiting) {
    write_all(STDERR_FILENO, g_wait_prefix);
    write_all(STDERR_FILENO, signal_name(sig));
    write_all(STDERR_FILENO, g_wait_suffix);
    _exit(128 + sig);
  }
  unsigned char b = static_cast<unsigned char>(sig);
  ssize_t n = ::write(g_wake[1], &b, 1);
  (void)n;  // the pipe is full only if signals pile up: one is enough
}

void install_signals(const LeasedWords& w, const std::string& name) {
  std::snprintf(g_wait_prefix, sizeof g_wait_prefix, "sqlguard %s: ", w.command);
  std::snprintf(g_wait_suffix, sizeof g_wait_suffix, " while %s %s '%s'; CMD not started\n", w.waiting, w.noun,
                terminal_safe(name).c_str());
  if (pipe2(g_wake, O_NONBLOCK | O_CLOEXEC) != 0)
    throw Error(ErrorCode::kInternal, std::string("pipe failed: ") + std::strerror(errno));
  struct sigaction sa {};
  sa.sa_handler = on_signal;  // no SA_RESTART: poll() wakes up
  sigemptyset(&sa.sa_mask);
  sigset_t ours;
  sigemptyset(&ours);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    sigaction(sig, &sa, nullptr);
    sigaddset(&ours, sig);
  }
  sigprocmask(SIG_UNBLOCK, &ours, nullptr);  // whatever our parent blocked
}

// Signals that arrived since the last call (0: none).
int take_signal() {
  unsigned char b = 0;
  int sig = 0;
  while (::read(g_wake[0], &b, 1) == 1) sig = b;
  return sig;
}

// What the command holds, whatever its kind: a Lock of the process-wide lock
// client of --db (make_lock), renewed by it.
std::shared_ptr<Lock> make_held(const LeasedCommand& c, const LeaseOptions& lo) {
  return with_db_uri([&]() -> std::shared_ptr<Lock> {
    if (c.names.size() > 1)
      return std::make_shared<LockSet>(single_db(), c.names, lo, Watchdog::kOn, connect_options(existing_only()));
    return make_lock(single_db(), c.name, c.spec, lo, Watchdog::kOn, connect_options(existing_only()));
  });
}

// The one name a refusal is about: a set's first busy name (or, when the
// attempt lost a race rather than meeting a holder, none).
std::string refused_name(const LeasedCommand& c, const Lock& lock) {
  if (c.names.size() <= 1) return c.name;
  return static_cast<const LockSet&>(lock).blocked_by();
}

// Who holds `c.name` now, for a run that did not get it: every live holder
// of the name as its kind (lock_holders). Read on a
// connection of its own after the wait; an error reading it leaves it out
// (the answer is "not acquired" either way).
nlohmann::json holders_of(const LeasedCommand& c, const std::string& name) {
  nlohmann::json out = nlohmann::json::array();
  if (name.empty()) return out;
  try {
    auto conn = open_db(existing_only());
    for (const auto& h : lock_holders(*conn, name, c.spec.kind)) {
      nlohmann::json j = {{"owner", h.owner}, {"fence", h.fence}, {"remaining_ms", h.remaining_ms}};
      if (!h.mode.empty()) j["mode"] = h.mode;
      out.push_back(std::move(j));
    }
  } catch (const std::exception& e) {
    log(LogLevel::kDebug, std::string("reading who holds the lock failed: ") + e.what());
  }
  return out;
}

// "held by A (fence 7) for another 51.3s" (and ", B ..." for more holders).
std::string holders_text(const nlohmann::json& holders) {
  std::string s;
  for (const auto& h : holders) {
    s += s.empty() ? ": held by " : ", ";
    s += terminal_safe(h["owner"].get<std::string>()) + " (fence " + std::to_string(h["fence"].get<std::int64_t>()) +
         ") for another " + remaining_text(h["remaining_ms"].get<std::int64_t>());
  }
  return s;
}

// "; if not renewed or released, this machine may take it over in 12.3s
// (...)" after a refusal that learned it (Lock::takeover_in).
std::string takeover_text(const std::optional<milliseconds>& in, const LeaseOptions& lo) {
  if (!in) return "";
  if (lo.take_over == TakeOver::kDatabaseClock)
    return "; its lease runs out on the database clock in " + remaining_text(in->count()) + " if it is not renewed";
  return "; a take-over needs its row unchanged for the holder's ttl on this machine's monotonic clock: if it "
         "is not renewed or released, a try in " + remaining_text(in->count()) +
         " takes it over (a --wait that long waits for it)";
}

// Waits `wait`, or (nullopt) until acquired: in chunks of the library's
// longest wait, each of which a release still ends at once.
bool wait_for_lease(Lock& lock, const std::optional<milliseconds>& wait) {
  if (wait) return lock.acquire(*wait);
  while (!lock.acquire(kAnyDuration.max)) {
  }
  return true;
}

}  // namespace

void run_leased(const LeasedCommand& c) {
  const LeasedWords& w = c.words;
  const std::string prefix = std::string("sqlguard ") + w.command + ": ";
  const std::string quoted = std::string(w.noun) + " '" + terminal_safe(c.name) + "'";
  LeaseOptions lo = c.lease;
  std::atomic<bool> lost{false};
  auto loss = std::make_shared<std::string>();
  auto loss_mu = std::make_shared<std::mutex>();
  lo.on_lost = [&lost, loss, loss_mu](const LeaseLoss& l) {
    std::lock_guard<std::mutex> lk(*loss_mu);
    *loss = std::string(to_string(l.cause)) + ": " + l.detail;
    lost = true;
  };
  install_signals(w, c.name);
  auto lock_ptr = make_held(c, lo);
  Lock& lock = *lock_ptr;
  if (!wait_for_lease(lock, c.wait)) {
    const std::string busy = refused_name(c, lock);
    const nlohmann::json holders = holders_of(c, busy);
    // How long until this machine may take the holding over if its holder
    // (dead, frozen, cut off) renews it no more: the watch a --wait 0s try
    // started goes on in the database for the next run on this machine.
    const auto takeover = lock.takeover_in();
    if (!global().json)
      std::cerr << prefix << quoted << " not " << w.won << " within " << format_duration(*c.wait)
                << (c.names.size() > 1 && !busy.empty() ? " ('" + terminal_safe(busy) + "' is busy; none taken)" : "")
                << holders_text(holders) << takeover_text(takeover, lo) << "\n";
    if (global().json) {
      nlohmann::json j = {{w.name_key, c.name},
                          {w.acquired_key, false},
                          {"waited_ms", c.wait->count()},
                          {"holder", holders.empty() ? nlohmann::json(nullptr) : holders[0]},
                          {"holders", holders},
                          {"takeover_in_ms", takeover ? nlohmann::json(takeover->count()) : nlohmann::json(nullptr)},
                          {"exit_code", c.conflict_exit}};
      if (c.names.size() > 1) {
        j["locks"] = c.names;
        j["busy"] = busy.empty() ? nlohmann::json(nullptr) : nlohmann::json(busy);
      }
      print_json(j);
    }
    exit_code() = c.conflict_exit;
    return;
  }
  g_waiting = 0;
  const auto held_fence = lock.fence();
  const std::string held_owner = lock.owner();
  if (int sig = take_signal()) {  // between the acquire and here: CMD never starts
    lock.release();
    if (!global().json) std::cerr << prefix << signal_name(sig) << " before CMD started; lease released\n";
    if (global().json)
      print_json({{w.name_key, c.name}, {w.acquired_key, true}, {"started", false}, {"signal", signal_name(sig)},
                  {"exit_code", 128 + sig}});
    exit_code() = 128 + sig;
    return;
  }
  // If we die, the supervisor stops the tree well before the lease (renewed
  // every ttl/3) can run out; if we are stopped or hung, the supervisor
  // stops it when the trust window ends: see run_supervisor.h.
  const milliseconds ttl = lo.ttl;
  auto orphan_grace = std::min({c.kill_grace, ttl / 4, milliseconds(500)});
  // The trust window's end on steady_clock, handed to the supervisor as
  // its deadline. now() is read before remaining(), and remaining() rounds
  // down, so the deadline is never later than the window's true end.
  auto now = steady_clock::now();
  auto window_end = now + lock.remaining();
  std::vector<std::pair<std::string, std::string>> env;
  for (const auto& var : c.fence_vars) env.emplace_back(var, std::to_string(held_fence));
  env.emplace_back("SQLGUARD_OWNER", held_owner);
  env.emplace_back(c.name_var, c.name);
  nlohmann::json fences = nlohmann::json::object();  // a set's, name by name
  if (c.names.size() > 1) {
    const auto& set = static_cast<const LockSet&>(lock);
    env.emplace_back("SQLGUARD_LOCK_COUNT", std::to_string(set.names().size()));
    for (std::size_t i = 0; i < set.names().size(); ++i) {
      const std::string& n = set.names()[i];
      env.emplace_back("SQLGUARD_LOCK_" + std::to_string(i + 1), n);
      env.emplace_back("SQLGUARD_FENCE_" + std::to_string(i + 1), std::to_string(set.fence_of(n)));
      fences[n] = set.fence_of(n);
    }
  }
  SupervisedCommand child(c.cmd, env, c.kill_grace, orphan_grace, window_end);
  bool stopped_for_loss = false;
  while (!child.poll()) {
    pollfd fds[2] = {{child.fd(), POLLIN, 0}, {g_wake[0], POLLIN, 0}};
    ::poll(fds, 2, 10);  // also the tick for the lease check below
    if (int sig = take_signal()) child.stop(sig);  // to the tree; SIGKILL after --kill-grace
    if (!stopped_for_loss && (lost || !lock.owns())) {
      stopped_for_loss = true;
      child.stop(SIGTERM);
    }
    // After a renewal the window ends later: tell the supervisor. Not
    // once it has ended: remaining() is 0 then, and "now" is no deadline.
    if (!stopped_for_loss) {
      now = steady_clock::now();
      if (auto left = lock.remaining(); left > milliseconds(0)) child.extend(now + left);
    }
  }
  // --json: in the outcome's object ("problem"), not as text on stderr.
  if (!child.problem().empty() && !global().json) std::cerr << prefix << child.problem() << "\n";
  if (stopped_for_loss || child.expired()) {
    std::string why;
    {
      std::lock_guard<std::mutex> lk(*loss_mu);
      why = loss->empty() ? "trust window ended without a confirmed renewal" : *loss;
    }
    // The supervisor acted on its own: we were stopped, hung or late.
    if (child.expired()) why += "; the supervisor stopped the tree when the trust window ended";
    if (!global().json)
      std::cerr << prefix << w.lost << " '" << terminal_safe(c.name) << "' lost (" << why
                << "); CMD's process tree was stopped" << std::endl;
    // Nothing is left to do with the database: the lease is gone and so is
    // the tree. Leave without ~LeaseLock, which joins a renewal that may
    // sit on a link that no longer answers (measured: without this, `run`
    // hung until a frozen PostgreSQL path healed).
    if (global().json) {
      nlohmann::json j = {{w.name_key, c.name}, {w.acquired_key, true}, {w.fence_key, held_fence}, {"owner", held_owner},
                          {"started", true}, {"lost", true}, {"cause", why}, {"exit_code", kExitLeaseLost}};
      if (!child.problem().empty()) j["problem"] = child.problem();
      print_json(j);
    }
    std::cout.flush();
    std::_Exit(kExitLeaseLost);
  }
  // Only now, with no process of CMD's tree left, may someone else start.
  // The release wakes whoever waits for the lease (a standby `elect`).
  const bool released = lock.release();
  if (!released && !global().json)
    std::cerr << prefix << "warning: lease '" << terminal_safe(c.name) << "' was not held at release\n";
  exit_code() = child.status() ? child.status()->code() : kExitError;
  if (global().json) {
    nlohmann::json j = {{w.name_key, c.name}, {w.acquired_key, true}, {w.fence_key, held_fence}, {"owner", held_owner},
                        {"started", true}, {"lost", false}, {"exit_code", exit_code()}};
    if (!fences.empty()) j["fences"] = fences;
    if (!child.problem().empty()) j["problem"] = child.problem();
    if (!released) j["warning"] = "the lease was not held at release";
    print_json(j);
  }
}

}  // namespace sqlguard::cli
