// sqlguard/lock_awaitable.h with a minimal hand-written executor (a queue
// drained by one thread) and a minimal coroutine type: the coroutine is
// resumed through `post` on the executor's thread, never on the lock
// client's waiter thread; errors come out of co_await; a time-out yields
// false; destroying a suspended coroutine cancels its acquire. No timing
// assertion: the bounds on waiting only keep a broken build from hanging.
#include <catch2/catch.hpp>
#include <malloc.h>

#include <atomic>
#include <condition_variable>
#include <coroutine>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "dialect/dialect.h"
#include "plans/plans.h"
#include "sqlguard/admin.h"
#include "sqlguard/errors.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_awaitable.h"
#include "sqlguard/lock_client.h"
#include "test_context.h"
#include "test_helpers.h"

using sgtest::ctx;
using sgtest::eventually;
using namespace std::chrono_literals;

namespace {

// The executor: one thread runs what post() queued, in order.
class LoopExecutor {
 public:
  LoopExecutor() : thread_([this] { loop(); }) {}
  ~LoopExecutor() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      queue_.push_back(std::move(fn));
    }
    cv_.notify_all();
  }
  std::thread::id id() const { return thread_.get_id(); }
  // Runs `fn` on the executor and waits for it: everything queued before has run.
  template <class F>
  auto run(F fn) -> decltype(fn()) {
    std::packaged_task<decltype(fn())()> task(std::move(fn));
    auto f = task.get_future();
    post([&task] { task(); });
    REQUIRE(f.wait_for(60s) == std::future_status::ready);
    return f.get();
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      auto fn = std::move(queue_.front());
      queue_.pop_front();
      lk.unlock();
      fn();
      lk.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

// The `post` handed to acquire_awaitable: queues on the executor and records
// who called it.
struct Posts {
  std::atomic<int> count{0};
  std::mutex mu;
  std::thread::id caller;
};
auto post_to(LoopExecutor& ex, Posts& posts) {
  return [&ex, &posts](std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lk(posts.mu);
      posts.caller = std::this_thread::get_id();
    }
    ++posts.count;
    ex.post(std::move(fn));
  };
}

// The smallest coroutine type: starts when resume() is called, keeps its
// frame until the Task is destroyed (which may be while it is suspended).
struct Task {
  struct promise_type {
    Task get_return_object() { return Task{std::coroutine_handle<promise_type>::from_promise(*this)}; }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_void() {}
    void unhandled_exception() { std::terminate(); }
  };
  explicit Task(std::coroutine_handle<promise_type> h) : h(h) {}
  Task(Task&& o) noexcept : h(std::exchange(o.h, {})) {}
  Task& operator=(Task&&) = delete;
  ~Task() {
    if (h) h.destroy();
  }
  std::coroutine_handle<promise_type> h;
};

struct Outcome {
  bool acquired = false;
  std::exception_ptr error;
  std::thread::id resumed_on;
};

// co_awaits the acquire and reports what it yielded and where it went on.
template <class Post>
Task await_acquire(sqlguard::LeaseLock& lock, std::chrono::milliseconds wait, Post post, std::promise<Outcome>& out) {
  Outcome o;
  try {
    o.acquired = co_await sqlguard::acquire_awaitable(lock, wait, post);
  } catch (...) {
    o.error = std::current_exception();
  }
  o.resumed_on = std::this_thread::get_id();
  out.set_value(o);
}

// Starts the coroutine on the executor and returns once it has suspended (or
// finished): the executor ran the start and then an empty marker.
template <class Post>
void start(LoopExecutor& ex, std::optional<Task>& task, sqlguard::LeaseLock& lock, std::chrono::milliseconds wait,
           Post post, std::promise<Outcome>& out) {
  ex.run([&] {
    task.emplace(await_acquire(lock, wait, post, out));
    task->h.resume();
  });
}

Outcome wait_outcome(std::future<Outcome>& f) {
  REQUIRE(f.wait_for(60s) == std::future_status::ready);
  return f.get();
}

sqlguard::ErrorCode code_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const sqlguard::Error& err) {
    return err.code();
  } catch (...) {
  }
  FAIL("not a sqlguard::Error");
  return sqlguard::ErrorCode::kInternal;
}

}  // namespace

