// sqlguard/lock_awaitable.h — co_await any Lock's acquire (lock.h: a lease, a
// fair lease, a semaphore permit, a read-write lease's side), on any executor.
//
//   // `post` is how your executor runs a function later (an event loop's
//   // queue, a thread pool, asio::post, ...):
//   auto post = [&loop](auto fn) { loop.enqueue(std::move(fn)); };
//   sqlguard::LeaseLock lock(client, "order:42", {.ttl = 10s});
//   if (co_await sqlguard::acquire_awaitable(lock, 5s, post)) {
//     ... lock.fence() ...
//     lock.release();
//   }
//
// The awaitable wraps Lock::acquire_async(wait, callback) (a handle of a
// LockClient, lock_client.h): no thread and no connection wait for the
// lock; the client's one waiter thread tries for it and completes the wait.
// It needs only C++20 <coroutine>, so it works with any coroutine type whose
// promise lets it be awaited (a hand-written task, cppcoro, folly, ...).
// Boost.Asio's own coroutines (asio::awaitable) only await Asio operations:
// there, wrap acquire_async with asio::async_initiate instead
// (examples/async-waiters/asio_acquire.h, docs/async.md).
//
// Result: `co_await` yields true (acquired: one hold, release it as usual),
// false (not within `wait`, or cancelled), or rethrows the error the acquire
// completed with (the database stayed unreachable, or no connection was free,
// until the wait ended; another failure of the attempt). Errors acquire_async
// throws at once (a handle that does not belong to a LockClient:
// kNotSupported; another asynchronous acquire of this handle still pending,
// a bad `wait`: kInvalidArgument; a forked child) are thrown at `co_await`
// too. Re-entrant like Lock::try_acquire(): a handle that holds a valid
// lease gets one more hold at once.
//
// Who resumes the coroutine: never the client's waiter thread. When the
// acquire completes after the coroutine suspended, the completion calls
// `post(fn)` and `fn()` resumes the coroutine wherever the executor runs it.
// (The client's sender thread completes a lease's batched first try; the
// same rules hold for it.)
// When it completed before the coroutine could suspend (re-entrant, or a very
// fast answer), the coroutine does not suspend: it goes on, on the thread
// that awaited, and `post` is not called. `post` is called at most once per
// co_await, from the thread that completes the acquire: the client's waiter
// thread, or a thread that cancels it (cancel_acquire(), the handle's destructor).
//
// Requirements on `post` (taken by value; any callable `post(fn)` where fn
// is a copyable `void()` callable, e.g. std::function<void(std::function<void()>)>):
//  * it queues `fn` to run later, on the executor: it must not run `fn`
//    inline (that would resume on the waiter thread) and must not block (it
//    runs on the waiter thread, which serves every waiter of the client);
//  * it is callable from another thread (the waiter thread, a cancelling
//    one) while the executor runs;
//  * it must not throw: an exception from it is logged by the client
//    (log hook) and the coroutine is never resumed.
//
// Cancellation:
//  * lock.cancel_acquire(), or destroying the handle while the coroutine
//    waits, cancels the acquire: the coroutine resumes (through `post`) with
//    false. Short of that, the handle must outlive the co_await.
//  * Destroying the suspended coroutine's frame (an executor shut down with
//    the coroutine pending, a task object dropped) is safe, provided the
//    frame is destroyed on a thread where `lock` may be used and not while
//    its posted resumption runs: the awaitable's destructor cancels the
//    pending acquire (cancel_acquire()); a resumption already posted finds the
//    frame gone and does nothing; a lease the acquire took for the destroyed
//    coroutine is released (Lock::unlock(), one hold; errors go to the
//    log hook). The destructor may then do one round trip to the database.
//
// Releases: `co_await sqlguard::release_awaitable(lock, post)` (bool, as
// release()) sends the release from the client's sender thread
// (Lock::release_async) and resumes through `post` the same way; with many
// coroutines on one client, their acquires' first tries and their releases
// go in batched statements (LockClientOptions::batch_max).
//
// Thread safety: as the handle's — one co_await per handle at a time, and the
// handle is not used from another thread while the coroutine waits (owns(),
// fence() and the other const readers excepted).
#pragma once

#include <chrono>
#include <concepts>
#include <coroutine>
#include <exception>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>

