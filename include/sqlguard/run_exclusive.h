// sqlguard/run_exclusive.h — "run if free, else skip" (ShedLock's model):
// a scheduled job that every instance starts at the same moment runs on one
// of them; the others skip at once, never wait.
//
//   auto client = sqlguard::LockClient::shared("postgresql://app:pw@db/app");
//   bool ran = sqlguard::run_exclusive(client, "nightly-report",
//                                      {.at_most = 10min, .at_least = 30s},
//                                      [](std::int64_t fence) { build_report(fence); });
//
// Contract:
//  * One attempt (never waits): false, and `fn` is not called, when someone
//    holds the lock.
//  * at_most (ShedLock's lockAtMostFor) is the lease's ttl: a holder that
//    dies frees the lock this long after it took it, on the database clock.
//    Without keep_alive the lease is NOT renewed: a run longer than at_most
//    may overlap the next one (ExclusiveResult::held_throughout says so
//    afterwards; pass the fence to what you write: fenced_write()).
//  * at_least (lockAtLeastFor, the lease's minimum hold): a run that ends
//    sooner keeps the lock until acquired_at + at_least, so instances whose
//    clocks or schedulers are a little late still skip.
//  * keep_alive (LockClient only): the client renews the lease while `fn`
//    runs (every at_most / 3); at_most then bounds only a dead holder.
//  * `fn` gets the lease's fencing token. Whatever it throws is rethrown
//    after the lock is released (at_least still applies).
//  * Bad input (a name, at_most outside 10 ms .. 7 d, at_least > at_most,
//    keep_alive on a borrowed connection) is Error(kInvalidArgument) naming
//    the field, before anything is sent.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "sqlguard/connection.h"

namespace sqlguard {

class LockClient;

struct ExclusiveOptions {
  std::chrono::milliseconds at_most{0};   // required: the lease's ttl
  std::chrono::milliseconds at_least{0};  // kept after a fast run
  bool keep_alive = false;                // renew while fn runs (LockClient only)
};

struct ExclusiveResult {
  bool ran = false;               // fn was called (the lock was free)
  std::int64_t fence = 0;         // the lease it ran under (0 if it did not run)
  bool held_throughout = false;   // the lease was still ours when fn returned
  explicit operator bool() const noexcept { return ran; }
};

ExclusiveResult run_exclusive(const std::shared_ptr<LockClient>& client, const std::string& name,
                              const ExclusiveOptions& options, const std::function<void(std::int64_t fence)>& fn);
// On the caller's connection (no keep_alive).
ExclusiveResult run_exclusive(Connection& conn, const std::string& name, const ExclusiveOptions& options,
                              const std::function<void(std::int64_t fence)>& fn);

}  // namespace sqlguard
