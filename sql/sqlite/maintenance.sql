-- sql/sqlite/maintenance.sql — SQLite >= 3.35 (RETURNING). One writer at a time; read-modify-write uses BEGIN IMMEDIATE.
-- Migrations, the database clock and session setup (src/core/migrate.cpp, connection.cpp,
-- src/dialect/sqlite/).

-- name: db_now
-- The database clock in ms since the Unix epoch, read fresh (per statement).
-- returns: :one db_now_ms
-- params: 
SELECT CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER);

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
INSERT INTO sqlguard_schema_version (version, name, checksum, applied_at) VALUES (?, ?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER));

-- name: migrate_count
-- returns: :one applied
-- params: max_version
SELECT COUNT(*) FROM sqlguard_schema_version WHERE version <= ?;

-- name: migrate_lock_xact
-- not needed: the whole run is one BEGIN IMMEDIATE transaction, which excludes other writers

-- name: migrate_lock_row
-- not needed: see migrate_lock_xact

-- name: migrate_unlock_row
-- not needed: see migrate_lock_xact

-- name: session_statement_timeout
-- not needed: the busy timeout bounds every wait; there is no server to hang

-- name: session_time_zone
-- not needed: MySQL/MariaDB session setup only

-- name: session_sql_mode
-- not needed: MySQL/MariaDB session setup only

-- name: session_isolation
-- not needed: MySQL/MariaDB session setup only

-- name: session_galera
-- not needed: Galera is MariaDB's

-- name: session_server_version
-- not needed: embedded: the library version is sqlite3_libversion()

-- name: session_id
-- not needed: embedded: no server session

-- name: session_setup
-- not needed: embedded: no server session, no pooler

-- name: session_client_address
-- not needed: embedded: no socket

-- name: session_journal_mode
-- returns: :one journal_mode
-- params: 
PRAGMA journal_mode;

-- name: session_journal_wal
-- Only the first opener of a new file switches it (WAL is stored in the file).
-- returns: :one journal_mode
-- params: 
PRAGMA journal_mode=WAL;

-- name: session_synchronous
-- Durable against process crashes (kill -9), not power loss.
-- returns: :exec
-- params: 
PRAGMA synchronous=NORMAL;

-- name: tx_begin
-- Takes the write lock up front: a deferred transaction upgrading to a writer can fail
-- with SQLITE_BUSY that no busy timeout resolves.
-- returns: :exec
-- params: 
BEGIN IMMEDIATE;

-- name: tx_commit
-- returns: :exec
-- params: 
COMMIT;

-- name: tx_rollback
-- returns: :exec
-- params: 
ROLLBACK;

-- name: tx_isolation_read_committed
-- not needed: SQLite transactions are serializable

-- name: tx_isolation_repeatable_read
-- not needed: SQLite transactions are serializable

-- name: tx_isolation_serializable
-- not needed: SQLite transactions are serializable

-- name: tx_galera_autocommit_off
-- not needed: a MariaDB Galera node's guard (see sql/mysql/maintenance.sql); here a rolled back transaction fails its statements

-- name: tx_galera_autocommit_on
-- not needed: a MariaDB Galera node's guard (see sql/mysql/maintenance.sql); here a rolled back transaction fails its statements

-- name: tx_galera_savepoint
-- not needed: a MariaDB Galera node's guard (see sql/mysql/maintenance.sql); here a rolled back transaction fails its statements

-- name: galera_heal_trigger_tables
-- not needed: Galera is MariaDB's

-- name: tx_galera_release_savepoint
-- not needed: a MariaDB Galera node's guard (see sql/mysql/maintenance.sql); here a rolled back transaction fails its statements

-- name: admin_list_sessions
-- not supported: embedded, no server sessions to end

-- name: admin_terminate_session
-- not supported: embedded, no server sessions to end

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
-- not needed: migrations run in one BEGIN IMMEDIATE transaction

-- name: migrate_lock_clear
-- not needed: see migrate_lock_table

-- name: galera_variables
-- not needed: Galera is MariaDB/MySQL only

-- name: galera_status
-- not needed: Galera is MariaDB/MySQL only

-- name: galera_fence_sequence
-- not needed: Galera is MariaDB/MySQL only
