// The cached process id (process.h).
#include "core/process.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>

namespace sqlguard::detail {
namespace {
std::atomic<pid_t> g_pid{0};

void refresh_in_child() noexcept { g_pid.store(::getpid(), std::memory_order_relaxed); }

pid_t first_ask() noexcept {
  static const bool registered = [] {
    ::pthread_atfork(nullptr, nullptr, refresh_in_child);
    return true;
  }();
  (void)registered;
  refresh_in_child();
  return g_pid.load(std::memory_order_relaxed);
}
}  // namespace

pid_t process_id() noexcept {
  const pid_t pid = g_pid.load(std::memory_order_relaxed);
  return pid != 0 ? pid : first_ask();
}

}  // namespace sqlguard::detail
