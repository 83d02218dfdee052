// Coalescing (LockClientOptions::batch_max): the batch plans' answers name
// by name (a name never seen and a released row taken, a held row and a
// reserved name left to the per-name path, a release only of what the caller
// holds), and a lock client whose connections are busy sends queued
// try-acquires and releases of distinct names as one batch, each caller
// getting its own answer. On every dialect: where the dialect has no batch
// plan (SQLite, Galera) every call is sent alone and no batch is counted.
#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "dialect/dialect.h"
#include "plans/plans.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"
#include "sqlguard/semaphore.h"
#include "test_context.h"
#include "test_helpers.h"

using namespace sqlguard;
using namespace std::chrono_literals;
using sgtest::ctx;
using sgtest::eventually;

namespace {

const detail::BatchPlan* batch_plan(Connection& c) { return c.dialect().plans().batch; }

// A Galera node (wsrep on): its acquire plan has no INSERT ... RETURNING.
bool galera_node(Connection& c) {
  if (!ctx().is(DialectKind::kMysql)) return false;
  auto r = c.execute("SELECT @@wsrep_on");
  return !r.rows.empty() && r.rows[0][0].as_int() == 1;
}

void expect_plan_where_promised(const detail::BatchPlan* plan) {
  // PostgreSQL (behind PgBouncer too) and a single MariaDB server batch;
  // SQLite and a Galera node do not (the galera step runs the client case).
  auto c = ctx().connect();
  if (ctx().is(DialectKind::kPostgresql)) CHECK(plan != nullptr);
  if (ctx().is_sqlite()) CHECK(plan == nullptr);
  if (ctx().is(DialectKind::kMysql)) CHECK((plan == nullptr) == galera_node(*c));
}

// Row of lease `name` as the database has it: owner, fence, held.
struct RowNow {
  std::string owner;
  std::int64_t fence = 0;
  bool held = false;
};
RowNow row_of(Connection& c, const std::string& name) {
  auto info = lease_info(c, name);
  REQUIRE(info);
  return RowNow{info->owner, info->fence, info->held()};
}

// Keeps a lock client's one work connection busy: `holder`'s guarded
// transaction runs on it until free() (or the end of the scope).
class BusyConnection {
 public:
  explicit BusyConnection(LeaseLock& holder) {
    thread_ = std::thread([this, &holder] {
      holder.run_guarded([&](Transaction&) {
        inside_.set_value();
        go_f_.wait();
      });
    });
    inside_.get_future().wait();
  }
  ~BusyConnection() { free(); }
  void free() {
    if (!thread_.joinable()) return;
    go_.set_value();
    thread_.join();
  }

 private:
  std::promise<void> inside_, go_;
  std::shared_future<void> go_f_ = go_.get_future().share();
  std::thread thread_;
};

}  // namespace

