// Bounded barging (LeaseOptions::barging_limit, issue 40): a waiter of the
// default lease that has waited barging_limit takes the lease's next turn,
// and the holder's release hands the lease to it instead of freeing it for
// whoever comes first -- on every dialect, for a handle on a borrowed
// connection and for a lock client's handle. A turn's owner that never comes
// costs the lock one ttl; a waiter that gives up gives its turn back.
// Negative controls: without a turn the releasing holder takes the lease
// straight back (barging), so the checks that it cannot are not vacuous.
#include <catch2/catch.hpp>

#include <future>
#include <thread>

#include "client/fairness.h"
#include "core/catalog.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"
#include "test_context.h"
#include "test_helpers.h"

using namespace sqlguard;
using namespace std::chrono_literals;
using sgtest::ctx;
using std::chrono::milliseconds;

namespace {
LeaseOptions opts(milliseconds ttl, milliseconds barging_limit) {
  LeaseOptions o;
  o.ttl = ttl;
  o.barging_limit = barging_limit;
  o.backoff_initial = 2ms;
  o.backoff_max = 20ms;
  return o;
}

// The lease's next turn as the row says (empty: nobody asked).
std::string next_owner(Connection& c, const std::string& name) {
  auto r = c.execute("SELECT next_owner FROM sqlguard_lock WHERE name = ?", {name});
  return r.rows.empty() ? std::string() : r.rows[0][0].as_string();
}

// Waits up to 5 s for a waiter to take the lease's next turn.
std::string wait_for_turn(Connection& c, const std::string& name) {
  for (int i = 0; i < 500; ++i) {
    if (auto t = next_owner(c, name); !t.empty()) return t;
    std::this_thread::sleep_for(10ms);
  }
  return {};
}
}  // namespace

TEST_CASE("a release hands the lease to the waiter with the next turn: the holder cannot barge back",
          "[lease][barging]") {
  auto c1 = ctx().connect(), c2 = ctx().connect(), probe = ctx().connect();
  const auto name = ctx().unique("bb");
  // The waiter, its turn taken, waits for the release in pauses of 2 s.
  LeaseOptions wo = opts(5s, 0ms);
  wo.backoff_initial = wo.backoff_max = 2s;
  LeaseLock holder(*c1, name, opts(5s, 10ms)), waiter(*c2, name, wo);
  REQUIRE(holder.try_acquire());
  const auto first_fence = holder.fence();
  auto got = std::async(std::launch::async, [&] { return waiter.acquire(5s); });
  const std::string turn = wait_for_turn(*probe, name);
  REQUIRE_FALSE(turn.empty());
  std::this_thread::sleep_for(200ms);  // it listens (PostgreSQL) and is in its pause
  REQUIRE(holder.release());
  CHECK_FALSE(holder.try_acquire());  // handed over in the release's own commit
  REQUIRE(got.get());
  CHECK(waiter.owns());
  auto row = probe->execute("SELECT owner, fence FROM sqlguard_lock WHERE name = ?", {name});
  REQUIRE(row.rows.size() == 1);
  if (ctx().pooler) {
    // Behind a transaction pooler nothing wakes a waiter (no LISTEN): its
    // polling attempt, one statement, confirms the hand-over with its own
    // owner token and a fence of its own.
    CHECK(waiter.owner() != turn);
    CHECK(row.rows[0][0].as_string() == waiter.owner());
  } else {
    // Held as the release wrote it, with the turn's token and the release's
    // fence (no confirming take): the acquire's read saw the hand-over
    // (MariaDB, SQLite), or the release's NOTIFY carried it (PostgreSQL).
    CHECK(waiter.owner() == turn);
    CHECK(row.rows[0][0].as_string() == turn);
  }
  CHECK(row.rows[0][1].as_int() == waiter.fence());
  CHECK(waiter.fence() > first_fence);
  CHECK(next_owner(*probe, name).empty());  // the turn is free again
  CHECK(waiter.release());
  CHECK(holder.try_acquire());  // nobody waits: released for whoever comes
}

TEST_CASE("a turn's owner that never comes costs one ttl; without a turn the holder barges back", "[lease][barging]") {
  auto c1 = ctx().connect(), probe = ctx().connect();
  const auto name = ctx().unique("bb");
  LeaseLock holder(*c1, name, opts(5s, 10ms));
  REQUIRE(holder.try_acquire());
  const auto first_fence = holder.fence();
  // A waiter that took the turn and died (never confirms): the release hands
  // the lease to it for its ttl (300 ms).
  probe->execute("UPDATE sqlguard_lock SET next_owner = 'ghost', next_since = 1, next_ttl_ms = 300 WHERE name = ?",
                 {name});
  REQUIRE(holder.release());
  CHECK(probe->execute("SELECT owner FROM sqlguard_lock WHERE name = ?", {name}).rows[0][0].as_string() == "ghost");
  CHECK_FALSE(holder.try_acquire());  // this look starts the watch of the ghost's lease
  std::this_thread::sleep_for(450ms);
  REQUIRE(holder.try_acquire());  // watched unchanged for its ttl: taken over, as a dead holder's
  CHECK(holder.fence() > first_fence);
  REQUIRE(holder.release());

  // Negative control: the same release without a turn frees the lease, and the
  // releasing holder takes it straight back.
  CHECK(holder.try_acquire());
  CHECK(holder.release());
}