TEST_CASE("an awaited acquire is resumed through post on the executor's thread, never on the lock client's waiter "
          "thread",
          "[lock-awaitable]") {
  auto client = sqlguard::LockClient::create(ctx().uri);
  const std::string name = ctx().unique("await");
  sqlguard::LeaseLock holder(client, name);
  sqlguard::LeaseLock lock(client, name);
  REQUIRE(holder.try_acquire());

  LoopExecutor ex;
  Posts posts;
  std::optional<Task> task;
  std::promise<Outcome> out;
  auto done = out.get_future();
  start(ex, task, lock, 60s, post_to(ex, posts), out);
  // Suspended while the holder holds the name: only a completion can resume it.
  CHECK(posts.count == 0);
  CHECK(done.wait_for(0s) == std::future_status::timeout);
  REQUIRE(holder.release());

  const Outcome o = wait_outcome(done);
  CHECK(o.acquired);
  CHECK_FALSE(o.error);
  CHECK(o.resumed_on == ex.id());
  CHECK(posts.count == 1);
  {
    std::lock_guard<std::mutex> lk(posts.mu);
    CHECK(posts.caller != ex.id());                     // post was called by the client's waiter thread,
    CHECK(posts.caller != std::this_thread::get_id());  // not by the releasing one
  }
  CHECK(lock.owns());
  CHECK(lock.hold_count() == 1);
  CHECK(lock.release());
  ex.run([&] { task.reset(); });
}

TEST_CASE("an awaited acquire of a handle that already holds the lease goes on at once without posting",
          "[lock-awaitable]") {
  auto client = sqlguard::LockClient::create(ctx().uri);
  sqlguard::LeaseLock lock(client, ctx().unique("await"));
  REQUIRE(lock.try_acquire());
  LoopExecutor ex;
  Posts posts;
  std::optional<Task> task;
  std::promise<Outcome> out;
  auto done = out.get_future();
  start(ex, task, lock, 1s, post_to(ex, posts), out);
  const Outcome o = wait_outcome(done);
  CHECK(o.acquired);
  CHECK(o.resumed_on == ex.id());
  CHECK(posts.count == 0);
  CHECK(lock.hold_count() == 2);
  CHECK(lock.release());
  CHECK(lock.release());
  ex.run([&] { task.reset(); });
}

TEST_CASE("an awaited acquire that times out yields false", "[lock-awaitable]") {
  auto client = sqlguard::LockClient::create(ctx().uri);
  const std::string name = ctx().unique("await");
  sqlguard::LeaseLock holder(client, name);
  sqlguard::LeaseLock lock(client, name);
  REQUIRE(holder.try_acquire());
  LoopExecutor ex;
  Posts posts;
  std::optional<Task> task;
  std::promise<Outcome> out;
  auto done = out.get_future();
  start(ex, task, lock, 200ms, post_to(ex, posts), out);
  const Outcome o = wait_outcome(done);
  CHECK_FALSE(o.acquired);
  CHECK_FALSE(o.error);
  CHECK(o.resumed_on == ex.id());
  CHECK_FALSE(lock.owns());
  CHECK(lock.hold_count() == 0);
  CHECK(holder.owns());
  ex.run([&] { task.reset(); });
}

TEST_CASE("an acquire that fails rethrows its error at co_await", "[lock-awaitable]") {
  LoopExecutor ex;
  Posts posts;

  SECTION("an error of the waiter thread's attempt (the database has no lock table)") {
    // A database sqlguard never migrated: the client connects, the attempt fails.
    auto client = sqlguard::LockClient::create(ctx().fresh_database());
    sqlguard::LeaseLock lock(client, ctx().unique("await"));
    std::optional<Task> task;
    std::promise<Outcome> out;
    auto done = out.get_future();
    start(ex, task, lock, 30s, post_to(ex, posts), out);
    const Outcome o = wait_outcome(done);
    REQUIRE(o.error);
    CHECK_FALSE(o.acquired);
    CHECK(o.resumed_on == ex.id());
    CHECK(code_of(o.error) == sqlguard::ErrorCode::kSchemaMismatch);  // "no such table ... run `sqlguard migrate`"
    CHECK(lock.hold_count() == 0);
    ex.run([&] { task.reset(); });
  }

  SECTION("an error acquire_async throws at once: a handle that is not a lock client's") {
    auto conn = ctx().connect();
    sqlguard::LeaseLock lock(*conn, ctx().unique("await"));
    std::optional<Task> task;
    std::promise<Outcome> out;
    auto done = out.get_future();
    start(ex, task, lock, 1s, post_to(ex, posts), out);
    const Outcome o = wait_outcome(done);
    REQUIRE(o.error);
    CHECK(code_of(o.error) == sqlguard::ErrorCode::kNotSupported);
    CHECK(o.resumed_on == ex.id());
    CHECK(posts.count == 0);
    ex.run([&] { task.reset(); });
  }

  SECTION("an error acquire_async throws at once: another acquire of the handle is pending") {
    auto client = sqlguard::LockClient::create(ctx().uri);
    const std::string name = ctx().unique("await");
    sqlguard::LeaseLock holder(client, name);
    sqlguard::LeaseLock lock(client, name);
    REQUIRE(holder.try_acquire());
    std::optional<Task> first, second;
    std::promise<Outcome> out1, out2;
    auto done1 = out1.get_future(), done2 = out2.get_future();
    start(ex, first, lock, 60s, post_to(ex, posts), out1);
    start(ex, second, lock, 60s, post_to(ex, posts), out2);
    const Outcome o = wait_outcome(done2);
    REQUIRE(o.error);
    CHECK(code_of(o.error) == sqlguard::ErrorCode::kInvalidArgument);
    // The first one still waits, and is served.
    CHECK(done1.wait_for(0s) == std::future_status::timeout);
    REQUIRE(holder.release());
    const Outcome o1 = wait_outcome(done1);
    CHECK(o1.acquired);
    CHECK(lock.release());
    ex.run([&] {
      first.reset();
      second.reset();
    });
  }
}

