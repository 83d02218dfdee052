-- sql/mysql/doctor.sql — MariaDB 10.3+. What `sqlguard doctor` (check_environment()) reads;
-- nothing here changes the server. Checks: src/dialect/mysql/doctor.cpp.

-- name: doctor_settings
-- (name, value) rows: version, default isolation and the lock/statement timeouts.
-- returns: :many name, value
-- params: 
SELECT 'version', VERSION()
UNION ALL SELECT 'isolation', CAST(@@GLOBAL.tx_isolation AS CHAR)
UNION ALL SELECT 'innodb_lock_wait_timeout', CAST(@@GLOBAL.innodb_lock_wait_timeout AS CHAR)
UNION ALL SELECT 'lock_wait_timeout', CAST(@@GLOBAL.lock_wait_timeout AS CHAR)
UNION ALL SELECT 'max_statement_time', CAST(@@GLOBAL.max_statement_time AS CHAR);

-- name: doctor_standbys
-- not needed: PostgreSQL streaming replication only (Galera checks read wsrep_* status)

-- name: doctor_backend_pid
-- not needed: PostgreSQL transaction-pooler detection only
