// Small Catch2 helpers shared by the test files.
#pragma once

#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <thread>

#include "sqlguard/errors.h"

namespace sgtest {

// The value of an environment variable a topology's test needs (set by
// tools/test.sh from tools/dbservers.sh env <topology>): a missing server is
// a failure, never a skip.
inline std::string required_env(const char* name) {
  const char* v = std::getenv(name);
  INFO(name << " must be set (tools/dbservers.sh env <topology>, as tools/test.sh does); a missing server is a "
               "failure");
  REQUIRE(v);
  REQUIRE(*v);
  return v;
}

// `uri` with one more query parameter.
inline std::string with_query(const std::string& uri, const std::string& kv) {
  return uri + (uri.find('?') == std::string::npos ? "?" : "&") + kv;
}

// Runs `f`, which must throw sqlguard::Error; returns its code (and what()).
inline sqlguard::ErrorCode code_of(const std::function<void()>& f, std::string* what = nullptr) {
  try {
    f();
  } catch (const sqlguard::Error& e) {
    if (what) *what = e.what();
    return e.code();
  }
  FAIL("expected sqlguard::Error");
  return sqlguard::ErrorCode::kInternal;
}

// For a forked child (no Catch2 assertions there): runs calls that must
// each throw Error(kInvalidArgument); first_answered is the number (from 1,
// in call order) of the first one that did not, 0 while none — the child's
// exit code.
struct MustRefuse {
  int calls = 0;
  int first_answered = 0;
  void operator()(const std::function<void()>& f) {
    ++calls;
    try {
      f();
    } catch (const sqlguard::Error& e) {
      if (e.code() == sqlguard::ErrorCode::kInvalidArgument) return;
    } catch (...) {
    }
    if (!first_answered) first_answered = calls;
  }
};

// What every handle of a lock client offers (lease, semaphore, read-write):
// each call must be refused (in a forked child).
template <class Handle>
void must_refuse_handle_calls(MustRefuse& must, Handle& h) {
  must([&] { (void)h.owns(); });
  must([&] { (void)h.fence(); });
  must([&] { (void)h.owner(); });
  must([&] { (void)h.hold_count(); });
  must([&] { (void)h.remaining(); });
  must([&] { (void)h.last_loss(); });
  must([&] { (void)h.cancel_acquire(); });
  must([&] { (void)h.release(); });
}

// Forks; the child runs `calls` and exits with first_answered; returns that
// exit code (or -1 when the child did not exit normally).
inline int first_answered_in_child(const std::function<void(MustRefuse&)>& calls) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    MustRefuse must;
    calls(must);
    ::_exit(must.first_answered);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Runs `f`, which must throw sqlguard::Error; returns what().
inline std::string message_of(const std::function<void()>& f) {
  std::string what;
  code_of(f, &what);
  return what;
}

// What failure_within() saw: the error and how long the call took.
struct Failure {
  sqlguard::ErrorCode code;
  std::string what;
  std::chrono::steady_clock::duration took;
};

// Runs `f` (which must throw sqlguard::Error) on another thread and waits up
// to `limit` for it: nullopt = still running (a hang; the future's destructor
// then waits for it).
inline std::optional<Failure> failure_within(std::chrono::milliseconds limit, const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  auto fut = std::async(std::launch::async, [&] {
    std::string what;
    auto code = code_of(f, &what);
    return Failure{code, what, std::chrono::steady_clock::now() - t0};
  });
  if (fut.wait_for(limit) != std::future_status::ready) return std::nullopt;
  return fut.get();
}

// Runs `fn` until it is true or `limit` passes (behaviour, not timing: the
// limit is generous); answers its last result.
template <typename F>
bool eventually(F fn, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (fn()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return fn();
}

}  // namespace sgtest
