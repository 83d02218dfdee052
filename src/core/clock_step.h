// Internal: seeing the database clock step (issue 38, item 3). The lock
// client reads the database's clock once per renewal round and compares how
// far it moved with how far this process's monotonic clock moved: a
// difference beyond what the two readings' round trips, a rate drift and
// kClockStepBound explain is a step (NTP, an operator, a VM restored). The
// watched take-over rule does not depend on the database clock; a step still
// shifts what `lock list` shows, minimum holds, retention, and the
// database-clock rule's take-overs (TakeOver::kDatabaseClock): it is
// reported (metric, log, and the cause of a loss it may explain).
#pragma once

#include <chrono>
#include <cstdint>

namespace sqlguard::detail {

// One reading: the database clock (ms since the epoch) read by a statement
// sent at `sent` whose answer came back at `back` (monotonic).
struct ClockSample {
  std::int64_t db_ms = 0;
  std::chrono::steady_clock::time_point sent{}, back{};
};

// The smallest step reported: well above what NTP slews in a renewal period
// (at most 0.05 %: 15 ms in 30 s), well below any ttl worth a lease.
inline constexpr std::chrono::milliseconds kClockStepBound{1000};
// The rate drift a reading may show over the time between two readings
// without being a step (1000 ppm: twice what any slewing clock shows).
inline constexpr std::int64_t kClockDriftPpm = 1000;

// How far the database clock stepped between readings `a` and `b` (b later):
// positive forward, negative back, 0 when the difference is within the
// readings' uncertainty (half of each round trip), the drift allowance and
// kClockStepBound.
std::int64_t clock_step_ms(const ClockSample& a, const ClockSample& b);

}  // namespace sqlguard::detail