#include "sqlguard/lock.h"

namespace sqlguard {
namespace detail {

// What one co_await shares with the client's completion callback and the
// posted resumption: either may outlive the awaitable (and its frame).
struct AcquireAwaitState {
  enum class Phase {
    kStarting,   // await_suspend is calling acquire_async()
    kReady,      // completed before the coroutine suspended: it goes on without suspending
    kSuspended,  // the coroutine is suspended; no result yet
    kPosted,     // result in; its resumption was handed to `post`
    kResumed,    // the coroutine runs again (or never suspended): the awaitable reads the result
    kAbandoned,  // the frame was destroyed while suspended: nobody resumes it
  };
  std::mutex mu{};
  Phase phase = Phase::kStarting;
  std::coroutine_handle<> handle{};
  bool acquired = false;
  std::exception_ptr error{};
};

// The function handed to `post`: resumes the coroutine unless its frame is gone.
class AcquireResume {
 public:
  explicit AcquireResume(std::shared_ptr<AcquireAwaitState> state) : state_(std::move(state)) {}
  void operator()() const {
    std::coroutine_handle<> h;
    {
      std::lock_guard<std::mutex> lk(state_->mu);
      if (state_->phase != AcquireAwaitState::Phase::kPosted) return;  // abandoned (or a second run)
      state_->phase = AcquireAwaitState::Phase::kResumed;
      h = state_->handle;
    }
    h.resume();
  }

 private:
  std::shared_ptr<AcquireAwaitState> state_;
};

// await_suspend of both awaitables: `start(callback)` begins the operation
// (acquire_async, release_async); the callback owns a copy of `post` and the
// state (once it may have run, the awaitable and its frame may be gone).
// False: completed before the coroutine could suspend (it goes on).
template <class Post, class Start>
bool suspend_for(std::shared_ptr<AcquireAwaitState>& state, std::coroutine_handle<> h, const Post& post,
                 Start&& start) {
  using Phase = AcquireAwaitState::Phase;
  auto st = std::make_shared<AcquireAwaitState>();
  st->handle = h;
  state = st;
  start([st, post](bool ok, std::exception_ptr error) mutable {
    {
      std::lock_guard<std::mutex> lk(st->mu);
      st->acquired = ok;
      st->error = std::move(error);
      switch (st->phase) {
        case Phase::kStarting:
          st->phase = Phase::kReady;
          return;
        case Phase::kSuspended:
          st->phase = Phase::kPosted;
          break;
        default:  // abandoned: the awaitable's destructor deals with it
          return;
      }
    }
    post(AcquireResume(st));
  });
  std::lock_guard<std::mutex> lk(st->mu);
  if (st->phase == Phase::kReady) {
    st->phase = Phase::kResumed;
    return false;
  }
  st->phase = Phase::kSuspended;
  return true;
}

// await_resume of both: the result, or the operation's error rethrown.
inline bool await_result(AcquireAwaitState& st) {
  std::lock_guard<std::mutex> lk(st.mu);
  if (st.error) std::rethrow_exception(st.error);
  return st.acquired;
}

}  // namespace detail

// How an executor runs a function later (see the contract above).
template <class Post>
concept AcquirePost = std::copy_constructible<Post> && std::invocable<Post&, detail::AcquireResume>;

// The awaitable acquire_awaitable() returns; co_await it once per acquire.
template <AcquirePost Post>
class AcquireAwaitable {
 public:
  AcquireAwaitable(Lock& lock, std::chrono::milliseconds wait, Post post)
      : lock_(&lock), wait_(wait), post_(std::move(post)) {}
  AcquireAwaitable(const AcquireAwaitable&) = delete;
  AcquireAwaitable& operator=(const AcquireAwaitable&) = delete;
  AcquireAwaitable(AcquireAwaitable&& o) noexcept
      : lock_(o.lock_), wait_(o.wait_), post_(std::move(o.post_)), state_(std::move(o.state_)) {}
  AcquireAwaitable& operator=(AcquireAwaitable&&) = delete;