TEST_CASE("a batch plan takes new and released names, leaves held and reserved ones to the per-name path, and "
          "releases only what the caller holds",
          "[coalesce]") {
  auto conn = ctx().connect();
  const detail::BatchPlan* plan = batch_plan(*conn);
  expect_plan_where_promised(plan);
  if (!plan) return;  // (SQLite: covered by the client case below, which then sends every call alone)

  const std::string fresh = ctx().unique("bt_new"), freed = ctx().unique("bt_freed"),
                    held = ctx().unique("bt_held"), reserved = ctx().unique("bt_sem");
  // A released row, a row another owner holds, a name a semaphore reserved.
  auto r1 = acquire_lease(*conn, freed, "earlier", 30s);
  REQUIRE(r1.acquired);
  REQUIRE(release_lease(*conn, freed, "earlier", r1.fence));
  auto r2 = acquire_lease(*conn, held, "someone-else", 30s);
  REQUIRE(r2.acquired);
  auto client = LockClient::create(ctx().uri);
  Semaphore sem(client, reserved, 2);
  REQUIRE(sem.try_acquire());

  std::vector<detail::BatchTry> tries = {{fresh, "me-1", 30s, 0ms}, {freed, "me-2", 30s, 0ms},
                                         {held, "me-3", 30s, 0ms}, {reserved, "me-4", 30s, 0ms}};
  const auto out = plan->acquire(*conn, tries);
  REQUIRE(out.size() == 4);
  CHECK(out[0].taken);
  CHECK(out[1].taken);
  CHECK(out[1].fence > r1.fence);
  CHECK_FALSE(out[2].taken);
  REQUIRE(out[2].seen);
  CHECK(out[2].seen->version.fence == r2.fence);
  CHECK_FALSE(out[2].seen->released);
  CHECK_FALSE(out[3].taken);  // the client sends it alone, which refuses it naming the kind
  CHECK(row_of(*conn, fresh).owner == "me-1");
  CHECK(row_of(*conn, freed).owner == "me-2");
  CHECK(row_of(*conn, held).owner == "someone-else");
  CHECK(out[0].fence != out[1].fence);

  // Releases: only the caller's own (name, owner, fence) is released; a wrong
  // fence and another owner's lease are answered false and left held.
  std::vector<detail::BatchRelease> refs = {{fresh, "me-1", out[0].fence},
                                            {freed, "me-2", out[1].fence + 1000},
                                            {held, "me-3", r2.fence}};
  const auto rel = plan->release(*conn, refs);
  REQUIRE(rel.size() == 3);
  CHECK(rel[0]);
  CHECK_FALSE(rel[1]);
  CHECK_FALSE(rel[2]);
  CHECK_FALSE(row_of(*conn, fresh).held);
  CHECK(row_of(*conn, freed).held);
  CHECK(row_of(*conn, held).held);
  CHECK(release_lease(*conn, freed, "me-2", out[1].fence));
  CHECK(release_lease(*conn, held, "someone-else", r2.fence));
  sem.release();
}

