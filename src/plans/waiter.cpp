#include "plans/waiter.h"

#include <algorithm>
#include <thread>

#include "core/reconnect.h"

namespace sqlguard::detail {

using std::chrono::milliseconds;

PauseResult WakingWaiter::wait_or_sleep(Connection& conn, const PauseArgs& a) {
  if (!conn.in_transaction() && a.idle_wakes < 2) {
    const auto cap_wait = std::min(a.backoff_max, std::max(a.left, milliseconds(1)));
    const auto d = std::min(cap_wait, std::max(a.holder_remaining, a.nap));
    try {
      return wait_for_release(conn, d) ? PauseResult::kWoken : PauseResult::kSlept;
    } catch (const Error& e) {
      // The database went away: what this waiter held in that session (the
      // wake-up lock, a LISTEN, a queue place) went with it; the next attempt
      // reconnects. Not woken.
      if (!is_outage(e) || conn.in_transaction()) throw;
      log(LogLevel::kInfo, "waiting for a lease release: " + std::string(e.what()) + "; retrying");
      session_lost();
      std::this_thread::sleep_for(d);
      return PauseResult::kSlept;
    }
  }
  before_nap(conn);
  std::this_thread::sleep_for(a.nap);
  return PauseResult::kSlept;
}

void ListeningWaiter::start_listening(Connection& conn, std::optional<Error>& outage) {
  try {
    conn.wait_for_notify(channel_, milliseconds(0));
    listening_ = true;
  } catch (const Error& e) {
    if (!is_outage(e)) throw;
    outage = e;
    listening_ = false;
  }
}

void ListeningWaiter::stop_listening(Connection& conn) noexcept {
  if (!listening_) return;
  listening_ = false;
  try {
    conn.unlisten(channel_);
  } catch (const std::exception& e) {
    log(LogLevel::kDebug, std::string("UNLISTEN failed: ") + e.what());
  }
}

}  // namespace sqlguard::detail
