// Lock sets (include/sqlguard/lock_set.h): several lease names all or none,
// a fence per name, renewed and lost together, no deadlock between sets.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "sqlguard/admin.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"
#include "sqlguard/lock_kinds.h"
#include "sqlguard/lock_set.h"
#include "sqlguard/semaphore.h"
#include "test_context.h"
#include "test_helpers.h"

using namespace sqlguard;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using sgtest::code_of;
using sgtest::ctx;
using sgtest::eventually;
using sgtest::message_of;

namespace {

LeaseOptions opts(std::chrono::milliseconds ttl = 5s) {
  LeaseOptions o;
  o.ttl = ttl;
  o.backoff_max = 20ms;
  return o;
}

// Whether `name` is held now, as its row says (another process's view).
bool held_in_database(Connection& c, const std::string& name) {
  auto info = lease_info(c, name);
  return info && info->held();
}

// Who is inside each name's critical section: an entry while another holder
// is inside is an overlap.
struct Occupancy {
  std::mutex mu;
  std::map<std::string, int> inside;
  int overlaps = 0;
  void enter(const std::vector<std::string>& names) {
    std::lock_guard<std::mutex> lk(mu);
    for (const auto& n : names)
      if (++inside[n] > 1) ++overlaps;
  }
  void leave(const std::vector<std::string>& names) {
    std::lock_guard<std::mutex> lk(mu);
    for (const auto& n : names) --inside[n];
  }
};

}  // namespace

TEST_CASE("a lock set takes every name or none, a fence per name, in one commit", "[lock-set]") {
  auto mine = LockClient::create(ctx().uri);
  auto theirs = LockClient::create(ctx().uri);
  auto admin = ctx().connect();
  const std::string a = ctx().unique("set_a"), b = ctx().unique("set_b"), c = ctx().unique("set_c");
  LockSet set(mine, {c, a, b}, opts());
  CHECK(set.names() == std::vector<std::string>{a, b, c});  // byte order, whatever the order given
  CHECK(set.kind() == LockKind::kLease);

  LeaseLock other_b(theirs, b, opts());
  REQUIRE(other_b.try_acquire());
  CHECK_FALSE(set.try_acquire());
  CHECK(set.blocked_by() == b);
  CHECK_FALSE(set.owns());
  CHECK(set.hold_count() == 0);
  // None: the name before the busy one was rolled back, the one after never taken.
  CHECK_FALSE(held_in_database(*admin, a));
  CHECK_FALSE(held_in_database(*admin, c));
  {
    LeaseLock other_a(theirs, a, opts());
    CHECK(other_a.try_acquire());  // free for anyone at once
    CHECK(other_a.release());
  }
  // Control: the same names taken one by one hold a subset when one is busy.
  {
    LeaseLock one_a(mine, a, opts()), one_b(mine, b, opts());
    CHECK(one_a.try_acquire());
    CHECK_FALSE(one_b.try_acquire());
    CHECK(held_in_database(*admin, a));  // what the set never leaves
    CHECK(one_a.release());
  }

  REQUIRE(other_b.release());
  REQUIRE(set.try_acquire());
  CHECK(set.owns());
  CHECK(set.remaining() > 0ms);
  CHECK(set.blocked_by().empty());
  std::vector<std::int64_t> fences{set.fence_of(a), set.fence_of(b), set.fence_of(c)};
  for (auto f : fences) CHECK(f > 0);
  std::sort(fences.begin(), fences.end());
  CHECK(std::adjacent_find(fences.begin(), fences.end()) == fences.end());  // one token each
  CHECK(set.fence() == set.fence_of(a));
  CHECK(code_of([&] { (void)set.fence_of("not-in-the-set"); }) == ErrorCode::kInvalidArgument);
  for (const auto& n : {a, b, c}) {
    INFO(n);
    CHECK(held_in_database(*admin, n));
    LeaseLock other(theirs, n, opts());
    CHECK_FALSE(other.try_acquire());
  }
  // Re-entrant, as a lease.
  CHECK(set.try_acquire());
  CHECK(set.hold_count() == 2);
  CHECK(set.release());
  CHECK(set.owns());
  CHECK(set.release());
  CHECK_FALSE(set.owns());
  for (const auto& n : {a, b, c}) {
    INFO(n);
    CHECK_FALSE(held_in_database(*admin, n));
  }
  CHECK_FALSE(set.release());  // nothing held
}

