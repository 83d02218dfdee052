#include "sqlguard/backoff.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>

namespace sqlguard {

std::chrono::milliseconds jittered(std::chrono::milliseconds cap, std::chrono::milliseconds floor) {
  if (cap.count() <= 0) return std::chrono::milliseconds(0);
  auto lo = std::clamp<std::int64_t>(floor.count(), 0, cap.count());
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::chrono::milliseconds(std::uniform_int_distribution<std::int64_t>(lo, cap.count())(rng));
}

std::chrono::milliseconds Backoff::delay(int retry) const {
  // The cap is computed in double so large retry counts saturate instead of
  // overflowing.
  double cap = static_cast<double>(initial.count()) * std::pow(multiplier, static_cast<double>(std::max(0, retry - 1)));
  cap = std::min(cap, static_cast<double>(max.count()));
  return jittered(std::chrono::milliseconds(static_cast<std::int64_t>(cap)), floor);
}

}  // namespace sqlguard
