// Internal: what a lock name is. A name is one lock, of one kind, while its
// rows exist: the seams rule, in one place. Every kind's acquire asks here
// (lease plans through refuse_if_reserved, synchronizers through
// sync_attempt), and the refusal names both kinds.
#pragma once

#include <cstdint>
#include <limits>
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
// The error for a use of `name` as `asked` ("lease", "fair", "semaphore",
// "rw") when it is `stored` (`permits`: a stored semaphore's count):
// kInvalidArgument (not retryable: the same call is refused until the name's
// rows are gone), naming both kinds.
Error kind_clash(const std::string& name, std::string_view stored, std::int64_t permits, std::string_view asked);
// A lease acquire (`asked`: "lease" or "fair") found the name's lease row held
// until `holder_expire_at`: when that is a synchronizer's reservation,
// throws kind_clash naming its kind (one read); otherwise returns.
void refuse_if_reserved(Connection& conn, const std::string& name, std::int64_t holder_expire_at,
                        std::string_view asked);

// The spelling of a kind in sqlguard_sync.kind and errors ("lease", "fair",
// "semaphore", "rw").
std::string_view kind_name(LockKind kind) noexcept;

}  // namespace sqlguard::detail
