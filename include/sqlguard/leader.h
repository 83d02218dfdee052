// sqlguard/leader.h — leader election on the lease lock.
//
// Candidates for one election (a lease name) campaign; the one holding the
// lease is the leader. Its term is the lease's fencing token: strictly
// increasing across leaders, so writes the leader makes can be fenced with
// it (fenced_write.h) and a deposed leader's late writes rejected.
//
//   sqlguard::LeaderElector e(uri, "outbox-relay", {
//       .on_elected = [&](std::int64_t term) { relay.start(term); },
//       .on_revoked = [&](const sqlguard::Revocation& r) { relay.stop(); }});
//   e.campaign();          // returns at once; the campaign runs in the background
//   ...
//   e.resign();            // hands over at once (waiters are woken)
//
// Guarantees (SQLite, PostgreSQL, MariaDB):
//  * At most one leader at any instant by the trust window: is_leader() is
//    LeaseLock::owns() of the candidate's lease — true only while the lease
//    is held AND inside the local trust window (request start + ttl -
//    safety margin, steady clock), which ends before the lease can expire on
//    the database clock. A leader must check is_leader() (or fence its
//    writes with term()) before each effect.
//  * Leadership is lost before the lease ends on a partition: the watchdog
//    renews every renew_period; when no renewal succeeds within the trust
//    window, is_leader() turns false at the window's end and on_revoked
//    fires (cause kUnreachable / kOutcomeUnknown) — before any other
//    candidate can take the lease.
//  * A resigning leader hands over promptly: resign() turns is_leader()
//    false, then releases the lease; the release wakes waiting candidates
//    (PostgreSQL NOTIFY, SQLite WAL watch, MariaDB wake-up lock), so the
//    next leader is elected without waiting for the lease to expire.
//  * After a loss (not a resignation) the candidate campaigns again.
//
// Cost: an elector owns no thread and no connection. It campaigns through
// the process-wide lock client of its URI (LockClient::shared: its
// connections, its renewal thread renew the leader's lease, its waiter
// thread waits for the lease without a thread per candidate), and its steps
// run on one thread shared by every elector of the process, started by the
// first campaign() and ended by the last resign().
//
// Callbacks run on that shared election thread, one at a time, in order for
// each elector (elected, revoked, elected, ...): they must not block for
// long (they hold up every elector of the process) and must not call
// campaign()/resign()/~LeaderElector. Exceptions they throw go to the log
// hook.
//
// Thread safety: all members are thread-safe. A URI whose every connection
// is its own database (SQLite in memory) is refused (kInvalidArgument):
// candidates could never see each other.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "sqlguard/connection.h"
#include "sqlguard/lease_lock.h"

namespace sqlguard {

enum class RevokeCause {
  kResigned,        // resign() or the elector was destroyed
  kExpired,         // the lease ran out before it was renewed
  kTakenOver,       // another candidate (or an operator's force release) took the lease
  kUnreachable,     // the database could not be reached within the trust window
  kOutcomeUnknown,  // renewals went unanswered until the trust window ended
};
std::string_view to_string(RevokeCause cause) noexcept;

struct Revocation {
  RevokeCause cause = RevokeCause::kResigned;
  std::int64_t term = 0;  // the term that ended
  std::string detail{};   // one line
};

struct ElectionOptions {
  // The leader's lease. Default: 10 s. Range as LeaseOptions::ttl.
  std::chrono::milliseconds ttl{std::chrono::seconds(10)};
  // Watchdog renewal period and safety margin: as in LeaseOptions
  // (defaults ttl / 3 and ttl / 10, at most 2 s).
  std::optional<std::chrono::milliseconds> renew_period{};
  std::optional<std::chrono::milliseconds> safety_margin{};
  // Least pause before campaigning again after a loss. Default: 100 ms.
  std::chrono::milliseconds recampaign_delay{100};
  // Identifies this candidate in lease_info()/leader() (the owner token is
  // "<candidate>/<random>"). Default: empty = a random owner token only.
  std::string candidate{};
  ConnectOptions connect{};
  // Called when this candidate becomes leader, with its term (the fence).
  std::function<void(std::int64_t term)> on_elected{};
  // Called when a term of this candidate ends, for any cause.
  std::function<void(const Revocation&)> on_revoked{};
};

class LeaderElector {
 public:
  // Validates the options (Error(kInvalidArgument) naming the field) and
  // the election name; connects on campaign().
  LeaderElector(std::string uri, std::string election, ElectionOptions options = {});
  // resign() (never throws).
  ~LeaderElector();
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  // Starts campaigning in the background (no-op if already). Returns
  // at once; on_elected tells when this candidate wins.
  void campaign();
  // Stops campaigning; a leader steps down first (is_leader() false, lease
  // released, on_revoked(kResigned) called before this returns). Waits for
  // the campaign to stop. No-op when not campaigning.
  void resign();

  bool campaigning() const;
  // Leader now, inside the trust window of its lease.
  bool is_leader() const;
  // Blocks until this candidate is leader (and on_elected has returned) or
  // `timeout` passes (0 .. 365 d), and says whether it is leader then. Returns at once (false) when it is
  // not campaigning or resigns meanwhile. Not from on_elected / on_revoked
  // (they run on the thread that would elect it): there it throws
  // Error(kInvalidArgument).
  bool wait_until_leader(std::chrono::milliseconds timeout);
  // The current term while leader; 0 otherwise.
  std::int64_t term() const;
  // Terms this candidate has won so far (since construction).
  std::uint64_t terms_won() const;
  // The lease as the database sees it now (any candidate's), on a
  // connection of the caller's (e.g. for a status page).
  static std::optional<LeaseInfo> leader(Connection& conn, const std::string& election);

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace sqlguard