TEST_CASE("a lock client whose connections are busy sends queued try-acquires and releases of distinct names as one "
          "batch, each caller with its own answer",
          "[coalesce][lock-client][galera]") {
  auto probe = ctx().connect();
  const bool batches = batch_plan(*probe) != nullptr;
  expect_plan_where_promised(batch_plan(*probe));
  const int n = 12;
  LockClientOptions co;
  co.max_connections = 3;  // renewal + listener + one work connection
  SECTION("coalesced") {}
  SECTION("negative control: batch_max = 1 sends every call alone") { co.batch_max = 1; }
  const bool expect_batches = batches && co.batch_max > 1;
  auto client = LockClient::create(ctx().uri, co);

  // A name another client holds: its try-acquire in the batch is answered busy.
  const std::string taken_name = ctx().unique("co_taken");
  auto other = LockClient::create(ctx().uri);
  LeaseLock holder(other, taken_name, LeaseOptions{});
  REQUIRE(holder.try_acquire());

  std::vector<std::unique_ptr<LeaseLock>> locks;
  for (int i = 0; i < n; ++i)
    locks.push_back(std::make_unique<LeaseLock>(client, i == 0 ? taken_name : ctx().unique("co_name"),
                                                LeaseOptions{}));

  // Holds the client's one work connection (a guarded transaction runs on
  // it) while the calls below queue behind it.
  auto queue_behind_busy_connection = [&](const std::function<bool(LeaseLock&)>& call, int first) {
    auto blocker = std::make_unique<LeaseLock>(client, ctx().unique("co_blocker"), LeaseOptions{});
    REQUIRE(blocker->try_acquire());
    BusyConnection guard(*blocker);
    std::vector<std::future<bool>> answers;
    for (int i = first; i < n; ++i)
      answers.push_back(std::async(std::launch::async, [&, i] { return call(*locks[static_cast<std::size_t>(i)]); }));
    const auto queued = static_cast<std::size_t>(n - first);
    if (expect_batches) CHECK(eventually([&] { return client->stats().calls_queued == queued; }, 10s));
    else std::this_thread::sleep_for(200ms);  // (nothing to wait for: each call waits for the connection alone)
    guard.free();
    std::vector<bool> out;
    for (auto& a : answers) out.push_back(a.get());
    CHECK(blocker->release());
    return out;
  };

  const auto before = client->stats();
  const auto got = queue_behind_busy_connection([](LeaseLock& l) { return l.try_acquire(); }, 0);
  REQUIRE(got.size() == static_cast<std::size_t>(n));
  CHECK_FALSE(got[0]);  // held by the other client
  CHECK(locks[0]->takeover_in().has_value());
  for (int i = 1; i < n; ++i) {
    INFO("lease " << i);
    CHECK(got[static_cast<std::size_t>(i)]);
    CHECK(locks[static_cast<std::size_t>(i)]->owns());
    CHECK(locks[static_cast<std::size_t>(i)]->fence() > 0);
  }
  const auto after_acquire = client->stats();
  if (expect_batches) {
    // One batch carried every queued try-acquire (the blocker's own acquire
    // and release went alone: the client was idle then).
    CHECK(after_acquire.batches - before.batches == 1);
    CHECK(after_acquire.batched_calls - before.batched_calls == static_cast<std::uint64_t>(n));
  } else {
    CHECK(after_acquire.batches == before.batches);
  }
  // What the batch took is renewed like any lease.
  CHECK(after_acquire.held_leases >= static_cast<std::size_t>(n - 1));

  // A waiter of another client on one of the names is woken by the batched
  // release (a NOTIFY / its wake-up lock freed), not by its polling, which
  // is slowed to 5 s here. (Behind a transaction pooler waiters poll: nothing
  // listens, so there is no wake-up to see.)
  auto watcher = LockClient::create(ctx().uri);
  LeaseOptions slow_poll;
  slow_poll.backoff_initial = 5s;
  slow_poll.backoff_max = 5s;
  slow_poll.barging_limit = 1h;  // (no next turn asked: the wake-up alone)
  LeaseLock waiter(watcher, locks[1]->name(), slow_poll);
  auto waited = std::async(std::launch::async, [&] { return waiter.acquire(30s); });
  const bool listens = !ctx().pooler;
  REQUIRE(eventually([&] { return watcher->stats().waiters == 1 && (!listens || watcher->stats().listening == 1); },
                     10s));
  const auto wakeups_before = watcher->stats().wakeups;

  const auto rel = queue_behind_busy_connection([](LeaseLock& l) { return l.release(); }, 1);
  for (bool r : rel) CHECK(r);
  CHECK(waited.get());
  if (listens) CHECK(watcher->stats().wakeups > wakeups_before);
  CHECK(waiter.release());
  const auto after_release = client->stats();
  if (expect_batches) {
    CHECK(after_release.batches - after_acquire.batches == 1);
    CHECK(after_release.batched_calls - after_acquire.batched_calls == static_cast<std::uint64_t>(n - 1));
  } else {
    CHECK(after_release.batches == before.batches);
  }
  auto c = ctx().connect();
  for (int i = 1; i < n; ++i) {
    INFO("lease " << i);
    CHECK_FALSE(locks[static_cast<std::size_t>(i)]->owns());
    CHECK_FALSE(row_of(*c, locks[static_cast<std::size_t>(i)]->name()).held);
  }
  CHECK(holder.owns());
  CHECK(holder.release());
}

