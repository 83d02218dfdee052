// async_acquire(lock, wait, token): LeaseLock::acquire_async as an Asio
// asynchronous operation, so it takes any completion token (use_awaitable,
// a callback, use_future, ...). Header-only; Boost.Asio 1.74+ (Debian
// libboost-dev), C++20. Copy it into your service.
//
//   bool acquired = co_await async_acquire(lock, 5s, boost::asio::use_awaitable);
//
// Completion signature: void(std::exception_ptr error, bool acquired).
// With use_awaitable, co_await yields `acquired` or rethrows `error`: the
// acquire's error (the database stayed unreachable, or no connection was
// free, until the wait ended), or an error of the call itself (kNotSupported
// for a handle that is not a LockClient's; kInvalidArgument when this handle
// already has an acquire pending). The initiation never throws: with Boost
// 1.74's use_awaitable an exception thrown by an initiation ends the program
// (std::terminate), so the call's errors go to the handler like any other.
//
// Where the handler runs: always through asio::post on the handler's
// associated executor (a coroutine's own executor with use_awaitable) —
// never inline inside async_acquire (a re-entrant acquire completes at once)
// and never on the lock client's waiter thread, which only queues it.
//
// Outstanding work: while the acquire waits, the operation holds a work
// guard on that executor, so io_context::run() does not return under a
// waiting coroutine. Consequently the io_context must outlive every pending
// acquire: cancel them (lock.cancel_acquire(), or destroy the LeaseLock: the
// handler then gets false) before stopping and destroying the io_context.
// Per-operation cancellation slots (Asio 1.77+) are not wired in: cancel
// through the LeaseLock.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <utility>

#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <sqlguard/lease_lock.h>

namespace example {

template <class CompletionToken>
auto async_acquire(sqlguard::LeaseLock& lock, std::chrono::milliseconds wait, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(std::exception_ptr, bool)>(
      [](auto handler, sqlguard::LeaseLock* lock, std::chrono::milliseconds wait) {
        auto work = boost::asio::make_work_guard(handler);  // on the handler's associated executor
        // acquire_async takes a std::function (copyable); Asio handlers are move-only.
        auto shared = std::make_shared<decltype(handler)>(std::move(handler));
        // Runs on the client's waiter thread (or inside acquire_async for a
        // re-entrant acquire, or below): only queue the handler, never run it here.
        auto complete = [shared, work](bool acquired, std::exception_ptr error) mutable {
          boost::asio::post(work.get_executor(),
                            [shared, error, acquired]() mutable { std::move(*shared)(error, acquired); });
          work.reset();
        };
        try {
          lock->acquire_async(wait, complete);
        } catch (...) {  // refused before it was queued: the callback was not and will not be called
          complete(false, std::current_exception());
        }
      },
      token, &lock, wait);
}

}  // namespace example
