// A lock client over a borrowed connection (ClientCore::over): a blocking
// acquire waits on the caller's thread, on that session, as the dialect's
// wait plan says (its session waiter: the head of a NOTIFY queue, the
// wake-up lock, the futex word, or naps with full jitter). The attempt is
// the client's one attempt (attempt_on); renewals are the client's renewer.
#include <algorithm>
#include <thread>

#include "dialect/dialect.h"
#include "client/client.h"
#include "client/fairness.h"
#include "core/reconnect.h"
#include "plans/plans.h"
#include "plans/waiter.h"

namespace sqlguard::detail {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

bool ClientCore::try_here(const std::shared_ptr<ClientLease>& l, milliseconds budget, milliseconds* holder_remaining,
                          Waiter* session, NextTurn* turn) {
  check_process();
  {
    std::lock_guard<std::mutex> lk(l->state->mu);
    if (l->state->hold > 0) {
      if (!l->state->valid_locked()) return false;  // lost: release() first
      ++l->state->hold;
      return true;
    }
  }
  if (!session && !turn && coalesces(*l)) return try_coalesced(l, budget, holder_remaining);
  auto c = borrow();
  return attempt_on(c, l, budget, holder_remaining, nullptr, session, turn);
}

namespace {
// A waiter that leaves gives up what it held (a queue place, a wake-up lock,
// a LISTEN, the lease's next turn).
struct FinishWait {
  ClientCore& core;
  const ClientLease& lease;
  Waiter& w;
  Connection& conn;
  std::optional<NextTurn>& turn;
  const std::optional<Error>& outage;  // the wait ends on an outage: no statement to give the turn back
  bool acquired = false;
  ~FinishWait() {
    if (!acquired && turn && !outage) core.drop_next_turn(&conn, lease, *turn);
    w.finish(conn, acquired);
  }
};

// The pause between two busy attempts: full jitter, capped by the backoff
// and by what the holder's lease has left (no point polling a 30 s lease
// every 5 ms, nor sleeping past its end).
PauseArgs pause_args(const ClientLease& l, milliseconds backoff, milliseconds left, milliseconds holder,
                     int idle_wakes) {
  const auto& o = l.options;
  const auto cap = std::min(backoff, std::max(holder, o.backoff_initial));
  return PauseArgs{std::min(jitter(cap), std::max(left, milliseconds(1))), left, holder, o.backoff_initial,
                   o.backoff_max, idle_wakes};
}
}  // namespace

bool ClientCore::acquire_here(const std::shared_ptr<ClientLease>& l, milliseconds wait) {
  Connection& conn = *borrowed_;
  if (!l->session_waiter) l->session_waiter = wait_plan_->make_waiter(l->channel(), wait_cap_);
  Waiter& w = *l->session_waiter;
  const auto deadline = steady_clock::now() + wait;
  auto backoff = l->options.backoff_initial;
  int idle_wakes = 0;  // wake-ups that found the lease still held
  milliseconds holder{0};
  w.begin(conn, !conn.in_transaction());
  // Bounded barging: past barging_limit the wait asks for the lease's next
  // turn. Not inside the caller's transaction (the turn's row write would
  // hold the lease's row until that transaction ends).
  std::optional<NextTurn> turn = conn.in_transaction() ? std::nullopt : FairPolicy::next_turn_for(*l);
  std::optional<Error> outage;  // the last attempt that failed because the database was unreachable
  FinishWait finish{*this, *l, w, conn, turn, outage};
  for (;;) {
    bool got = false;
    try {
      // A lost connection is retried for what is left of this wait, not a
      // whole ttl: acquire(wait) returns (or reports the outage) on time.
      const auto left_now = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
      got = try_here(l, std::max(left_now, milliseconds(1)), &holder, &w, turn ? &*turn : nullptr);
      outage.reset();
    } catch (const Error& e) {
      // The database went away while this waiter waits: keep waiting (and
      // retrying) until the wait's own deadline, and report the outage, not
      // "busy", if it lasts that long.
      // (Or new leases were refused while the renewer is behind: waited out
      // like an outage, as the shared client's waiters do.)
      if ((!is_outage(e) && e.code() != ErrorCode::kResourceExhausted) || conn.in_transaction() ||
          steady_clock::now() >= deadline)
        throw;
      outage = e;
      w.session_lost();
    }
    if (got) {
      finish.acquired = true;
      w.acquired(conn);
      return true;
    }
    w.busy(conn);
    w.next_turn(turn && turn->mine, turn && !turn->mine && (turn->past_limit || turn->other_turn));
    if (const auto cap = FairPolicy::turn_pause_cap(turn ? &*turn : nullptr, *l); cap != milliseconds::max()) {
      // Bounded barging: no pause outlasts barging_limit; past it, a hot
      // lock's next release hands the lease to this wait (its turn), or frees
      // the turn: look again soon (and, with the turn, be woken by that
      // release where the plan listens); a long hold is looked at less often.
      holder = std::min(holder, cap);
      backoff = std::min(backoff, cap);
    }
    {
      std::lock_guard<std::mutex> lk(l->state->mu);
      if (l->state->hold > 0) return false;  // holding a lost lease: waiting cannot help
    }
    if (w.listen_first(conn, outage)) continue;
    const auto now = steady_clock::now();
    if (now >= deadline) {
      if (outage) throw *outage;
      return false;
    }
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - now);
    if (outage) {
      std::this_thread::sleep_for(std::min(jitter(backoff), std::max(left, milliseconds(1))));
      backoff = std::min(backoff * 2, l->options.backoff_max);
      continue;
    }
    const auto paused = w.pause(conn, pause_args(*l, backoff, left, holder, idle_wakes), outage);
    if (paused == PauseResult::kRetryNow) continue;
    if (paused != PauseResult::kNapped)
      idle_wakes = paused == PauseResult::kWoken && !wait_plan_->wakes_every_waiter() ? idle_wakes + 1 : 0;
    backoff = std::min(backoff * 2, l->options.backoff_max);
  }
}

void ClientCore::released(const ClientLease& l, Connection& conn) {
  if (l.session_waiter) l.session_waiter->released(conn);
  local_release(l.name);
}

void ClientCore::forget(const ClientLease& l) noexcept {
  if (l.session_waiter && borrowed_) l.session_waiter->close(*borrowed_);
}

}  // namespace sqlguard::detail
