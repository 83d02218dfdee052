-- sql/postgresql/doctor.sql — PostgreSQL 15. What `sqlguard doctor` (check_environment()) reads;
-- nothing here changes the server. Checks: src/dialect/postgresql/doctor.cpp.

-- name: doctor_settings
-- (name, value) rows: the server settings the checks judge (durability among them), whether this is a standby, the
-- address the backend really listens on (differs from the URI's port behind a pooler) and the
-- backend pid (differs from the one libpq got at connect behind a pooler). The isolation is the
-- session's default before sqlguard's own session_setup changed it (reset_val: server, database
-- and role settings).
-- returns: :many name, value
-- params: 
SELECT name, CASE WHEN name = 'default_transaction_isolation' THEN reset_val ELSE setting END FROM pg_settings
WHERE name IN ('server_version', 'server_version_num', 'default_transaction_isolation', 'lock_timeout',
               'statement_timeout', 'idle_in_transaction_session_timeout', 'synchronous_commit',
               'synchronous_standby_names', 'fsync', 'full_page_writes')
UNION ALL SELECT 'in_recovery', pg_is_in_recovery()::text
UNION ALL SELECT 'server_port', coalesce(inet_server_port()::text, '')
UNION ALL SELECT 'backend_pid', pg_backend_pid()::text;

-- name: doctor_standbys
-- The standbys streaming from this server and whether each is synchronous (sync_state is NULL
-- without pg_monitor / superuser).
-- returns: :many application_name, state, sync_state
-- params: 
SELECT coalesce(application_name, ''), coalesce(state, ''), coalesce(sync_state, '')
FROM pg_stat_replication ORDER BY application_name;

-- name: doctor_backend_pid
-- Run in consecutive transactions: a different pid each time means a transaction pooler.
-- returns: :one backend_pid
-- params: 
SELECT pg_backend_pid();

-- name: doctor_engine
-- What the server says it is: version() and the installed extensions ("citus 12.1-1, plpgsql 1.0").
-- Read first and on its own (no pg_settings), so that an engine that only speaks the protocol
-- (CockroachDB, YugabyteDB) is named even where the other checks' statements fail.
-- returns: :one version, detail
-- params: 
SELECT version(), coalesce((SELECT string_agg(extname || ' ' || extversion, ', ' ORDER BY extname) FROM pg_extension), '');
