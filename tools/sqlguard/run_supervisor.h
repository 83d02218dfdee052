// `sqlguard run` owns CMD's whole process tree, even when `run` itself is
// killed with SIGKILL. The tree looks like this:
//
//   sqlguard run            holds the lease (watchdog), decides when to stop;
//   │                       a child subreaper
//   └─ run-supervisor       hidden subcommand, own process group, a child
//      │                    subreaper; the only process that signals CMD
//      └─ CMD               own process group (pgid = its pid), dies with
//         └─ ...            the supervisor (PR_SET_PDEATHSIG = SIGKILL)
//
// `run` and the supervisor talk over a socketpair (SOCK_SEQPACKET, one
// Report/Request per packet). Who stops the tree, and how:
//  * `run` asks (lease lost, SIGTERM/SIGINT/SIGHUP to `run`): the supervisor
//    sends that signal (+SIGCONT) to CMD's group and every descendant, and
//    SIGKILL after --kill-grace.
//  * `run` cannot act (stopped by SIGSTOP or Ctrl-Z, hung, starved): the
//    supervisor knows the end of the lease's trust window, which `run`
//    pushes forward after every renewal. When it passes unextended, the
//    supervisor stops the tree as `run` would on a lost lease (SIGTERM,
//    SIGKILL after --kill-grace) and reports it; the lease itself expires on
//    the database clock only a safety margin later. A `run` that is merely
//    slow still renews, so its deadline moves before it is reached.
//  * CMD exits: whatever it left behind gets the same (SIGTERM, SIGKILL
//    after --kill-grace); `run` releases the lease only once the tree is gone.
//  * `run` dies (any signal, SIGKILL included): the supervisor reads EOF and
//    stops the tree with SIGTERM, SIGKILL after the orphan grace
//    (min(--kill-grace, ttl/4, 500 ms)), well inside what is left of a lease
//    the watchdog renewed every ttl/3.
//  * the supervisor dies: CMD gets SIGKILL from the kernel (parent-death
//    signal); its descendants are reparented to `run` (a subreaper), which
//    SIGKILLs the group and the tree and reaps them before it releases.
//  * both die at the same instant (kill -9 of both pids, the OOM killer):
//    CMD dies with the supervisor, but its descendants outlive it. Closing
//    that gap needs a cgroup (e.g. systemd-run --scope); see README "run".
//    Likewise nothing here acts while `run` AND the supervisor are stopped
//    together (a frozen cgroup, a paused container, SIGSTOP to both): the
//    fencing token (SQLGUARD_FENCE) is what protects the resource then.
// A descendant that leaves CMD's group (setpgid/setsid, a daemon's double
// fork) is still found: the supervisor is a subreaper, so it stays in the
// supervisor's tree, and stops walk the tree through /proc, not just the group.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "process.h"

namespace sqlguard::cli {

// `run`'s side: spawns the supervisor, which starts CMD at once.
class SupervisedCommand {
 public:
  // `env` is added to CMD's environment. `deadline` is the end of the
  // lease's trust window now: unless extend() moves it, the supervisor
  // stops the tree then by itself. Throws Error(kInternal) when the
  // supervisor cannot be started.
  SupervisedCommand(const std::vector<std::string>& cmd, const std::vector<std::pair<std::string, std::string>>& env,
                    std::chrono::milliseconds kill_grace, std::chrono::milliseconds orphan_grace,
                    std::chrono::steady_clock::time_point deadline);
  ~SupervisedCommand();  // closes the socket: a supervisor still running then stops the tree
  SupervisedCommand(const SupervisedCommand&) = delete;
  SupervisedCommand& operator=(const SupervisedCommand&) = delete;

  // Readable when the supervisor reports (or dies): poll it, then call poll().
  int fd() const { return sock_; }
  // Handles reports, notices a dead supervisor (then kills the tree itself).
  // Returns true once CMD and all its descendants are gone.
  bool poll();
  // Stops the tree: `sig` now, SIGKILL after the kill grace.
  void stop(int sig);
  // Moves the supervisor's deadline to `deadline` (the trust window's end
  // after a renewal). Cheap: call it on every tick; an earlier or equal
  // deadline is ignored (a deadline only moves forward).
  void extend(std::chrono::steady_clock::time_point deadline);
  // The supervisor saw the deadline pass unextended and began the stop.
  bool expired() const { return expired_; }
  // CMD's exit status, once known.
  const std::optional<proc::ExitStatus>& status() const { return status_; }
  // Set when the supervisor died before the tree was gone: one line.
  const std::string& problem() const { return problem_; }

 private:
  void take_over();  // the supervisor is gone: SIGKILL what it left, reap it

  proc::Child sup_;
  int sock_ = -1;
  pid_t cmd_pid_ = 0;
  std::chrono::milliseconds kill_grace_;
  std::optional<proc::ExitStatus> status_;
  bool done_ = false, finished_ = false, expired_ = false;
  std::chrono::steady_clock::time_point deadline_sent_;
  std::optional<std::chrono::steady_clock::time_point> stop_deadline_;  // a stuck supervisor is killed then
  std::string problem_;
};

// Registers the hidden `run-supervisor` subcommand.
void add_run_supervisor(CLI::App& app);

}  // namespace sqlguard::cli
