// sqlguard/admin.h — operator and fault-injection tools (`sqlguard chaos`,
// maintenance scripts). Not for request paths. Statements: the admin_*
// entries of sql/<dialect>/maintenance.sql.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sqlguard/connection.h"

namespace sqlguard::admin {

// Ends every other session on this database that sqlguard opened
// (PostgreSQL: application_name 'sqlguard'; MySQL/MariaDB: the same user),
// except this one and the session ids in `spare` (Connection::session_id()).
// Returns how many were ended. SQLite has no sessions: Error(kNotSupported).
int terminate_sessions(Connection& conn, const std::vector<std::int64_t>& spare = {});

// Deletes the lease row of `name` whatever its state (the fence history is
// the sequence: a later acquire still gets a larger token). True if a row
// was deleted. A name a semaphore or read-write lease reserved is left alone
// (false): deleting its reservation would let a lease be taken beside that
// kind's holdings (`cleanup` removes it once the name is idle;
// delete_by_prefix removes a test's names of every kind).
bool delete_lease(Connection& conn, const std::string& name);
// Deletes the fence record of `resource` (fenced_write.h). True if deleted.
bool delete_fenced_resource(Connection& conn, const std::string& resource);
// Deletes every inbox row of `consumer`; returns how many.
std::int64_t delete_inbox_consumer(Connection& conn, const std::string& consumer);

// Test / benchmark clean-up: deletes every lock row, semaphore / read-write
// lease / fair queue row (and their holdings and places), idempotency key
// and inbox message whose name / key / message id starts with `prefix`, and
// the grant history of those names (history.h) (1..255
// bytes of ASCII). Returns the rows deleted.
std::int64_t delete_by_prefix(Connection& conn, const std::string& prefix);

}  // namespace sqlguard::admin
