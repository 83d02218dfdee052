#include "client/bounded_call.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/process.h"

namespace sqlguard::detail {

struct BoundedCaller::Worker {
  std::mutex mu;
  std::condition_variable cv;
  std::function<void()> task;  // set = a call to run
  bool done = false;           // the last call returned
  bool quit = false;           // abandoned: exit after the current call

  static void run(std::shared_ptr<Worker> w) {
    std::unique_lock<std::mutex> lk(w->mu);
    for (;;) {
      w->cv.wait(lk, [&] { return w->task || w->quit; });
      if (!w->task) return;
      auto task = std::move(w->task);
      w->task = nullptr;
      lk.unlock();
      task();
      lk.lock();
      w->done = true;
      w->cv.notify_all();
      if (w->quit) return;
    }
  }
  void abandon() {
    std::lock_guard<std::mutex> lk(mu);
    quit = true;
    cv.notify_all();
  }
};

BoundedCaller::~BoundedCaller() {
  if (worker_) worker_->abandon();
}

BoundedCaller::Outcome BoundedCaller::call(std::function<void()> fn, std::chrono::steady_clock::time_point deadline,
                                           const std::function<bool()>& stopped) {
  using std::chrono::steady_clock;
  if (!worker_) {
    worker_ = std::make_shared<Worker>();
    std::thread t(&Worker::run, worker_);
    name_thread(t, "sqlguard-call").detach();
  }
  std::shared_ptr<Worker> w = worker_;
  std::unique_lock<std::mutex> lk(w->mu);
  w->done = false;
  w->task = std::move(fn);
  w->cv.notify_all();
  for (;;) {
    auto until = std::min(deadline, steady_clock::now() + std::chrono::milliseconds(20));
    if (w->cv.wait_until(lk, until, [&] { return w->done; })) return Outcome::kDone;
    Outcome gave_up = Outcome::kDone;
    if (steady_clock::now() >= deadline) gave_up = Outcome::kTimedOut;
    else if (stopped()) gave_up = Outcome::kStopped;
    else continue;
    // The call is still running: leave it to its worker (drain() waits
    // for it). Those given up earlier that have returned are forgotten.
    w->quit = true;
    w->cv.notify_all();
    lk.unlock();
    forget_returned();
    abandoned_.push_back(std::move(worker_));
    return gave_up;
  }
}

bool BoundedCaller::drain(std::chrono::steady_clock::time_point deadline) {
  bool all = true;
  for (const auto& a : abandoned_) {
    std::unique_lock<std::mutex> lk(a->mu);
    if (!a->cv.wait_until(lk, deadline, [&] { return a->done; })) all = false;
  }
  forget_returned();
  return all;
}

void BoundedCaller::forget_returned() {
  std::erase_if(abandoned_, [](const std::shared_ptr<Worker>& a) {
    std::lock_guard<std::mutex> g(a->mu);
    return a->done;
  });
}

}  // namespace sqlguard::detail