TEST_CASE("64 threads on one lock client with two work connections take and release distinct names, never two "
          "holders of one name, every fence new",
          "[coalesce][lock-client]") {
  auto client = LockClient::create(ctx().uri);  // 4 connections: 2 work
  const int threads = 64, rounds = 15;
  std::vector<std::string> names;
  for (int i = 0; i < threads; ++i) names.push_back(ctx().unique("co_many"));
  std::atomic<int> wins{0}, errors{0};
  std::vector<std::vector<std::int64_t>> fences(threads);
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      LeaseLock l(client, names[static_cast<std::size_t>(t)], LeaseOptions{});
      for (int r = 0; r < rounds; ++r) {
        try {
          if (!l.try_acquire()) continue;
          ++wins;
          fences[static_cast<std::size_t>(t)].push_back(l.fence());
          if (!l.release()) ++errors;
        } catch (const Error&) {
          ++errors;
        }
      }
    });
  for (auto& t : ts) t.join();
  CHECK(errors == 0);
  CHECK(wins == threads * rounds);  // each name has one user: every try wins
  std::set<std::int64_t> all;
  for (const auto& f : fences) {
    for (std::size_t i = 1; i < f.size(); ++i) CHECK(f[i] > f[i - 1]);
    all.insert(f.begin(), f.end());
  }
  CHECK(all.size() == static_cast<std::size_t>(threads * rounds));  // no fence drawn twice
  auto c = ctx().connect();
  for (const auto& n : names) CHECK_FALSE(row_of(*c, n).held);
  const auto s = client->stats();
  INFO("batches " << s.batches << ", calls carried " << s.batched_calls);
  if (batch_plan(*c)) CHECK(s.batched_calls > s.batches);  // with 64 callers on 2 connections, batches carried several
  else CHECK(s.batches == 0);
  CHECK(s.calls_queued == 0);
}

TEST_CASE("calls queued for coalescing longer than borrow_timeout fail with kResourceExhausted; held leases are "
          "untouched and the queue empties",
          "[coalesce][lock-client]") {
  LockClientOptions co;
  co.max_connections = 3;  // one work connection
  co.borrow_timeout = 300ms;
  auto client = LockClient::create(ctx().uri, co);
  LeaseLock held(client, ctx().unique("ex_held"), LeaseOptions{});
  REQUIRE(held.try_acquire());
  const std::int64_t fence = held.fence();
  // The one work connection stays busy in a guarded transaction for longer
  // than borrow_timeout.
  BusyConnection guard(held);
  const int n = 6;
  std::vector<std::unique_ptr<LeaseLock>> locks;
  for (int i = 0; i < n; ++i) locks.push_back(std::make_unique<LeaseLock>(client, ctx().unique("ex_new"), LeaseOptions{}));
  std::vector<std::future<ErrorCode>> answers;
  for (int i = 0; i < n; ++i)
    answers.push_back(std::async(std::launch::async, [&, i]() -> ErrorCode {
      try {
        locks[static_cast<std::size_t>(i)]->try_acquire();
        return ErrorCode::kInternal;  // (answered: not expected while the connection is busy)
      } catch (const Error& e) {
        return e.code();
      }
    }));
  for (auto& a : answers) CHECK(a.get() == ErrorCode::kResourceExhausted);
  CHECK(client->stats().calls_queued == 0);
  guard.free();
  // The held lease was never at stake, and the client works again.
  CHECK(held.owns());
  CHECK(held.fence() == fence);
  for (auto& l : locks) CHECK_FALSE(l->owns());
  CHECK(locks[0]->try_acquire());
  CHECK(locks[0]->release());
  CHECK(held.release());
}

