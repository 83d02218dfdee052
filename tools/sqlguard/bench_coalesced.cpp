// lease-coalesced (issue 40 item 5): many requesters on ONE lock client, each
// taking and releasing a lease name of its own, with the client's coalescing
// on (LockClientOptions::batch_max) and off (every call alone), same cell.
// Requesters are threads (blocking try_acquire / release) or coroutines on
// two executor threads (co_await acquire_awaitable / release_awaitable: the
// client's sender thread sends their calls).
#include <atomic>
#include <condition_variable>
#include <coroutine>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_awaitable.h"
#include "sqlguard/lock_client.h"

namespace sqlguard::bench {

using std::chrono::milliseconds;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Path {
  Stats st;
  LockClientStats client;
};

// One path: `requesters` threads on one client with `batch_max`.
Path run_path(const ClientBench& b, std::size_t requesters, std::size_t batch_max, const std::string& tag,
              milliseconds warmup, milliseconds duration) {
  LockClientOptions co = client_options(b);
  co.max_connections = 4;  // renewal + listener + 2 work connections
  co.batch_max = batch_max;
  auto client = LockClient::create(b.uri, co);
  LeaseOptions o;
  o.ttl = milliseconds(kTtlMs);
  const std::string prefix = b.prefix + ":" + tag + ":";
  Path p;
  p.st = run_clients(static_cast<int>(requesters), false, [&](int i) -> OpFn {
    auto lock = std::make_shared<LeaseLock>(client, prefix + std::to_string(i), o);
    return [lock] {
      if (!lock->try_acquire()) return false;  // (a name of its own: never expected)
      if (!lock->release()) throw std::runtime_error("release: the lease was not held");
      return true;
    };
  }, warmup, duration);
  p.client = client->stats();
  return p;
}

// The coroutines' executor: `threads` threads drain one queue.
class Executor {
 public:
  explicit Executor(int threads) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { loop(); });
  }
  ~Executor() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  void post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      queue_.push_back(std::move(fn));
    }
    cv_.notify_one();
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
  std::vector<std::thread> threads_;
};

// A coroutine that starts at once and frees its frame when it ends.
struct Detached {
  struct promise_type {
    Detached get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
};

struct CoRun {
  std::atomic<int> phase{0};  // 0 warm-up, 1 measured, 2 stop
  std::atomic<int> finished{0};
  std::mutex mu;
  std::condition_variable cv;
};

// One requester: acquire and release its own name until the run stops. Its
// Stats are its own (one coroutine runs on one thread at a time).
Detached requester(LeaseLock& lock, Executor& ex, CoRun& run, Stats& st) {
  auto post = [&ex](std::function<void()> fn) { ex.post(std::move(fn)); };
  while (run.phase.load(std::memory_order_acquire) != 2) {
    const int ph = run.phase.load(std::memory_order_acquire);
    const auto t0 = Clock::now();
    try {
      const bool ok = co_await acquire_awaitable(lock, milliseconds(5000), post);
      if (ok && !co_await release_awaitable(lock, post)) throw std::runtime_error("release: the lease was not held");
      if (ph == 1) {
        if (ok) {
          ++st.ops;
          st.lat_ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
        } else {
          ++st.misses;
        }
      }
    } catch (const std::exception& e) {
      if (ph == 1) ++st.errors;
      if (st.first_error.empty()) st.first_error = e.what();
    }
  }
  {
    std::lock_guard<std::mutex> lk(run.mu);
    run.finished.fetch_add(1);
  }
  run.cv.notify_all();
}

// The same path with `requesters` coroutines on two executor threads.
Path run_path_coroutines(const ClientBench& b, std::size_t requesters, std::size_t batch_max, const std::string& tag,
                         milliseconds warmup, milliseconds duration) {
  LockClientOptions co = client_options(b);
  co.max_connections = 4;
  co.batch_max = batch_max;
  auto client = LockClient::create(b.uri, co);
  LeaseOptions o;
  o.ttl = milliseconds(kTtlMs);
  const std::string prefix = b.prefix + ":" + tag + ":";
  std::vector<std::unique_ptr<LeaseLock>> locks;
  for (std::size_t i = 0; i < requesters; ++i)
    locks.push_back(std::make_unique<LeaseLock>(client, prefix + std::to_string(i), o));
  std::vector<Stats> per(requesters);
  CoRun run;
  Path p;
  {
    Executor ex(2);
    for (std::size_t i = 0; i < requesters; ++i)
      ex.post([&, i] { requester(*locks[i], ex, run, per[i]); });
    std::this_thread::sleep_for(warmup);
    const auto t0 = Clock::now();
    run.phase.store(1, std::memory_order_release);
    std::this_thread::sleep_for(duration);
    run.phase.store(2, std::memory_order_release);
    p.st.elapsed_s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::unique_lock<std::mutex> lk(run.mu);
    run.cv.wait_for(lk, std::chrono::seconds(60), [&] { return run.finished.load() == static_cast<int>(requesters); });
    if (run.finished.load() != static_cast<int>(requesters))
      throw Error(ErrorCode::kTimeout, "lease-coalesced: coroutine requesters did not stop within 60 s");
  }
  for (auto& s : per) p.st.merge_client(s);
  p.client = client->stats();
  return p;
}

}  // namespace