TEST_CASE("destroying a coroutine suspended in an awaited acquire cancels the acquire and never resumes it",
          "[lock-awaitable]") {
  auto client = sqlguard::LockClient::create(ctx().uri);
  const std::string name = ctx().unique("await");
  sqlguard::LeaseLock holder(client, name);
  sqlguard::LeaseLock lock(client, name);
  REQUIRE(holder.try_acquire());
  LoopExecutor ex;
  Posts posts;
  std::optional<Task> task;
  std::promise<Outcome> out;
  auto done = out.get_future();
  start(ex, task, lock, 60s, post_to(ex, posts), out);
  CHECK(client->stats().waiters == 1);
  ex.run([&] { task.reset(); });  // the frame goes, on the executor's thread

  // Its queue place is given up (at once, or when an attempt running now ends).
  for (int i = 0; i < 600 && client->stats().waiters != 0; ++i) std::this_thread::sleep_for(50ms);
  CHECK(client->stats().waiters == 0);
  REQUIRE(holder.release());
  // Nobody holds the name now: not the destroyed coroutine's handle.
  sqlguard::LeaseLock third(client, name);
  CHECK(third.try_acquire());
  CHECK(lock.hold_count() == 0);
  CHECK_FALSE(lock.owns());
  CHECK(done.wait_for(0s) == std::future_status::timeout);  // its body never went on
  CHECK(third.release());
}

TEST_CASE("destroying the LeaseLock while a coroutine awaits it resumes the coroutine with false, through post",
          "[lock-awaitable]") {
  auto client = sqlguard::LockClient::create(ctx().uri);
  const std::string name = ctx().unique("await");
  sqlguard::LeaseLock holder(client, name);
  sqlguard::LeaseLock first(client, name);
  auto lock = std::make_unique<sqlguard::LeaseLock>(client, name);
  REQUIRE(holder.try_acquire());
  // `first` is the head of the name's queue; the coroutine's handle waits
  // behind it, so no attempt of its own runs when it is destroyed.
  auto first_done = first.acquire_async(60s);
  // (its first try answered busy: it is the head of the name's queue)
  REQUIRE(eventually([&] { return client->stats().attempts > 0 && client->stats().calls_queued == 0; }, 10s));
  LoopExecutor ex;
  Posts posts;
  std::optional<Task> task;
  std::promise<Outcome> out;
  auto done = out.get_future();
  start(ex, task, *lock, 60s, post_to(ex, posts), out);
  REQUIRE(client->stats().waiters == 2);

  SECTION("destroyed") { lock.reset(); }
  SECTION("cancel_acquire()") { CHECK(lock->cancel_acquire()); }

  const Outcome o = wait_outcome(done);
  CHECK_FALSE(o.acquired);
  CHECK_FALSE(o.error);
  CHECK(o.resumed_on == ex.id());
  CHECK(posts.count == 1);
  {
    std::lock_guard<std::mutex> lk(posts.mu);
    CHECK(posts.caller == std::this_thread::get_id());  // the cancelling thread completed it
  }
  CHECK(client->stats().waiters == 1);
  REQUIRE(holder.release());
  REQUIRE(first_done.wait_for(60s) == std::future_status::ready);
  CHECK(first_done.get());
  CHECK(first.release());
  ex.run([&] { task.reset(); });
}

