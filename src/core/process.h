// Internal: the calling process's id without a system call each time. Lock
// handles ask on every call whether they run in the process that made their
// client (a forked child must not use the parent's sessions and threads);
// getpid() is a real system call, several per acquire and release, and on
// a virtual machine a costly one. The id is cached and refreshed in a forked
// child by a pthread_atfork handler (fork() runs it; posix_spawn's child
// execs before it could ask). And the names of the threads sqlguard starts.
#pragma once

#include <sys/types.h>

#include <thread>

namespace sqlguard::detail {

pid_t process_id() noexcept;

// Names a thread sqlguard started (what top -H, ps -L, perf and gdb show; at
// most 15 bytes on Linux, longer names are cut there), by its starter right
// after it was made: "sqlguard-<role>", so an operator can tell the lock
// client's renewer from the application's threads. Returns `t`.
std::thread& name_thread(std::thread& t, const char* name) noexcept;

}  // namespace sqlguard::detail
