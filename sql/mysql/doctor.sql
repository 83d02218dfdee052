-- sql/mysql/doctor.sql — MariaDB 10.3+. What `sqlguard doctor` (check_environment()) reads;
-- nothing here changes the server. Checks: src/dialect/mysql/doctor.cpp.

-- name: doctor_settings
-- (name, value) rows: version, default isolation, the lock/statement timeouts and what makes a commit
-- durable (redo log flush, binary log and its sync, whether this is a Galera node). Read from
-- GLOBAL_VARIABLES so that a variable this server lacks is NULL, not an error.
-- returns: :many name, value
-- params: 
SELECT 'version', VERSION()
UNION ALL SELECT 'isolation', CAST(@@GLOBAL.tx_isolation AS CHAR)
UNION ALL SELECT 'innodb_lock_wait_timeout', CAST(@@GLOBAL.innodb_lock_wait_timeout AS CHAR)
UNION ALL SELECT 'lock_wait_timeout', CAST(@@GLOBAL.lock_wait_timeout AS CHAR)
UNION ALL SELECT 'max_statement_time', CAST(@@GLOBAL.max_statement_time AS CHAR)
UNION ALL SELECT LOWER(VARIABLE_NAME), VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES
  WHERE VARIABLE_NAME IN ('INNODB_FLUSH_LOG_AT_TRX_COMMIT', 'LOG_BIN', 'SYNC_BINLOG', 'WSREP_ON');

-- name: doctor_standbys
-- not needed: PostgreSQL streaming replication only (Galera checks read wsrep_* status)

-- name: doctor_backend_pid
-- not needed: PostgreSQL transaction-pooler detection only

-- name: doctor_engine
-- What the server says it is: VERSION() ("10.11.6-MariaDB-0+deb12u1", "8.0.11-TiDB-v7.5.0",
-- "8.0.30-Vitess") and @@version_comment.
-- returns: :one version, detail
-- params: 
SELECT VERSION(), @@version_comment;
