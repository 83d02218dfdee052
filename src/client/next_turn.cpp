// Bounded barging (LeaseOptions::barging_limit): a waiting acquire of the
// default lease competes with every contender until it has waited
// barging_limit, then asks for the lease's next turn (next_owner on the
// lease's row; the earliest waiter on the database clock wins it). The
// holder's release hands the lease to the waiter with the turn in its own
// commit (sql/<dialect>/lease.sql, lease_release); that waiter's next
// attempt confirms it. Nothing here decides who holds the lease: a turn is a
// hint to the next release, and the take-over rule is unchanged.
#include <algorithm>

#include "client/client.h"
#include "core/catalog.h"
#include "core/reconnect.h"

namespace sqlguard::detail {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {
// While the turn is its own, a waiter looks again only every few busy
// attempts (an older waiter may take the turn; a take-over of a dead
// holder clears it): the turn's owner attempts often.
constexpr int kRecheckEvery = 8;
}  // namespace

std::optional<NextTurn> ClientCore::next_turn_for(const ClientLease& l) {
  if (!l.options.barging_limit || l.kind != RowKind::kLease || !l.wakes) return std::nullopt;
  NextTurn t;
  t.owner = l.options.owner.empty() ? make_owner_token() : l.options.owner;
  return t;
}

milliseconds ClientCore::turn_pause_cap(const NextTurn* t, const ClientLease& l) {
  const auto& limit = l.options.barging_limit;
  if (!t || !limit) return milliseconds::max();
  if (t->past_limit) {
    const std::int64_t doubled = std::int64_t{1} << std::min(t->same_holder, 16);
    return std::min(l.options.backoff_initial * doubled, l.options.backoff_max);
  }
  const auto waited = std::chrono::duration_cast<milliseconds>(steady_clock::now() - t->began);
  return std::max(milliseconds(1), *limit - waited);
}

bool ClientCore::ask_next_turn(Connection& conn, const ClientLease& l, NextTurn& t) {
  const auto& limit = l.options.barging_limit;
  if (!limit) return false;
  const auto waited = std::chrono::duration_cast<milliseconds>(steady_clock::now() - t.began);
  if (waited < *limit) return false;
  t.past_limit = true;
  if (t.mine && ++t.unchecked < kRecheckEvery) return false;
  t.unchecked = 0;
  static constexpr auto kMine = column(Sql::lease_next_read, "mine");
  static constexpr auto kGranted = column(Sql::lease_next_read, "granted");
  static constexpr auto kOpen = column(Sql::lease_next_read, "open");
  static constexpr auto kFree = column(Sql::lease_next_read, "free");
  static constexpr auto kFence = column(Sql::lease_next_read, "fence");
  try {
    // The earliest waiter wins the turn: its place is when it began to wait,
    // on the database clock (one clock for every process; a step of it only
    // reorders waiters, it never decides who holds the lease).
    if (t.since < 0) t.since = std::max<std::int64_t>(0, conn.db_now_ms() - waited.count());
    auto r = run(conn, Sql::lease_next_read, {l.name, t.owner, t.since});
    if (r.rows.empty()) {
      t.mine = false;
      return false;
    }
    const Row& row = r.rows[0];
    const std::int64_t fence = cell(row, kFence).as_int();
    t.same_holder = fence == t.seen_fence ? t.same_holder + 1 : 0;
    t.seen_fence = fence;
    // Handed to it, or released since the attempt: try again at once.
    if (cell(row, kGranted).as_int() != 0 || cell(row, kFree).as_int() != 0) return true;
    t.mine = cell(row, kMine).as_int() != 0;
    if (t.mine || cell(row, kOpen).as_int() == 0) return false;
    t.asked = true;  // before the statement: one whose answer is lost may have committed
    t.mine = run(conn, Sql::lease_next_set, {l.name, t.owner, t.since, l.options.ttl.count()}).affected == 1;
    if (t.mine) {
      std::lock_guard<std::mutex> lk(wait_mu_);
      ++turns_asked_;
    }
  } catch (const Error& e) {
    // A turn is a hint: a deadlock victim or a certification failure (the
    // row was being released) only means it asks again on its next attempt.
    if (is_outage(e)) throw;
    log(LogLevel::kDebug, "asking for the next turn of lease '" + l.name + "' failed: " + e.what());
    t.mine = false;
  }
  return false;
}

void ClientCore::drop_next_turn(Connection* held, const ClientLease& l, NextTurn& t) noexcept {
  if (!t.asked) return;
  t.asked = t.mine = false;
  try {
    std::optional<Borrowed> own;
    if (!held) own.emplace(borrow());
    Connection& c = held ? *held : **own;
    // One try, no reconnect loop: a turn that stays costs at most one ttl
    // (the lease handed to nobody). The statement wakes the waiters itself
    // where a release does (PostgreSQL, SQLite); on MariaDB nobody holds a
    // handed lease's wake-up lock, so they are not blocked on it.
    run(c, Sql::lease_next_drop, {l.name, t.owner, lease_wakeup_channel(l.name)});
  } catch (const std::exception& e) {
    log(LogLevel::kDebug, "giving back the next turn of lease '" + l.name +
                              "' failed (a lease handed to this wait runs out by itself): " + e.what());
  }
}

}  // namespace sqlguard::detail
