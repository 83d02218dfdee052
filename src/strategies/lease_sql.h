// Internal: the exact statements the lease lock issues (with `?`
// placeholders, before the driver numbers them), so `sqlguard bench` can run
// byte-identical SQL through the native driver and `--emit-sql` can print it.
#pragma once

#include <string>
#include <string_view>

#include "sqlguard/connection.h"

namespace sqlguard::detail {

// `which`: "acquire", "insert" (MySQL only; "" elsewhere), "read_mine",
// "info", "renew", "release", "force", "notify" (PostgreSQL only; "" elsewhere).
// Throws Error(kInvalidArgument) for another name.
const std::string& lease_sql(const Connection& conn, std::string_view which);

}  // namespace sqlguard::detail