TEST_CASE("a waiter that gives up gives the next turn back", "[lease][barging]") {
  auto c1 = ctx().connect(), c2 = ctx().connect(), probe = ctx().connect();
  const auto name = ctx().unique("bb");
  LeaseLock holder(*c1, name, opts(5s, 10ms)), waiter(*c2, name, opts(5s, 0ms));
  REQUIRE(holder.try_acquire());
  auto got = std::async(std::launch::async, [&] { return waiter.acquire(600ms); });
  CHECK_FALSE(wait_for_turn(*probe, name).empty());  // it had the turn (so the check below can fail)
  CHECK_FALSE(got.get());
  CHECK(next_owner(*probe, name).empty());
  REQUIRE(holder.release());
  CHECK(holder.try_acquire());  // nothing handed over to a waiter that left
}

TEST_CASE("barging_limit: a waiter below it never takes the turn; out of range is refused", "[lease][barging]") {
  auto c1 = ctx().connect(), c2 = ctx().connect(), probe = ctx().connect();
  const auto name = ctx().unique("bb");
  LeaseLock holder(*c1, name, opts(5s, 10ms)), waiter(*c2, name, opts(5s, std::chrono::hours(1)));
  REQUIRE(holder.try_acquire());
  auto got = std::async(std::launch::async, [&] { return waiter.acquire(800ms); });
  // Looked at while it still waits (a turn it had would be given back at the
  // end); with barging_limit 0 the same wait takes it (the tests above).
  std::this_thread::sleep_for(400ms);
  CHECK(next_owner(*probe, name).empty());
  CHECK_FALSE(got.get());
  LeaseOptions bad;
  bad.barging_limit = -1ms;
  CHECK_THROWS_AS(LeaseLock(*c2, name, bad), Error);
  bad.barging_limit = std::chrono::hours(2);
  CHECK_THROWS_AS(LeaseLock(*c2, name, bad), Error);
}

TEST_CASE("a lock client's waiter takes the next turn and gets the release", "[lease][barging][lock-client]") {
  auto c1 = ctx().connect(), probe = ctx().connect();
  const auto name = ctx().unique("bb");
  LeaseLock holder(*c1, name, opts(5s, 10ms));
  auto client = LockClient::create(ctx().uri);
  LeaseLock waiter(client, name, opts(5s, 0ms));
  REQUIRE(holder.try_acquire());
  auto got = std::async(std::launch::async, [&] { return waiter.acquire(5s); });
  const std::string turn = wait_for_turn(*probe, name);
  REQUIRE_FALSE(turn.empty());
  REQUIRE(holder.release());
  CHECK_FALSE(holder.try_acquire());
  REQUIRE(got.get());
  CHECK(client->stats().next_turns >= 1);
  // Held as handed where the acquire reads first (not on PostgreSQL).
  CHECK(client->stats().turn_grants == (ctx().kind == DialectKind::kPostgresql ? 0u : 1u));
  CHECK(waiter.owns());
  CHECK(next_owner(*probe, name).empty());
  CHECK(waiter.release());
  CHECK(holder.try_acquire());  // released by the turn's token: free for whoever comes
  CHECK(holder.release());
}

