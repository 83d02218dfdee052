// Internal: SQLite (extended) result code -> portable error code.
#pragma once

#include <string_view>

#include "sqlguard/errors.h"

namespace sqlguard::sqlite_errors {
// Extended code first, then its primary code; "no such table" messages are
// kSchemaMismatch; kInternal otherwise (errors.cpp).
ErrorCode classify(int extended, std::string_view msg);
}  // namespace sqlguard::sqlite_errors
