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
#include "sqlguard/read_write_lease.h"
#include "sqlguard/semaphore.h"
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

TEST_CASE("a refused try says how long until a take-over: the rest of this process's watch, which later tries of "
          "any of its handles count on; nothing before a try or while held",
          "[lease][takeover]") {
  auto client = LockClient::create(ctx().uri);
  auto c1 = ctx().connect();
  const std::string name = ctx().unique("takeoverin");
  LeaseLock first(client, name, opts(5s));
  CHECK_FALSE(first.takeover_in());  // no attempt yet
  REQUIRE(acquire_lease(*c1, name, "gone", 400ms).acquired);  // never renewed, never released
  CHECK_FALSE(first.try_acquire());
  const auto t0 = steady_clock::now();
  REQUIRE(first.takeover_in());
  CHECK(*first.takeover_in() > 0ms);
  CHECK(*first.takeover_in() <= 400ms);
  std::this_thread::sleep_for(200ms);
  // Another handle of the process: its first try counts on the same watch.
  LeaseLock second(client, name, opts(5s));
  CHECK_FALSE(second.try_acquire());
  REQUIRE(second.takeover_in());
  CHECK(*second.takeover_in() <= 200ms);
  CHECK(*first.takeover_in() <= 200ms);  // and the first one's answer counts down
  std::this_thread::sleep_until(t0 + 450ms);
  CHECK(second.try_acquire());
  CHECK_FALSE(second.takeover_in());
  CHECK(second.release());

  SECTION("the database-clock rule: what the holder's expiry has left on the database clock") {
    const std::string other = ctx().unique("takeoverin-db");
    REQUIRE(acquire_lease(*c1, other, "alive", 5s).acquired);
    LeaseLock ctl(client, other, opts(5s, TakeOver::kDatabaseClock));
    CHECK_FALSE(ctl.try_acquire());
    REQUIRE(ctl.takeover_in());
    CHECK(*ctl.takeover_in() > 4s);
    CHECK(*ctl.takeover_in() <= 5s);
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
  // (A renewal that lands between the step and the try undoes the step — it
  // did once in CI, on MariaDB: then step again; the holder renews
  // throughout, so every try is beside a live holder.)
  AcquireResult ctl;
  for (int i = 0; i < 5 && !ctl.acquired; ++i) {
    step_forward(*admin, name, 1h);
    ctl = acquire_lease(*c2, name, "taker", 5s, {}, TakeOver::kDatabaseClock);
  }
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
  o.idempotency = o.inbox = o.history = false;
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

// ---- holdings (semaphores, read-write leases) and fair queue places ----------------------
namespace {

// A holding whose holder died long ago by the database clock: staged as a
// row whose expiry is an hour in the past (a forward step of an hour looks
// the same to the rule), unreleased (beat 1), with a ttl of `ttl`. Slot -7:
// no acquire draws a negative slot.
void stage_dead_holding(Connection& admin, const std::string& name, const char* mode, milliseconds ttl) {
  const std::int64_t now = admin.db_now_ms();
  admin.execute("INSERT INTO sqlguard_sync_holder (name, slot, mode, permits, owner, fence, expire_at, acquired_at, "
                "renewed_at, min_release_at, beat, ttl_ms) VALUES (?, -7, ?, 1, 'gone', 1, ?, ?, ?, 0, 1, ?)",
                {name, std::string(mode), now - 3600000, now - 3600000 - ttl.count(), now - 3600000 - ttl.count(),
                 ttl.count()});
}

std::int64_t holder_rows(const std::string& name, const std::string& owner) {
  return sgtest::query_int("SELECT COUNT(*) FROM sqlguard_sync_holder WHERE name = ? AND owner = ?", {name, owner});
}

// The holdings of `name` move `by` into the past (a forward step of the
// database clock as the rule sees it).
void step_holdings_forward(Connection& admin, const std::string& name, milliseconds by) {
  admin.execute("UPDATE sqlguard_sync_holder SET expire_at = expire_at - ?, renewed_at = renewed_at - ?, "
                "acquired_at = acquired_at - ? WHERE name = ?",
                {by.count(), by.count(), by.count(), name});
}

}  // namespace

TEST_CASE("an abandoned semaphore permit is taken over only after this process saw it unchanged for its ttl, not "
          "when the database clock says it ran out",
          "[semaphore][takeover]") {
  auto client = LockClient::create(ctx().uri);
  auto admin = ctx().connect();
  const std::string name = ctx().unique("semwatch");
  Semaphore sem(client, name, 1, opts(5s));
  REQUIRE(sem.try_acquire());  // the name's head
  REQUIRE(sem.release());
  stage_dead_holding(*admin, name, "P", 400ms);

  CHECK_FALSE(sem.try_acquire());  // the first sighting: the database clock alone decides nothing
  const auto t0 = steady_clock::now();
  // The refusal says how long is left: the rest of the watch it started.
  REQUIRE(sem.takeover_in());
  CHECK(*sem.takeover_in() > 0ms);
  CHECK(*sem.takeover_in() <= 400ms);
  std::this_thread::sleep_for(200ms);
  CHECK_FALSE(sem.try_acquire());
  REQUIRE(sem.takeover_in());
  CHECK(*sem.takeover_in() <= 200ms);
  CHECK(holder_rows(name, "gone") == 1);
  std::this_thread::sleep_until(t0 + 450ms);
  CHECK(sem.try_acquire());  // seen unchanged for its ttl: taken over, as seen
  CHECK_FALSE(sem.takeover_in());  // held: nothing to take over
  CHECK(holder_rows(name, "gone") == 0);
  CHECK(sem.release());

  SECTION("the control: the database-clock rule takes it at the first look") {
    const std::string other = ctx().unique("semwatch-ctl");
    Semaphore ctl(client, other, 1, opts(5s, TakeOver::kDatabaseClock));
    REQUIRE(ctl.try_acquire());
    REQUIRE(ctl.release());
    stage_dead_holding(*admin, other, "P", 400ms);
    CHECK(ctl.try_acquire());
    CHECK(ctl.release());
  }
}

TEST_CASE("a writer passes a dead reader only after watching it for its ttl", "[rw-lease][takeover]") {
  auto client = LockClient::create(ctx().uri);
  auto admin = ctx().connect();
  const std::string name = ctx().unique("rwwatch");
  ReadWriteLease rw(client, name, opts(5s));
  REQUIRE(rw.try_acquire(LeaseMode::kExclusive));
  REQUIRE(rw.release());
  stage_dead_holding(*admin, name, "S", 400ms);
  CHECK_FALSE(rw.try_acquire(LeaseMode::kExclusive));
  std::this_thread::sleep_for(450ms);
  CHECK(rw.try_acquire(LeaseMode::kExclusive));
  CHECK(holder_rows(name, "gone") == 0);
  CHECK(rw.release());
}

TEST_CASE("a forward step of the database clock takes no permit from a holder that renews; the database-clock rule "
          "lets a taker in beside it (the control)",
          "[semaphore][takeover]") {
  auto admin = ctx().connect();
  auto ca = LockClient::create(ctx().uri);
  auto cb = LockClient::create(ctx().uri);
  const std::string name = ctx().unique("semstep");
  Semaphore a(ca, name, 1, opts(1500ms));
  Semaphore b(cb, name, 1, opts(1500ms));
  REQUIRE(a.try_acquire());
  bool taken = false, a_lost_trust = false;
  const auto until = steady_clock::now() + 3s;
  while (steady_clock::now() < until) {
    step_holdings_forward(*admin, name, 1h);
    taken = taken || b.try_acquire();
    a_lost_trust = a_lost_trust || !a.owns();
    std::this_thread::sleep_for(50ms);
  }
  CHECK_FALSE(taken);
  CHECK_FALSE(a_lost_trust);
  CHECK(a.owns());

  Semaphore ctl(cb, name, 1, opts(1500ms, TakeOver::kDatabaseClock));
  // (A renewal between the step and the try undoes the step: step again.)
  bool got = false;
  for (int i = 0; i < 5 && !got; ++i) {
    step_holdings_forward(*admin, name, 1h);
    got = ctl.try_acquire();
  }
  CHECK(got);
  CHECK((got && a.owns()));  // two holders of one permit: the overlap this rule allows
  CHECK(sgtest::eventually([&] { return !a.owns(); }, 5s));  // the holder learns at its next renewal
  if (got) CHECK(ctl.release());
}

namespace {
// A place in the fair queue of `name` ahead of every waiter (ticket -9),
// expired an hour ago by the database clock, with a ttl of `ttl`.
void stage_place(Connection& admin, const std::string& name, milliseconds ttl) {
  admin.execute("INSERT INTO sqlguard_lock_queue (name, ticket, owner, expire_at, beat, ttl_ms) VALUES (?, -9, "
                "'queued', ?, 1, ?)",
                {name, admin.db_now_ms() - 3600000, ttl.count()});
}

LeaseOptions fair(milliseconds ttl, TakeOver rule = TakeOver::kWatched) {
  LeaseOptions o = opts(ttl, rule);
  o.fair = true;
  return o;
}
}  // namespace

TEST_CASE("a fair queue's place is passed only after the waiter behind it watched it unchanged for its ttl; a place "
          "that is renewed is never passed, whatever the database clock says",
          "[fair-lease][takeover]") {
  auto client = LockClient::create(ctx().uri);
  auto admin = ctx().connect();
  const std::string name = ctx().unique("placewatch");
  LeaseLock w(client, name, fair(5s));
  REQUIRE(w.try_acquire());  // the name's head
  REQUIRE(w.release());
  stage_place(*admin, name, 400ms);

  SECTION("a dead place: passed after its watch") {
    CHECK_FALSE(w.try_acquire());  // someone waits ahead, as far as this process has seen
    std::this_thread::sleep_for(450ms);
    CHECK(w.try_acquire());
    CHECK(sgtest::query_int("SELECT COUNT(*) FROM sqlguard_lock_queue WHERE name = ? AND owner = 'queued'",
                            {name}) == 0);
    CHECK(w.release());
  }
  SECTION("a live place (renewed every 100 ms) an hour behind the database clock: never passed; the "
          "database-clock rule jumps it (the control)") {
    bool jumped = false;
    const auto until = steady_clock::now() + 1500ms;
    while (steady_clock::now() < until) {
      admin->execute("UPDATE sqlguard_lock_queue SET beat = beat + 1 WHERE name = ? AND owner = 'queued'", {name});
      jumped = jumped || w.try_acquire();
      std::this_thread::sleep_for(100ms);
    }
    CHECK_FALSE(jumped);
    LeaseLock ctl(client, name, fair(5s, TakeOver::kDatabaseClock));
    const bool got = ctl.try_acquire();
    CHECK(got);  // ahead of it a waiter that still renews its place: FIFO broken by the clock
    if (got) CHECK(ctl.release());
  }
}

TEST_CASE("a later `run --permits` process on this machine continues the watch of a dead holding an earlier one "
          "started",
          "[semaphore][takeover][cli]") {
  auto admin = ctx().connect();
  const std::string name = ctx().unique("cliholding");
  std::string out;
  auto cli = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {sgtest::cli_path(), "--db", ctx().uri};
    argv.insert(argv.end(), args.begin(), args.end());
    return sgtest::run_process(argv, &out);
  };
  REQUIRE(cli({"lock", "resize", name, "--permits", "1"}) == 0);
  stage_dead_holding(*admin, name, "P", 500ms);
  const std::vector<std::string> run = {"run", "--lock", name, "--permits", "1", "--wait", "0s", "--", "true"};
  std::vector<std::string> json_run = run;
  json_run.insert(json_run.begin(), "--json");
  REQUIRE(cli(json_run) == 75);  // a new process: its first sighting, shared with this machine
  // The refusal says how long until this machine may take it over.
  INFO(out);
  CHECK(out.find("\"takeover_in_ms\":") != std::string::npos);
  CHECK(out.find("\"takeover_in_ms\":null") == std::string::npos);
  CHECK(sgtest::query_int("SELECT COUNT(*) FROM sqlguard_sync_watch WHERE name = ?", {name}) == 1);
  std::this_thread::sleep_for(600ms);
  SECTION("a later process takes it over") { CHECK(cli(run) == 0); }
  SECTION("the control: a sighting made on another machine is not this machine's") {
    admin->execute("UPDATE sqlguard_sync_watch SET watcher = 'another-machine' WHERE name = ?", {name});
    CHECK(cli(run) == 75);
  }
}

TEST_CASE("cleanup never deletes an unreleased holding or a waiting place by the database clock",
          "[semaphore][fair-lease][takeover][cleanup]") {
  auto admin = ctx().connect();
  auto client = LockClient::create(ctx().uri);
  const std::string sem_name = ctx().unique("keepheld");
  const std::string fair_name = ctx().unique("keepplace");
  Semaphore sem(client, sem_name, 1, opts(5s));
  REQUIRE(sem.try_acquire());
  REQUIRE(sem.release());
  LeaseLock f(client, fair_name, fair(5s));
  REQUIRE(f.try_acquire());
  REQUIRE(f.release());
  stage_dead_holding(*admin, sem_name, "P", 400ms);  // an hour "expired"
  stage_place(*admin, fair_name, 400ms);
  CleanupOptions o;
  o.lock_grace = 0ms;
  o.idempotency = o.inbox = o.history = false;
  cleanup(*admin, o);
  CHECK(holder_rows(sem_name, "gone") == 1);
  CHECK(sgtest::query_int("SELECT COUNT(*) FROM sqlguard_lock_queue WHERE name = ?", {fair_name}) == 1);
  CHECK(sgtest::query_int("SELECT COUNT(*) FROM sqlguard_sync WHERE name = ?", {sem_name}) == 1);  // its head stays
  // The control: released, they go.
  admin->execute("UPDATE sqlguard_sync_holder SET beat = 0 WHERE name = ?", {sem_name});
  admin->execute("UPDATE sqlguard_lock_queue SET beat = 0 WHERE name = ?", {fair_name});
  const auto r = cleanup(*admin, o);
  CHECK(r.holdings_deleted >= 1);
  CHECK(r.queue_places_deleted >= 1);
  CHECK(holder_rows(sem_name, "gone") == 0);
}
