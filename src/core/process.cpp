// The cached process id and thread names (process.h).
#include "core/process.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>

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

std::thread& name_thread(std::thread& t, const char* name) noexcept {
  char buf[16] = {};
  for (std::size_t i = 0; i + 1 < sizeof buf && name[i] != '\0'; ++i) buf[i] = name[i];
  (void)::pthread_setname_np(t.native_handle(), buf);  // a name is a help, never a failure
  return t;
}

pid_t process_id() noexcept {
  const pid_t pid = g_pid.load(std::memory_order_relaxed);
  return pid != 0 ? pid : first_ask();
}

}  // namespace sqlguard::detail
