-- sql/mysql/maintenance.sql — MariaDB >= 10.6 (mysqlcppconn 1.1). Session time zone is pinned to UTC.
-- Migrations, the database clock and session setup (src/core/migrate.cpp, connection.cpp,
-- src/dialect/mysql/).

-- name: db_now
-- The database clock in ms since the Unix epoch, read fresh (per statement).
-- returns: :one db_now_ms
-- params: 
SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);

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
INSERT INTO sqlguard_schema_version (version, name, checksum, applied_at) VALUES (?, ?, ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED));

-- name: migrate_count
-- returns: :one applied
-- params: max_version
SELECT COUNT(*) FROM sqlguard_schema_version WHERE version <= ?;

-- name: migrate_lock_table
-- The migration mutex is a row, not GET_LOCK: GET_LOCK is node-local on Galera, a row
-- is certified cluster-wide (concurrent inserts from two nodes: one wins).
-- returns: :exec
-- params: 
CREATE TABLE IF NOT EXISTS sqlguard_migrate_lock (
  id        TINYINT      NOT NULL PRIMARY KEY,
  owner     VARCHAR(255) NOT NULL,
  expire_at BIGINT       NOT NULL) ENGINE = InnoDB;

-- name: migrate_lock_clear
-- Frees the mutex of a migrator that died holding it, once it expired (database clock).
-- returns: :execrows
-- params: 
SET STATEMENT wsrep_sync_wait = 2 FOR DELETE FROM sqlguard_migrate_lock WHERE id = 1 AND expire_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);

-- name: migrate_lock_xact
-- not needed: migrations hold a lock row (migrate_lock_row); GET_LOCK is node-local on Galera

-- name: migrate_lock_row
-- Takes the mutex: inserted = taken, duplicate key = another migrator holds it (the caller
-- retries for up to 300 s). Owner = this session on this server; it expires after 120 s
-- (sqlguard's migrations take seconds), so a crashed migrator cannot block for ever.
-- returns: :execrows
-- params: 
SET STATEMENT wsrep_sync_wait = 4 FOR INSERT INTO sqlguard_migrate_lock (id, owner, expire_at)
VALUES (1, CONCAT(@@hostname, ':', @@port, '#', CONNECTION_ID()), CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + 120000);

-- name: migrate_unlock_row
-- returns: :execrows
-- params: 
DELETE FROM sqlguard_migrate_lock WHERE id = 1 AND owner = CONCAT(@@hostname, ':', @@port, '#', CONNECTION_ID());

-- name: session_statement_timeout
-- not needed: the driver read/write timeout (ConnectOptions::io_timeout) bounds watchdog statements

-- name: session_time_zone
-- Run on every (re)connect: no DST or session zone can shift a timestamp.
-- returns: :exec
-- params: 
SET time_zone = '+00:00';

-- name: session_sql_mode
-- Strict: an oversize value is an error, never silently truncated.
-- returns: :exec
-- params: 
SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_DATE,NO_ZERO_IN_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION';

-- name: session_isolation
-- Fewer gap locks, hence fewer deadlocks on hot keys.
-- returns: :exec
-- params: 
SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED;

-- name: session_galera
-- At connect, on MariaDB: 1 = a Galera node (its acquire plan: read first, then update and read back).
-- returns: :one wsrep_on
-- params: 
SELECT @@wsrep_on;

-- name: session_server_version
-- At connect: the server's version, and the largest packet it accepts (a statement with its values
-- larger than that is refused before it is sent, naming the limit).
-- returns: :one version, max_allowed_packet
-- params: 
SELECT VERSION(), @@max_allowed_packet;

-- name: session_id
-- returns: :one session_id
-- params: 
SELECT CONNECTION_ID();

-- name: session_setup
-- not needed: the session setup is session_time_zone, session_sql_mode and session_isolation; no pooler sits between client and server

-- name: session_client_address
-- At connect: this session's client address as the server sees it ("127.0.0.1:54321"). Its port finds
-- the connection's socket, which is checked for a server-side end (KILL, a restart) before each
-- autocommit statement leaves: seen there, nothing was sent (connection_lost, not commit_in_doubt).
-- returns: :one host
-- params: 
SELECT HOST FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID();

-- name: session_journal_mode
-- not needed: SQLite file settings only

-- name: session_journal_wal
-- not needed: SQLite file settings only

-- name: session_synchronous
-- not needed: SQLite file settings only

-- name: tx_begin
-- returns: :exec
-- params: 
START TRANSACTION;

-- name: tx_commit
-- returns: :exec
-- params: 
COMMIT;

-- name: tx_rollback
-- returns: :exec
-- params: 
ROLLBACK;

