// sqlguard/mysql.h — MySQL/MariaDB escape hatch. Include only if you link
// mysqlcppconn. Gives the sql::Connection* of a sqlguard connection, so your
// own statements run inside the sqlguard transaction open on it. Rules of
// mysqlcppconn 1.1 apply: read and destroy every ResultSet you open
// (an unread result leaves the connection out of sync and a later ROLLBACK
// silently does nothing), and do not call setAutoCommit/commit/rollback
// yourself while a sqlguard transaction is open.
#pragma once

#include "sqlguard/connection.h"

namespace sql {
class Connection;
}

namespace sqlguard::mysql {

// Throws Error(kInvalidArgument) if `conn` is not MySQL/MariaDB.
sql::Connection* native_handle(Connection& conn);

}  // namespace sqlguard::mysql
