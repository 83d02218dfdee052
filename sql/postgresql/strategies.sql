-- sql/postgresql/strategies.sql — PostgreSQL 15 (libpqxx 6.4). `?` placeholders are numbered $1..$n by the driver.
-- Row locks, version CAS, guarded updates and state machines (src/strategies/row_lock.cpp,
-- version_cas.cpp, transition.cpp) on the USER's tables. {slot} is a validated, quoted
-- identifier or a fragment below; {list*SEP} is a list of them joined by SEP. Every value is a ?.

-- name: row_lock_select
-- RowLocker::lock(): columns = key column first, then RowLockSpec::columns.
-- returns: :many columns...
-- params: key
SELECT {columns*, } FROM {table} WHERE {key} = ? {lock};

-- name: row_claim
-- RowLocker::claim() without a filter.
-- returns: :many columns...
-- params: limit
SELECT {columns*, } FROM {table} ORDER BY {key} LIMIT ? {lock};

-- name: row_claim_filtered
-- RowLocker::claim(): filter = param_eq fragments, one per claim_filter column.
-- returns: :many columns...
-- params: filter values..., limit
SELECT {columns*, } FROM {table} WHERE {filter* AND } ORDER BY {key} LIMIT ? {lock};

-- fragment: lock_exclusive
FOR UPDATE;

-- fragment: lock_exclusive_nowait
FOR UPDATE NOWAIT;

-- fragment: lock_exclusive_skip_locked
FOR UPDATE SKIP LOCKED;

-- fragment: lock_shared
FOR SHARE;

-- fragment: lock_shared_nowait
FOR SHARE NOWAIT;

-- fragment: lock_shared_skip_locked
FOR SHARE SKIP LOCKED;

-- name: lock_timeout_local
-- SET LOCAL lock_timeout with a bound value ('5000ms'), right after BEGIN.
-- returns: :exec
-- params: timeout
SELECT set_config('lock_timeout', ?, true);

-- name: lock_timeout_get
-- not needed: the lock timeout is transaction-local (lock_timeout_local)

-- name: lock_timeout_set
-- not needed: the lock timeout is transaction-local (lock_timeout_local)

-- name: cas_select
-- VersionCas::read(): columns = version column first, then VersionCasSpec::columns.
-- returns: :many columns...
-- params: key
SELECT {columns*, } FROM {table} WHERE {key} = ?;

-- name: cas_update
-- returns: :execrows
-- params: values..., key, expected_version
UPDATE {table} SET {assignments*, }, {version} = {version} + 1 WHERE {key} = ? AND {version} = ?;

-- name: cas_version
-- returns: :many version
-- params: key
SELECT {version} FROM {table} WHERE {key} = ?;

-- name: guarded_update
-- returns: :execrows
-- params: assignment values..., key, guard values...
UPDATE {table} SET {assignments*, } WHERE {key} = ? {guards* };

-- name: row_exists
-- returns: :many present
-- params: key
SELECT 1 FROM {table} WHERE {key} = ?;

-- name: sm_state
-- returns: :many status
-- params: key
SELECT {status} FROM {table} WHERE {key} = ?;

-- name: sm_state_locked
-- The audit row needs the exact from-state: read it row-locked.
-- returns: :many status
-- params: key
SELECT {status} FROM {table} WHERE {key} = ? FOR UPDATE;

-- name: sm_update
-- assignments = assign_set(status column) first, then TransitionDef::assignments.
-- returns: :execrows
-- params: to_state, assignment values..., key, from states..., guard values...
UPDATE {table} SET {assignments*, } WHERE {key} = ? AND {status} IN ({from*, }) {guards* };

-- name: sm_audit_insert
-- returns: :execrows
-- params: machine, entity_key, event, from_state, to_state, actor
INSERT INTO {audit_table} (machine, entity_key, event, from_state, to_state, actor, at_ms)
VALUES (?, ?, ?, ?, ?, ?, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT);

-- fragment: assign_set
{col} = ?;

-- fragment: assign_add
{col} = {col} + ?;

-- fragment: assign_subtract
{col} = {col} - ?;

-- fragment: guard_eq
AND {col} = ?;

-- fragment: guard_ne
AND {col} <> ?;

