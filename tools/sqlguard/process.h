// Child processes of the sqlguard CLI: the one place that forks, execs,
// reaps and signals. Used by `run` (its supervisor and CMD), `demo` (the
// demo workers), `bench --processes` (forked clients) and `chaos` (workers,
// the dbservers script).
//
// Contract:
//  * Everything a child needs (argv, environment, the file it writes to) is
//    prepared before fork(); between fork and exec the child makes only
//    async-signal-safe calls, so spawning from a process with threads (the
//    lease watchdog, the chaos restart thread) is safe.
//  * A Child never kills or reaps on its own: not when destroyed, not when
//    moved from. Callers decide (and must reap what they spawn).
//  * signal() reaches the child's whole process group when it was started in
//    its own group (SpawnOptions::own_group), else the child alone.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace sqlguard::cli::proc {

struct SpawnOptions {
  // Set in the child's environment on top of ours (an existing variable of
  // the same name is dropped first).
  std::vector<std::pair<std::string, std::string>> env;
  // Look argv[0] up in PATH (execvp) instead of taking it as a path.
  bool search_path = false;
  // The child's stdout (stdin and stderr are always inherited).
  enum class Out {
    kInherit,
    kFile,    // `out_file`, created or truncated
    kNull,    // /dev/null
    kStderr,  // our stderr: keeps our stdout (JSON) clean
    kPipe,    // a pipe read through Child::out_fd(); see fork_call for forked functions
  } out = Out::kInherit;
  std::string out_file;
  // A process group of its own: a terminal's Ctrl-C then reaches only us.
  bool own_group = false;
  // SIGKILL the child when we die (PR_SET_PDEATHSIG); a child whose parent
  // is already gone when it starts exits at once.
  bool die_with_parent = false;
  // Signals reset to SIG_DFL in the child (ones we catch or ignore).
  std::vector<int> default_signals;
  // Start the child with no blocked signals.
  bool unblock_signals = false;
  // When non-empty and exec fails, the child writes
  // "<prefix>cannot execute '<argv[0]>': <reason>" to stderr. Always exit 127.
  std::string exec_error_prefix;
  // Descriptors handed to the child: {ours, theirs} = dup2(ours, theirs),
  // open across exec. Everything else stays close-on-exec as we opened it.
  std::vector<std::pair<int, int>> pass_fds;
};

// How a reaped child ended.
struct ExitStatus {
  int raw = 0;  // waitpid() status
  bool exited() const;     // by exit(), not by a signal
  int code() const;        // the exit status, or 128 + signal (shell convention)
  int term_signal() const; // the signal that ended it, or 0
  std::string describe() const;  // "exit status N" / "signal N"
};

class Child {
 public:
  Child() = default;
  Child(Child&& o) noexcept;
  Child& operator=(Child&& o) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();  // closes out_fd(); does not signal or reap

  pid_t pid() const { return pid_; }  // kept after reaping (for logs)
  bool started() const { return pid_ > 0; }
  bool running() const { return pid_ > 0 && !reaped_; }

  // Reaps the child if it has ended within `timeout` (0: do not block;
  // kForever: block). EINTR is retried. Returns running() == false.
  static constexpr std::chrono::milliseconds kForever = std::chrono::milliseconds::max();
  bool wait(std::chrono::milliseconds timeout = kForever);
  const ExitStatus& status() const { return status_; }  // valid once reaped

  // Sends `sig` (group or process, see above). No-op once reaped.
  void signal(int sig);
  // Kill with grace, for a polling loop: the first call sends SIGTERM, any
  // call once `grace` has passed since then sends SIGKILL.
  void kill_with_grace(std::chrono::milliseconds grace);

  // Out::kPipe: our read end (-1 otherwise); close_out() closes it early.
  int out_fd() const { return out_fd_; }
  void close_out();

 private:
  friend Child spawn(const std::vector<std::string>&, const SpawnOptions&);
  friend Child fork_call(const std::function<int(int out_fd)>&, const SpawnOptions&);
  Child(pid_t pid, bool own_group, int out_fd) : pid_(pid), own_group_(own_group), out_fd_(out_fd) {}
  pid_t pid_ = 0;
  bool own_group_ = false;
  bool reaped_ = false;
  ExitStatus status_;
  int out_fd_ = -1;
  bool term_sent_ = false;
  std::chrono::steady_clock::time_point term_at_{};
};

// fork() + exec(argv). Throws sqlguard::Error(kInternal) if it cannot fork;
// a failed exec shows as exit status 127.
Child spawn(const std::vector<std::string>& argv, const SpawnOptions& o = {});

// fork() without exec: the child runs `fn` and _exit()s with its result
// (1 if it throws), skipping atexit handlers and stdio flushes. The child
// runs ordinary code after fork(), so call this only while we have no other
// threads (bench's forked clients). Honours own_group, die_with_parent,
// default_signals and unblock_signals; `env`, `search_path` and
// `exec_error_prefix` are ignored. With Out::kPipe, `fn` gets the pipe's
// write end (its stdout stays as it is); otherwise -1.
Child fork_call(const std::function<int(int out_fd)>& fn, const SpawnOptions& o = {});

// The path of this executable (/proc/self/exe), for re-executing ourselves.
std::string self_exe();

// ---- process trees (`sqlguard run` owns everything CMD starts) --------------
//
// A descendant can leave CMD's process group (setpgid/setsid), but not our
// tree: while we live, its parent chain leads back to us, and when its
// parent dies it is reparented to us if we are a child subreaper. So the
// tree, not the group, is what we stop; the group is signalled too because
// killpg() reaches all its members in one atomic call.

// PR_SET_CHILD_SUBREAPER: orphans below us are reparented to us, not to
// init, so we can still find, signal and reap them. Throws kInternal.
void become_subreaper();

// Every process below `root` (children, grandchildren, ...), from the
// parent links in /proc, zombies included. A snapshot: it may miss a
// process forked after the scan, which is why TreeStop keeps re-scanning.
std::vector<pid_t> descendants(pid_t root);

// Sends `sig` to process group `pgid` (when > 0) and to every descendant of
// `root`. Each descendant is signalled through a pidfd opened after the
// scan and re-checked against its parent, so a pid recycled in between is
// never hit. Returns how many descendants were found.
int signal_tree(pid_t root, pid_t pgid, int sig);

// Reaps every child of ours that has ended (waitpid(-1, WNOHANG)), calling
// on_exit(pid, status) for each. Returns false once we have no child left
// (ECHILD): with a subreaper, that means no descendant is left either.
bool reap_children(const std::function<void(pid_t, const ExitStatus&)>& on_exit = {});

// Stops a process tree the way `run` promises: `sig` (plus SIGCONT, so a
// stopped process acts on it) to the group and the tree now, SIGKILL once
// `grace` has passed, repeated on every tick() until the caller sees the
// tree gone (reap_children() false). Not thread-safe; the caller reaps.
class TreeStop {
 public:
  TreeStop(pid_t root, pid_t pgid) : root_(root), pgid_(pgid) {}
  // First call: sends `sig` and arms SIGKILL after `grace`. Later calls
  // send `sig` again and may bring the SIGKILL closer, never later.
  void begin(int sig, std::chrono::milliseconds grace);
  void tick();  // SIGKILL round when due
  bool started() const { return started_; }
  // Time until the next SIGKILL round (for a poll timeout); kForever if none.
  std::chrono::milliseconds until_kill() const;

 private:
  pid_t root_, pgid_;
  bool started_ = false;
  std::chrono::steady_clock::time_point kill_at_{};
};

}  // namespace sqlguard::cli::proc
