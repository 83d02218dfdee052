-- sql/postgresql/maintenance.sql — PostgreSQL 15 (libpqxx 6.4). `?` placeholders are numbered $1..$n by the driver.
-- Migrations, the database clock and session setup (src/core/migrate.cpp, connection.cpp,
-- src/dialect/postgresql/).

-- name: db_now
-- The database clock in ms since the Unix epoch, read fresh (clock_timestamp(), never now():
-- now() is frozen at transaction start).
-- returns: :one db_now_ms
-- params: 
SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT;

-- name: migrate_version_table
-- returns: :exec
-- params: 
CREATE TABLE IF NOT EXISTS sqlguard_schema_version (
  version INTEGER NOT NULL PRIMARY KEY,
  name VARCHAR(255) NOT NULL,
  checksum VARCHAR(64) NOT NULL,
  applied_at BIGINT NOT NULL);

-- name: migrate_read_applied
-- returns: :many version, name, checksum, applied_at
-- params: 
SELECT version, name, checksum, applied_at FROM sqlguard_schema_version;

-- name: migrate_record
-- returns: :execrows
-- params: version, name, checksum
INSERT INTO sqlguard_schema_version (version, name, checksum, applied_at) VALUES (?, ?, ?, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT);

-- name: migrate_count
-- returns: :one applied
-- params: max_version
SELECT COUNT(*) FROM sqlguard_schema_version WHERE version <= ?;

-- name: migrate_lock_xact
-- Database-wide mutex for migrations: a TRANSACTION-scoped advisory lock, taken first inside the
-- one transaction the whole migration run is (PostgreSQL DDL is transactional), released by its
-- COMMIT or ROLLBACK. Never a session advisory lock: behind a transaction pooler the session
-- that took it is not the one that would release it, and a lost connection cannot strand it.
-- returns: :one locked
-- params: 
SELECT 1 AS locked FROM (SELECT pg_advisory_xact_lock(7310575312359104513)) AS l;

-- name: migrate_lock_row
-- not needed: migrations hold a transaction-scoped lock (migrate_lock_xact)

-- name: migrate_unlock_row
-- not needed: migrate_lock_xact is transaction-scoped; the migration transaction's end releases it

-- name: session_statement_timeout
-- Bounds every statement of a watchdog connection by the renew period.
-- returns: :exec
-- params: timeout_ms
SELECT set_config('statement_timeout', ?, false);

-- name: session_time_zone
-- not needed: MySQL/MariaDB session setup only

-- name: session_sql_mode
-- not needed: MySQL/MariaDB session setup only

-- name: session_isolation
-- not needed: MySQL/MariaDB session setup only

-- name: session_galera
-- not needed: Galera is MariaDB's

-- name: session_server_version
-- not needed: libpq reports the server version

-- name: session_id
-- not needed: libpq reports the backend pid