  // The frame was destroyed while suspended: cancel, and release what a
  // completion that raced with the cancel acquired.
  ~AcquireAwaitable() {
    if (!state_) return;
    using Phase = detail::AcquireAwaitState::Phase;
    std::unique_lock<std::mutex> lk(state_->mu);
    const Phase was = state_->phase;
    if (was != Phase::kSuspended && was != Phase::kPosted) return;
    state_->phase = Phase::kAbandoned;  // from now on neither the callback nor a posted resumption resumes
    const bool acquired = state_->acquired;
    lk.unlock();
    if (was == Phase::kPosted) {
      if (acquired) lock_->unlock();
      return;
    }
    // Pending. A successful cancel completes it with false (or, when its
    // attempt is running, the client releases what that attempt takes). A
    // failed one means the completion is already on its way: the waiter
    // thread set the handle's hold before it stopped counting it as pending,
    // so a hold here is what this acquire took (it was queued with none).
    if (!lock_->cancel_acquire() && lock_->hold_count() > 0) lock_->unlock();
  }

  bool await_ready() const noexcept { return false; }

  // Returns false (do not suspend) when the acquire completed inside
  // acquire_async() or before this function could suspend the coroutine.
  bool await_suspend(std::coroutine_handle<> h) {
    return detail::suspend_for(state_, h, post_,
                               [&](AcquireCallback done) { lock_->acquire_async(wait_, std::move(done)); });
  }

  // True: acquired. False: not within the wait, or cancelled. Rethrows the
  // acquire's error.
  bool await_resume() { return detail::await_result(*state_); }

 private:
  Lock* lock_;
  std::chrono::milliseconds wait_;
  Post post_;
  std::shared_ptr<detail::AcquireAwaitState> state_;
};

// `co_await acquire_awaitable(lock, wait, post)`: waits up to `wait` for
// `lock` (a handle of a LockClient) without a thread, and resumes through
// `post`. See the contract at the top of this header.
template <class Post>
  requires AcquirePost<std::decay_t<Post>>
[[nodiscard]] AcquireAwaitable<std::decay_t<Post>> acquire_awaitable(Lock& lock, std::chrono::milliseconds wait,
                                                                     Post&& post) {
  return AcquireAwaitable<std::decay_t<Post>>(lock, wait, std::forward<Post>(post));
}

// The awaitable release_awaitable() returns: Lock::release_async() awaited.
template <AcquirePost Post>
class ReleaseAwaitable {
 public:
  ReleaseAwaitable(Lock& lock, Post post) : lock_(&lock), post_(std::move(post)) {}
  ReleaseAwaitable(const ReleaseAwaitable&) = delete;
  ReleaseAwaitable& operator=(const ReleaseAwaitable&) = delete;
  ReleaseAwaitable(ReleaseAwaitable&& o) noexcept
      : lock_(o.lock_), post_(std::move(o.post_)), state_(std::move(o.state_)) {}
  ReleaseAwaitable& operator=(ReleaseAwaitable&&) = delete;

  // The frame was destroyed while suspended: the release goes on (nothing
  // to undo); nobody is resumed.
  ~ReleaseAwaitable() {
    if (!state_) return;
    using Phase = detail::AcquireAwaitState::Phase;
    std::lock_guard<std::mutex> lk(state_->mu);
    if (state_->phase == Phase::kSuspended || state_->phase == Phase::kPosted) state_->phase = Phase::kAbandoned;
  }

  bool await_ready() const noexcept { return false; }

  bool await_suspend(std::coroutine_handle<> h) {
    return detail::suspend_for(state_, h, post_,
                               [&](ReleaseCallback done) { lock_->release_async(std::move(done)); });
  }

  // What release() would return; rethrows what it would throw.
  bool await_resume() { return detail::await_result(*state_); }

 private:
  Lock* lock_;
  Post post_;
  std::shared_ptr<detail::AcquireAwaitState> state_;
};

// `co_await release_awaitable(lock, post)`: release() without blocking the
// coroutine's thread (Lock::release_async: a lease handle of a LockClient;
// other kinds throw kNotSupported at co_await). Resumed through `post` as
// acquire_awaitable's are, or not suspended when nothing was sent (not the
// last hold; not held). The handle's destructor waits for a pending release.
template <class Post>
  requires AcquirePost<std::decay_t<Post>>
[[nodiscard]] ReleaseAwaitable<std::decay_t<Post>> release_awaitable(Lock& lock, Post&& post) {
  return ReleaseAwaitable<std::decay_t<Post>>(lock, std::forward<Post>(post));
}

}  // namespace sqlguard
