// Internal: MySQL / MariaDB error number -> portable error code.
#pragma once

#include "sqlguard/errors.h"

namespace sqlguard::mysql {
// Server and client error numbers; kInternal for anything not in the table (errors.cpp).
ErrorCode classify(int code);
}  // namespace sqlguard::mysql
