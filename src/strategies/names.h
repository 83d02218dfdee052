// Internal: what a lock name is. A name is one lock, of one kind, while its
// rows exist: the seams rule, in one place. Every kind's acquire asks here
// (lease plans through refuse_if_reserved, synchronizers through
// sync_attempt), and the refusal names both kinds.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "sqlguard/connection.h"
#include "sqlguard/errors.h"
#include "sqlguard/lock.h"

namespace sqlguard::detail {

// A semaphore or read-write lease reserves its name in sqlguard_lock with a
// row no lease can take: owner '', expire_at = kReservedExpireAt (held for
// ever; sync_reserve_name). A lease acquire that finds the name held until
// then was asked for a name of another kind.
inline constexpr std::int64_t kReservedExpireAt = std::numeric_limits<std::int64_t>::max();
// What a name's rows say it is: sqlguard_sync's kind ("semaphore", "rw",
// "fair"; "reserved" when only a lease row reserves it) and permit count,
// and its sqlguard_lock row's owner when it has one ('' = reserved by a
// synchronizer).
struct StoredName {
  std::string kind;
  std::int64_t permits = 0;
  std::optional<std::string> lease_owner;
};

// The error for a use of `name` as `asked` when it is `stored` (`permits`: a
// stored semaphore's count): kInvalidArgument (not retryable: the same call
// is refused until the name's rows are gone), naming both kinds.
Error kind_clash(const std::string& name, std::string_view stored, std::int64_t permits, LockKind asked);
// A handle of kind `asked` (a semaphore asking with `permits`, its count;
// 0: no count) may use a name stored as `stored`: throws kind_clash for
// another kind, kInvalidArgument for a semaphore asked with another count.
void check_name(const std::string& name, const StoredName& stored, LockKind asked, std::int64_t permits);
// A semaphore or read-write lease reserves its name in sqlguard_lock inside
// its acquire transaction (after sync_open): a lease row of the name refuses
// it (kind_clash). A fair lease's queue does not (its lease row is its own).
void reserve_name(Connection& conn, const StoredName& stored, const std::string& name, LockKind asked);
// A lease acquire (`asked`: kLease or kFairLease) found the name's lease row
// held until `holder_expire_at`: when that is a synchronizer's reservation,
// throws kind_clash naming its kind (one read); otherwise returns.
void refuse_if_reserved(Connection& conn, const std::string& name, std::int64_t holder_expire_at, LockKind asked);

// The spelling of a kind in sqlguard_sync.kind and errors: kinds.h.
std::string_view kind_name(LockKind kind) noexcept;

}  // namespace sqlguard::detail
