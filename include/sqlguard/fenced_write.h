// sqlguard/fenced_write.h — fenced writes: the storage-side check that makes
// a fencing token useful (Kleppmann, "How to do distributed locking").
#pragma once

#include <cstdint>
#include <string>

#include "sqlguard/connection.h"

namespace sqlguard {

// Accepts a write to `resource` carrying `fence` only if no larger token was
// accepted for it before, and records it (table sqlguard_fenced_resource).
// Run it inside the transaction of the write it protects so both commit
// together. Returns false for a stale token: the write must be refused
// (roll back). Throws Error(kInvalidArgument) for a bad resource name or a
// fence <= 0. Statements: fenced_ensure, fenced_update in sql/<dialect>/lease.sql.
bool fenced_write(Connection& conn, const std::string& resource, std::int64_t fence);

}  // namespace sqlguard