-- name: tx_isolation_read_committed
-- Before tx_begin: applies to the next transaction only.
-- returns: :exec
-- params: 
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;

-- name: tx_isolation_repeatable_read
-- returns: :exec
-- params: 
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;

-- name: tx_isolation_serializable
-- returns: :exec
-- params: 
SET TRANSACTION ISOLATION LEVEL SERIALIZABLE;

-- A transaction on a Galera node (kGaleraDialect) is opened with tx_galera_autocommit_off and
-- tx_galera_savepoint instead of tx_begin, and closed with tx_galera_release_savepoint, then
-- tx_commit, then tx_galera_autocommit_on (or tx_rollback, then tx_galera_autocommit_on).
-- Why: a transaction that another node's write brute-force aborts while one of its
-- statements runs can be rolled back with no error to that statement or the next (measured
-- on MariaDB 10.11: a lock set's statements then ran on outside any transaction and its
-- COMMIT committed nothing, so its names were held by others as well). Under autocommit = 0
-- the statements after such a rollback open a new transaction instead of committing one by
-- one, and the savepoint, which the rollback discarded, is missing when it is released
-- (error 1305): the connection rolls that new transaction back and reports a conflict.

-- name: tx_galera_autocommit_off
-- returns: :exec
-- params: 
SET autocommit = 0;

-- name: tx_galera_savepoint
-- The transaction's mark: it exists as long as the transaction tx_galera_autocommit_off began.
-- returns: :exec
-- params: 
SAVEPOINT sqlguard_tx;

-- name: tx_galera_release_savepoint
-- Before tx_commit: error 1305 (no such savepoint) = the transaction was rolled back unseen.
-- returns: :exec
-- params: 
RELEASE SAVEPOINT sqlguard_tx;

-- name: galera_heal_trigger_tables
-- A Galera node whose table cache holds a lock table with unparseable triggers (the grant
-- history's: a session brute-force aborted while it parsed them, MariaDB 10.11 measured, see
-- docs/history.md) fails every statement that opens that copy of the table with 1064 "Trigger
-- ... has an error in its body", until the copy leaves the cache. This closes the node's cached
-- copies (LOCAL: not replicated; the triggers are read again at the next open), waiting at most
-- 1 s for statements that use them. Needs the RELOAD privilege; without it the error stays
-- until the cache evicts the copy.
-- returns: :exec
-- params: 
SET STATEMENT lock_wait_timeout = 1 FOR FLUSH LOCAL TABLES sqlguard_lock, sqlguard_sync_holder;

-- name: tx_galera_autocommit_on
-- After tx_commit or tx_rollback: the session's statements commit one by one again.
-- returns: :exec
-- params: 
SET autocommit = 1;

-- name: admin_list_sessions
-- Other sessions of this user on this database (sqlguard chaos: session-kill fault).
-- returns: :many session_id
-- params:
SELECT id FROM information_schema.processlist
WHERE db = DATABASE() AND id <> CONNECTION_ID() AND user = SUBSTRING_INDEX(CURRENT_USER(), '@', 1);

-- name: admin_terminate_session
-- KILL takes no placeholder: {#id} is an integer read from admin_list_sessions.
-- returns: :exec
KILL {#id};

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

-- name: galera_variables
-- Galera checks (src/dialect/mysql/galera_checks.cpp, for `sqlguard doctor`): the settings.
-- Columns: wsrep_on, session wsrep_sync_wait, global wsrep_sync_wait, binlog_format,
-- innodb_autoinc_lock_mode, thread_cache_size.
-- returns: :one wsrep_on, session_sync_wait, global_sync_wait, binlog_format, autoinc_lock_mode, thread_cache_size
-- params: 
SELECT @@wsrep_on, @@session.wsrep_sync_wait, @@global.wsrep_sync_wait, @@binlog_format, @@innodb_autoinc_lock_mode, @@thread_cache_size;

-- name: galera_status
-- The node's view of the cluster: wsrep_cluster_size, wsrep_cluster_status (Primary),
-- wsrep_ready, wsrep_local_state_comment (Synced), as (name, value) rows.
-- returns: :many name, value
-- params: 
SELECT LOWER(VARIABLE_NAME), VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS
WHERE VARIABLE_NAME IN ('WSREP_CLUSTER_SIZE', 'WSREP_CLUSTER_STATUS', 'WSREP_READY', 'WSREP_LOCAL_STATE_COMMENT');

-- name: galera_fence_sequence
-- The fence sequence's settings: cache_size must be 0 (NOCACHE) on Galera.
-- returns: :one cache_size, increment
-- params: 
SELECT cache_size, increment FROM sqlguard_fence_seq;
