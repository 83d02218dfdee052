// Internal: what a lock handle and the lock client's renewer share (one mutex), and
// the lease functions both call.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "sqlguard/lease_lock.h"

namespace sqlguard::detail {

struct LeaseState {
  mutable std::mutex mu;
  int hold = 0;
  std::string owner;
  std::int64_t fence = 0;
  // Counts the acquisitions recorded here (owner and fence set): the lock
  // client's renewer tells the one it registered from a later one by it.
  std::uint64_t acquisition = 0;
  std::int64_t expire_at = 0;  // DB clock, of the acquisition
  std::chrono::steady_clock::time_point valid_until{};
  bool lost = false;
  // A release() of the acquisition is under way: it ends the acquisition
  // before anything else can report on it (the renewer's
  // result for a lease the handle is releasing says nothing about a lease
  // the handle still holds). Cleared when the release returns or throws.
  bool ending = false;
  std::unique_ptr<LeaseLoss> loss;  // the last one (allocated only when a loss happens)
  std::function<void(const LeaseLoss&)> on_lost;
  // The last attempt that did not acquire: how long until a take-over of
  // what stood in its way was possible, as of `refused_at` (unset: none
  // known; an acquisition clears it). Lock::takeover_in().
  std::optional<std::chrono::milliseconds> takeover_in;
  std::chrono::steady_clock::time_point refused_at{};

  void refused_locked(std::int64_t takeover_in_ms) {
    if (takeover_in_ms > 0) {
      takeover_in = std::chrono::milliseconds(takeover_in_ms);
      refused_at = std::chrono::steady_clock::now();
    } else {
      takeover_in.reset();
    }
  }
  std::optional<std::chrono::milliseconds> takeover_in_locked() const {
    if (!takeover_in || hold > 0) return std::nullopt;
    const auto left = *takeover_in - std::chrono::duration_cast<std::chrono::milliseconds>(
                                          std::chrono::steady_clock::now() - refused_at);
    return std::max(left, std::chrono::milliseconds(0));
  }

  std::optional<LeaseLoss> last_loss_locked() const { return loss ? std::optional<LeaseLoss>(*loss) : std::nullopt; }
  bool valid_locked() const { return hold > 0 && !lost && std::chrono::steady_clock::now() < valid_until; }
  // What is left of the trust window; 0 when not valid.
  std::chrono::milliseconds remaining_locked() const {
    if (!valid_locked()) return std::chrono::milliseconds(0);
    return std::chrono::duration_cast<std::chrono::milliseconds>(valid_until - std::chrono::steady_clock::now());
  }
  // Records the loss of the held lease once, counts it, logs it and calls
  // on_lost (outside the mutex). Nothing when not held, already lost or
  // being released (`ending`), or (`owner` given) when the held lease is
  // another acquisition than (owner, fence). True if this call recorded the
  // loss.
  bool mark_lost(LossCause cause, std::string detail, const std::string* owner = nullptr, std::int64_t fence = 0);
};

// An attempt that did not acquire: what it learned of the take-over.
inline void note_refusal(LeaseState& st, std::int64_t takeover_in_ms) {
  std::lock_guard<std::mutex> lk(st.mu);
  st.refused_locked(takeover_in_ms);
}

// Why `owner` no longer holds lease `name`. `known_expire_at`: a DB-clock
// time the lease was known to last until (its acquire's expiry; renewals only
// move it later): a lease gone before it was ended by someone else (a forced
// release, its row deleted), kTakenOver, not expired.
LossCause diagnose_lease(Connection& conn, const std::string& name, const std::string& owner, std::int64_t fence,
                         std::int64_t known_expire_at, std::string* detail);

// The queue place a fair lease was acquired from: kept until the release
// removes it in the same commit, so a hand-off costs one commit (the
// acquire's), not two. An empty owner: none (tickets start at 0).
struct HeldPlace {
  std::int64_t ticket = -1;
  std::string owner;
};

// release_lease() of a fair lease (LeaseOptions::fair): removes the place it
// was acquired from in the same commit, and where the wait plan wakes fair
// waiters by ticket, names the queue's next one in the wake-up.
bool release_lease(Connection& conn, const std::string& name, const std::string& owner, std::int64_t fence,
                   ReleaseCommit commit, bool fair, const HeldPlace& place = {});

// acquire_lease() with the caller's waiter queue seat (plans.h), counted in
// the metrics; contention is retried briefly, then reported as not acquired.
// Under TakeOver::kWatched a busy attempt is a sighting in this process's
// watch book (takeover.h) and a ripe watch lets the attempt take over.
struct QueueSeat;
// A busy attempt saw the holder's row: a sighting for this process's watch
// and, under the watched rule, how long until it may take over (`r`).
struct Sighting;
struct NextTurnSeen;
void watched_busy(AcquireResult& r, const std::string& key, const Sighting& seen, TakeOver rule);
// The connect options of a lease handle made from a URI (its shared client's
// or its own connection): no call, reconnects included, may block past a
// third of the ttl (at least 1 s; the caller's timeouts, if smaller, win).
ConnectOptions lease_connect_options(ConnectOptions o, std::chrono::milliseconds ttl);

AcquireResult acquire_lease_seated(Connection& conn, const std::string& name, const std::string& owner,
                                   std::chrono::milliseconds ttl, std::chrono::milliseconds min_hold, QueueSeat* seat,
                                   bool seen_free = false, TakeOver rule = TakeOver::kWatched,
                                   const std::string& turn_owner = {}, bool hold_grant = false,
                                   std::optional<NextTurnSeen>* next_seen = nullptr);
// acquire_lease_seated without its checks of the arguments and of the
// connection: inside a transaction too (a lock set's attempt takes every
// name in one, ClientCore::try_acquire_set_on; the caller validated them).
AcquireResult acquire_lease_here(Connection& conn, const std::string& name, const std::string& owner,
                                 std::chrono::milliseconds ttl, std::chrono::milliseconds min_hold, QueueSeat* seat,
                                 bool seen_free, TakeOver rule, const std::string& turn_owner,
                                 bool hold_grant = false, std::optional<NextTurnSeen>* next_seen = nullptr);

}  // namespace sqlguard::detail
