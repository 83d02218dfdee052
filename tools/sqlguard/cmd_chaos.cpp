// `sqlguard chaos`: runs N worker processes (chaos_worker.cpp) against one
// database while a seeded fault injector kill -9s them, SIGSTOPs lock
// holders past their ttl, terminates their server sessions and restarts the
// server; then checks invariants from what the database recorded.
//
// Bounded: every loop ends at --duration (workers stop by themselves at the
// same deadline), every paused worker is SIGCONTed, every child is reaped,
// stragglers are SIGKILLed after a grace. Workers die with the coordinator
// (PR_SET_PDEATHSIG). Traffic goes only to --db (and the server restart
// script named by SQLGUARD_DBSERVERS).
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <type_traits>

#include "chaos.h"
#include "common.h"
#include "sqlguard/admin.h"
#include "sqlguard/inbox.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/migrate.h"
#include "sqlguard/validate.h"

namespace sqlguard::cli {
namespace chaos {
void add_chaos_worker(CLI::App& app);
}

namespace {

using namespace chaos;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using nlohmann::json;

volatile sig_atomic_t g_stop = 0;
void on_stop_signal(int) { g_stop = 1; }

std::int64_t wall_ms() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string random_run_id() {
  std::random_device rd;
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", static_cast<unsigned>(rd()));
  return buf;
}

struct Opts {
  std::string duration = "30s", ttl = "1s";
  int workers = 4;
  std::uint64_t seed = 0;
  bool no_fencing = false, no_restarts = false, keep = false;
};

milliseconds flag_duration(const std::string& flag, const std::string& text, milliseconds min, milliseconds max) {
  milliseconds d;
  try {
    d = parse_duration(text);
  } catch (const Error& e) {
    throw CLI::ValidationError(flag, e.message());
  }
  if (d < min || d > max)
    throw CLI::ValidationError(flag, "is " + text + "; it must be between " + format_duration(min) + " and " +
                                         format_duration(max));
  return d;
}

// A child of ours: a worker slot's current process.
struct Child {
  pid_t pid = 0;
  bool alive = false;
  bool killed_by_us = false;
  bool paused = false;
  steady_clock::time_point resume_at{};
  steady_clock::time_point respawn_at{};
  bool respawn_pending = false;
  std::int64_t last_paused_fence = -1;     // never pause the same lease twice
  steady_clock::time_point no_kill_until{};  // let a resumed worker make its late write
};

struct KillRecord {
  int slot;
  int resource;
  std::int64_t fence;
  std::int64_t kill_db_ms;
  steady_clock::time_point check_at;
  bool checked = false;
  bool taken_over = false;
  std::int64_t expire_at_ms = 0;  // of the victim's lease, read after the kill
};

class Coordinator {
 public:
  Coordinator(const Opts& o, milliseconds duration, milliseconds ttl)
      : o_(o), duration_(duration), ttl_(ttl), names_(random_run_id()), rng_(o.seed) {}

  int run();

 private:
  // ---- database helpers ----
  Connection& db() { return *conn_; }
  // Runs f on the coordinator's connection, reconnecting (bounded) when the
  // session was killed or the server restarted.
  template <typename F>
  std::invoke_result_t<F&, Connection&> with_db(F&& f, milliseconds bound = milliseconds(30000)) {
    auto until = steady_clock::now() + bound;
    for (;;) {
      try {
        return f(*conn_);
      } catch (const Error& e) {
        bool transient = e.code() == ErrorCode::kConnectionLost || e.code() == ErrorCode::kCommitInDoubt ||
                         e.code() == ErrorCode::kTimeout || e.code() == ErrorCode::kLockBusy ||
                         e.code() == ErrorCode::kConflict;
        if (!transient || steady_clock::now() >= until) throw;
        try {
          if (conn_->in_transaction()) conn_->rollback();
        } catch (const Error&) {
        }
        try {
          conn_->reconnect();
        } catch (const Error&) {
          std::this_thread::sleep_for(milliseconds(200));
        }
      }
    }
  }
  void create_tables();
  void drop_tables();

  // ---- processes ----
  void spawn(int slot);
  void reap();
  int pick_target(std::initializer_list<std::int32_t> phases, bool need_lease, bool for_pause = false);
  void check_killed_lease(KillRecord& k);
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  milliseconds jitter(milliseconds base, double lo, double hi) {
    return milliseconds(static_cast<long long>(base.count() * std::uniform_real_distribution<double>(lo, hi)(rng_)));
  }
  void fault(const std::string& kind, int slot, const std::string& detail);

  // ---- faults ----
  void do_kill(int slot);
  void do_pause(int slot);
  void do_connection_kill();
  void start_restart();
  void join_restart();
  bool run_dbservers(const std::string& action);
  void finish_processes();

  // ---- checks ----
  json check();

