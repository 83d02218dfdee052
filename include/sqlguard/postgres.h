// sqlguard/postgres.h — PostgreSQL escape hatch. Include only if you link
// libpqxx. Gives the pqxx transaction of the sqlguard transaction that is
// open on `conn`, so your own statements commit atomically with sqlguard's.
#pragma once

#include "sqlguard/connection.h"

namespace pqxx {
class transaction_base;
class connection_base;
}  // namespace pqxx

namespace sqlguard::postgres {

// The open transaction's pqxx object. Throws Error(kInvalidArgument) if
// `conn` is not PostgreSQL or no sqlguard transaction is open on it.
pqxx::transaction_base& native_transaction(Connection& conn);
// The underlying connection (for LISTEN, COPY, ...). Do not close it.
pqxx::connection_base& native_connection(Connection& conn);

// LISTEN/NOTIFY waits are Connection::wait_for_notify().

}  // namespace sqlguard::postgres
