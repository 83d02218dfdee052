// The take-over rule (issue 38, TakeOver in lease_lock.h): an unreleased lease
// is taken over only after the taker's process (or an earlier process on the
// same machine) has seen its row unchanged for the holder's ttl on a monotonic
// clock; no wall clock, the database's included, decides alone. Each check
// has its control: the database-clock rule, which a forward step fools.
//
// A forward step of the database clock by S is staged by moving the row's
// own times S back (what the rule compares is expire_at against the
// database's now: the same either way); the chaos run steps the server's real
// clock under libfaketime.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "sqlguard/cleanup.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"
#include "test_context.h"
#include "test_helpers.h"

using namespace sqlguard;
using namespace std::chrono_literals;
using sgtest::ctx;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {

// The database clock jumps `by` ahead under lease `name`'s row.
void step_forward(Connection& admin, const std::string& name, milliseconds by) {
  admin.execute("UPDATE sqlguard_lock SET expire_at = expire_at - ?, renewed_at = renewed_at - ?, "
                "acquired_at = acquired_at - ? WHERE name = ?",
                {by.count(), by.count(), by.count(), name});
}

LeaseOptions opts(milliseconds ttl, TakeOver rule = TakeOver::kWatched) {
  LeaseOptions o;
  o.ttl = ttl;
  o.take_over = rule;
  return o;
}

}  // namespace

TEST_CASE("an abandoned lease is taken over only after this process saw it unchanged for the holder's ttl, not when "
          "the database clock says it ran out",
          "[lease][takeover]") {
  auto c1 = ctx().connect();
  auto c2 = ctx().connect();
  const std::string name = ctx().unique("watch");
  const auto held = acquire_lease(*c1, name, "gone", 400ms);  // never renewed, never released
  REQUIRE(held.acquired);
  std::this_thread::sleep_for(500ms);
  auto info = lease_info(*c2, name);
  REQUIRE(info);
  CHECK_FALSE(info->held());  // the database clock says it ran out...

  const auto first = acquire_lease(*c2, name, "taker", 5s);
  CHECK_FALSE(first.acquired);  // ...which alone decides nothing
  CHECK(first.watch_ms == 400);
  CHECK(first.holder_unchanged_ms < 400);
  CHECK(first.holder_remaining_ms > 0);
  const auto t0 = steady_clock::now();

  std::this_thread::sleep_for(200ms);
  const auto mid = acquire_lease(*c2, name, "taker", 5s);
  CHECK_FALSE(mid.acquired);
  CHECK(mid.holder_unchanged_ms >= 200);
  CHECK(mid.holder_remaining_ms <= 200);

  std::this_thread::sleep_until(t0 + 450ms);
  const auto later = acquire_lease(*c2, name, "taker", 5s);
  REQUIRE(later.acquired);
  CHECK(later.fence > held.fence);
  CHECK_FALSE(renew_lease(*c1, name, "gone", held.fence, 400ms));  // its holder, were it back, has lost it

  SECTION("the control: the database-clock rule takes it at the first look") {
    const std::string other = ctx().unique("watch-ctl");
    REQUIRE(acquire_lease(*c1, other, "gone", 400ms).acquired);
    std::this_thread::sleep_for(500ms);
    CHECK(acquire_lease(*c2, other, "taker", 5s, {}, TakeOver::kDatabaseClock).acquired);
  }
}

TEST_CASE("a renewal restarts every watch of the lease; a release needs no watch", "[lease][takeover]") {
  auto c1 = ctx().connect();
  auto c2 = ctx().connect();
  const std::string name = ctx().unique("rewatch");
  const auto held = acquire_lease(*c1, name, "holder", 400ms);
  REQUIRE(held.acquired);
  REQUIRE_FALSE(acquire_lease(*c2, name, "taker", 5s).acquired);  // the first sighting
  std::this_thread::sleep_for(250ms);
  REQUIRE(renew_lease(*c1, name, "holder", held.fence, 400ms));
  std::this_thread::sleep_for(250ms);  // 500 ms after the first sighting, 250 ms after the renewal
  const auto after = acquire_lease(*c2, name, "taker", 5s);
  CHECK_FALSE(after.acquired);
  CHECK(after.holder_unchanged_ms < 250);  // a new version: its watch starts at this sighting

  REQUIRE(release_lease(*c1, name, "holder", held.fence));
  CHECK(acquire_lease(*c2, name, "taker", 5s).acquired);  // released: at once
}

TEST_CASE("a forward step of the database clock takes nothing from a holder that renews; the database-clock rule "
          "lets a taker in beside it (the control)",
          "[lease][takeover]") {
  auto admin = ctx().connect();
  auto client = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("fwdstep");
  LeaseLock a(client, name, opts(1500ms));
  REQUIRE(a.try_acquire());
  const std::int64_t fence = a.fence();

  // One hour ahead, again and again, while a taker tries every 50 ms for
  // two ttls: the holder keeps renewing (a renewal does not look at the
  // database clock), the taker never sees one version for a whole ttl.
  auto c2 = ctx().connect();
  bool taken = false, a_lost_trust = false;
  const auto until = steady_clock::now() + 3s;
  while (steady_clock::now() < until) {
    step_forward(*admin, name, 1h);
    taken = taken || acquire_lease(*c2, name, "taker", 5s).acquired;
    a_lost_trust = a_lost_trust || !a.owns();
    std::this_thread::sleep_for(50ms);
  }
  CHECK_FALSE(taken);
  CHECK_FALSE(a_lost_trust);
  CHECK(a.owns());
  CHECK(a.fence() == fence);

  // The control: the same step and the database-clock rule. The taker gets
  // the lease while the holder still trusts it: the overlap this rule allows.
  step_forward(*admin, name, 1h);
  const auto ctl = acquire_lease(*c2, name, "taker", 5s, {}, TakeOver::kDatabaseClock);
  CHECK(ctl.acquired);
  CHECK((ctl.acquired && a.owns()));  // both "hold" it now
  CHECK(sgtest::eventually([&] { return !a.owns(); }, 5s));  // the holder learns at its next renewal
  REQUIRE(a.last_loss());
  CHECK(a.last_loss()->cause == LossCause::kTakenOver);
}

