// Internal: the calling process's id without a system call each time. Lock
// handles ask on every call whether they run in the process that made their
// client (a forked child must not use the parent's sessions and threads);
// getpid() is a real system call, several per acquire and release, and on
// a virtual machine a costly one. The id is cached and refreshed in a forked
// child by a pthread_atfork handler (fork() runs it; posix_spawn's child
// execs before it could ask).
#pragma once

#include <sys/types.h>

namespace sqlguard::detail {

pid_t process_id() noexcept;

}  // namespace sqlguard::detail
