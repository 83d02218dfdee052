-- sql/sqlite/strategies.sql — SQLite >= 3.35 (RETURNING). One writer at a time; read-modify-write uses BEGIN IMMEDIATE.
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
-- empty: BEGIN IMMEDIATE already holds the database write lock (NOWAIT = busy timeout 0)

-- fragment: lock_exclusive_nowait
-- empty: BEGIN IMMEDIATE already holds the database write lock (NOWAIT = busy timeout 0)

-- fragment: lock_exclusive_skip_locked
-- empty: BEGIN IMMEDIATE already holds the database write lock (NOWAIT = busy timeout 0)

-- fragment: lock_shared
-- empty: BEGIN IMMEDIATE already holds the database write lock (NOWAIT = busy timeout 0)

-- fragment: lock_shared_nowait
-- empty: BEGIN IMMEDIATE already holds the database write lock (NOWAIT = busy timeout 0)

-- fragment: lock_shared_skip_locked
-- empty: BEGIN IMMEDIATE already holds the database write lock (NOWAIT = busy timeout 0)

-- name: lock_timeout_local
-- not needed: the busy timeout is per connection, kept by the connection's own busy handler

-- name: lock_timeout_get
-- not needed: the connection keeps its busy timeout (its busy handler waits for the write lock's release)

-- name: lock_timeout_set
-- not needed: the connection keeps its busy timeout (its busy handler waits for the write lock's release)

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
-- The audit row needs the exact from-state: read it under BEGIN IMMEDIATE's write lock.
-- returns: :many status
-- params: key
SELECT {status} FROM {table} WHERE {key} = ?;

-- name: sm_update
-- assignments = assign_set(status column) first, then TransitionDef::assignments.
-- returns: :execrows
-- params: to_state, assignment values..., key, from states..., guard values...
UPDATE {table} SET {assignments*, } WHERE {key} = ? AND {status} IN ({from*, }) {guards* };

-- name: sm_audit_insert
-- returns: :execrows
-- params: machine, entity_key, event, from_state, to_state, actor
INSERT INTO {audit_table} (machine, entity_key, event, from_state, to_state, actor, at_ms)
VALUES (?, ?, ?, ?, ?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER));

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
INSERT INTO sqlguard_versioned_table (table_name, version_column, declared_at) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER))
ON CONFLICT (table_name) DO NOTHING;

-- name: versioned_resolve
-- The table a spelling names, as SQLite resolves it: names ignore case; an unqualified name is
-- looked up in temp, then main, then the attached databases in attach order. One row
-- `canonical_name` = schema.table (as stored), none if no such table.
-- returns: :one canonical_name
-- params: table, schema, schema
SELECT t.schema || '.' || t.name AS canonical_name FROM pragma_table_list t LEFT JOIN pragma_database_list d ON d.name = t.schema
WHERE t.name = ? COLLATE NOCASE AND (? IS NULL OR t.schema = ? COLLATE NOCASE)
ORDER BY CASE t.schema WHEN 'temp' THEN -1 WHEN 'main' THEN 0 ELSE COALESCE(d.seq, 1000) END LIMIT 1;

-- name: table_has_column
-- Before a table is declared versioned (and when a VersionCas is built): the table's column of that
-- name, none if it has no such column. schema and table are the canonical name's parts
-- (versioned_resolve); column names ignore case in SQLite, as in the column's own use.
-- returns: :one column_name
-- params: table, schema, column
SELECT name AS column_name FROM pragma_table_info(?, ?) WHERE name = ? COLLATE NOCASE;

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
-- not needed: SQLite compares keys with BINARY unless a column declares COLLATE NOCASE / RTRIM, which its catalog does not report through SQL; README "Key columns and collations" says so

