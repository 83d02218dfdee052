// Small Catch2 helpers shared by the test files.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <thread>

#include "sqlguard/errors.h"

namespace sgtest {

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
