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
  // `env` is added to CMD's environment. Throws Error(kInternal) when the
  // supervisor cannot be started.
  SupervisedCommand(const std::vector<std::string>& cmd, const std::vector<std::pair<std::string, std::string>>& env,
                    std::chrono::milliseconds kill_grace, std::chrono::milliseconds orphan_grace);
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
  bool done_ = false, finished_ = false;
  std::optional<std::chrono::steady_clock::time_point> stop_deadline_;  // a stuck supervisor is killed then
  std::string problem_;
};

// Registers the hidden `run-supervisor` subcommand.
void add_run_supervisor(CLI::App& app);

}  // namespace sqlguard::cli
