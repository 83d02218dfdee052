// sqlguard/sqlite.h — SQLite escape hatch. Include only if you link SQLite.
//
// Gives the native sqlite3* of a sqlguard SQLite connection, so your own
// statements run inside the same transaction as sqlguard's (for example, the
// business write and the inbox dedup row commit together). Do not close the
// handle and do not change its busy timeout or journal mode.
#pragma once

#include "sqlguard/connection.h"

struct sqlite3;

namespace sqlguard::sqlite {

// Throws Error(kInvalidArgument) if `conn` is not an SQLite connection.
sqlite3* native_handle(Connection& conn);

}  // namespace sqlguard::sqlite