TEST_CASE("lock sets overlapping in any order never deadlock and never overlap, nor with single leases",
          "[lock-set][contention]") {
  auto client = LockClient::create(ctx().uri);
  const std::string p = ctx().unique("setmix");
  const std::string a = p + "_a", b = p + "_b", c = p + "_c", d = p + "_d";
  // Four sets, given in different orders, and a single lease on b.
  const std::vector<std::vector<std::string>> sets{{a, b, c}, {c, b, a}, {d, c, b}, {a, d}, {b}};
  Occupancy occ;
  std::atomic<int> wins{0}, errors{0};
  std::atomic<bool> stop{false};
  std::mutex err_mu;
  std::string first_error;
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < sets.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        std::unique_ptr<Lock> lock;
        if (sets[i].size() == 1) lock = std::make_unique<LeaseLock>(client, sets[i][0], opts());
        else lock = std::make_unique<LockSet>(client, sets[i], opts());
        while (!stop) {
          if (!lock->acquire(3s)) continue;
          occ.enter(sets[i]);
          std::this_thread::sleep_for(1ms);
          occ.leave(sets[i]);
          lock->release();
          ++wins;
        }
      } catch (const std::exception& e) {
        ++errors;
        std::lock_guard<std::mutex> lk(err_mu);
        if (first_error.empty()) first_error = e.what();
      }
    });
  }
  std::this_thread::sleep_for(2s);
  stop = true;
  for (auto& t : threads) t.join();
  INFO("first error: " << first_error);
  CHECK(errors == 0);
  CHECK(occ.overlaps == 0);
  CHECK(wins > 20);
  // Control: the detector fires when two holders are inside at once.
  Occupancy control;
  control.enter({a, b});
  control.enter({b});
  CHECK(control.overlaps == 1);
}

TEST_CASE("a lock set waits holding nothing and takes every name once the last busy one is released",
          "[lock-set]") {
  auto mine = LockClient::create(ctx().uri);
  auto theirs = LockClient::create(ctx().uri);
  auto admin = ctx().connect();
  const std::string a = ctx().unique("setw_a"), b = ctx().unique("setw_b");
  LeaseLock other_b(theirs, b, opts());
  REQUIRE(other_b.try_acquire());
  LockSet set(mine, {a, b}, opts());
  std::atomic<bool> got{false};
  std::thread waiter([&] { got = set.acquire(10s); });
  // While it waits it holds nothing: a stays free for anyone.
  std::this_thread::sleep_for(300ms);
  CHECK_FALSE(got.load());
  CHECK_FALSE(held_in_database(*admin, a));
  REQUIRE(other_b.release());
  waiter.join();
  CHECK(got.load());
  CHECK(set.owns());
  CHECK(set.release());
  // A wait that ends without the set: false, nothing held.
  REQUIRE(other_b.try_acquire());
  CHECK_FALSE(set.acquire(200ms));
  CHECK_FALSE(held_in_database(*admin, a));
  CHECK(other_b.release());
}

