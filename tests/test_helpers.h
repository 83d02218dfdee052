// Small Catch2 helpers shared by the test files.
#pragma once

#include <catch2/catch.hpp>

#include <functional>
#include <string>

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

}  // namespace sgtest
