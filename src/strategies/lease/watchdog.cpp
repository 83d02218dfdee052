#include "strategies/lease/watchdog.h"

#include <algorithm>
#include <atomic>

#include "core/metric_hooks.h"

namespace sqlguard::detail {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {
// One renewal's answer, filled on the caller's worker thread.
struct Renewal {
  std::shared_ptr<Connection> conn;  // the watchdog's connection (made here when missing)
  std::atomic<bool> connected{false};
  bool ok = false;
  LossCause cause = LossCause::kExpired;
  std::string detail;
  std::exception_ptr error;
};
}  // namespace

void LeaseWatchdog::start() {
  stop();
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->stop = false;
  }
  // The state stays alive in the thread even if on_lost destroys the handle.
  thread_ = std::thread([this, state = state_, wake = wake_] { loop(state, wake); });
}

void LeaseWatchdog::stop() noexcept {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->stop = true;
  }
  wake_->notify_all();
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // called from on_lost on the watchdog thread itself
    return;
  }
  thread_.join();
}

void LeaseWatchdog::loop(std::shared_ptr<LeaseState> state, std::shared_ptr<std::condition_variable> wake) {
  std::shared_ptr<Connection> conn;  // dropped after a connection problem (reconnect on the next try)
  BoundedCaller caller;
  // Retry quickly after a transient failure, but keep enough of the trust
  // window to report the loss before it ends.
  const milliseconds retry = std::clamp<milliseconds>(period_ / 4, milliseconds(10), milliseconds(1000));
  // The loss is signalled this long before the trust window ends.
  const milliseconds early = std::min<milliseconds>(retry, milliseconds(20));
  milliseconds next = period_;
  bool unknown = false;  // the last failure was a sent renewal with no answer
  for (;;) {
    std::string owner;
    std::int64_t fence = 0, known_expire_at = 0;
    steady_clock::time_point valid_until;
    {
      std::unique_lock<std::mutex> lk(state->mu);
      wake->wait_for(lk, next, [&] { return state->stop; });
      if (state->stop || state->hold == 0 || state->lost) return;
      owner = state->owner;
      fence = state->fence;
      known_expire_at = state->expire_at;
      valid_until = state->valid_until;
    }
    const auto start = steady_clock::now();
    auto r = std::make_shared<Renewal>();
    r->conn = std::move(conn);
    auto outcome = caller.call(
        [r, factory = factory_, name = name_, owner, fence, ttl = ttl_, known_expire_at] {
          try {
            if (!r->conn) r->conn = std::shared_ptr<Connection>(factory());
            r->connected = true;
            r->ok = renew_lease(*r->conn, name, owner, fence, ttl);
            if (!r->ok) r->cause = diagnose_lease(*r->conn, name, owner, fence, known_expire_at, &r->detail);
          } catch (...) {
            r->error = std::current_exception();
          }
        },
        renewal_deadline(valid_until, early, start, std::clamp<milliseconds>(period_, milliseconds(500), std::chrono::seconds(5))),
        [&state] {
          std::lock_guard<std::mutex> lk(state->mu);
          return state->stop;
        });
    if (outcome == BoundedCaller::Outcome::kStopped) return;  // release, ~LeaseLock: the renewal finishes on its own
    if (outcome == BoundedCaller::Outcome::kTimedOut) {
      // No renewal answered within the trust window: the lease may be gone
      // in the database by now. owns() is already false.
      const bool sent = r->connected.load();
      state->mark_lost(sent || unknown ? LossCause::kOutcomeUnknown : LossCause::kUnreachable,
                        "no renewal of lease '" + name_ + "' succeeded within its trust window: database " +
                            (sent ? "did not answer" : "unreachable"));
      return;
    }
    if (!r->error) {
      conn = r->conn;
      if (!r->ok) {
        state->mark_lost(r->cause, std::move(r->detail));
        return;
      }
      std::lock_guard<std::mutex> lk(state->mu);
      if (state->owner == owner && state->fence == fence && !state->lost) state->valid_until = start + ttl_ - margin_;
      next = period_;
      unknown = false;
      continue;
    }
    ++metric::lock_renew_errors();
    try {
      std::rethrow_exception(r->error);
    } catch (const std::exception& e) {
      const Error* se = dynamic_cast<const Error*>(&e);
      const bool conn_problem = !se || se->code() == ErrorCode::kConnectionLost ||
                                se->code() == ErrorCode::kCommitInDoubt || se->code() == ErrorCode::kTimeout;
      unknown = r->connected && conn_problem;
      if (!conn_problem) conn = r->conn;  // else reconnect on the next try
      log(LogLevel::kInfo, "watchdog renew of '" + name_ + "' failed, retrying: " + e.what());
    } catch (...) {
      log(LogLevel::kInfo, "watchdog renew of '" + name_ + "' failed with a non-standard exception, retrying");
    }
    if (valid_until - steady_clock::now() <= retry * 2) {
      state->mark_lost(unknown ? LossCause::kOutcomeUnknown : LossCause::kUnreachable,
                        "could not renew lease '" + name_ + "' before its trust window ended: database " +
                            (unknown ? "did not answer" : "unreachable"));
      return;
    }
    next = retry;
  }
}

}  // namespace sqlguard::detail
