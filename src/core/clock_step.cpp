#include "core/clock_step.h"

#include <cstdlib>

namespace sqlguard::detail {

std::int64_t clock_step_ms(const ClockSample& a, const ClockSample& b) {
  using std::chrono::duration_cast;
  using std::chrono::microseconds;
  // Each reading was taken somewhere between its send and its answer: its
  // midpoint, give or take half the round trip.
  const auto mid_a = a.sent + (a.back - a.sent) / 2;
  const auto mid_b = b.sent + (b.back - b.sent) / 2;
  const std::int64_t mono_us = duration_cast<microseconds>(mid_b - mid_a).count();
  const std::int64_t db_us = (b.db_ms - a.db_ms) * 1000;
  const std::int64_t diff_us = db_us - mono_us;
  const std::int64_t slack_us = duration_cast<microseconds>(a.back - a.sent).count() / 2 +
                                duration_cast<microseconds>(b.back - b.sent).count() / 2 +
                                1000 /* the database clock's ms resolution */ +
                                std::llabs(mono_us) / 1'000'000 * kClockDriftPpm +
                                duration_cast<microseconds>(kClockStepBound).count();
  if (std::llabs(diff_us) <= slack_us) return 0;
  return diff_us / 1000;
}

}  // namespace sqlguard::detail
