// `sqlguard run`'s supervisor and the socket protocol between the two; the
// design is in run_supervisor.h.
#include "run_supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>

#include "common.h"
#include "sqlguard/errors.h"

namespace sqlguard::cli {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// One packet each way. The supervisor reports kStarted (CMD's pid = its
// process group), kExited (CMD's wait status), kExpired (the deadline passed
// unextended; the stop has begun) and kDone (no descendant left, the
// supervisor exits next); `run` sends kStop (a signal number) and kDeadline
// (the new end of the trust window, in steady_clock ms).
struct Packet {
  enum Kind : std::int32_t { kStarted = 1, kExited = 2, kDone = 3, kStop = 4, kDeadline = 5, kExpired = 6 } kind;
  std::int64_t value;
};

// Deadlines cross the process boundary as steady_clock milliseconds.
// libstdc++'s steady_clock is CLOCK_MONOTONIC, one clock for every process
// of the machine (and of the time namespace `run` and its supervisor share),
// so both read the same instant from the same number.
std::int64_t to_wire(steady_clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(t.time_since_epoch()).count();
}
steady_clock::time_point from_wire(std::int64_t ms) { return steady_clock::time_point(milliseconds(ms)); }

constexpr int kControlFd = 3;  // the supervisor's end of the socket

void send_packet(int fd, Packet::Kind kind, std::int64_t value) {
  if (fd < 0) return;
  Packet p{kind, value};
  // MSG_NOSIGNAL: a peer that is gone is noticed by its EOF, not by SIGPIPE.
  while (::send(fd, &p, sizeof p, MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

// 1: a packet, 0: the peer is gone, -1: nothing to read now.
int recv_packet(int fd, Packet* p) {
  for (;;) {
    ssize_t n = ::recv(fd, p, sizeof *p, MSG_DONTWAIT);
    if (n == static_cast<ssize_t>(sizeof *p)) return 1;
    if (n == 0) return 0;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return -1;
    return 0;  // a reset or a short packet: treat the peer as gone
  }
}

int poll_ms(milliseconds d, milliseconds cap) {
  return static_cast<int>(std::max(milliseconds(0), std::min(d, cap)).count());
}

// ---- the supervisor process --------------------------------------------------------

struct SupervisorArgs {
  long long kill_grace_ms = 10000, orphan_grace_ms = 500;
  long long deadline_ms = 0;  // the trust window's end when CMD starts (steady_clock ms)
  std::vector<std::string> cmd;
};

int supervise(const SupervisorArgs& a) {
  const milliseconds kill_grace(a.kill_grace_ms), orphan_grace(a.orphan_grace_ms);
  int ctl = kControlFd;
  fcntl(ctl, F_SETFD, FD_CLOEXEC);  // CMD must not hold `run`'s peer open
  proc::become_subreaper();
  // Signals arrive through a signalfd, polled with the socket.
  sigset_t sigs;
  sigemptyset(&sigs);
  for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&sigs, s);
  sigprocmask(SIG_BLOCK, &sigs, nullptr);
  int sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sfd < 0) throw Error(ErrorCode::kInternal, std::string("signalfd failed: ") + std::strerror(errno));

  // `run` may have died while we started: then CMD never starts. A peek:
  // what `run` has sent already (a stop, a deadline) is handled in the loop.
  Packet p{};
  if (::recv(ctl, &p, sizeof p, MSG_DONTWAIT | MSG_PEEK) == 0) return 0;

  proc::SpawnOptions so;
  so.search_path = true;
  so.own_group = true;
  so.die_with_parent = true;  // if we are SIGKILLed, CMD goes too; `run` kills the rest
  so.unblock_signals = true;
  so.default_signals = {SIGTERM, SIGINT, SIGHUP};
  so.exec_error_prefix = "sqlguard run: ";
  proc::Child cmd = proc::spawn(a.cmd, so);
  const pid_t cmd_pid = cmd.pid();
  send_packet(ctl, Packet::kStarted, static_cast<std::int32_t>(cmd_pid));

  proc::TreeStop stop(getpid(), cmd_pid);
  // The end of `run`'s trust window, pushed forward by `run` after each
  // renewal. A `run` that is stopped (SIGSTOP, Ctrl-Z), hung or starved
  // cannot push it, nor act on the lost lease itself: then we stop the tree
  // at the instant `run` would have, before the lease expires on the
  // database clock (the safety margin lies between the two).
  constexpr auto kNone = steady_clock::time_point::max();
  steady_clock::time_point deadline = a.deadline_ms > 0 ? from_wire(a.deadline_ms) : kNone;
  for (;;) {
    bool any = proc::reap_children([&](pid_t pid, const proc::ExitStatus& st) {
      if (pid != cmd_pid) return;
      send_packet(ctl, Packet::kExited, st.raw);
      // What CMD left behind is stopped too: the lease ends with the tree.
      stop.begin(SIGTERM, kill_grace);
    });
    if (!any) {
      send_packet(ctl, Packet::kDone, 0);
      return 0;
    }
    stop.tick();
    pollfd fds[2] = {{sfd, POLLIN, 0}, {ctl, POLLIN, 0}};
    milliseconds wake = stop.until_kill();
    if (deadline != kNone) {
      auto now = steady_clock::now();
      wake = std::min(wake, deadline <= now ? milliseconds(0) : std::chrono::ceil<milliseconds>(deadline - now));
    }
    // While stopping, re-scan the tree often: a process forked after the
    // last scan still gets its SIGKILL.
    int timeout = poll_ms(wake, stop.started() ? milliseconds(20) : milliseconds(1000));
    ::poll(fds, ctl >= 0 ? 2 : 1, timeout);
    signalfd_siginfo si{};
    while (::read(sfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
      int sig = static_cast<int>(si.ssi_signo);
      if (sig != SIGCHLD) stop.begin(sig, kill_grace);  // someone stops us directly: stop the tree
    }
    if (ctl < 0) continue;
    for (;;) {
      int r = recv_packet(ctl, &p);
      if (r < 0) break;
      if (r == 0) {
        // `run` is gone (maybe SIGKILLed): nobody renews the lease any more.
        ::close(ctl);
        ctl = -1;
        deadline = kNone;  // the orphan stop below comes sooner than any deadline
        stop.begin(SIGTERM, orphan_grace);
        break;
      }
      if (p.kind == Packet::kStop && p.value > 0 && p.value < NSIG) stop.begin(static_cast<int>(p.value), kill_grace);
      // Only forward: a deadline never moves back, and once passed it stays passed.
      if (p.kind == Packet::kDeadline && deadline != kNone) deadline = std::max(deadline, from_wire(p.value));
    }
    // Checked after the socket is drained: an extension already sent counts.
    if (deadline != kNone && steady_clock::now() >= deadline) {
      deadline = kNone;
      send_packet(ctl, Packet::kExpired, 0);
      stop.begin(SIGTERM, kill_grace);  // what `run` does when it sees its lease lost
    }
  }
}

}  // namespace

// ---- `run`'s side ---------------------------------------------------------------

SupervisedCommand::SupervisedCommand(const std::vector<std::string>& cmd,
                                     const std::vector<std::pair<std::string, std::string>>& env,
                                     milliseconds kill_grace, milliseconds orphan_grace,
                                     steady_clock::time_point deadline)
    : kill_grace_(kill_grace), deadline_sent_(deadline) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    throw Error(ErrorCode::kInternal, std::string("socketpair failed: ") + std::strerror(errno));
  // Orphans of a dead supervisor come to us, so we can still kill them.
  proc::become_subreaper();
  std::vector<std::string> argv = {proc::self_exe(),
                                   "run-supervisor",
                                   "--kill-grace-ms",
                                   std::to_string(kill_grace.count()),
                                   "--orphan-grace-ms",
                                   std::to_string(orphan_grace.count()),
                                   "--deadline-ms",
                                   std::to_string(to_wire(deadline)),
                                   "--"};
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  proc::SpawnOptions so;
  so.env = env;
  so.own_group = true;  // a Ctrl-C or a kill of `run`'s group does not reach it: `run` decides
  so.unblock_signals = true;
  so.pass_fds = {{sv[1], kControlFd}};
  so.exec_error_prefix = "sqlguard run: supervisor: ";
  try {
    sup_ = proc::spawn(argv, so);
  } catch (...) {
    ::close(sv[0]);
    ::close(sv[1]);
    throw;
  }
  ::close(sv[1]);  // only the supervisor holds its end: its death is our EOF
  sock_ = sv[0];
}

SupervisedCommand::~SupervisedCommand() {
  if (sock_ >= 0) ::close(sock_);
  // A supervisor still running stops the tree on our EOF and exits; reap
  // it if it is quick, else init does.
  if (sup_.running()) sup_.wait(milliseconds(0));
}

void SupervisedCommand::extend(steady_clock::time_point deadline) {
  // `deadline` comes from a millisecond count of the trust window, so it
  // jitters by a millisecond between calls: only a real move (a renewal,
  // ttl/3 at least) is sent.
  if (finished_ || deadline <= deadline_sent_ + milliseconds(2)) return;
  deadline_sent_ = deadline;
  send_packet(sock_, Packet::kDeadline, to_wire(deadline));
}

void SupervisedCommand::stop(int sig) {
  if (finished_) return;
  if (!stop_deadline_) stop_deadline_ = steady_clock::now() + kill_grace_ + std::chrono::seconds(2);
  send_packet(sock_, Packet::kStop, sig);
}

bool SupervisedCommand::poll() {
  if (finished_) return true;
  bool gone = false;
  Packet p{};
  for (;;) {
    int r = recv_packet(sock_, &p);
    if (r < 0) break;
    if (r == 0) {
      gone = true;
      break;
    }
    if (p.kind == Packet::kStarted) cmd_pid_ = static_cast<pid_t>(p.value);
    else if (p.kind == Packet::kExited) status_ = proc::ExitStatus{static_cast<int>(p.value)};
    else if (p.kind == Packet::kExpired) expired_ = true;
    else if (p.kind == Packet::kDone) done_ = true;
  }
  if (!gone && stop_deadline_ && steady_clock::now() >= *stop_deadline_) {
    // A stop must end within the grace; a stuck (or SIGSTOPped) supervisor
    // is replaced by us.
    problem_ = "the supervisor did not finish the stop in time; killed it";
    sup_.signal(SIGKILL);
    gone = true;
  }
  if (!gone) return false;
  sup_.wait();
  if (!done_) {
    if (problem_.empty()) problem_ = "the supervisor (pid " + std::to_string(sup_.pid()) + ") ended by " +
                                     sup_.status().describe() + " before CMD's tree was gone";
    take_over();
  }
  finished_ = true;
  return true;
}

void SupervisedCommand::take_over() {
  // CMD died with the supervisor (parent-death signal); anything below it
  // was reparented to us. Nothing left deserves a grace: SIGKILL all.
  proc::TreeStop stop(getpid(), cmd_pid_);
  stop.begin(SIGKILL, milliseconds(0));
  while (proc::reap_children()) {
    stop.tick();
    std::this_thread::sleep_for(milliseconds(5));
  }
}

void add_run_supervisor(CLI::App& app) {
  auto a = std::make_shared<SupervisorArgs>();
  auto* cmd = app.add_subcommand("run-supervisor", "internal: the process that owns CMD's tree for `sqlguard run`");
  cmd->group("");  // hidden
  cmd->add_option("--kill-grace-ms", a->kill_grace_ms)->required();
  cmd->add_option("--orphan-grace-ms", a->orphan_grace_ms)->required();
  cmd->add_option("--deadline-ms", a->deadline_ms)->required();
  cmd->add_option("CMD", a->cmd)->required();
  cmd->callback([a] {
    if (a->kill_grace_ms < 0 || a->orphan_grace_ms < 0 || a->deadline_ms < 0)
      throw CLI::ValidationError("run-supervisor", "bad internal arguments");
    exit_code() = supervise(*a);
  });
}

}  // namespace sqlguard::cli