// ---- a cancel while the handle's attempt runs (found by these tests) --------
// LeaseLock::cancel_acquire() promises: "its callback gets (false, nullptr),
// at once or, while its attempt runs, right after it". The waiter loop once
// dropped such a wait without completing it. Made deterministic here: the
// client has one work connection, held by a guarded transaction, so the
// head's attempt is stuck in borrow() when the cancel comes.
namespace {
struct StuckAttempt {
  std::shared_ptr<sqlguard::LockClient> client;
  std::unique_ptr<sqlguard::LeaseLock> other;
  std::promise<void> started, finish;
  std::thread thread;
  StuckAttempt() {
    sqlguard::LockClientOptions o;
    o.max_connections = 3;  // renewal + listener + ONE work connection
    client = sqlguard::LockClient::create(ctx().uri, o);
    other = std::make_unique<sqlguard::LeaseLock>(client, ctx().unique("other"));
    REQUIRE(other->try_acquire());
    auto finish_f = finish.get_future().share();
    thread = std::thread([this, finish_f] {
      other->run_guarded([&](sqlguard::Transaction&) {
        started.set_value();
        finish_f.wait();
      });
    });
    started.get_future().wait();  // the only work connection is taken
  }
  // Returns once an attempt has started and waits for a connection: the
  // waiter thread's, or (a lease's first try) one queued for a sender thread.
  bool attempt_started() const {
    const auto s = client->stats();
    return s.attempts > 0 || s.calls_queued > 0;
  }
  void wait_for_attempt() const {
    for (int i = 0; i < 6000 && !attempt_started(); ++i) std::this_thread::sleep_for(1ms);
    REQUIRE(attempt_started());
  }
  void unstick() {
    finish.set_value();
    thread.join();
    other->release();
  }
};
}  // namespace

TEST_CASE("a cancel while the handle's attempt runs completes its acquire_async callback with false",
          "[lock-awaitable][cancel]") {
  StuckAttempt stuck;
  const std::string name = ctx().unique("await");
  sqlguard::LeaseLock lock(stuck.client, name);
  auto called = std::make_shared<std::promise<bool>>();
  auto called_f = called->get_future();
  lock.acquire_async(30s, [called](bool acquired, std::exception_ptr) { called->set_value(acquired); });
  stuck.wait_for_attempt();
  CHECK(lock.cancel_acquire());
  stuck.unstick();
  REQUIRE(called_f.wait_for(10s) == std::future_status::ready);
  CHECK_FALSE(called_f.get());
  CHECK(lock.hold_count() == 0);
}

TEST_CASE("destroying the LeaseLock while its attempt runs resumes the awaiting coroutine with false",
          "[lock-awaitable][cancel]") {
  StuckAttempt stuck;
  auto lock = std::make_unique<sqlguard::LeaseLock>(stuck.client, ctx().unique("await"));
  LoopExecutor ex;
  Posts posts;
  std::optional<Task> task;
  std::promise<Outcome> out;
  auto done = out.get_future();
  start(ex, task, *lock, 30s, post_to(ex, posts), out);
  stuck.wait_for_attempt();
  lock.reset();
  stuck.unstick();
  if (done.wait_for(10s) != std::future_status::ready) {
    ex.run([&] { task->h = {}; });  // leak the frame: its awaitable would cancel through the destroyed handle
    FAIL("the coroutine was not resumed after its LeaseLock was destroyed");
  }
  CHECK_FALSE(done.get().acquired);
  ex.run([&] { task.reset(); });
}

