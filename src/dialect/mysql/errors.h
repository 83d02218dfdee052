// Internal: MySQL / MariaDB error number -> portable error code.
#pragma once

#include <string_view>

#include "sqlguard/errors.h"

namespace sqlguard::mysql {
// Server and client error numbers; kInternal for anything not in the table (errors.cpp).
ErrorCode classify(int code);

// 1064 "Trigger '...' has an error in its body" on a Galera node: the node's
// cached copy of a table failed to parse its (valid) triggers, a MariaDB
// fault under brute-force aborts (docs/deploying-galera.md); the statement did not run.
// Elsewhere that error is a trigger really broken: not this.
bool unparsed_trigger_copy(int code, std::string_view message, bool galera);
}  // namespace sqlguard::mysql