TEST_CASE("asynchronous calls that find no work connection free fail like blocked ones: a release after "
          "borrow_timeout (the lease still held), an acquire by its deadline",
          "[coalesce][lock-client][async][galera]") {
  LockClientOptions co;
  co.max_connections = 3;  // one work connection
  co.borrow_timeout = 300ms;
  bool expect_exhausted = true;
  SECTION("borrow_timeout 300 ms") {}
  SECTION("negative control: borrow_timeout 10 s, the release waits for the connection") {
    co.borrow_timeout = 10s;
    expect_exhausted = false;
  }
  auto client = LockClient::create(ctx().uri, co);
  LeaseLock busy(client, ctx().unique("ax_busy"), LeaseOptions{});
  LeaseLock held(client, ctx().unique("ax_held"), LeaseOptions{});
  LeaseLock fresh(client, ctx().unique("ax_new"), LeaseOptions{});
  REQUIRE(busy.try_acquire());
  REQUIRE(held.try_acquire());
  const std::string owner = held.owner();
  // The one work connection stays busy in a guarded transaction.
  BusyConnection guard(busy);
  auto released = held.release_async();
  auto got = fresh.acquire_async(1s);
  if (expect_exhausted) {
    // Both answer while the connection is still busy.
    REQUIRE(released.wait_for(5s) == std::future_status::ready);
    CHECK_THROWS_MATCHES(released.get(), Error, Catch::Predicate<Error>([](const Error& e) {
                           return e.code() == ErrorCode::kResourceExhausted &&
                                  std::string(e.what()).find("borrow_timeout (300ms)") != std::string::npos;
                         }));
    REQUIRE(got.wait_for(5s) == std::future_status::ready);
    CHECK_THROWS_MATCHES(got.get(), Error, Catch::Predicate<Error>([](const Error& e) {
                           return e.code() == ErrorCode::kResourceExhausted;
                         }));
    CHECK_FALSE(fresh.owns());
    CHECK(held.hold_count() == 1);  // kept: the release can be called again
  } else {
    CHECK(released.wait_for(1s) == std::future_status::timeout);  // queued, not given up
  }
  {
    auto c = ctx().connect();  // the row is untouched either way
    auto info = lease_info(*c, held.name());
    REQUIRE(info);
    CHECK(info->held());
    CHECK(info->owner == owner);
  }
  guard.free();
  if (expect_exhausted) {
    CHECK(held.release_async().get());  // called again: the connection is free now
  } else {
    REQUIRE(released.wait_for(10s) == std::future_status::ready);
    CHECK(released.get());
    try {  // (its outcome is not this section's question: taken, or exhausted at its deadline)
      if (got.get()) CHECK(fresh.release());
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::kResourceExhausted);
    }
  }
  CHECK_FALSE(held.owns());
  CHECK(busy.release());
  CHECK(client->stats().calls_queued == 0);
}

TEST_CASE("a waiting acquire_async whose later attempt finds no work connection free ends at its deadline, "
          "not after borrow_timeout",
          "[coalesce][lock-client][async][galera]") {
  LockClientOptions co;
  co.max_connections = 3;  // one work connection
  co.borrow_timeout = 10s;
  auto client = LockClient::create(ctx().uri, co);
  const std::string name = ctx().unique("ad_held");
  // Held elsewhere, never renewed: the waiter's next attempts come within
  // the holder's 800 ms.
  auto other = ctx().connect();
  LeaseOptions short_ttl;
  short_ttl.ttl = 800ms;
  LeaseLock holder(*other, name, short_ttl);
  REQUIRE(holder.try_acquire());
  LeaseLock late(client, name, LeaseOptions{});
  LeaseLock busy(client, ctx().unique("ad_busy"), LeaseOptions{});
  REQUIRE(busy.try_acquire());
  const auto before = client->stats().attempts;
  auto got = late.acquire_async(3s);
  // Its first attempt found the lease taken (it may take a connection up
  // to borrow_timeout; the later ones only up to the wait's deadline).
  REQUIRE(eventually([&] { return client->stats().attempts > before; }, 10s));
  std::this_thread::sleep_for(300ms);
  const auto t0 = std::chrono::steady_clock::now();
  BusyConnection guard(busy);
  REQUIRE(got.wait_for(8s) == std::future_status::ready);  // (the old code: after borrow_timeout, 10 s)
  INFO("answered after " << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count()
                         << " ms");
  CHECK_FALSE(got.get());  // timed out: no error (it tried, the lease was taken)
  CHECK_FALSE(late.owns());
  guard.free();
  CHECK(busy.release());
  CHECK(client->stats().waiters == 0);
}