-- fragment: guard_lt
AND {col} < ?;

-- fragment: guard_le
AND {col} <= ?;

-- fragment: guard_gt
AND {col} > ?;

-- fragment: guard_ge
AND {col} >= ?;

-- fragment: param_eq
{col} = ?;

-- fragment: param
?;

-- ---- issue 17: the one version rule and leased (rescuable) claims -------------------------

-- name: versioned_declare
-- Declares a user table versioned (include/sqlguard/version_cas.h). An existing declaration inserts nothing (0 rows).
-- table_name is the canonical name (versioned_resolve).
-- returns: :execrows
-- params: table_name, version_column
INSERT INTO sqlguard_versioned_table (table_name, version_column, declared_at) VALUES (?, ?, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT)
ON CONFLICT (table_name) DO NOTHING;

-- name: versioned_resolve
-- The table a spelling names, as the database resolves it (search_path, quoting): one row
-- `canonical_name` = schema.table, none if no such table. Declarations are stored under it.
-- returns: :one canonical_name
-- params: quoted_name
SELECT n.nspname || '.' || c.relname AS canonical_name FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass(?);

-- name: table_has_column
-- Before a table is declared versioned (and when a VersionCas is built): the table's column of that
-- name, none if it has no such column. schema and table are the canonical name's parts
-- (versioned_resolve); sqlguard quotes identifiers, so the column name compares exactly.
-- pg_attribute rather than information_schema.columns: the latter hides columns the role has no
-- privilege on, which would refuse a table the role can write.
-- returns: :one column_name
-- params: schema, table, column
SELECT a.attname AS column_name FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = ? AND c.relname = ? AND a.attname = ? AND a.attnum > 0 AND NOT a.attisdropped;

-- name: versioned_undeclare
-- undeclare_versioned_table(): removes the declaration stored under the canonical name and
-- one an older build stored under the raw spelling (versioned_lookup counts both).
-- returns: :execrows
-- params: table_name, spelling
DELETE FROM sqlguard_versioned_table WHERE table_name = ? OR table_name = ?;

-- name: versioned_list
-- versioned_tables() / `sqlguard versioned list`: every declaration, by name.
-- returns: :many table_name, version_column, declared_at
-- params:
SELECT table_name, version_column, declared_at FROM sqlguard_versioned_table ORDER BY table_name;

-- name: key_column_collation
-- When a writer on a user table is built: the key column's collation, and loose = 1 for a
-- nondeterministic one (e.g. an ICU collation that ignores case or accents: two different keys
-- compare equal). Deterministic collations compare bytes in the end: loose = 0.
-- returns: :one collation_name, loose
-- params: quoted_name, column
SELECT co.collname AS collation_name, CASE WHEN co.collisdeterministic THEN 0 ELSE 1 END AS loose FROM pg_attribute a JOIN pg_collation co ON co.oid = a.attcollation WHERE a.attrelid = to_regclass(?) AND a.attname = ? AND NOT a.attisdropped;

-- name: versioned_lookup
-- The declared version column of the table a spelling names (versioned_resolve), looked up
-- when a writer writes. A row an older build stored under the raw spelling, which migration
-- 0006 could not resolve, still counts for that exact spelling (after the canonical one).
-- returns: :one version_column
-- params: quoted_name, spelling, spelling
SELECT v.version_column FROM sqlguard_versioned_table v
WHERE v.table_name = (SELECT n.nspname || '.' || c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass(?))
   OR v.table_name = ?
ORDER BY v.table_name = ? LIMIT 1;

-- name: guarded_update_versioned
-- guarded_update on a table declared versioned: the version moves in the same statement.
-- returns: :execrows
-- params: assignment values..., key, guard values...
UPDATE {table} SET {assignments*, }, {version} = {version} + 1 WHERE {key} = ? {guards* };

-- name: sm_update_versioned
-- sm_update on a table declared versioned: the version moves in the same statement.
-- returns: :execrows
-- params: to_state, assignment values..., key, from states..., guard values...
UPDATE {table} SET {assignments*, }, {version} = {version} + 1 WHERE {key} = ? AND {status} IN ({from*, }) {guards* };

