// The one code path of `sqlguard run` and `sqlguard elect`: wait for a
// lease, run CMD under the supervisor of run_supervisor.h while the lease is
// held (the client renews it), stop CMD's whole process tree when the lease
// is lost, on SIGTERM/SIGINT/SIGHUP, or when this process dies, and release
// the lease once the tree is gone. The commands differ only in what they
// wait for (run: --wait, default 0; elect: until elected, unless --wait),
// the variables CMD gets and the words they print.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_kinds.h"

#include <cstdint>

namespace sqlguard::cli {

// The words of one command, in messages and JSON.
struct LeasedWords {
  const char* command;       // "run": the "sqlguard run: " prefix
  const char* name_key;      // JSON key of the lease's name: "lock"
  const char* acquired_key;  // JSON key of acquired or not: "acquired"
  const char* fence_key;     // JSON key of the fencing token: "fence"
  const char* noun;          // "lock": "lock 'x' not acquired within 5s"
  const char* won;           // "acquired"
  const char* waiting;       // "waiting for": "SIGTERM while waiting for lock 'x'"
  const char* lost;          // "lease": "lease 'x' lost (...)"
};

struct LeasedCommand {
  LeasedWords words{};
  // What the command holds while CMD runs: a lease (lease.fair: a fair one),
  // a semaphore's permit (spec.permits: its count when NAME is new), a side of
  // a read-write lease, or any kind of lock_kinds.def (`run --kind`).
  LockSpec spec{};
  std::string name;  // the lease; checked by the command (check_name_arg)
  // `run --lock a --lock b`: several lease names held all or none (a
  // LockSet); `name` is then their label (joined by ','). Empty or one name:
  // `name` alone.
  std::vector<std::string> names;
  // ttl, min_hold, owner. on_lost is the helper's.
  LeaseOptions lease;
  // How long to wait for the lease; nullopt: until it is acquired.
  std::optional<std::chrono::milliseconds> wait;
  std::chrono::milliseconds kill_grace{std::chrono::seconds(10)};
  int conflict_exit = 75;  // exit code when not acquired within `wait`
  std::vector<std::string> cmd;
  // CMD's environment: each of these names is set to the fence (run:
  // SQLGUARD_FENCE; elect adds SQLGUARD_TERM), `name_var` to the name;
  // SQLGUARD_OWNER is always set to the owner token. A set also gives
  // SQLGUARD_LOCK_COUNT=N and, for i = 1..N in the set's (byte) order,
  // SQLGUARD_LOCK_i (a name) and SQLGUARD_FENCE_i (its fence);
  // SQLGUARD_FENCE is the first name's.
  std::vector<std::string> fence_vars{"SQLGUARD_FENCE"};
  std::string name_var = "SQLGUARD_LOCK";
};

// Runs the command to its end and sets exit_code(): CMD's status; 5 when
// the lease was lost while CMD ran (then it leaves with std::_Exit, see the
// .cpp); `conflict_exit` when not acquired in time; 128+N for signal N while
// waiting (from the signal handler) or before CMD started. With --json,
// prints exactly one JSON object. Throws for errors (connect, database).
void run_leased(const LeasedCommand& c);

}  // namespace sqlguard::cli