TEST_CASE("a waiting acquire takes over a lease whose holder died within its ttl plus one renewal period",
          "[lease][takeover]") {
  auto client = LockClient::create(ctx().uri);
  auto c1 = ctx().connect();
  const std::string name = ctx().unique("waiting");
  // The holder "dies": acquired and renewed by hand, then never again.
  auto held = acquire_lease(*c1, name, "dies", 600ms);
  REQUIRE(held.acquired);
  LeaseLock w(client, name, opts(5s));
  std::atomic<bool> got{false};
  std::thread t([&] { got = w.acquire(10s); });
  std::this_thread::sleep_for(300ms);
  const auto last_renewal = steady_clock::now();  // (before it is sent: no sighting of it can be earlier)
  REQUIRE(renew_lease(*c1, name, "dies", held.fence, 600ms));  // its last renewal
  t.join();
  const auto took = steady_clock::now() - last_renewal;
  REQUIRE(got);
  CHECK(took >= 600ms);  // never before a whole ttl unchanged
  // ttl + the waiter's longest nap (backoff_max, 500 ms: how late it may see
  // the last renewal) + scheduling slack on a loaded machine.
  CHECK(took < 600ms + 500ms + 1500ms);
  w.release();
}

TEST_CASE("a later process on this machine continues the watch an earlier one started; another machine's sighting "
          "does not count",
          "[lease][takeover][cli]") {
  const std::string name = ctx().unique("cliwatch");
  std::string out;
  auto cli = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {sgtest::cli_path(), "--db", ctx().uri, "--json"};
    argv.insert(argv.end(), args.begin(), args.end());
    return sgtest::run_process(argv, &out);
  };
  // Holder: a process that takes the lease and exits without releasing it.
  REQUIRE(cli({"lock", "acquire", name, "--ttl", "500ms", "--owner", "gone"}) == 0);
  std::this_thread::sleep_for(600ms);  // the database clock says it ran out: sightings are shared from now
  REQUIRE(cli({"lock", "acquire", name, "--owner", "first"}) == 75);  // a new process: its first sighting
  CHECK_THAT(out, Catch::Matchers::Contains("\"watch_ms\":500"));
  CHECK_THAT(out, Catch::Matchers::Contains("\"takeover_in_ms\":"));
  std::this_thread::sleep_for(600ms);
  SECTION("a later process on this machine takes it over") {
    CHECK(cli({"lock", "acquire", name, "--owner", "later"}) == 0);
  }
  SECTION("the control: a sighting made on another machine is not this machine's") {
    auto admin = ctx().connect();
    admin->execute("UPDATE sqlguard_lock_watch SET watcher = 'another-machine' WHERE name = ?", {name});
    CHECK(cli({"lock", "acquire", name, "--owner", "later"}) == 75);
    std::this_thread::sleep_for(600ms);
    CHECK(cli({"lock", "acquire", name, "--owner", "later"}) == 0);  // its own sighting, a ttl ago
  }
}

TEST_CASE("cleanup never deletes an unreleased lease row by the database clock, and drops sightings of changed leases",
          "[lease][takeover][cleanup]") {
  auto c = ctx().connect();
  auto c2 = ctx().connect();
  const std::string name = ctx().unique("keep");
  auto sightings = [&] {
    return c->execute("SELECT COUNT(*) FROM sqlguard_lock_watch WHERE name = ?", {name}).rows.at(0)[0].as_int();
  };
  const auto held = acquire_lease(*c, name, "holder", 300ms);
  REQUIRE(held.acquired);
  step_forward(*c, name, 24h);  // long "expired" by the database clock
  REQUIRE_FALSE(acquire_lease(*c2, name, "taker", 5s).acquired);  // this process's first look: shared
  REQUIRE(sightings() == 1);
  CleanupOptions o;
  o.lock_grace = 0ms;
  o.idempotency = o.inbox = false;
  cleanup(*c, o);
  auto info = lease_info(*c, name);
  REQUIRE(info);  // the unreleased row stays
  CHECK(info->fence == held.fence);
  CHECK(sightings() == 1);  // still the lease's version: kept
  REQUIRE(renew_lease(*c, name, "holder", held.fence, 300ms));  // a new version
  const auto r1 = cleanup(*c, o);
  CHECK(r1.lease_watches_deleted >= 1);
  CHECK(sightings() == 0);
  // Released, it goes.
  REQUIRE(release_lease(*c, name, "holder", held.fence));
  std::this_thread::sleep_for(20ms);
  const auto r2 = cleanup(*c, o);
  CHECK(r2.locks_deleted >= 1);
  CHECK_FALSE(lease_info(*c, name));
}