-- name: row_lease_claim
-- RowLocker::claim_leased(): rows nobody holds or whose claim lease ended (DB clock).
-- Rows another claimer is marking right now are skipped (SKIP LOCKED).
-- returns: :many columns...
-- params: limit
SELECT {columns*, } FROM {table} WHERE ({until} IS NULL OR {until} <= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT) ORDER BY {key} LIMIT ? FOR UPDATE SKIP LOCKED;

-- name: row_lease_claim_filtered
-- returns: :many columns...
-- params: filter values..., limit
SELECT {columns*, } FROM {table} WHERE {filter* AND } AND ({until} IS NULL OR {until} <= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT) ORDER BY {key} LIMIT ? FOR UPDATE SKIP LOCKED;

-- name: row_lease_mark
-- Marks one selected row claimed, in the claim's transaction (the row is locked or, on
-- SQLite, the database is). The lease condition is repeated so nothing live is stolen.
-- returns: :execrows
-- params: owner, lease_ms, key
UPDATE {table} SET {owner} = ?, {until} = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + ? WHERE {key} = ? AND ({until} IS NULL OR {until} <= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT);

-- name: row_lease_mark_versioned
-- returns: :execrows
-- params: owner, lease_ms, key
UPDATE {table} SET {owner} = ?, {until} = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + ?, {version} = {version} + 1 WHERE {key} = ? AND ({until} IS NULL OR {until} <= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT);

-- name: row_lease_renew
-- Owner-checked: a claim another claimer rescued is not renewed (0 rows).
-- returns: :execrows
-- params: lease_ms, key, owner
UPDATE {table} SET {until} = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + ? WHERE {key} = ? AND {owner} = ?;

-- name: row_lease_renew_versioned
-- returns: :execrows
-- params: lease_ms, key, owner
UPDATE {table} SET {until} = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + ?, {version} = {version} + 1 WHERE {key} = ? AND {owner} = ?;

-- name: row_lease_finish
-- complete() / release(): owner-checked, clears the claim and writes complete_columns
-- (sets = assign_set_tail fragments, none for release()).
-- returns: :execrows
-- params: values..., key, owner
UPDATE {table} SET {owner} = NULL, {until} = NULL{sets*} WHERE {key} = ? AND {owner} = ?;

-- name: row_lease_finish_versioned
-- returns: :execrows
-- params: values..., key, owner
UPDATE {table} SET {owner} = NULL, {until} = NULL, {version} = {version} + 1{sets*} WHERE {key} = ? AND {owner} = ?;

-- fragment: assign_set_tail
, {col} = ?;

-- ---- issue 41: a guarded update of many keys, all or none ---------------------------------

-- name: guarded_apply_many
-- GuardedUpdate::apply_all() in one statement. req reads the keys' rows locked, IN KEY ORDER (the
-- row locks are taken above the sort, so every such call locks in one order and two never
-- deadlock), and evaluates each key's guards on the row as locked (a row changed meanwhile is
-- read again at its newest version). upd writes only when every key's guards held: its WHERE
-- starts with a one-time count of them, so it writes all keys or none. Each row says which item
-- it is, whether its guards held and whether the statement wrote.
-- returns: :many item, ok, applied
-- params: item pairs..., guard pairs..., keys..., assignment pairs..., key count, keys...
WITH req AS MATERIALIZED (
  SELECT CASE {key} {items* } ELSE -1 END AS item,
         CASE WHEN TRUE {guards* } THEN 1 ELSE 0 END AS ok
  FROM {table} WHERE {key} IN ({keys*, }) ORDER BY {key} FOR UPDATE
), upd AS (
  UPDATE {table} SET {assignments*, } WHERE (SELECT count(*) FROM req WHERE req.ok = 1) = ? AND {key} IN ({keys*, })
  RETURNING 1
)
SELECT item, ok, (SELECT count(*) FROM upd) AS applied FROM req;

