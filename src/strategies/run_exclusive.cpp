// run_exclusive (include/sqlguard/run_exclusive.h): one try of a lease whose
// ttl is at_most and minimum hold at_least, fn under it, then the release
// (kept until the minimum hold ends).
#include "sqlguard/run_exclusive.h"

#include "sqlguard/errors.h"
#include "sqlguard/lease_lock.h"
#include "sqlguard/lock_client.h"
#include "sqlguard/validate.h"

namespace sqlguard {
namespace {

using std::chrono::milliseconds;

LeaseOptions lease_options(const ExclusiveOptions& o) {
  check_duration(o.at_most, "at_most", milliseconds(10), std::chrono::hours(24 * 7));
  check_duration(o.at_least, "at_least", milliseconds(0), o.at_most);
  LeaseOptions lo;
  lo.ttl = o.at_most;
  lo.min_hold = o.at_least;
  return lo;
}

ExclusiveResult run_under(LeaseLock& lock, const std::function<void(std::int64_t)>& fn) {
  ExclusiveResult r;
  if (!lock.try_acquire()) return r;
  r.ran = true;
  r.fence = lock.fence();
  try {
    fn(r.fence);
  } catch (...) {
    lock.unlock();  // never throws; errors go to the log hook
    throw;
  }
  r.held_throughout = lock.owns();
  // false: it was no longer ours (expired during a run longer than at_most,
  // or taken); the log hook has the cause.
  if (!lock.release()) r.held_throughout = false;
  return r;
}

}  // namespace

ExclusiveResult run_exclusive(const std::shared_ptr<LockClient>& client, const std::string& name,
                              const ExclusiveOptions& options, const std::function<void(std::int64_t)>& fn) {
  if (!client) throw Error(ErrorCode::kInvalidArgument, "run_exclusive: the lock client is null");
  if (!fn) throw Error(ErrorCode::kInvalidArgument, "run_exclusive: fn is empty");
  LeaseLock lock(client, name, lease_options(options), options.keep_alive ? Watchdog::kOn : Watchdog::kOff);
  return run_under(lock, fn);
}

ExclusiveResult run_exclusive(Connection& conn, const std::string& name, const ExclusiveOptions& options,
                              const std::function<void(std::int64_t)>& fn) {
  if (options.keep_alive)
    throw Error(ErrorCode::kInvalidArgument,
                "run_exclusive: keep_alive renews through a LockClient; on a borrowed connection nothing renews "
                "(use the LockClient overload, or a longer at_most)");
  if (!fn) throw Error(ErrorCode::kInvalidArgument, "run_exclusive: fn is empty");
  LeaseLock lock(conn, name, lease_options(options));
  return run_under(lock, fn);
}

}  // namespace sqlguard