-- name: session_setup
-- Run on every (re)connect without ?pooler=transaction. backend_pid is the server session's pid: when it is not the
-- pid libpq got at connect (client_pid), a pooler is in the path and a URI that declares none is refused
-- (connection.cpp). The SET makes sqlguard's autocommit statements and plain BEGINs run at READ COMMITTED whatever
-- the database's default_transaction_isolation says (under serializable a release failed with 40001 and left the
-- lock held); it is made only on the session libpq connected to, or behind a declared session pooler
-- (session_pooler = 1: the server session is this client's until it disconnects), never on one a transaction
-- pooler hands to another client.
-- returns: :one backend_pid, isolation
-- params: client_pid, session_pooler
SELECT pg_backend_pid() AS backend_pid, CASE WHEN pg_backend_pid() = ? OR ?::int = 1 THEN set_config('default_transaction_isolation', 'read committed', false) END AS isolation;

-- name: session_client_address
-- not needed: libpq gives the socket (PQsocket)

-- name: session_journal_mode
-- not needed: SQLite file settings only

-- name: session_journal_wal
-- not needed: SQLite file settings only

-- name: session_synchronous
-- not needed: SQLite file settings only

-- name: tx_begin
-- not needed: libpqxx issues BEGIN [ISOLATION LEVEL ...]/COMMIT/ROLLBACK for its transaction classes

-- name: tx_commit
-- not needed: libpqxx issues BEGIN [ISOLATION LEVEL ...]/COMMIT/ROLLBACK for its transaction classes

-- name: tx_rollback
-- not needed: libpqxx issues BEGIN [ISOLATION LEVEL ...]/COMMIT/ROLLBACK for its transaction classes

-- name: tx_isolation_read_committed
-- not needed: libpqxx issues BEGIN [ISOLATION LEVEL ...]/COMMIT/ROLLBACK for its transaction classes

-- name: tx_isolation_repeatable_read
-- not needed: libpqxx issues BEGIN [ISOLATION LEVEL ...]/COMMIT/ROLLBACK for its transaction classes

-- name: tx_isolation_serializable
-- not needed: libpqxx issues BEGIN [ISOLATION LEVEL ...]/COMMIT/ROLLBACK for its transaction classes

-- name: tx_galera_autocommit_off
-- not needed: a guard for MariaDB Galera nodes (sql/mysql/maintenance.sql); here a rolled-back transaction fails its statements

-- name: tx_galera_autocommit_on
-- not needed: a guard for MariaDB Galera nodes (sql/mysql/maintenance.sql); here a rolled-back transaction fails its statements

-- name: tx_galera_savepoint
-- not needed: a guard for MariaDB Galera nodes (sql/mysql/maintenance.sql); here a rolled-back transaction fails its statements

-- name: galera_heal_trigger_tables
-- not needed: Galera is MariaDB's

-- name: tx_galera_release_savepoint
-- not needed: a guard for MariaDB Galera nodes (sql/mysql/maintenance.sql); here a rolled-back transaction fails its statements

-- name: admin_list_sessions
-- Other sessions sqlguard opened on this database (sqlguard chaos: session-kill fault).
-- returns: :many session_id
-- params:
SELECT pid FROM pg_stat_activity
WHERE application_name = 'sqlguard' AND pid <> pg_backend_pid() AND datname = current_database();

-- name: admin_terminate_session
-- returns: :exec
-- params: session_id
SELECT pg_terminate_backend(?);

-- name: admin_delete_lease
-- Operator: forget a lease's name entirely (the fence history is the sequence). Never the
-- reservation of a semaphore's or read-write lease's name (owner '', sync_reserve_name):
-- deleting it would let a lease be taken beside that kind's holdings; cleanup removes it
-- once the name is idle.
-- returns: :execrows
-- params: name
DELETE FROM sqlguard_lock WHERE name = ? AND owner <> '';

-- name: admin_delete_fenced_resource
-- returns: :execrows
-- params: resource
DELETE FROM sqlguard_fenced_resource WHERE resource = ?;

-- name: admin_delete_inbox_consumer
-- returns: :execrows
-- params: consumer
DELETE FROM sqlguard_inbox WHERE consumer = ?;

-- name: admin_delete_prefix_leases
-- Test and bench clean-up: every lock row whose name starts with a prefix (prefix_len
-- characters long).
-- returns: :execrows
-- params: prefix_len, prefix
DELETE FROM sqlguard_lock WHERE substr(name, 1, ?) = ?;

-- name: admin_delete_prefix_sync
-- Test and bench clean-up: semaphore / read-write lease / fair queue rows (the name's row)
-- whose name starts with a prefix; admin_delete_prefix_holdings and _places delete theirs.
-- returns: :execrows
-- params: prefix_len, prefix
DELETE FROM sqlguard_sync WHERE substr(name, 1, ?) = ?;

-- name: admin_delete_prefix_holdings
-- returns: :execrows
-- params: prefix_len, prefix
DELETE FROM sqlguard_sync_holder WHERE substr(name, 1, ?) = ?;

-- name: admin_delete_prefix_places
-- returns: :execrows
-- params: prefix_len, prefix
DELETE FROM sqlguard_lock_queue WHERE substr(name, 1, ?) = ?;

-- name: admin_delete_prefix_idempotency
-- returns: :execrows
-- params: prefix_len, prefix
DELETE FROM sqlguard_idempotency WHERE substr(idem_key, 1, ?) = ?;

-- name: admin_delete_prefix_inbox
-- returns: :execrows
-- params: prefix_len, prefix
DELETE FROM sqlguard_inbox WHERE substr(message_id, 1, ?) = ?;

-- name: admin_delete_prefix_history
-- The grant history's rows of the names starting with a prefix (history.h).
-- returns: :execrows
-- params: prefix_len, prefix
DELETE FROM sqlguard_history WHERE substr(name, 1, ?) = ?;

-- name: migrate_lock_table
-- not needed: migrations hold a transaction-scoped advisory lock (migrate_lock_xact)

-- name: migrate_lock_clear
-- not needed: see migrate_lock_table

-- name: galera_variables
-- not needed: Galera is MariaDB/MySQL only

-- name: galera_status
-- not needed: Galera is MariaDB/MySQL only

-- name: galera_fence_sequence
-- not needed: Galera is MariaDB/MySQL only