TEST_CASE("batch_max outside 1 .. 64 is refused with an error naming it, before anything connects", "[coalesce][bad-input]") {
  for (std::size_t bad : {std::size_t{0}, std::size_t{65}}) {
    LockClientOptions co;
    co.batch_max = bad;
    INFO("batch_max " << bad);
    try {
      LockClient::create(ctx().uri, co);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::kInvalidArgument);
      CHECK(std::string(e.what()).find("batch_max is " + std::to_string(bad) + "; it must be 1 .. 64") !=
            std::string::npos);
    }
  }
  LockClientOptions one;
  one.batch_max = 1;  // the bounds themselves are accepted
  CHECK(LockClient::create(ctx().uri, one) != nullptr);
}

TEST_CASE("asynchronous acquires and releases of many names are sent in batches by the client's sender threads, each "
          "with its own answer; a held name waits in the waiter queue and is woken by its release",
          "[coalesce][lock-client][async][galera]") {
  auto probe = ctx().connect();
  const bool batches = batch_plan(*probe) != nullptr;
  const int n = 48;
  LockClientOptions co;
  co.max_connections = 3;  // renewal + listener + one work connection: one sender thread
  SECTION("coalesced") {}
  SECTION("negative control: batch_max = 1 sends every call alone") { co.batch_max = 1; }
  const bool expect_batches = batches && co.batch_max > 1;
  auto client = LockClient::create(ctx().uri, co);

  std::vector<std::unique_ptr<LeaseLock>> locks;
  for (int i = 0; i < n; ++i) locks.push_back(std::make_unique<LeaseLock>(client, ctx().unique("as_name"), LeaseOptions{}));
  // A name another client holds: its acquire waits, then gets the release.
  auto other = LockClient::create(ctx().uri);
  const std::string held_name = ctx().unique("as_held");
  LeaseLock holder(other, held_name, LeaseOptions{});
  REQUIRE(holder.try_acquire());
  LeaseLock late(client, held_name, LeaseOptions{});
  LeaseLock at_once(client, ctx().unique("as_free"), LeaseOptions{});  // (below: nothing queued)

  const auto before = client->stats();
  std::vector<std::future<bool>> got;
  for (auto& l : locks) got.push_back(l->acquire_async(10s));  // every call from this one thread, none blocks
  auto late_got = late.acquire_async(30s);
  for (int i = 0; i < n; ++i) {
    INFO("lease " << i);
    REQUIRE(got[static_cast<std::size_t>(i)].wait_for(20s) == std::future_status::ready);
    CHECK(got[static_cast<std::size_t>(i)].get());
    CHECK(locks[static_cast<std::size_t>(i)]->owns());
  }
  const auto after_acquire = client->stats();
  INFO("batches " << after_acquire.batches - before.batches << ", calls carried "
                  << after_acquire.batched_calls - before.batched_calls);
  if (expect_batches) {
    // 49 calls on one connection: the first went alone, the rest in batches
    // of up to 64 (the late one's try among them, answered busy).
    CHECK(after_acquire.batches - before.batches >= 1);
    CHECK(after_acquire.batched_calls - before.batched_calls >= 10);
  } else {
    CHECK(after_acquire.batches == before.batches);
  }
  CHECK(late_got.wait_for(300ms) == std::future_status::timeout);  // held by the other client: waiting
  CHECK(client->stats().waiters == 1);
  CHECK(holder.release());
  REQUIRE(late_got.wait_for(20s) == std::future_status::ready);
  CHECK(late_got.get());
  CHECK(late.owns());

  // Releases: all from this thread, none blocks; each answered true.
  std::vector<std::future<bool>> rel;
  for (auto& l : locks) rel.push_back(l->release_async());
  for (int i = 0; i < n; ++i) {
    INFO("lease " << i);
    REQUIRE(rel[static_cast<std::size_t>(i)].wait_for(20s) == std::future_status::ready);
    CHECK(rel[static_cast<std::size_t>(i)].get());
    CHECK_FALSE(locks[static_cast<std::size_t>(i)]->owns());
    CHECK(locks[static_cast<std::size_t>(i)]->hold_count() == 0);
  }
  const auto after_release = client->stats();
  if (expect_batches) CHECK(after_release.batches > after_acquire.batches);
  else CHECK(after_release.batches == before.batches);
  auto c = ctx().connect();
  for (int i = 0; i < n; ++i) {
    INFO("lease " << i);
    CHECK_FALSE(row_of(*c, locks[static_cast<std::size_t>(i)]->name()).held);
  }
  CHECK(late.release_async().get());
  CHECK_FALSE(row_of(*c, held_name).held);
  // An idle client: a lone asynchronous call is sent at once, alone.
  CHECK(at_once.acquire_async(5s).get());
  CHECK(at_once.release_async().get());
  CHECK(client->stats().calls_queued == 0);
}

