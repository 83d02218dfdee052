#include "process.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <thread>
#include <unordered_map>

#include "sqlguard/errors.h"

namespace sqlguard::cli::proc {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

bool ExitStatus::exited() const { return WIFEXITED(raw); }
int ExitStatus::code() const { return WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw); }
int ExitStatus::term_signal() const { return WIFSIGNALED(raw) ? WTERMSIG(raw) : 0; }
std::string ExitStatus::describe() const {
  return exited() ? "exit status " + std::to_string(WEXITSTATUS(raw)) : "signal " + std::to_string(WTERMSIG(raw));
}

Child::Child(Child&& o) noexcept { *this = std::move(o); }

Child& Child::operator=(Child&& o) noexcept {
  if (this != &o) {
    close_out();
    pid_ = o.pid_;
    own_group_ = o.own_group_;
    reaped_ = o.reaped_;
    status_ = o.status_;
    out_fd_ = o.out_fd_;
    term_sent_ = o.term_sent_;
    term_at_ = o.term_at_;
    o.pid_ = 0;
    o.out_fd_ = -1;
  }
  return *this;
}

Child::~Child() { close_out(); }

void Child::close_out() {
  if (out_fd_ >= 0) ::close(out_fd_);
  out_fd_ = -1;
}

bool Child::wait(milliseconds timeout) {
  if (!running()) return true;
  auto until = timeout == kForever ? steady_clock::time_point::max() : steady_clock::now() + timeout;
  const int flags = timeout == kForever ? 0 : WNOHANG;
  for (;;) {
    int st = 0;
    pid_t r = waitpid(pid_, &st, flags);
    if (r == pid_) {
      reaped_ = true;
      status_.raw = st;
      return true;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      // Not our child (any more): nothing left to wait for.
      reaped_ = true;
      return true;
    }
    if (steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
}

void Child::signal(int sig) {
  if (!running()) return;
  if (own_group_) ::killpg(pid_, sig);
  else ::kill(pid_, sig);
}

void Child::kill_with_grace(milliseconds grace) {
  if (!term_sent_) {
    term_sent_ = true;
    term_at_ = steady_clock::now();
    signal(SIGTERM);
  } else if (steady_clock::now() - term_at_ > grace) {
    signal(SIGKILL);
  }
}

namespace {

// What the child does between fork and exec/fn, prepared by the parent.
struct Prepared {
  pid_t parent = 0;
  int out = -1;        // fd for the child's stdout, or -1
  int pipe_read = -1;  // Out::kPipe: our end (closed in the child)
};

void write_str(int fd, const char* s) {
  ssize_t n = ::write(fd, s, std::strlen(s));
  (void)n;  // nothing to do about a failed diagnostic
}

// Child side, async-signal-safe only.
void setup_child(const SpawnOptions& o, const Prepared& p, bool stdout_from_out) {
  if (o.die_with_parent) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != p.parent) _exit(0);  // the parent died before prctl took effect
  }
  if (o.own_group) setpgid(0, 0);
  if (p.pipe_read >= 0) ::close(p.pipe_read);
  if (o.out == SpawnOptions::Out::kStderr) dup2(STDERR_FILENO, STDOUT_FILENO);
  else if (stdout_from_out && p.out >= 0) dup2(p.out, STDOUT_FILENO);
  for (const auto& [ours, theirs] : o.pass_fds) {
    if (ours == theirs) fcntl(theirs, F_SETFD, 0);  // dup2 onto itself would keep close-on-exec
    else dup2(ours, theirs);
  }
  for (int sig : o.default_signals) ::signal(sig, SIG_DFL);
  if (o.unblock_signals) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
  }
}

Prepared prepare(const SpawnOptions& o) {
  Prepared p;
  p.parent = getpid();
  switch (o.out) {
    case SpawnOptions::Out::kInherit:
    case SpawnOptions::Out::kStderr:  // dup2(2, 1) in the child
      break;
    case SpawnOptions::Out::kFile:
      p.out = ::open(o.out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
      if (p.out < 0)
        throw Error(ErrorCode::kInternal, "cannot create '" + o.out_file + "': " + std::strerror(errno));
      break;
    case SpawnOptions::Out::kNull:
      p.out = ::open("/dev/null", O_WRONLY | O_CLOEXEC);  // if that fails, the child keeps our stdout
      break;
    case SpawnOptions::Out::kPipe: {
      int fds[2];
      if (pipe2(fds, O_CLOEXEC) != 0)
        throw Error(ErrorCode::kInternal, std::string("pipe failed: ") + std::strerror(errno));
      p.pipe_read = fds[0];
      p.out = fds[1];
      break;
    }
  }
  // Our buffered output goes out before the child can write to the same file.
  std::cout.flush();
  std::fflush(stdout);
  return p;
}

// Parent side after fork(): keeps the read end, closes the child's copy.
// Returns the pid; throws if fork() failed.
pid_t adopt(pid_t pid, const SpawnOptions& o, Prepared& p) {
  int err = errno;
  if (p.out >= 0) ::close(p.out);
  if (pid < 0) {
    if (p.pipe_read >= 0) ::close(p.pipe_read);
    throw Error(ErrorCode::kInternal, std::string("fork failed: ") + std::strerror(err));
  }
  // Also in the parent: a signal sent right after spawn must find the group.
  if (o.own_group) setpgid(pid, pid);
  return pid;
}

}  // namespace