-- name: versioned_lookup
-- The declared version column of the table a spelling names (versioned_resolve), looked up
-- when a writer writes. A row an older build stored under the raw spelling, which migration
-- 0006 could not resolve, still counts for that exact spelling (after the canonical one).
-- returns: :one version_column
-- params: table, schema, schema, spelling, spelling
SELECT v.version_column FROM sqlguard_versioned_table v
WHERE v.table_name = (SELECT t.schema || '.' || t.name FROM pragma_table_list t LEFT JOIN pragma_database_list d ON d.name = t.schema
                      WHERE t.name = ? COLLATE NOCASE AND (? IS NULL OR t.schema = ? COLLATE NOCASE)
                      ORDER BY CASE t.schema WHEN 'temp' THEN -1 WHEN 'main' THEN 0 ELSE COALESCE(d.seq, 1000) END LIMIT 1)
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
-- BEGIN IMMEDIATE already holds the database write lock: no SKIP LOCKED needed.
-- returns: :many columns...
-- params: limit
SELECT {columns*, } FROM {table} WHERE ({until} IS NULL OR {until} <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)) ORDER BY {key} LIMIT ?;

-- name: row_lease_claim_filtered
-- returns: :many columns...
-- params: filter values..., limit
SELECT {columns*, } FROM {table} WHERE {filter* AND } AND ({until} IS NULL OR {until} <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)) ORDER BY {key} LIMIT ?;

-- name: row_lease_mark
-- Marks one selected row claimed, in the claim's transaction (the row is locked or, on
-- SQLite, the database is). The lease condition is repeated so nothing live is stolen.
-- returns: :execrows
-- params: owner, lease_ms, key
UPDATE {table} SET {owner} = ?, {until} = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ? WHERE {key} = ? AND ({until} IS NULL OR {until} <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER));

-- name: row_lease_mark_versioned
-- returns: :execrows
-- params: owner, lease_ms, key
UPDATE {table} SET {owner} = ?, {until} = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, {version} = {version} + 1 WHERE {key} = ? AND ({until} IS NULL OR {until} <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER));

-- name: row_lease_renew
-- Owner-checked: a claim another claimer rescued is not renewed (0 rows).
-- returns: :execrows
-- params: lease_ms, key, owner
UPDATE {table} SET {until} = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ? WHERE {key} = ? AND {owner} = ?;

-- name: row_lease_renew_versioned
-- returns: :execrows
-- params: lease_ms, key, owner
UPDATE {table} SET {until} = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, {version} = {version} + 1 WHERE {key} = ? AND {owner} = ?;

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
-- not needed: one statement cannot lock the rows, count their guards and then write all or none here; GuardedUpdate::apply_all() runs guarded_lock_many, then guarded_update_many, in one transaction

-- name: guarded_apply_many_versioned
-- not needed: as guarded_apply_many

-- name: guarded_lock_many
-- GuardedUpdate::apply_all(), first of two statements in one transaction: the keys' rows, read under the
-- database's write lock (sqlguard's transactions on SQLite begin IMMEDIATE: no other writer between
-- the read and the write), each with its item
-- index and whether its guards hold on the row as locked. Nothing is written unless every key's did.
-- returns: :many item, ok
-- params: item pairs..., guard pairs..., keys...
SELECT CASE {key} {items* } ELSE -1 END AS item,
       CASE WHEN TRUE {guards* } THEN 1 ELSE 0 END AS ok
FROM {table} WHERE {key} IN ({keys*, }) ORDER BY {key};

-- name: guarded_update_many
-- The write after guarded_lock_many found every key's guards held (the write lock is still held).
-- returns: :execrows
-- params: assignment pairs..., keys...
UPDATE {table} SET {assignments*, } WHERE {key} IN ({keys*, });

-- name: guarded_update_many_versioned
-- guarded_update_many on a table declared versioned: the version of every written row moves.
-- returns: :execrows
-- params: assignment values..., keys...
UPDATE {table} SET {assignments*, }, {version} = {version} + 1 WHERE {key} IN ({keys*, });


-- name: sm_apply_many
-- not needed: as guarded_apply_many (fire_all() runs sm_lock_many, then guarded_update_many)

-- name: sm_apply_many_versioned
-- not needed: as guarded_apply_many

-- name: sm_lock_many
-- StateMachine::fire_all(), first of two statements in one transaction, as guarded_lock_many: the
-- keys' rows read under the write lock, each with its item, its state and whether the event may fire on it.
-- returns: :many item, status, ok
-- params: item pairs..., from states..., guard pairs..., keys...
SELECT CASE {key} {items* } ELSE -1 END AS item, {status} AS status,
       CASE WHEN {status} IN ({from*, }) {guards* } THEN 1 ELSE 0 END AS ok
FROM {table} WHERE {key} IN ({keys*, }) ORDER BY {key};

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