TEST_CASE("awaited acquires of new names leave nothing behind in the lock client or the heap",
          "[lock-awaitable][memory]") {
  // Issue 43 item 1, the awaitable path: a coroutine per new name waits for
  // a held name and is served when it is released; the client's counts come
  // back and the heap does not grow with the names (the bound as in
  // test_lock_client.cpp's memory test: 16 KB + 2 B per acquisition; state
  // kept per name costs 100 B or more each).
  auto client = sqlguard::LockClient::create(ctx().uri);
  auto admin = ctx().connect();
  const std::string prefix = ctx().unique("awaitmem");
  LoopExecutor ex;
  Posts posts;
  auto one = [&](const std::string& name) {
    sqlguard::LeaseOptions o;
    o.ttl = 30s;
    sqlguard::LeaseLock holder(client, name, o), lock(client, name, o);
    REQUIRE(holder.try_acquire());
    std::optional<Task> task;
    std::promise<Outcome> out;
    auto done = out.get_future();
    start(ex, task, lock, 30s, post_to(ex, posts), out);
    REQUIRE(holder.release());
    const Outcome r = wait_outcome(done);
    REQUIRE(r.acquired);
    REQUIRE(lock.release());
    ex.run([&] { task.reset(); });
  };
  const int per_round = ctx().is_sqlite() ? 400 : 150;
  auto round = [&](int r) {
    const std::string p = prefix + "_" + std::to_string(r) + "_";
    for (int i = 0; i < per_round; ++i) one(p + std::to_string(i));
    sqlguard::admin::delete_by_prefix(*admin, p);
  };
  round(-1);  // warm-up: statement caches, the listener, the threads
  const auto before = client->stats();
  long grown = std::numeric_limits<long>::max();
  for (int r = 0; r < 2; ++r) {
    const std::size_t h0 = mallinfo2().uordblks;
    round(r);
    grown = std::min(grown, static_cast<long>(mallinfo2().uordblks) - static_cast<long>(h0));
  }
  INFO("heap grew at least " << grown << " B over a round of " << per_round << " awaited acquisitions");
  CHECK(sgtest::eventually([&] {
    const auto s = client->stats();
    return s.held_leases == before.held_leases && s.waiters == before.waiters && s.listening == before.listening &&
           s.names_tracked == before.names_tracked;
  }, 5s));
  CHECK(client->stats().names_tracked == 0);
  CHECK(grown <= 16 * 1024 + 2 * per_round);
}

namespace {
// co_awaits acquire then release of `lock` `rounds` times; counts what it got.
template <class Post>
Task take_and_release(sqlguard::LeaseLock& lock, int rounds, Post post, std::atomic<int>& wins,
                      std::atomic<int>& released, std::atomic<int>& finished, std::atomic<int>& errors,
                      std::atomic<int>& off_executor, std::thread::id executor) {
  for (int r = 0; r < rounds; ++r) {
    try {
      if (!co_await sqlguard::acquire_awaitable(lock, 10s, post)) continue;
      ++wins;
      if (std::this_thread::get_id() != executor) ++off_executor;
      if (co_await sqlguard::release_awaitable(lock, post)) ++released;
      if (std::this_thread::get_id() != executor) ++off_executor;
    } catch (...) {
      ++errors;
    }
  }
  ++finished;
}
}  // namespace

TEST_CASE("64 coroutines on one executor thread take and release names of their own through one lock client: every "
          "acquire and release answered, resumed on the executor, batched where the dialect has a batch plan",
          "[lock-awaitable][async][coalesce]") {
  sqlguard::LockClientOptions co;
  co.max_connections = 3;  // one work connection
  auto client = sqlguard::LockClient::create(ctx().uri, co);
  const int n = 64, rounds = 5;
  std::vector<std::unique_ptr<sqlguard::LeaseLock>> locks;
  for (int i = 0; i < n; ++i) locks.push_back(std::make_unique<sqlguard::LeaseLock>(client, ctx().unique("aw_many")));
  LoopExecutor ex;
  Posts posts;
  std::atomic<int> wins{0}, released{0}, finished{0}, errors{0}, off_executor{0};
  std::vector<std::optional<Task>> tasks(n);
  ex.run([&] {
    for (int i = 0; i < n; ++i) {
      tasks[static_cast<std::size_t>(i)].emplace(take_and_release(*locks[static_cast<std::size_t>(i)], rounds,
                                                                  post_to(ex, posts), wins, released, finished, errors,
                                                                  off_executor, ex.id()));
      tasks[static_cast<std::size_t>(i)]->h.resume();
    }
  });
  REQUIRE(eventually([&] { return finished.load() == n; }, 60s));
  CHECK(errors == 0);
  CHECK(wins == n * rounds);  // each name has one user: every acquire wins
  CHECK(released == n * rounds);
  CHECK(off_executor == 0);
  const auto s = client->stats();
  INFO("batches " << s.batches << ", calls carried " << s.batched_calls);
  auto c = ctx().connect();
  const bool plan = c->dialect().plans().batch != nullptr;
  if (plan) CHECK(s.batched_calls > s.batches);
  else CHECK(s.batches == 0);
  for (const auto& l : locks) {
    auto info = sqlguard::lease_info(*c, l->name());
    REQUIRE(info);
    CHECK_FALSE(info->held());
  }
  CHECK(s.calls_queued == 0);
  CHECK(s.waiters == 0);
  ex.run([&] { tasks.clear(); });
}