Child spawn(const std::vector<std::string>& argv, const SpawnOptions& o) {
  if (argv.empty()) throw Error(ErrorCode::kInvalidArgument, "spawn: empty argv");
  std::vector<std::string> args = argv;
  std::vector<char*> av;
  for (auto& a : args) av.push_back(a.data());
  av.push_back(nullptr);
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    bool replaced = false;
    for (const auto& [k, v] : o.env)
      if (std::strncmp(*e, k.c_str(), k.size()) == 0 && (*e)[k.size()] == '=') replaced = true;
    if (!replaced) env.emplace_back(*e);
  }
  for (const auto& [k, v] : o.env) env.push_back(k + "=" + v);
  std::vector<char*> ev;
  for (auto& e : env) ev.push_back(e.data());
  ev.push_back(nullptr);
  std::string exec_error = o.exec_error_prefix + "cannot execute '" + argv[0] + "': ";

  Prepared p = prepare(o);
  pid_t pid = fork();
  if (pid == 0) {
    setup_child(o, p, true);
    if (o.search_path) execvpe(av[0], av.data(), ev.data());
    else execve(av[0], av.data(), ev.data());
    if (!o.exec_error_prefix.empty()) {
      const char* why = std::strerror(errno);
      write_str(STDERR_FILENO, exec_error.c_str());
      write_str(STDERR_FILENO, why);
      write_str(STDERR_FILENO, "\n");
    }
    _exit(127);
  }
  return Child(adopt(pid, o, p), o.own_group, p.pipe_read);
}

Child fork_call(const std::function<int(int out_fd)>& fn, const SpawnOptions& o) {
  Prepared p = prepare(o);
  const bool pipe = o.out == SpawnOptions::Out::kPipe;
  pid_t pid = fork();
  if (pid == 0) {
    setup_child(o, p, !pipe);
    int rc = 1;
    try {
      rc = fn(pipe ? p.out : -1);
    } catch (...) {
    }
    _exit(rc);
  }
  return Child(adopt(pid, o, p), o.own_group, p.pipe_read);
}

std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw Error(ErrorCode::kInternal, "cannot find this executable (/proc/self/exe)");
  return std::string(buf, static_cast<std::size_t>(n));
}

// ---- process trees -------------------------------------------------------------

void become_subreaper() {
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
    throw Error(ErrorCode::kInternal, std::string("PR_SET_CHILD_SUBREAPER failed: ") + std::strerror(errno));
}

namespace {

// The parent of `pid` from /proc/<pid>/stat, or 0 if it is gone. The
// command name (field 2) may hold spaces and ')', so parse after the last ')'.
pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return 0;
  auto close = stat.rfind(')');
  if (close == std::string::npos || close + 4 >= stat.size()) return 0;
  // ") S 1234 ..." : state, then the parent pid.
  return static_cast<pid_t>(std::strtol(stat.c_str() + close + 4, nullptr, 10));
}

// pid -> parent for every process in /proc.
std::unordered_map<pid_t, pid_t> parent_links() {
  std::unordered_map<pid_t, pid_t> links;
  DIR* d = opendir("/proc");
  if (!d) return links;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    pid_t ppid = parent_of(static_cast<pid_t>(pid));
    if (ppid > 0) links[static_cast<pid_t>(pid)] = ppid;
  }
  closedir(d);
  return links;
}

std::vector<pid_t> descendants_in(const std::unordered_map<pid_t, pid_t>& links, pid_t root) {
  std::unordered_multimap<pid_t, pid_t> children;
  for (const auto& [pid, ppid] : links) children.emplace(ppid, pid);
  std::vector<pid_t> out;
  std::vector<pid_t> todo{root};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    auto [b, e] = children.equal_range(p);
    for (auto it = b; it != e; ++it) {
      out.push_back(it->second);
      todo.push_back(it->second);
    }
  }
  return out;
}

}  // namespace

std::vector<pid_t> descendants(pid_t root) { return descendants_in(parent_links(), root); }

int signal_tree(pid_t root, pid_t pgid, int sig) {
  if (pgid > 0) ::killpg(pgid, sig);
  // Snapshot the parents first: a pidfd pins the process, then its parent is
  // read again, so a pid that ended and was recycled since the scan (its
  // parent would differ) is left alone.
  const auto links = parent_links();
  const auto tree = descendants_in(links, root);
  for (pid_t pid : tree) {
    // Raw syscalls: glibc 2.36's <sys/pidfd.h> lacks C linkage for C++.
    int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0) continue;  // already gone
    auto it = links.find(pid);
    if (it != links.end() && parent_of(pid) == it->second) ::syscall(SYS_pidfd_send_signal, fd, sig, nullptr, 0);
    ::close(fd);
  }
  return static_cast<int>(tree.size());
}

bool reap_children(const std::function<void(pid_t, const ExitStatus&)>& on_exit) {
  for (;;) {
    int st = 0;
    pid_t r = waitpid(-1, &st, WNOHANG);
    if (r > 0) {
      if (on_exit) on_exit(r, ExitStatus{st});
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    return !(r < 0 && errno == ECHILD);
  }
}

void TreeStop::begin(int sig, milliseconds grace) {
  auto at = steady_clock::now() + grace;
  if (!started_ || at < kill_at_) kill_at_ = at;
  started_ = true;
  signal_tree(root_, pgid_, sig);
  if (sig != SIGKILL) signal_tree(root_, pgid_, SIGCONT);
}

void TreeStop::tick() {
  if (started_ && steady_clock::now() >= kill_at_) signal_tree(root_, pgid_, SIGKILL);
}

milliseconds TreeStop::until_kill() const {
  if (!started_) return Child::kForever;
  auto now = steady_clock::now();
  return now >= kill_at_ ? milliseconds(0) : std::chrono::duration_cast<milliseconds>(kill_at_ - now) + milliseconds(1);
}

}  // namespace sqlguard::cli::proc