-- name: guarded_apply_many_versioned
-- guarded_apply_many on a table declared versioned: the version of every written row moves.
-- returns: :many item, ok, applied
-- params: item pairs..., guard pairs..., keys..., assignment pairs..., key count, keys...
WITH req AS MATERIALIZED (
  SELECT CASE {key} {items* } ELSE -1 END AS item,
         CASE WHEN TRUE {guards* } THEN 1 ELSE 0 END AS ok
  FROM {table} WHERE {key} IN ({keys*, }) ORDER BY {key} FOR UPDATE
), upd AS (
  UPDATE {table} SET {assignments*, }, {version} = {version} + 1 WHERE (SELECT count(*) FROM req WHERE req.ok = 1) = ? AND {key} IN ({keys*, })
  RETURNING 1
)
SELECT item, ok, (SELECT count(*) FROM upd) AS applied FROM req;

-- name: guarded_lock_many
-- not needed: guarded_apply_many reads, locks and writes in one statement

-- name: guarded_update_many
-- not needed: guarded_apply_many reads, locks and writes in one statement

-- name: guarded_update_many_versioned
-- not needed: guarded_apply_many_versioned reads, locks and writes in one statement


-- name: sm_apply_many
-- StateMachine::fire_all() in one statement, as guarded_apply_many: the keys' rows locked in key
-- order, each answering its item, its state and whether the event may fire on it (a from-state and
-- every guard); upd moves them all only when every key's answer was yes.
-- returns: :many item, status, ok, applied
-- params: item pairs..., from states..., guard pairs..., keys..., assignment values..., key count, keys...
WITH req AS MATERIALIZED (
  SELECT CASE {key} {items* } ELSE -1 END AS item, {status} AS status,
         CASE WHEN {status} IN ({from*, }) {guards* } THEN 1 ELSE 0 END AS ok
  FROM {table} WHERE {key} IN ({keys*, }) ORDER BY {key} FOR UPDATE
), upd AS (
  UPDATE {table} SET {assignments*, } WHERE (SELECT count(*) FROM req WHERE req.ok = 1) = ? AND {key} IN ({keys*, })
  RETURNING 1
)
SELECT item, status, ok, (SELECT count(*) FROM upd) AS applied FROM req;

-- name: sm_apply_many_versioned
-- sm_apply_many on a table declared versioned: the version of every written row moves.
-- returns: :many item, status, ok, applied
-- params: item pairs..., from states..., guard pairs..., keys..., assignment values..., key count, keys...
WITH req AS MATERIALIZED (
  SELECT CASE {key} {items* } ELSE -1 END AS item, {status} AS status,
         CASE WHEN {status} IN ({from*, }) {guards* } THEN 1 ELSE 0 END AS ok
  FROM {table} WHERE {key} IN ({keys*, }) ORDER BY {key} FOR UPDATE
), upd AS (
  UPDATE {table} SET {assignments*, }, {version} = {version} + 1 WHERE (SELECT count(*) FROM req WHERE req.ok = 1) = ? AND {key} IN ({keys*, })
  RETURNING 1
)
SELECT item, status, ok, (SELECT count(*) FROM upd) AS applied FROM req;

-- name: sm_lock_many
-- not needed: sm_apply_many reads, locks and writes in one statement

-- fragment: many_when
-- One key's value in a CASE {key} of GuardedUpdate::apply_all(): WHEN key THEN value.
WHEN ? THEN ?;

-- fragment: many_set
-- One assignment, each key's own value. (ELSE is never taken: only the listed keys' rows are
-- written. It gives the CASE the column's type where parameters have none, PostgreSQL.)
{col} = CASE {key} {whens* } ELSE {col} END;

-- fragment: many_add
{col} = {col} + CASE {key} {whens* } ELSE {col} END;

-- fragment: many_subtract
{col} = {col} - CASE {key} {whens* } ELSE {col} END;

-- fragment: many_guard_eq
-- One guard, each key's own value (ELSE as in many_set).
AND {col} = CASE {key} {whens* } ELSE {col} END;

-- fragment: many_guard_ne
AND {col} <> CASE {key} {whens* } ELSE {col} END;

-- fragment: many_guard_lt
AND {col} < CASE {key} {whens* } ELSE {col} END;

-- fragment: many_guard_le
AND {col} <= CASE {key} {whens* } ELSE {col} END;

-- fragment: many_guard_gt
AND {col} > CASE {key} {whens* } ELSE {col} END;

-- fragment: many_guard_ge
AND {col} >= CASE {key} {whens* } ELSE {col} END;