TEST_CASE("a waiting lock set is woken by another client's release of the lease in its way (PostgreSQL, SQLite); "
          "on MariaDB and behind a transaction pooler it tries on its timers",
          "[lock-set]") {
  auto admin = ctx().connect();
  // Where the client's listener listens on channels (PostgreSQL LISTEN,
  // SQLite futex words); MariaDB's wake-up locks and a pooler's sessions: not.
  const bool listens = ctx().kind != DialectKind::kMysql && !admin->capabilities().transaction_pooler;
  auto mine = LockClient::create(ctx().uri);
  auto theirs = LockClient::create(ctx().uri);
  const std::string a = ctx().unique("setk_a"), b = ctx().unique("setk_b"), c = ctx().unique("setk_c");
  LeaseOptions o = opts();
  o.barging_limit = 0ms;  // listens from its first busy attempt (lock_set.cpp: listen_after)
  // Naps of up to 30 s (full jitter): a release is seen by a wake-up, or by
  // chance when a nap happens to end.
  o.backoff_initial = listens ? 30s : 5ms;
  o.backoff_max = listens ? 30s : 50ms;
  LeaseLock holder(theirs, b, opts(30s));
  REQUIRE(holder.try_acquire());
  LockSet set(mine, {a, b, c}, o);
  const auto wakeups_before = mine->stats().wakeups;
  std::atomic<bool> got{false};
  std::thread waiter([&] { got = set.acquire(60s); });
  std::this_thread::sleep_for(300ms);
  CHECK_FALSE(got.load());
  const auto released_at = std::chrono::steady_clock::now();
  REQUIRE(holder.release());
  waiter.join();
  const auto waited = std::chrono::steady_clock::now() - released_at;
  REQUIRE(got.load());
  CHECK(set.owns());
  const auto wakeups = mine->stats().wakeups - wakeups_before;
  INFO("listens " << listens << ", wake-ups " << wakeups << ", acquired "
                  << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count() << " ms after the release");
  if (listens) {
    // Woken, not a nap's end: a nap of 30 s ends in the 10 s after the
    // release in a third of the runs, and then no wake-up was delivered.
    CHECK(wakeups >= 1);
    CHECK(waited < 10s);
  } else {
    CHECK(wakeups == 0);  // its timers found it free
  }
  CHECK(set.release());

  // The same wait asynchronously (the client's waiter thread makes the
  // attempts; the listener wakes the set's queue).
  REQUIRE(holder.try_acquire());
  const auto async_before = mine->stats().wakeups;
  std::future<bool> f = set.acquire_async(60s);
  std::this_thread::sleep_for(300ms);
  CHECK(f.wait_for(0s) == std::future_status::timeout);
  const auto async_released_at = std::chrono::steady_clock::now();
  REQUIRE(holder.release());
  REQUIRE(f.get());
  const auto async_waited = std::chrono::steady_clock::now() - async_released_at;
  const auto async_wakeups = mine->stats().wakeups - async_before;
  INFO("asynchronous: wake-ups " << async_wakeups << ", acquired "
                                 << std::chrono::duration_cast<std::chrono::milliseconds>(async_waited).count()
                                 << " ms after the release");
  if (listens) {
    CHECK(async_wakeups >= 1);
    CHECK(async_waited < 10s);
  } else {
    CHECK(async_wakeups == 0);
  }
  CHECK(set.owns());
  CHECK(set.release());
}

TEST_CASE("a lock set waits asynchronously on the client's waiter thread, holding nothing; a cancelled wait takes "
          "nothing",
          "[lock-set][async]") {
  auto mine = LockClient::create(ctx().uri);
  auto theirs = LockClient::create(ctx().uri);
  auto admin = ctx().connect();
  const std::string a = ctx().unique("seta_a"), b = ctx().unique("seta_b");
  LeaseLock other_b(theirs, b, opts());
  REQUIRE(other_b.try_acquire());
  LockSet set(mine, {a, b}, opts());
  auto got = set.acquire_async(10s);
  std::this_thread::sleep_for(300ms);
  CHECK(got.wait_for(0s) == std::future_status::timeout);
  CHECK_FALSE(held_in_database(*admin, a));  // it holds nothing while it waits
  CHECK(code_of([&] { set.try_acquire(); }) == ErrorCode::kInvalidArgument);  // one pending acquire at a time
  REQUIRE(other_b.release());
  CHECK(got.get());
  CHECK(set.owns());
  CHECK(held_in_database(*admin, a));
  CHECK(set.acquire_async(1s).get());  // re-entrant: at once
  CHECK(set.hold_count() == 2);
  CHECK(set.release());
  CHECK(set.release());
  CHECK_FALSE(held_in_database(*admin, a));
  // Cancelled: the callback gets false and nothing is held.
  REQUIRE(other_b.try_acquire());
  std::promise<bool> cancelled;
  set.acquire_async(10s, [&](bool ok, std::exception_ptr) { cancelled.set_value(ok); });
  std::this_thread::sleep_for(100ms);
  CHECK(set.cancel_acquire());
  CHECK_FALSE(cancelled.get_future().get());
  CHECK_FALSE(set.cancel_acquire());  // none pending
  REQUIRE(other_b.release());
  std::this_thread::sleep_for(200ms);
  CHECK_FALSE(held_in_database(*admin, a));
  CHECK_FALSE(held_in_database(*admin, b));
  CHECK(set.hold_count() == 0);
  // A wait that ends without the set: false.
  REQUIRE(other_b.try_acquire());
  CHECK_FALSE(set.acquire_async(300ms).get());
  CHECK(other_b.release());
}

