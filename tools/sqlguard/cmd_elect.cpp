// sqlguard elect: `etcdctl elect` for scripts. The election is a lease named
// NAME (as LeaderElector's, so a library candidate and a CLI candidate can
// compete in one election); its leader runs CMD, its term is the lease's
// fencing token. It is `run`'s code path (leased_command.h) with three
// differences: a candidate waits to be elected as long as it takes unless
// --wait is given, CMD gets SQLGUARD_TERM, and the default ttl is
// LeaderElector's 10 s, so a standby takes over from a dead leader sooner.
// When CMD exits the leader resigns: the release wakes the next candidate.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common.h"
#include "leased_command.h"
#include "sqlguard/lease_lock.h"

namespace sqlguard::cli {

void add_elect(CLI::App& app) {
  struct Opts {
    std::string name, ttl = "10s", wait, grace = "10s", candidate;
    int conflict_exit = kExitTempFail;
    std::vector<std::string> cmd;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "elect", "Campaign for leadership of election NAME and run CMD while leader (etcdctl elect for scripts)");
  cmd->add_option("NAME", o->name, "Election name (1..255 bytes; the lease's name)")->required();
  cmd->add_option("--ttl", o->ttl, "The leader's lease; renewed every ttl/3")->capture_default_str();
  auto* wait =
      cmd->add_option("--wait", o->wait, "Give up if not elected within this long (exit 75); default: until elected");
  cmd->add_option("--kill-grace", o->grace, "Stopping CMD's tree: SIGKILL this long after SIGTERM")->capture_default_str();
  cmd->add_option("--candidate", o->candidate,
                  "Names this candidate in `lock list` (owner token \"ID/<random>\"); default: a random token");
  cmd->add_option("--conflict-exit-code", o->conflict_exit, "Exit code when not elected within --wait")
      ->check(whole_number(0, 255))
      ->capture_default_str();
  cmd->add_option("CMD", o->cmd, "Command and arguments (after --)")->required();
  cmd->callback([o, wait] {
    check_name_arg("NAME", o->name);
    LeasedCommand c;
    c.words = {"elect", "election", "elected", "term", "election", "won", "campaigning in", "leadership of"};
    c.name = o->name;
    c.lease.ttl = duration_flag("--ttl", o->ttl, kLeaseTtl);
    if (wait->count() > 0) c.wait = duration_flag("--wait", o->wait);
    c.kill_grace = duration_flag("--kill-grace", o->grace);
    if (!o->candidate.empty()) {
      check_name_arg("--candidate", o->candidate);
      // LeaderElector's form, so both kinds of candidate read alike.
      c.lease.owner = o->candidate + "/" + make_owner_token();
      if (c.lease.owner.size() > kMaxNameBytes)
        throw BadValue("--candidate", "is " + std::to_string(o->candidate.size()) +
                                          " bytes; with the \"/<random>\" suffix the owner token would be " +
                                          std::to_string(c.lease.owner.size()) + " bytes, over the limit of " +
                                          std::to_string(kMaxNameBytes));
    }
    c.conflict_exit = o->conflict_exit;
    c.cmd = o->cmd;
    c.fence_vars = {"SQLGUARD_TERM", "SQLGUARD_FENCE"};
    c.name_var = "SQLGUARD_ELECTION";
    run_leased(c);
  });
}

}  // namespace sqlguard::cli