json coalesced_cell(const ClientBench& b, std::size_t requesters, milliseconds warmup, milliseconds duration) {
  json j = {{"requesters", requesters}, {"clients", requesters}, {"client_model", "one LockClient, 4 connections"}};
  const std::size_t batch_max = LockClientOptions{}.batch_max;
  Path co = run_path(b, requesters, batch_max, "co", warmup, duration);
  Path alone = run_path(b, requesters, 1, "alone", warmup, duration);
  add_cell_fields(j, "lease-coalesced", co.st, nullptr);
  j["misses"] = co.st.misses;
  j["batch_max"] = batch_max;
  j["connections"] = co.client.connections_open;
  j["batches"] = co.client.batches;
  j["batched_calls"] = co.client.batched_calls;
  j["calls_per_batch"] = co.client.batches > 0 ? json(r3(static_cast<double>(co.client.batched_calls) /
                                                        static_cast<double>(co.client.batches)))
                                               : json(nullptr);
  j["alone_ops_per_s"] = r3(alone.st.ops_per_s());
  j["alone_p50_ms"] = r3(alone.st.pct_ms(0.5));
  j["alone_p99_ms"] = r3(alone.st.pct_ms(0.99));
  j["alone_errors"] = alone.st.errors;
  j["coalesced_vs_alone"] =
      alone.st.ops_per_s() > 0 ? json(r3(co.st.ops_per_s() / alone.st.ops_per_s())) : json(nullptr);
  if (!alone.st.first_error.empty()) j["alone_first_error"] = alone.st.first_error;
  // The same requesters as coroutines on two executor threads (coalesced).
  Path cor = run_path_coroutines(b, requesters, batch_max, "cor", warmup, duration);
  j["coroutine_ops_per_s"] = r3(cor.st.ops_per_s());
  j["coroutine_p50_ms"] = r3(cor.st.pct_ms(0.5));
  j["coroutine_p99_ms"] = r3(cor.st.pct_ms(0.99));
  j["coroutine_errors"] = cor.st.errors;
  j["coroutine_misses"] = cor.st.misses;
  j["coroutine_executor_threads"] = 2;
  j["coroutine_client_threads"] = cor.client.threads;
  j["coroutine_calls_per_batch"] =
      cor.client.batches > 0
          ? json(r3(static_cast<double>(cor.client.batched_calls) / static_cast<double>(cor.client.batches)))
          : json(nullptr);
  if (!cor.st.first_error.empty()) j["coroutine_first_error"] = cor.st.first_error;
  return j;
}

}  // namespace sqlguard::bench