TEST_CASE("a loss of one name is the set's loss, said once; the other names stay held until release()",
          "[lock-set][loss]") {
  auto client = LockClient::create(ctx().uri);
  auto theirs = LockClient::create(ctx().uri);
  auto admin = ctx().connect();
  const std::string a = ctx().unique("setl_a"), b = ctx().unique("setl_b");
  std::atomic<int> calls{0};
  std::mutex mu;
  std::optional<LeaseLoss> said;
  LeaseOptions o = opts(1500ms);
  o.on_lost = [&](const LeaseLoss& l) {
    ++calls;
    std::lock_guard<std::mutex> lk(mu);
    said = l;
  };
  LockSet set(client, {a, b}, o);
  REQUIRE(set.try_acquire());
  REQUIRE(force_release(*admin, b));
  REQUIRE(eventually([&] { return calls.load() > 0; }, 10s));
  std::this_thread::sleep_for(1200ms);  // more renewal rounds: said once
  CHECK(calls.load() == 1);
  CHECK_FALSE(set.owns());
  REQUIRE(set.last_loss());
  CHECK_THAT(set.last_loss()->detail, Contains(b));
  {
    std::lock_guard<std::mutex> lk(mu);
    REQUIRE(said);
    CHECK(said->cause == LossCause::kTakenOver);
  }
  CHECK(held_in_database(*admin, a));  // still the set's
  CHECK_FALSE(set.try_acquire());      // lost: release() first
  CHECK_FALSE(set.release());          // it was not held whole
  CHECK_FALSE(held_in_database(*admin, a));
  // A new acquisition is a new set: lost again would be said again.
  REQUIRE(set.try_acquire());
  CHECK(set.owns());
  CHECK_FALSE(set.last_loss());
  CHECK(set.release());
}

TEST_CASE("a lock set's guarded transaction re-checks and locks every name", "[lock-set][guarded]") {
  auto client = LockClient::create(ctx().uri);
  auto admin = ctx().connect();
  const std::string t = ctx().unique("setg_t");
  admin->execute_script("CREATE TABLE " + t + " (id INTEGER NOT NULL PRIMARY KEY, fence BIGINT NOT NULL)");
  const std::string a = ctx().unique("setg_a"), b = ctx().unique("setg_b");
  LockSet set(client, {a, b}, opts());
  CHECK_FALSE(set.run_guarded([](Transaction&) {}));  // not held
  REQUIRE(set.try_acquire());
  CHECK(set.run_guarded([&](Transaction& tx) {
    tx.execute("INSERT INTO " + t + " (id, fence) VALUES (?, ?)", {std::int64_t{1}, set.fence_of(b)});
  }));
  REQUIRE(force_release(*admin, b));
  bool ran = false;
  CHECK_FALSE(set.run_guarded([&](Transaction& tx) {
    ran = true;
    tx.execute("INSERT INTO " + t + " (id, fence) VALUES (?, ?)", {std::int64_t{2}, set.fence_of(b)});
  }));
  CHECK_FALSE(ran);
  CHECK(sgtest::query_int("SELECT COUNT(*) FROM " + t) == 1);
  CHECK_FALSE(set.owns());  // the check found the loss
  set.release();
}

TEST_CASE("a lock set refuses bad input before anything is sent, and a name of another kind takes nothing",
          "[lock-set][bad-input]") {
  auto client = LockClient::create(ctx().uri);
  auto admin = ctx().connect();
  const std::string a = ctx().unique("setbad_a"), s = ctx().unique("setbad_s");
  CHECK(code_of([&] { LockSet x(client, std::vector<std::string>{}, opts()); }) == ErrorCode::kInvalidArgument);
  CHECK_THAT(message_of([&] { LockSet x(client, {a, "x", a}, opts()); }), Contains("listed twice"));
  CHECK(code_of([&] { LockSet x(client, {a, ""}, opts()); }) == ErrorCode::kInvalidArgument);
  CHECK(code_of([&] { LockSet x(client, {a, std::string(300, 'n')}, opts()); }) == ErrorCode::kInvalidArgument);
  std::vector<std::string> too_many;
  for (std::size_t i = 0; i <= LockSet::kMaxNames; ++i) too_many.push_back(a + "_" + std::to_string(i));
  CHECK_THAT(message_of([&] { LockSet x(client, too_many, opts()); }), Contains("at most 1000"));
  LeaseOptions fair = opts();
  fair.fair = true;
  CHECK_THAT(message_of([&] { LockSet x(client, {a}, fair); }), Contains("fair"));
  LeaseOptions bad_ttl = opts();
  bad_ttl.ttl = 0ms;
  CHECK(code_of([&] { LockSet x(client, {a}, bad_ttl); }) == ErrorCode::kInvalidArgument);
  LockSet set(client, {a, s}, opts());
  // A name in use as a semaphore: refused, naming both kinds; a is not taken.
  Semaphore sem(client, s, 2, opts());
  REQUIRE(sem.try_acquire());
  std::string what;
  CHECK(code_of([&] { set.try_acquire(); }, &what) == ErrorCode::kInvalidArgument);
  CHECK_THAT(what, Contains("semaphore"));
  CHECK_FALSE(set.owns());
  CHECK_FALSE(held_in_database(*admin, a));
  CHECK(sem.release());
}

