// sqlguard/backoff.h — the one backoff-with-jitter helper (library and CLI).
//
// "Full jitter" (AWS architecture blog, "Exponential Backoff and Jitter"):
// the n-th delay is uniform in [floor, cap_n] with
// cap_n = min(max, initial * multiplier^(n-1)), which spreads contenders
// that failed together. Thread-safe: one generator per thread, seeded
// independently so processes started together draw different delays.
#pragma once

#include <chrono>

namespace sqlguard {

// Uniform in [floor, cap] (floor is clamped to cap; cap <= 0 gives 0).
std::chrono::milliseconds jittered(std::chrono::milliseconds cap,
                                   std::chrono::milliseconds floor = std::chrono::milliseconds(0));

struct Backoff {
  std::chrono::milliseconds initial{5};    // cap of the first delay. Default: 5 ms.
  std::chrono::milliseconds max{1000};     // cap of every delay. Default: 1 s.
  double multiplier = 2.0;                 // growth of the cap per retry. Default: 2.
  std::chrono::milliseconds floor{0};      // least delay (0 = full jitter). Default: 0.

  // Delay before retry number `retry` (1-based); large counts saturate at max.
  std::chrono::milliseconds delay(int retry) const;
};

}  // namespace sqlguard
