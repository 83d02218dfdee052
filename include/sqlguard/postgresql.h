// sqlguard/postgresql.h — PostgreSQL escape hatch. Include only if you link
// libpqxx. Gives the pqxx transaction of the sqlguard transaction that is
// open on `conn`, so your own statements commit atomically with sqlguard's.
#pragma once

#include <string>
#include <string_view>

#include "sqlguard/connection.h"

namespace pqxx {
class transaction_base;
class connection_base;
}  // namespace pqxx

namespace sqlguard::postgresql {

// The open transaction's pqxx object. Throws Error(kInvalidArgument) if
// `conn` is not PostgreSQL or no sqlguard transaction is open on it.
pqxx::transaction_base& native_transaction(Connection& conn);
// The underlying connection (for LISTEN, COPY, ...). Do not close it.
pqxx::connection_base& native_connection(Connection& conn);

// libpq's form of a statement: sqlguard writes `?`, libpq wants $1..$n
// (quoted text is left alone). What the catalog text becomes on the wire.
std::string numbered_placeholders(std::string_view sql);

// LISTEN/NOTIFY waits are Connection::wait_for_notify().

}  // namespace sqlguard::postgresql
