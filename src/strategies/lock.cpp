// What every Lock (include/sqlguard/lock.h) does the same way: the future
// form of acquire_async, Lockable, and the one guard.
#include "sqlguard/lock.h"

#include "client/client.h"
#include "sqlguard/read_write_lease.h"
#include "sqlguard/validate.h"
#include "strategies/kinds.h"

namespace sqlguard {

using std::chrono::milliseconds;

namespace {
// "lease 'x'", "fair lease 'x'", "semaphore 'x'", "read-write lease 'x' (shared)":
// the kind's noun (lock_kinds.def) without its article.
std::string named(const Lock& l) {
  std::string noun = detail::kind_noun(detail::kind_name(l.kind()));
  for (std::string_view article : {"a ", "an "})
    if (noun.starts_with(article)) noun.erase(0, article.size());
  std::string s = noun + " '" + printable(l.name(), 64) + "'";
  if (const auto* side = dynamic_cast<const ReadWriteLease::Side*>(&l))
    s += " (" + std::string(to_string(side->mode())) + ")";
  return s;
}
}  // namespace

std::future<bool> Lock::acquire_async(milliseconds wait) {
  auto [done, f] = detail::completion_future();
  acquire_async(wait, std::move(done));
  return std::move(f);
}

void Lock::release_async(ReleaseCallback) {
  throw Error(ErrorCode::kNotSupported, "release_async of " + named(*this) +
                                            ": not offered for this kind (a lease or fair lease of a LockClient has it)");
}

std::future<bool> Lock::release_async() {
  auto [done, f] = detail::completion_future();
  release_async(std::move(done));
  return std::move(f);
}

void Lock::lock() {
  const milliseconds configured = lock_wait();
  const milliseconds wait = configured.count() > 0 ? configured : std::chrono::hours(24 * 365);
  if (!acquire(wait))
    throw Error(ErrorCode::kLockBusy,
                named(*this) + " not acquired within " + format_duration(wait));
}

void Lock::unlock() noexcept {
  try {
    release();
  } catch (const std::exception& e) {
    log(LogLevel::kWarning, "unlock of " + named(*this) + " failed (it expires by itself): " + e.what());
  }
}

LockGuard::LockGuard(Lock& lock, milliseconds wait) : lock_(lock) {
  if (!lock_.acquire(wait))
    throw Error(ErrorCode::kLockBusy, named(lock) + " not acquired within " + format_duration(wait));
}

LockGuard::~LockGuard() { lock_.unlock(); }

}  // namespace sqlguard
