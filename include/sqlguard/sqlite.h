// sqlguard/sqlite.h — SQLite escape hatch. Include only if you link SQLite.
//
// Gives the native sqlite3* of a sqlguard SQLite connection, so your own
// statements run inside the same transaction as sqlguard's (for example, the
// business write and the inbox dedup row commit together). Do not close the
// handle and do not change its busy handler, busy timeout or journal mode.
#pragma once

#include <chrono>

#include "sqlguard/connection.h"

struct sqlite3;

namespace sqlguard::sqlite {

// Throws Error(kInvalidArgument) if `conn` is not an SQLite connection.
sqlite3* native_handle(Connection& conn);

// How long a writer of `conn` waits for the database's write lock
// (ConnectOptions::busy_timeout, or what a row-lock scope set for its
// statement). `PRAGMA busy_timeout` reads 0 on a sqlguard connection to a
// file: the wait is sqlguard's own busy handler, which a writer's release
// wakes (the `<file>-sqlguard-wake` file beside the database) instead of
// SQLite's fixed sleeps of 1 to 100 ms. An in-memory database keeps SQLite's
// handler. Throws Error(kInvalidArgument) if `conn` is not an SQLite
// connection.
std::chrono::milliseconds busy_timeout(Connection& conn);

}  // namespace sqlguard::sqlite
