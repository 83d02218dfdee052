#include "core/io_deadline.h"

#include <sys/socket.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "core/process.h"

namespace sqlguard::detail {
namespace {

using Clock = std::chrono::steady_clock;

class Timer {
 public:
  static Timer& instance() {
    // Leaked on purpose: the thread may still wait at exit, and a static
    // destructor would race it.
    static Timer* t = new Timer;
    return *t;
  }

  std::uint64_t arm(int fd, Clock::time_point at) {
    std::lock_guard<std::mutex> lk(mu_);
    const std::uint64_t id = ++next_;
    const bool earliest = queue_.empty() || at < queue_.begin()->first.first;
    queue_.emplace(std::make_pair(at, id), fd);
    if (!thread_started_) {
      thread_started_ = true;
      std::thread t([this] { loop(); });
      name_thread(t, "sqlguard-io").detach();
    } else if (earliest) {
      cv_.notify_one();
    }
    return id;
  }

  // True if it fired. Under the same mutex as the firing, so a socket is
  // never shut down after its call has returned.
  bool disarm(std::uint64_t id) {
    std::lock_guard<std::mutex> lk(mu_);
    if (fired_.erase(id)) return true;
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (it->first.second == id) {
        queue_.erase(it);
        break;
      }
    }
    return false;
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      if (queue_.empty()) {
        cv_.wait(lk);
        continue;
      }
      auto first = queue_.begin();
      if (Clock::now() < first->first.first) {
        cv_.wait_until(lk, first->first.first);
        continue;
      }
      ::shutdown(first->second, SHUT_RDWR);
      fired_.insert(first->first.second);
      queue_.erase(first);
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<Clock::time_point, std::uint64_t>, int> queue_;  // (deadline, id) -> fd
  std::set<std::uint64_t> fired_;
  std::uint64_t next_ = 0;
  bool thread_started_ = false;
};

}  // namespace

void IoDeadline::arm(int fd, std::chrono::milliseconds timeout) {
  disarm();
  fired_ = false;
  if (fd >= 0) id_ = Timer::instance().arm(fd, Clock::now() + timeout);
}

bool IoDeadline::disarm() noexcept {
  if (id_) {
    try {
      fired_ = Timer::instance().disarm(id_);
    } catch (...) {
    }
    id_ = 0;
  }
  return fired_;
}

}  // namespace sqlguard::detail
