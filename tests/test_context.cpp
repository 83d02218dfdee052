#include "test_context.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace sgtest {

std::string worker_path() { return SQLGUARD_TEST_WORKER; }
std::string cli_path() {
  const char* other = std::getenv("SQLGUARD_TEST_CLI");
  return other && *other ? other : SQLGUARD_CLI;
}

namespace detail {
Context g_ctx;
std::vector<std::string>* g_fresh_dbs = nullptr;
std::string with_database(const std::string& uri, const std::string& db);
}  // namespace detail

const Context& ctx() { return detail::g_ctx; }

std::unique_ptr<sqlguard::Connection> Context::connect(const sqlguard::ConnectOptions& o) const {
  return sqlguard::make_connection(uri, o);
}

std::string Context::unique(std::string_view base) const {
  static std::atomic<int> counter{0};
  return std::string(base) + "_" + run_id + "_" + std::to_string(++counter);
}

std::string Context::fresh_database() const {
  std::string db = unique("sgfresh");
  if (is_sqlite()) {
    std::string path = uri.substr(name.size() + std::strlen("://"));
    auto slash = path.rfind('/');
    std::string file = path.substr(0, slash + 1) + db + ".db";
    return name + "://" + file;
  }
  auto admin = sqlguard::make_connection(base_uri);
  admin->execute_script("CREATE DATABASE " + db);
  if (detail::g_fresh_dbs) detail::g_fresh_dbs->push_back(db);
  return detail::with_database(base_uri, db);
}

static void write_all_env(const std::vector<std::string>& extra_env) {
  for (const auto& kv : extra_env) {
    auto eq = kv.find('=');
    setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
  }
}

int spawn(const std::vector<std::string>& argv, const std::string& out_file) {
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    if (!out_file.empty()) {
      int fd = open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        close(fd);
      }
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

int wait_pid(int pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

static std::string read_file(const std::string& path) {
  std::string out;
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  fclose(f);
  return out;
}

static std::string temp_out() {
  static std::atomic<int> n{0};
  return "/tmp/sgtest-out-" + std::to_string(getpid()) + "-" + std::to_string(++n);
}

int run_process(const std::vector<std::string>& argv, std::string* out, const std::vector<std::string>& extra_env) {
  std::string file = out ? temp_out() : std::string();
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    write_all_env(extra_env);
    if (!file.empty()) {
      int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        close(fd);
      }
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int rc = wait_pid(pid);
  if (out) {
    *out = read_file(file);
    unlink(file.c_str());
  }
  return rc;
}

std::vector<int> run_parallel(const std::vector<std::vector<std::string>>& argvs, std::vector<std::string>* outs) {
  std::vector<int> pids;
  std::vector<std::string> files;
  for (const auto& a : argvs) {
    files.push_back(outs ? temp_out() : std::string());
    pids.push_back(spawn(a, files.back()));
  }
  std::vector<int> rcs;
  if (outs) outs->clear();
  for (std::size_t i = 0; i < pids.size(); ++i) {
    rcs.push_back(wait_pid(pids[i]));
    if (outs) {
      outs->push_back(read_file(files[i]));
      unlink(files[i].c_str());
    }
  }
  return rcs;
}

// Shared by the tests; a server restart (restart, chaos and in-doubt
// tests) ends its session, which its next statement reports as
// ConnectionLost: a cheap check here spends that report, so the caller's
// statement reconnects.
sqlguard::Connection& probe() {
  static std::unique_ptr<sqlguard::Connection> c = ctx().connect();
  try {
    c->execute("SELECT 1");
  } catch (const sqlguard::Error& e) {
    if (e.code() != sqlguard::ErrorCode::kConnectionLost && e.code() != sqlguard::ErrorCode::kCommitInDoubt) throw;
  }
  return *c;
}

// A server restart (restart/chaos tests) breaks the cached session; the
// first statement after it reports ConnectionLost and the next reconnects.
template <typename F>
static auto on_probe(F&& f) {
  try {
    return f(probe());
  } catch (const sqlguard::Error& e) {
    if (e.code() != sqlguard::ErrorCode::kConnectionLost) throw;
    return f(probe());
  }
}

void exec(const std::string& sql, const sqlguard::Params& params) {
  on_probe([&](sqlguard::Connection& c) { return c.execute(sql, params).affected; });
}

std::int64_t query_int(const std::string& sql, const sqlguard::Params& params) {
  return on_probe([&](sqlguard::Connection& c) { return c.execute(sql, params).rows.at(0)[0].as_int(); });
}

}  // namespace sgtest