TEST_CASE("release_async answers at once when nothing is sent, is refused where it is not offered, and a handle "
          "destroyed right after it waits for it",
          "[coalesce][lock-client][async][bad-input]") {
  auto client = LockClient::create(ctx().uri);
  LeaseLock l(client, ctx().unique("ra"), LeaseOptions{});
  // Not held: false at once (on this thread), nothing sent.
  CHECK_FALSE(l.release_async().get());
  // Re-entrant: the first of two holds is dropped at once, still held.
  REQUIRE(l.try_acquire());
  REQUIRE(l.try_acquire());
  CHECK(l.release_async().get());
  CHECK(l.hold_count() == 1);
  CHECK(l.owns());
  CHECK(l.release_async().get());
  CHECK(l.hold_count() == 0);
  // An empty callback.
  REQUIRE(l.try_acquire());
  try {
    l.release_async(ReleaseCallback{});
    FAIL("an empty callback was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    CHECK(std::string(e.what()).find("release_async") != std::string::npos);
  }
  CHECK(l.owns());  // (refused before anything changed)
  CHECK(l.release());
  // Other kinds: kNotSupported naming the kind.
  Semaphore sem(client, ctx().unique("ra_sem"), 2);
  REQUIRE(sem.try_acquire());
  try {
    sem.release_async([](bool, std::exception_ptr) {});
    FAIL("release_async of a semaphore was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kNotSupported);
    CHECK(std::string(e.what()).find("semaphore") != std::string::npos);
  }
  CHECK(sem.release());
  // A handle on a borrowed connection has no sender thread.
  auto own = ctx().connect();
  LeaseLock borrowed(*own, ctx().unique("ra_borrowed"), LeaseOptions{});
  REQUIRE(borrowed.try_acquire());
  CHECK_THROWS_MATCHES(borrowed.release_async([](bool, std::exception_ptr) {}), Error,
                       Catch::Predicate<Error>([](const Error& e) { return e.code() == ErrorCode::kNotSupported; }));
  CHECK(borrowed.release());
  // Destroyed right after: the destructor waits for the release (its
  // completion still runs, on a sender thread, and the row is released).
  const std::string name = ctx().unique("ra_gone");
  std::promise<bool> answer;
  {
    LeaseLock gone(client, name, LeaseOptions{});
    REQUIRE(gone.try_acquire());
    gone.release_async([&](bool ok, std::exception_ptr) { answer.set_value(ok); });
  }
  auto f = answer.get_future();
  REQUIRE(f.wait_for(1s) == std::future_status::ready);  // (done before the destructor returned)
  CHECK(f.get());
  auto c = ctx().connect();
  CHECK_FALSE(row_of(*c, name).held);
}
