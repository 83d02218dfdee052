// Internal: PostgreSQL SQLSTATE -> portable error code.
#pragma once

#include <string_view>

#include "sqlguard/errors.h"

namespace sqlguard::pg {
// Exact states first, then two-character class prefixes ("08"); kInternal
// for anything not in the table (errors.cpp).
ErrorCode classify_state(std::string_view state);
}  // namespace sqlguard::pg