  const Opts& o_;
  milliseconds duration_, ttl_;
  Names names_;
  std::mt19937_64 rng_;
  std::unique_ptr<Connection> conn_;
  DialectKind kind_ = DialectKind::kSqlite;
  std::string exe_;
  std::string state_path_;
  Slot* slots_ = nullptr;
  std::size_t state_size_ = 0;
  std::vector<Child> kids_;
  steady_clock::time_point t0_, deadline_;
  int resources_ = 1, items_ = 2, messages_ = 100;
  std::int64_t initial_qty_ = 0;
  std::int64_t clock_offset_ms_ = 0;  // db clock - wall clock, measured at start
  json faults_ = json::array();
  std::vector<std::string> notes_;
  std::vector<KillRecord> kill_records_;
  int kills_ = 0, pauses_ = 0, connection_kills_ = 0, sessions_terminated_ = 0, server_restarts_ = 0,
      restart_failures_ = 0, unexpected_exits_ = 0, stragglers_ = 0;
  std::string dbservers_, server_target_;
  std::thread restart_thread_;
  std::atomic<bool> restarting_{false};
  std::atomic<int> restart_result_{-1};  // -1 none, 0 ok, 1 failed
  std::int64_t last_exit_db_ms_ = 0;
};

void Coordinator::fault(const std::string& kind, int slot, const std::string& detail) {
  auto t = std::chrono::duration_cast<milliseconds>(steady_clock::now() - t0_).count();
  json f = {{"t_ms", t}, {"kind", kind}, {"detail", detail}};
  if (slot >= 0) {
    f["worker"] = slot;
    f["pid"] = kids_[slot].pid;
  }
  faults_.push_back(f);
  std::cerr << "chaos: +" << t << "ms " << kind;
  if (slot >= 0) std::cerr << " worker " << slot << " (pid " << kids_[slot].pid << ")";
  std::cerr << ": " << detail << std::endl;
}

void Coordinator::create_tables() {
  const auto& n = names_;
  db().execute_script("CREATE TABLE " + n.res +
                      " (id INTEGER NOT NULL PRIMARY KEY, version BIGINT NOT NULL, last_fence BIGINT NOT NULL, "
                      "last_worker INTEGER NOT NULL)");
  db().execute_script("CREATE TABLE " + n.audit +
                      " (resource INTEGER NOT NULL, seq BIGINT NOT NULL, fence BIGINT NOT NULL, worker INTEGER NOT "
                      "NULL, pid BIGINT NOT NULL, start_ms BIGINT NOT NULL, end_ms BIGINT NOT NULL, paused INTEGER "
                      "NOT NULL, PRIMARY KEY (resource, seq))");
  // Deliberately no CHECK (qty >= 0) and no UNIQUE on effect.message: the
  // checker, not the schema, must catch a broken strategy.
  db().execute_script("CREATE TABLE " + n.stock +
                      " (id INTEGER NOT NULL PRIMARY KEY, qty BIGINT NOT NULL, version BIGINT NOT NULL, initial_qty "
                      "BIGINT NOT NULL)");
  db().execute_script("CREATE TABLE " + n.sale +
                      " (item INTEGER NOT NULL, worker INTEGER NOT NULL, method VARCHAR(16) NOT NULL)");
  db().execute_script("CREATE TABLE " + n.effect + " (message BIGINT NOT NULL, worker INTEGER NOT NULL)");
  for (int r = 0; r < resources_; ++r)
    db().execute("INSERT INTO " + n.res + " (id, version, last_fence, last_worker) VALUES (?, 0, 0, -1)", {r});
  for (int i = 0; i < items_; ++i)
    db().execute("INSERT INTO " + n.stock + " (id, qty, version, initial_qty) VALUES (?, ?, 0, ?)",
                 {i, initial_qty_, initial_qty_});
}

void Coordinator::drop_tables() {
  for (const auto* t : {&names_.res, &names_.audit, &names_.stock, &names_.sale, &names_.effect}) {
    try {
      with_db([&](Connection& c) { c.execute_script("DROP TABLE IF EXISTS " + *t); return 0; });
    } catch (const Error& e) {
      notes_.push_back("could not drop " + *t + ": " + e.message());
    }
  }
  try {
    with_db([&](Connection& c) {
      for (int r = 0; r < resources_; ++r) {
        admin::delete_lease(c, names_.lock(r));
        admin::delete_fenced_resource(c, names_.lock(r));
      }
      admin::delete_inbox_consumer(c, names_.consumer);
      return 0;
    });
  } catch (const Error& e) {
    notes_.push_back(std::string("could not delete the run's lock/inbox rows: ") + e.message());
  }
}

void Coordinator::spawn(int slot) {
  // Everything the child needs is built before fork(): between fork and exec
  // only async-signal-safe calls (the coordinator has a restart thread).
  std::vector<std::string> args = {exe_,
                                   "--connect-timeout",
                                   "2s",
                                   "chaos-worker",
                                   "--run",
                                   names_.run,
                                   "--state",
                                   state_path_,
                                   "--slot",
                                   std::to_string(slot),
                                   "--deadline-ns",
                                   std::to_string(deadline_.time_since_epoch().count()),
                                   "--ttl-ms",
                                   std::to_string(ttl_.count()),
                                   "--resources",
                                   std::to_string(resources_),
                                   "--items",
                                   std::to_string(items_),
                                   "--messages",
                                   std::to_string(messages_),
                                   "--seed",
                                   std::to_string(o_.seed + 1000003ULL * slot + pick(0, 1 << 20))};
  if (o_.no_fencing) args.push_back("--no-fencing");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The URI travels in the environment (SQLGUARD_DB), not on the command
  // line where `ps` would show its password.
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "SQLGUARD_DB=", 12) != 0) env.emplace_back(*e);
  env.push_back("SQLGUARD_DB=" + global().db);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t parent = getpid();
  int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  slots_[slot].phase = kIdle;
  slots_[slot].resource = -1;
  slots_[slot].pid = 0;
  pid_t pid = fork();
  if (pid < 0) {
    if (devnull >= 0) ::close(devnull);
    throw Error(ErrorCode::kInternal, std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(0);
    setpgid(0, 0);  // a terminal's Ctrl-C reaches only the coordinator, which winds the run down
    if (devnull >= 0) dup2(devnull, STDOUT_FILENO);  // stdout is the coordinator's JSON
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(exe_.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  if (devnull >= 0) ::close(devnull);
  auto& k = kids_[slot];
  k = Child{};
  k.pid = pid;
  k.alive = true;
}

void Coordinator::reap() {
  for (std::size_t i = 0; i < kids_.size(); ++i) {
    auto& k = kids_[i];
    if (!k.alive) continue;
    int status = 0;
    pid_t r = waitpid(k.pid, &status, WNOHANG);
    if (r != k.pid) continue;
    k.alive = false;
    k.paused = false;
    last_exit_db_ms_ = wall_ms() + clock_offset_ms_;
    bool before_deadline = steady_clock::now() < deadline_ - milliseconds(300);
    if (k.killed_by_us) {
      if (before_deadline) {
        k.respawn_pending = true;
        k.respawn_at = steady_clock::now() + milliseconds(pick(50, 250));
      }
      continue;
    }
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      ++unexpected_exits_;
      std::string how = WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                          : "signal " + std::to_string(WTERMSIG(status));
      fault("worker-died", static_cast<int>(i), "unexpected " + how + (before_deadline ? "; respawning" : ""));
      if (before_deadline) {
        k.respawn_pending = true;
        k.respawn_at = steady_clock::now() + milliseconds(200);
      }
    }
  }
}

// A live, running (not paused) worker in one of `phases`, or -1.
int Coordinator::pick_target(std::initializer_list<std::int32_t> phases, bool need_lease, bool for_pause) {
  std::vector<int> c;
  auto now = steady_clock::now();
  for (std::size_t i = 0; i < kids_.size(); ++i) {
    const auto& k = kids_[i];
    if (!k.alive || k.paused || slots_[i].pid.load() != k.pid) continue;
    if (for_pause ? slots_[i].fence.load() == k.last_paused_fence : now < k.no_kill_until) continue;
    auto ph = slots_[i].phase.load();
    if (std::find(phases.begin(), phases.end(), ph) == phases.end()) continue;
    if (need_lease && slots_[i].resource.load() < 0) continue;
    c.push_back(static_cast<int>(i));
  }
  if (c.empty()) return -1;
  return c[pick(0, static_cast<int>(c.size()) - 1)];
}

void Coordinator::do_kill(int slot) {
  auto& s = slots_[slot];
  auto phase = s.phase.load();
  int res = s.resource.load();
  std::int64_t fence = s.fence.load();
  ::kill(kids_[slot].pid, SIGKILL);
  kids_[slot].killed_by_us = true;
  ++kills_;
  std::int64_t at = wall_ms() + clock_offset_ms_;
  if (res >= 0 && (phase == kHolding || phase == kWriting))
    kill_records_.push_back({slot, res, fence, at, steady_clock::now() + milliseconds(200)});
  std::string detail = std::string("kill -9 while ") + phase_name(phase);
  if (res >= 0) detail += " (lease " + names_.lock(res) + ", fence " + std::to_string(fence) + ")";
  fault("kill", slot, detail);
}

// Reads the victim's lease once its last renewal can no longer be in
// flight. Its expiry is final then: only the dead watchdog could extend it.
void Coordinator::check_killed_lease(KillRecord& k) {
  try {
    auto info = lease_info(*conn_, names_.lock(k.resource));
    k.checked = true;
    if (!info || info->fence != k.fence)
      k.taken_over = true;  // someone holds a newer lease: the victim's had expired
    else
      k.expire_at_ms = info->expire_at_ms;
  } catch (const Error&) {
    try {
      conn_->reconnect();
    } catch (const Error&) {
    }
    // checked again at the end
  }
}

void Coordinator::do_pause(int slot) {
  auto& s = slots_[slot];
  milliseconds len = ttl_ * 2 + milliseconds(500);
  ::kill(kids_[slot].pid, SIGSTOP);
  kids_[slot].paused = true;
  kids_[slot].last_paused_fence = s.fence.load();
  kids_[slot].resume_at = steady_clock::now() + len;
  ++pauses_;
  fault("pause", slot,
        "SIGSTOP for " + format_duration(len) + " (ttl " + format_duration(ttl_) + ") while " +
            phase_name(s.phase.load()) + " lease " + names_.lock(std::max(0, s.resource.load())) + " fence " +
            std::to_string(s.fence.load()));
}

void Coordinator::do_connection_kill() {
  // Spare paused workers' main sessions: their late write must reach the
  // database (it is what the fence and the lease re-check have to stop).
  // The ids are integers read from our own shared memory.
  std::vector<std::int64_t> spare;
  for (std::size_t i = 0; i < kids_.size(); ++i) {
    std::int64_t sid = slots_[i].session.load();
    if (kids_[i].alive && kids_[i].paused && sid > 0) spare.push_back(sid);
  }
  int n = 0;
  try {
    n = with_db([&](Connection& c) { return admin::terminate_sessions(c, spare); }, milliseconds(3000));
  } catch (const Error& e) {
    fault("connection-kill", -1, std::string("failed: ") + e.message());
    return;
  }
  ++connection_kills_;
  sessions_terminated_ += n;
  fault("connection-kill", -1, "terminated " + std::to_string(n) + " worker sessions");
}

bool Coordinator::run_dbservers(const std::string& action) {
  std::string bash = "/bin/bash";
  std::vector<std::string> args = {bash, dbservers_, action, server_target_};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    dup2(STDERR_FILENO, STDOUT_FILENO);  // keep our stdout (JSON) clean
    execv(bash.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

void Coordinator::start_restart() {
  restarting_ = true;
  restart_result_ = -1;
  fault("server-restart", -1, "$SQLGUARD_DBSERVERS restart " + server_target_);
  restart_thread_ = std::thread([this] {
    bool ok = run_dbservers("restart");
    restart_result_ = ok ? 0 : 1;
    restarting_ = false;
  });
}

void Coordinator::finish_processes() {
  // Wake every paused worker first: a SIGSTOPped child never outlives us.
  for (std::size_t i = 0; i < kids_.size(); ++i)
    if (kids_[i].alive && kids_[i].paused) {
      ::kill(kids_[i].pid, SIGCONT);
      kids_[i].paused = false;
      fault("resume", static_cast<int>(i), "SIGCONT at the end of the run");
    }
  auto grace = deadline_ + std::max(ttl_ * 3, milliseconds(5000)) + milliseconds(10000);
  for (;;) {
    reap();
    bool any = std::any_of(kids_.begin(), kids_.end(), [](const Child& k) { return k.alive; });
    if (!any) break;
    if (steady_clock::now() >= grace) {
      for (std::size_t i = 0; i < kids_.size(); ++i)
        if (kids_[i].alive) {
          ++stragglers_;
          fault("straggler", static_cast<int>(i), "still running after the grace period; SIGKILL");
          ::kill(kids_[i].pid, SIGCONT);
          ::kill(kids_[i].pid, SIGKILL);
          kids_[i].killed_by_us = true;
        }
      for (auto& k : kids_)
        if (k.alive) {
          waitpid(k.pid, nullptr, 0);
          k.alive = false;
        }
      last_exit_db_ms_ = wall_ms() + clock_offset_ms_;
      break;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  if (restart_thread_.joinable()) join_restart();
}

void Coordinator::join_restart() {
  restart_thread_.join();
  if (restart_result_ == 0) {
    ++server_restarts_;
    fault("server-restart", -1, "server back");
  } else {
    ++restart_failures_;
    fault("server-restart", -1, "restart script failed");
  }
}

int Coordinator::run() {
  conn_ = open_db();
  kind_ = conn_->kind();
  migrate(*conn_);  // the lock, fence and inbox tables; idempotent
  // Scale: one protected resource per 4 workers (contention is the point),
  // stock and messages sized so that a run sells out and redelivers a lot.
  resources_ = std::max(1, o_.workers / 4);
  items_ = 2;
  auto secs = std::max<long long>(1, duration_.count() / 1000);
  initial_qty_ = std::max<long long>(20, 3LL * o_.workers * secs);  // sells out in most runs
  messages_ = static_cast<int>(std::min<long long>(20000, std::max<long long>(50, 8LL * o_.workers * secs)));
  create_tables();
  clock_offset_ms_ = conn_->db_now_ms() - wall_ms();

  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0) throw Error(ErrorCode::kInternal, "cannot resolve /proc/self/exe");
  exe_.assign(exe, static_cast<std::size_t>(len));

  char tmpl[] = "/tmp/sqlguard-chaos-XXXXXX";
  int fd = mkostemp(tmpl, O_CLOEXEC);
  if (fd < 0) throw Error(ErrorCode::kInternal, "cannot create the chaos state file in /tmp");
  state_path_ = tmpl;
  state_size_ = sizeof(Slot) * static_cast<std::size_t>(o_.workers);
  if (ftruncate(fd, static_cast<off_t>(state_size_)) != 0) {
    ::close(fd);
    throw Error(ErrorCode::kInternal, "cannot size the chaos state file");
  }
  void* mem = mmap(nullptr, state_size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (mem == MAP_FAILED) throw Error(ErrorCode::kInternal, "mmap of the chaos state file failed");
  slots_ = static_cast<Slot*>(mem);
  for (int i = 0; i < o_.workers; ++i) new (&slots_[i]) Slot();

  // Server faults.
  bool server = kind_ != DialectKind::kSqlite;
  if (!server) {
    notes_.push_back("sqlite: connection kills and server restarts do not apply (no server, no sessions); kill -9 "
                     "and SIGSTOP faults do");
  } else {
    server_target_ = kind_ == DialectKind::kPostgres ? "pg" : "mariadb";
    const char* env = std::getenv("SQLGUARD_DBSERVERS");
    if (o_.no_restarts)
      notes_.push_back("server restarts disabled by --no-server-restarts");
    else if (!env || !*env)
      notes_.push_back("server restarts skipped: SQLGUARD_DBSERVERS (path of tools/dbservers.sh) is not set");
    else
      dbservers_ = env;
  }

  struct sigaction sa {}, old_int{}, old_term{};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);

  t0_ = steady_clock::now();
  deadline_ = t0_ + duration_;
  kids_.resize(o_.workers);
  json result;
  try {
    for (int i = 0; i < o_.workers; ++i) spawn(i);
    fault("start", -1,
          std::to_string(o_.workers) + " workers, ttl " + format_duration(ttl_) + ", run " + names_.run +
              (o_.no_fencing ? ", FENCING DISABLED (negative control)" : ""));

    const milliseconds pause_len = ttl_ * 2 + milliseconds(500);
    const milliseconds kill_every = std::max(ttl_, milliseconds(800));
    const milliseconds conn_kill_every = std::max(ttl_, milliseconds(1000)) * 3 / 2;
    auto next_pause = t0_ + std::max(milliseconds(300), duration_ / 10);
    auto next_kill = t0_ + jitter(kill_every, 0.5, 1.0);
    auto next_conn_kill = t0_ + jitter(conn_kill_every, 0.5, 1.0);
    auto next_restart = t0_ + duration_ * 45 / 100;
    bool restarts_on = !dbservers_.empty() && duration_ >= milliseconds(3000);
    if (!dbservers_.empty() && !restarts_on) notes_.push_back("server restarts need --duration of at least 3s");
    int max_paused = std::max(1, o_.workers / 2);
    bool pause_fits = true;

    while (!g_stop) {
      auto now = steady_clock::now();
      if (now >= deadline_) break;
      reap();
      for (std::size_t i = 0; i < kids_.size(); ++i) {
        auto& k = kids_[i];
        if (k.alive && k.paused && now >= k.resume_at) {
          ::kill(k.pid, SIGCONT);
          k.paused = false;
          k.no_kill_until = now + milliseconds(500);
          fault("resume", static_cast<int>(i), "SIGCONT");
        }
        if (!k.alive && k.respawn_pending && now >= k.respawn_at) {
          spawn(static_cast<int>(i));
          fault("respawn", static_cast<int>(i), "replacement worker started");
        }
      }
      int paused_now = static_cast<int>(std::count_if(kids_.begin(), kids_.end(), [](const Child& k) { return k.paused; }));
      // Pauses past the ttl: only while a pause still ends before the
      // deadline, so the late write happens inside the run.
      pause_fits = now + pause_len + milliseconds(300) <= deadline_;
      if (pause_fits && now >= next_pause && paused_now < max_paused) {
        int t = pick_target({kHolding}, true, /*for_pause=*/true);
        if (t >= 0) {
          do_pause(t);
          next_pause = now + jitter(pause_len, 0.6, 1.2);
        }
        // else: nobody holds a lease this instant; try again next tick
      }
      if (now >= next_kill) {
        // Prefer a worker holding a lease or inside a transaction; fall back
        // to anyone after a while.
        int t = pick_target({kHolding, kWriting, kInventoryTx, kInboxTx}, false);
        if (t < 0 && now >= next_kill + milliseconds(300)) t = pick_target({kIdle, kAcquiring}, false);
        if (t >= 0) {
          do_kill(t);
          next_kill = now + jitter(kill_every, 0.5, 1.5);
        }
      }
      for (auto& k : kill_records_)
        if (!k.checked && now >= k.check_at && !restarting_) check_killed_lease(k);
      if (server && now >= next_conn_kill && !restarting_) {
        do_connection_kill();
        next_conn_kill = now + jitter(conn_kill_every, 0.7, 1.3);
      }
      if (restarts_on && now >= next_restart && !restarting_ && !restart_thread_.joinable() &&
          now + milliseconds(1500) < deadline_) {
        start_restart();
        next_restart = now + std::max(milliseconds(20000), duration_ / 3);
      }
      if (restart_thread_.joinable() && !restarting_) join_restart();
      std::this_thread::sleep_for(milliseconds(5));
    }
    if (g_stop) notes_.push_back("interrupted by a signal before --duration ended");
    finish_processes();
  } catch (...) {
    // Never leave stopped or running children behind.
    for (auto& k : kids_)
      if (k.alive) {
        ::kill(k.pid, SIGCONT);
        ::kill(k.pid, SIGKILL);
        waitpid(k.pid, nullptr, 0);
        k.alive = false;
      }
    if (restart_thread_.joinable()) restart_thread_.join();
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    munmap(slots_, state_size_);
    unlink(state_path_.c_str());
    throw;
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (restart_failures_ > 0) {
    // Do not leave the server down: try a plain start once.
    notes_.push_back("the restart script failed; ran `$SQLGUARD_DBSERVERS start " + server_target_ + "`");
    run_dbservers("start");
  }

  try {
    result = check();
  } catch (...) {
    munmap(slots_, state_size_);
    unlink(state_path_.c_str());
    throw;
  }
  munmap(slots_, state_size_);
  unlink(state_path_.c_str());
  if (!o_.keep) drop_tables();
  return result["violations"].get<int>() > 0 ? kExitInvariant : kExitOk;
}

json Coordinator::check() {
  json inv = {{"fence_order", 0}, {"overlap", 0}, {"stock", 0}, {"inbox_effects", 0}, {"stale_lock", 0}};
  json examples = json::array();
  auto example = [&](const std::string& s) {
    if (examples.size() < 10) examples.push_back(s);
  };

  // Finish the inbox: deliver every message once more (the broker's final
  // redelivery), so "exactly one effect" is checked for EVERY message.
  std::int64_t drained = 0;
  with_db([&](Connection& c) {
    Inbox inbox(c);
    for (int m = 1; m <= messages_; ++m) {
      auto r = inbox.process(names_.consumer, "m" + std::to_string(m), [&](Transaction& tx) {
        tx.execute("INSERT INTO " + names_.effect + " (message, worker) VALUES (?, -1)", {m});
      });
      if (r.outcome == InboxOutcome::kProcessed) ++drained;
    }
    return 0;
  });

  // 1+2. Fenced writes: per resource in commit order (seq), tokens strictly
  // increase and critical sections [start_ms, end_ms] do not overlap.
  auto audit = with_db([&](Connection& c) {
    return c.execute("SELECT resource, seq, fence, worker, start_ms, end_ms, paused FROM " + names_.audit +
                     " ORDER BY resource, seq");
  });
  std::int64_t accepted = static_cast<std::int64_t>(audit.rows.size()), paused_accepted = 0;
  for (std::size_t i = 0; i < audit.rows.size(); ++i) {
    const auto& row = audit.rows[i];
    if (row[6].as_int() != 0) ++paused_accepted;
    if (i == 0 || audit.rows[i - 1][0].as_int() != row[0].as_int()) continue;
    const auto& prev = audit.rows[i - 1];
    if (row[2].as_int() <= prev[2].as_int()) {
      inv["fence_order"] = inv["fence_order"].get<int>() + 1;
      example("fence_order: resource " + row[0].as_string() + " seq " + row[1].as_string() + " fence " +
              row[2].as_string() + " (worker " + row[3].as_string() + (row[6].as_int() ? ", after a pause" : "") +
              ") committed after fence " + prev[2].as_string());
    }
    if (row[4].as_int() < prev[5].as_int()) {
      inv["overlap"] = inv["overlap"].get<int>() + 1;
      example("overlap: resource " + row[0].as_string() + " fence " + row[2].as_string() + " started at " +
              row[4].as_string() + " before fence " + prev[2].as_string() + " ended at " + prev[5].as_string() +
              " (" + std::to_string(prev[5].as_int() - row[4].as_int()) + " ms)");
    }
  }

  // 3. Stock: never below zero, sold + left == initial.
  std::int64_t sold_total = 0, left_total = 0, initial_total = 0;
  auto stock = with_db([&](Connection& c) {
    return c.execute("SELECT s.id, s.qty, s.initial_qty, (SELECT COUNT(*) FROM " + names_.sale +
                     " x WHERE x.item = s.id) FROM " + names_.stock + " s ORDER BY s.id");
  });
  for (const auto& row : stock.rows) {
    std::int64_t qty = row[1].as_int(), initial = row[2].as_int(), sold = row[3].as_int();
    sold_total += sold;
    left_total += qty;
    initial_total += initial;
    if (qty < 0 || sold + qty != initial) {
      inv["stock"] = inv["stock"].get<int>() + 1;
      example("stock: item " + row[0].as_string() + " qty " + std::to_string(qty) + ", sold " + std::to_string(sold) +
              ", initial " + std::to_string(initial));
    }
  }

  // 4. Inbox: every message has exactly one effect.
  auto effects = with_db([&](Connection& c) {
    return c.execute("SELECT message, COUNT(*) FROM " + names_.effect + " GROUP BY message");
  });
  std::map<std::int64_t, std::int64_t> per_msg;
  std::int64_t effect_rows = 0;
  for (const auto& row : effects.rows) {
    per_msg[row[0].as_int()] = row[1].as_int();
    effect_rows += row[1].as_int();
  }
  for (int m = 1; m <= messages_; ++m) {
    auto it = per_msg.find(m);
    std::int64_t n = it == per_msg.end() ? 0 : it->second;
    if (n != 1) {
      inv["inbox_effects"] = inv["inbox_effects"].get<int>() + 1;
      example("inbox: message m" + std::to_string(m) + " has " + std::to_string(n) + " effects");
    }
  }

  // 5. Stale locks: a lease whose holder was killed must expire within the
  // ttl of the kill (the watchdog died with it: nothing may extend it). If
  // the row now carries another fence, it was taken over, i.e. it expired.
  const std::int64_t slack = 250;  // kill timestamp estimate + a renewal already in flight
  int verified_in_row = 0, verified_by_takeover = 0;
  std::int64_t max_orphan_ms = 0;
  for (auto& k : kill_records_) {
    if (!k.checked) {
      auto info = with_db([&](Connection& c) { return lease_info(c, names_.lock(k.resource)); });
      k.checked = true;
      k.taken_over = !info || info->fence != k.fence;
      if (!k.taken_over) k.expire_at_ms = info->expire_at_ms;
    }
    if (k.taken_over) {
      ++verified_by_takeover;
      continue;
    }
    ++verified_in_row;
    std::int64_t orphan = k.expire_at_ms - k.kill_db_ms;
    max_orphan_ms = std::max(max_orphan_ms, orphan);
    if (orphan > ttl_.count() + slack) {
      inv["stale_lock"] = inv["stale_lock"].get<int>() + 1;
      example("stale_lock: " + names_.lock(k.resource) + " fence " + std::to_string(k.fence) + " held " +
              std::to_string(orphan) + " ms after its holder was killed (ttl " + std::to_string(ttl_.count()) + ")");
    }
  }
  // And nobody is alive now: no lease of the run may outlast the last exit by more than the ttl.
  auto leases = with_db([&](Connection& c) { return list_leases(c, true); });
  for (const auto& l : leases) {
    if (l.name.rfind(names_.prefix, 0) != 0) continue;
    if (l.expire_at_ms > last_exit_db_ms_ + ttl_.count() + slack) {
      inv["stale_lock"] = inv["stale_lock"].get<int>() + 1;
      example("stale_lock: " + l.name + " fence " + std::to_string(l.fence) + " expires " +
              std::to_string(l.expire_at_ms - last_exit_db_ms_) + " ms after the last worker exited");
    }
  }

  int violations = 0;
  for (auto& [k, v] : inv.items()) violations += v.get<int>();

  // Counters the workers kept in shared memory.
  std::int64_t acquisitions = 0, by_lease = 0, by_fence = 0, late = 0, late_rejected = 0, slow = 0, sales_g = 0,
               sales_c = 0, cas_conf = 0, deliveries = 0, processed = 0, dups = 0, errors = 0, reconnects = 0,
               losses = 0;
  for (int i = 0; i < o_.workers; ++i) {
    auto& s = slots_[i];
    acquisitions += s.acquisitions;
    by_lease += s.rejected_by_lease;
    by_fence += s.rejected_by_fence;
    late += s.late_attempts;
    late_rejected += s.late_rejected;
    slow += s.slow_holds;
    sales_g += s.sales_guarded;
    sales_c += s.sales_cas;
    cas_conf += s.cas_conflicts;
    deliveries += s.deliveries;
    processed += s.inbox_processed;
    dups += s.inbox_duplicates;
    errors += s.errors;
    reconnects += s.reconnects;
    losses += s.lease_losses;
  }
  double secs = std::chrono::duration_cast<milliseconds>(duration_).count() / 1000.0;
  json j = {
      {"dialect", std::string(to_string(kind_))},
      {"run_id", names_.run},
      {"duration_s", secs},
      {"workers", o_.workers},
      {"seed", o_.seed},
      {"ttl_ms", ttl_.count()},
      {"fencing", !o_.no_fencing},
      {"acquisitions", acquisitions},
      {"fenced_writes_accepted", accepted},
      {"stale_writes_rejected", by_lease + by_fence},
      {"stale_rejected_by_lease_check", by_lease},
      {"stale_rejected_by_fence", by_fence},
      {"late_writes_after_pause", late},
      {"late_writes_rejected", late_rejected},
      {"late_writes_accepted", paused_accepted},
      {"slow_holds_past_ttl", slow},
      {"lease_losses", losses},
      {"kills", kills_},
      {"pauses", pauses_},
      {"connection_kills", connection_kills_},
      {"sessions_terminated", sessions_terminated_},
      {"server_restarts", server_restarts_},
      {"server_restart_failures", restart_failures_},
      {"unexpected_worker_exits", unexpected_exits_},
      {"stragglers_killed", stragglers_},
      {"worker_errors", errors},
      {"reconnects", reconnects},
      {"stock", {{"items", items_}, {"initial", initial_total}, {"sold", sold_total}, {"left", left_total},
                 {"sold_guarded", sales_g}, {"sold_cas", sales_c}, {"cas_conflicts", cas_conf}}},
      {"inbox", {{"messages", messages_}, {"deliveries", deliveries}, {"processed", processed},
                 {"duplicates", dups}, {"drained_at_end", drained}, {"effect_rows", effect_rows}}},
      {"stale_lock_checks", {{"killed_holders", kill_records_.size()}, {"still_in_row", verified_in_row},
                             {"taken_over", verified_by_takeover}, {"max_orphan_ms", max_orphan_ms}}},
      {"violations", violations},
      {"invariants", inv},
      {"violation_examples", examples},
      {"notes", notes_},
      {"faults", faults_},
  };
  if (global().json) {
    print_json(j);
  } else {
    auto& out = std::cout;
    out << "sqlguard chaos: " << j["dialect"].get<std::string>() << ", " << secs << " s, " << o_.workers
        << " workers, ttl " << format_duration(ttl_) << ", seed " << o_.seed
        << (o_.no_fencing ? ", FENCING DISABLED (negative control)" : "") << "\n";
    out << "  faults:     " << kills_ << " kill -9, " << pauses_ << " pauses past ttl, " << connection_kills_
        << " connection kills (" << sessions_terminated_ << " sessions), " << server_restarts_ << " server restarts\n";
    out << "  leases:     " << acquisitions << " acquisitions, " << accepted << " fenced writes accepted, "
        << (by_lease + by_fence) << " stale writes rejected (" << by_lease << " by the lease re-check, " << by_fence
        << " by the fence); late writes after a pause: " << late << " (" << late_rejected << " rejected)\n";
    out << "  stock:      initial " << initial_total << ", sold " << sold_total << ", left " << left_total << "\n";
    out << "  inbox:      " << messages_ << " messages, " << deliveries << " deliveries, " << dups
        << " duplicates skipped, " << effect_rows << " effects\n";
    out << "  invariants: ";
    bool first = true;
    for (auto& [k, v] : inv.items()) {
      out << (first ? "" : ", ") << k << "=" << v.get<int>();
      first = false;
    }
    out << "\n";
    for (const auto& e : examples) out << "    " << e.get<std::string>() << "\n";
    for (const auto& n : notes_) out << "  note: " << n << "\n";
    out << (violations == 0 ? "OK: no invariant violated\n"
                            : "VIOLATED: " + std::to_string(violations) + " invariant violations\n");
  }
  return j;
}

}  // namespace

void add_chaos(CLI::App& app) {
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "chaos", "Fault injection (kill -9, pauses past the ttl, killed sessions, server restarts) with an invariant "
               "checker; exits 4 when an invariant is violated");
  cmd->fallthrough();  // --db / --json may also follow the subcommand name
  cmd->add_option("--duration", o->duration, "How long to inject faults (workers stop at the same time)")
      ->capture_default_str();
  cmd->add_option("--workers", o->workers, "Worker processes (1..64)")->capture_default_str();
  auto* seed = cmd->add_option("--seed", o->seed, "Seed of the fault schedule (default: random, printed)");
  cmd->add_option("--ttl", o->ttl, "Lease ttl of the workers (100ms..60s); pauses last 2*ttl+500ms")
      ->capture_default_str();
  cmd->add_flag("--no-fencing", o->no_fencing,
                "Negative control: write without re-checking the lease or the fencing token (must report violations)");
  cmd->add_flag("--no-server-restarts", o->no_restarts, "Do not restart the database server");
  cmd->add_flag("--keep-tables", o->keep, "Keep the run's chaos_<run>_* tables for inspection");
  cmd->callback([o, seed] {
    auto duration = flag_duration("--duration", o->duration, milliseconds(1), std::chrono::hours(24));
    auto ttl = flag_duration("--ttl", o->ttl, milliseconds(100), milliseconds(60000));
    if (o->workers < 1 || o->workers > 64)
      throw CLI::ValidationError("--workers", "is " + std::to_string(o->workers) + "; it must be between 1 and 64");
    if (seed->count() == 0) o->seed = std::random_device{}() & 0xFFFFFFFFu;
    Coordinator c(*o, duration, ttl);
    exit_code() = c.run();
  });
  chaos::add_chaos_worker(app);
}

}  // namespace sqlguard::cli
