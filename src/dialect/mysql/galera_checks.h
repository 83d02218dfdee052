// Internal: the Galera checks of `sqlguard doctor` (MariaDB Galera / Percona
// XtraDB Cluster). Not a public API; check_environment() calls it on mysql.
#pragma once

#include <vector>

#include "sqlguard/connection.h"
#include "sqlguard/doctor.h"

namespace sqlguard::mysql {

// Appends the Galera checks for the server `conn` is connected to:
//   galera_wsrep           wsrep_on (OFF: one ok line "not a Galera node", nothing more)
//   galera_cluster         wsrep_cluster_status Primary, wsrep_ready ON, size, local state
//   galera_sync_wait       wsrep_sync_wait (sqlguard sets it per deciding statement)
//   galera_fence_sequence  sqlguard_fence_seq is NOCACHE (migration 0004_galera)
//   galera_binlog_format   binlog_format = ROW (Galera replicates row events only)
//   galera_autoinc_lock_mode innodb_autoinc_lock_mode = 2 (Galera's requirement)
// Changes nothing. A statement that fails is reported as a `fail` (or `warn`)
// result for its check, never thrown. Statements: galera_* in sql/mysql/maintenance.sql.
void add_galera_checks(Connection& conn, std::vector<CheckResult>& out);

}  // namespace sqlguard::mysql