TEST_CASE("the waiter that began to wait first takes the turn from a later one", "[lease][barging]") {
  auto c1 = ctx().connect(), c2 = ctx().connect(), probe = ctx().connect();
  const auto name = ctx().unique("bb");
  LeaseLock holder(*c1, name, opts(5s, 10ms)), waiter(*c2, name, opts(5s, 0ms));
  REQUIRE(holder.try_acquire());
  // A turn asked by a waiter that began later than any real one can have
  // (next_since far in the future of the database clock)...
  probe->execute("UPDATE sqlguard_lock SET next_owner = 'later', next_since = 9000000000000, next_ttl_ms = 5000 "
                 "WHERE name = ?", {name});
  auto got = std::async(std::launch::async, [&] { return waiter.acquire(5s); });
  // ... goes to the waiter that began earlier.
  std::string turn;
  for (int i = 0; i < 500 && (turn = next_owner(*probe, name)) == "later"; ++i) std::this_thread::sleep_for(10ms);
  CHECK(turn != "later");
  CHECK_FALSE(turn.empty());
  REQUIRE(holder.release());
  REQUIRE(got.get());
  CHECK(waiter.release());

  // Negative control: a turn asked by a waiter that began EARLIER (next_since 1)
  // is not taken from it: the release hands the lease to 'earlier', not to the
  // waiter (which times out).
  REQUIRE(holder.try_acquire());
  probe->execute("UPDATE sqlguard_lock SET next_owner = 'earlier', next_since = 1, next_ttl_ms = 5000 WHERE name = ?",
                 {name});
  auto late = std::async(std::launch::async, [&] { return waiter.acquire(600ms); });
  std::this_thread::sleep_for(300ms);
  CHECK(next_owner(*probe, name) == "earlier");
  REQUIRE(holder.release());
  CHECK_FALSE(late.get());
  CHECK(probe->execute("SELECT owner FROM sqlguard_lock WHERE name = ?", {name}).rows[0][0].as_string() == "earlier");
}

TEST_CASE("a lease handed to a wait that ended before it confirmed it is given back, and a waiter gets it",
          "[lease][barging][lock-client]") {
  auto c1 = ctx().connect(), probe = ctx().connect();
  const auto name = ctx().unique("bb");
  LeaseLock holder(*c1, name, opts(5s, 10ms));
  REQUIRE(holder.try_acquire());
  // The turn of a wait ('gone') that then ends: the release hands the lease
  // to it; its wait gives the turn back after that (lease_next_drop, the
  // statement a wait that ends unacquired runs).
  probe->execute("UPDATE sqlguard_lock SET next_owner = 'gone', next_since = 1, next_ttl_ms = 5000 WHERE name = ?",
                 {name});
  REQUIRE(holder.release());
  CHECK(probe->execute("SELECT owner FROM sqlguard_lock WHERE name = ?", {name}).rows[0][0].as_string() == "gone");
  CHECK_FALSE(holder.try_acquire());  // negative control: handed, it is held (for its 5 s ttl)
  auto client = LockClient::create(ctx().uri);
  LeaseLock waiter(client, name, opts(5s, std::chrono::hours(1)));
  // 3 s: less than the 5 s watch a take-over of 'gone' would need, so only
  // the give-back can end this wait acquired.
  auto got = std::async(std::launch::async, [&] { return waiter.acquire(3s); });
  std::this_thread::sleep_for(100ms);  // waiting, the lease held by 'gone'
  CHECK(detail::run(*probe, detail::Sql::lease_next_drop, {name, std::string("gone"), lease_wakeup_channel(name)})
            .affected == 1);
  REQUIRE(got.get());
  CHECK(waiter.owns());
  // A lease its owner confirmed is never given back by a stale drop.
  const auto fence = waiter.fence();
  CHECK(detail::run(*probe, detail::Sql::lease_next_drop, {name, std::string("gone"), lease_wakeup_channel(name)})
            .affected == 0);
  CHECK(waiter.owns());
  CHECK(probe->execute("SELECT fence FROM sqlguard_lock WHERE name = ? AND beat <> 0", {name}).rows.at(0)[0].as_int() ==
        fence);
  CHECK(waiter.release());
}

// MariaDB's named locks are recursive: a session that takes its wake-up lock
// twice must free it twice. A woken waiter already holds it when its attempt
// finds the lease handed to it, and the take then waits for it again
// (await_wakeup_lock); a second count would outlive the release's one
// RELEASE_LOCK and keep every waiter blocked until its timeout (the hot lock
// turned once per waiter timeout, 5 ms, under bounded barging).
TEST_CASE("the wake-up lock a session holds is not taken twice: one release frees it", "[lease][barging][wakeup]") {
  const auto& cat = detail::Catalog::of(to_string(ctx().kind));
  if (ctx().kind != DialectKind::kMysql) {
    // Woken by the release statement itself (NOTIFY, a futex word): no lock.
    CHECK_FALSE(cat.has(detail::Sql::lease_wakeup_wait));
    return;
  }
  auto a = ctx().connect(), b = ctx().connect();
  const auto channel = lease_wakeup_channel(ctx().unique("wk"));
  auto granted = [&](Connection& c, double timeout_s) {
    return detail::run(c, detail::Sql::lease_wakeup_wait, {channel, timeout_s}).rows.at(0)[0].as_int();
  };
  auto free_now = [&] { return b->execute("SELECT IS_FREE_LOCK(?)", {channel}).rows.at(0)[0].as_int(); };
  CHECK(granted(*a, 0.0) == 1);
  CHECK(granted(*a, 0.002) == 1);  // held already: 1 at once
  CHECK(free_now() == 0);
  detail::run(*a, detail::Sql::lease_wakeup_signal, {channel});
  CHECK(free_now() == 1);
  CHECK(granted(*b, 0.0) == 1);  // another session gets it at once
  detail::run(*b, detail::Sql::lease_wakeup_signal, {channel});
  // The control: a plain GET_LOCK taken twice outlives one release.
  a->execute("SELECT GET_LOCK(?, 0)", {channel});
  a->execute("SELECT GET_LOCK(?, 0)", {channel});
  a->execute("SELECT RELEASE_LOCK(?)", {channel});
  CHECK(free_now() == 0);
  a->execute("SELECT RELEASE_LOCK(?)", {channel});
  CHECK(free_now() == 1);
}