TEST_CASE("a lock set takes leases and semaphore permits together, all or none", "[lock-set][semaphore]") {
  auto mine = LockClient::create(ctx().uri);
  auto theirs = LockClient::create(ctx().uri);
  auto admin = ctx().connect();
  const std::string a = ctx().unique("setsem_a"), s = ctx().unique("setsem_s"), t = ctx().unique("setsem_t");
  LockSet set(mine, {{s, parse_lock_spec("semaphore:2")}, {a, {}}, {t, parse_lock_spec("semaphore:1")}}, opts());
  CHECK(set.names() == std::vector<std::string>{a, s, t});
  CHECK(set.spec_of(s).permits == 2);
  CHECK(set.spec_of(a).kind == LockKind::kLease);
  // The semaphore full: the set is busy on it and takes nothing.
  Semaphore one(theirs, s, 2, opts()), two(theirs, s, 2, opts());
  REQUIRE(one.try_acquire());
  REQUIRE(two.try_acquire());
  CHECK_FALSE(set.try_acquire());
  CHECK(set.blocked_by() == s);
  CHECK_FALSE(held_in_database(*admin, a));
  CHECK(synchronizer_info(*admin, t).in_use == 0);
  // A permit free: the set holds the lease and a permit of each semaphore.
  REQUIRE(two.release());
  REQUIRE(set.try_acquire());
  CHECK(set.owns());
  CHECK(held_in_database(*admin, a));
  CHECK(synchronizer_info(*admin, s).in_use == 2);
  CHECK(synchronizer_info(*admin, t).in_use == 1);
  CHECK(set.fence_of(s) > 0);
  CHECK(set.fence_of(t) > 0);
  CHECK_FALSE(two.try_acquire());  // the set's permit counts
  CHECK(set.run_guarded([](Transaction&) {}));
  CHECK(set.release());
  CHECK(synchronizer_info(*admin, s).in_use == 1);
  CHECK(synchronizer_info(*admin, t).in_use == 0);
  CHECK_FALSE(held_in_database(*admin, a));
  CHECK(one.release());
  // Asked with another count than the stored one: refused naming both, nothing taken.
  LockSet wrong(mine, {{a, {}}, {s, parse_lock_spec("semaphore:3")}}, opts());
  std::string what;
  CHECK(code_of([&] { wrong.try_acquire(); }, &what) == ErrorCode::kInvalidArgument);
  CHECK_THAT(what, Contains("2") && Contains("3"));
  CHECK_FALSE(held_in_database(*admin, a));
  // Kinds a set does not hold are refused before anything is sent.
  CHECK_THAT(message_of([&] { LockSet x(mine, {{a, parse_lock_spec("rw:shared")}}, opts()); }),
             Contains("leases and semaphore permits"));
  CHECK_THAT(message_of([&] { LockSet x(mine, {{a, parse_lock_spec("fair")}}, opts()); }),
             Contains("leases and semaphore permits"));
}

TEST_CASE("a lock set of 1,000 names is taken and released whole", "[lock-set][scale]") {
  auto client = LockClient::create(ctx().uri);
  auto admin = ctx().connect();
  const std::string p = ctx().unique("setbig");
  std::vector<std::string> names;
  for (int i = 0; i < 1000; ++i) names.push_back(p + "_" + std::to_string(i));
  LockSet set(client, names, opts(10s));
  REQUIRE(set.try_acquire());
  CHECK(set.owns());
  CHECK(held_in_database(*admin, names.front()));
  CHECK(held_in_database(*admin, names.back()));
  CHECK(client->stats().held_leases >= 1000);
  // One of them taken by another set: the whole set waits (all or none).
  LockSet overlapping(LockClient::create(ctx().uri), {names[500], p + "_other"}, opts());
  CHECK_FALSE(overlapping.try_acquire());
  CHECK(overlapping.blocked_by() == names[500]);
  CHECK(set.release());
  CHECK_FALSE(held_in_database(*admin, names[500]));
  CHECK(overlapping.try_acquire());
  CHECK(overlapping.release());
  admin::delete_by_prefix(*admin, p);
}
