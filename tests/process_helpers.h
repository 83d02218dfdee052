// Helpers for tests that watch real process trees (sqlguard run): is a pid
// alive (zombies are not), the pids a CMD recorded, a bounded wait.
#pragma once

#include <catch2/catch.hpp>

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace sgtest::tree {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Alive = exists and is not a zombie (a zombie passes kill -0).
inline bool alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

inline std::vector<pid_t> read_pids(const std::string& path) {
  std::ifstream in(path);
  std::vector<pid_t> pids;
  long p;
  while (in >> p) pids.push_back(static_cast<pid_t>(p));
  return pids;
}

// Waits until `path` lists `n` pids.
inline std::vector<pid_t> wait_for_pids(const std::string& path, std::size_t n) {
  auto until = Clock::now() + 15s;
  for (;;) {
    auto pids = read_pids(path);
    if (pids.size() >= n || Clock::now() > until) return pids;
    std::this_thread::sleep_for(10ms);
  }
}

// How long until none of `pids` is alive (polled every ms), or `bound` + 1 s.
inline std::chrono::milliseconds time_until_gone(const std::vector<pid_t>& pids, Clock::time_point since,
                                                 std::chrono::milliseconds bound) {
  for (;;) {
    bool any = false;
    for (pid_t p : pids) any = any || alive(p);
    auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since);
    if (!any || took > bound + 1s) return took;
    std::this_thread::sleep_for(1ms);
  }
}

// The raw wait status of `pid`, waiting at most `bound`; -1 on time-out.
inline int wait_raw(pid_t pid, std::chrono::milliseconds bound = 30s) {
  auto until = Clock::now() + bound;
  for (;;) {
    int st = 0;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) return st;
    if (r < 0 && errno != EINTR) return -1;
    if (Clock::now() > until) return -1;
    std::this_thread::sleep_for(1ms);
  }
}

// A temporary directory, removed with everything in it.
struct TempDir {
  std::string path;
  TempDir() {
    char d[] = "/tmp/sgtest-tree-XXXXXX";
    REQUIRE(mkdtemp(d));
    path = d;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return path + "/" + name; }
};

}  // namespace sgtest::tree