// PostgreSQL: the hand-over's wake-up carries what the release wrote, so the
// turn's owner needs no statement to hold it; a plain release's says nothing.
// Elsewhere a wake-up says nothing (SQLite's futex word) or there is none to
// listen to (MariaDB: the wake-up lock).
TEST_CASE("a hand-over's wake-up carries its grant: owner, fence, expiry and ttl as the row has them",
          "[lease][barging][wakeup]") {
  auto c1 = ctx().connect(), listener = ctx().connect(), probe = ctx().connect();
  const auto name = ctx().unique("bg");
  const auto channel = lease_wakeup_channel(name);
  if (ctx().kind == DialectKind::kMysql || ctx().pooler) {
    // MariaDB: the wake-up lock; behind a transaction pooler: no LISTEN.
    CHECK_THROWS_AS(listener->wait_for_notify_payloads(channel, 0ms), Error);
    return;
  }
  LeaseLock holder(*c1, name, opts(5s, 10ms));
  REQUIRE(holder.try_acquire());
  CHECK(listener->wait_for_notify_payloads(channel, 0ms).empty());  // listens from here on
  const std::string turn = "turn-owner-token";
  REQUIRE(detail::run(*probe, detail::Sql::lease_next_set, {name, turn, std::int64_t{1}, std::int64_t{3000}}).affected ==
          1);
  REQUIRE(holder.release());
  auto woken = listener->wait_for_notify_payloads(channel, 2s);
  REQUIRE(woken.size() == 1);
  auto row = probe->execute("SELECT owner, fence, expire_at, ttl_ms, handed FROM sqlguard_lock WHERE name = ?", {name});
  REQUIRE(row.rows.size() == 1);
  CHECK(row.rows[0][0].as_string() == turn);
  CHECK(row.rows[0][4].as_int() == 1);
  if (ctx().kind == DialectKind::kPostgresql) {
    CHECK(woken[0] == "turn:" + turn + "|" + std::to_string(row.rows[0][1].as_int()) + "|" +
                          std::to_string(row.rows[0][2].as_int()) + "|3000");
  } else {
    CHECK(woken[0].empty());
  }
  // The handed lease released by its owner: nobody has the turn, nothing granted.
  REQUIRE(detail::run(*probe, detail::Sql::lease_release, {name, turn, row.rows[0][1].as_int(), channel}).affected == 1);
  woken = listener->wait_for_notify_payloads(channel, 2s);
  REQUIRE(woken.size() == 1);
  CHECK(woken[0].empty());
}

TEST_CASE("a hand-over's payload is read only for the turn it names, whole", "[lease][barging][wakeup]") {
  detail::FairGrant g;
  CHECK(detail::FairPolicy::turn_grant({"", "turn:a@h:1#2|7|1000|300"}, "a@h:1#2", &g));
  CHECK(g.fence == 7);
  CHECK(g.expire_at == 1000);
  CHECK(g.ttl_ms == 300);
  CHECK_FALSE(detail::FairPolicy::turn_grant({"turn:a@h:1#2|7|1000|300"}, "a@h:1#3", &g));  // another wait's turn
  CHECK(g.fence == 0);
  CHECK_FALSE(detail::FairPolicy::turn_grant({"turn:a@h:1#2|7|1000"}, "a@h:1#2", &g));        // cut short
  CHECK_FALSE(detail::FairPolicy::turn_grant({"turn:a@h:1#2|7|1000|300|9"}, "a@h:1#2", &g));  // more than a grant
  CHECK_FALSE(detail::FairPolicy::turn_grant({"turn:x|1|2|3|7|1000|300"}, "x", &g));  // owner "x|1|2|3" is not "x"
  CHECK_FALSE(detail::FairPolicy::turn_grant({"12:a@h:1#2|7|1000|300"}, "a@h:1#2", &g));  // a fair place's grant
  CHECK_FALSE(detail::FairPolicy::turn_grant({"turn:|7|1000|300"}, "", &g));              // no turn
}
