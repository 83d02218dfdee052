-- sql/mysql/strategies.sql — MariaDB >= 10.6 (mysqlcppconn 1.1). Session time zone is pinned to UTC.
-- Row locks, version CAS, guarded updates and state machines (src/strategies/row_lock.cpp,
-- version_cas.cpp, transition.cpp) on the USER's tables. {slot} is a validated, quoted
-- identifier or a fragment below; {list*SEP} is a list of them joined by SEP. Every value is a ?.

-- name: row_lock_select
-- RowLocker::lock(): columns = key column first, then RowLockSpec::columns. The lock wait
-- bound rides in the statement (SET STATEMENT ... FOR: whole seconds, at least 1), so the
-- session's innodb_lock_wait_timeout is never read, changed or restored.
-- params: key
SET STATEMENT innodb_lock_wait_timeout = {#timeout_s} FOR
SELECT {columns*, } FROM {table} WHERE {key} = ? {lock};

-- name: row_claim
-- RowLocker::claim() without a filter.
-- params: limit
SET STATEMENT innodb_lock_wait_timeout = {#timeout_s} FOR
SELECT {columns*, } FROM {table} ORDER BY {key} LIMIT ? {lock};

-- name: row_claim_filtered
-- RowLocker::claim(): filter = param_eq fragments, one per claim_filter column.
-- params: filter values..., limit
SET STATEMENT innodb_lock_wait_timeout = {#timeout_s} FOR
SELECT {columns*, } FROM {table} WHERE {filter* AND } ORDER BY {key} LIMIT ? {lock};

-- fragment: lock_exclusive
FOR UPDATE;

-- fragment: lock_exclusive_nowait
FOR UPDATE NOWAIT;

-- fragment: lock_exclusive_skip_locked
FOR UPDATE SKIP LOCKED;

-- fragment: lock_shared
LOCK IN SHARE MODE;

-- fragment: lock_shared_nowait
LOCK IN SHARE MODE NOWAIT;

-- fragment: lock_shared_skip_locked
LOCK IN SHARE MODE SKIP LOCKED;

-- name: lock_timeout_local
-- not needed: the row-lock selects carry their wait bound (SET STATEMENT ... FOR)

-- name: lock_timeout_get
-- not needed: the row-lock selects carry their wait bound (SET STATEMENT ... FOR)

-- name: lock_timeout_set
-- not needed: the row-lock selects carry their wait bound (SET STATEMENT ... FOR)

-- name: cas_select
-- VersionCas::read(): columns = version column first, then VersionCasSpec::columns.
-- params: key
SELECT {columns*, } FROM {table} WHERE {key} = ?;

-- name: cas_update
-- params: values..., key, expected_version
UPDATE {table} SET {assignments*, }, {version} = {version} + 1 WHERE {key} = ? AND {version} = ?;

-- name: cas_version
-- params: key
SELECT {version} FROM {table} WHERE {key} = ?;

-- name: guarded_update
-- params: assignment values..., key, guard values...
UPDATE {table} SET {assignments*, } WHERE {key} = ? {guards* };

-- name: row_exists
-- params: key
SELECT 1 FROM {table} WHERE {key} = ?;

-- name: sm_state
-- params: key
SELECT {status} FROM {table} WHERE {key} = ?;

-- name: sm_state_locked
-- The audit row needs the exact from-state: read it row-locked.
-- params: key
SELECT {status} FROM {table} WHERE {key} = ? FOR UPDATE;

-- name: sm_update
-- assignments = assign_set(status column) first, then TransitionDef::assignments.
-- params: to_state, assignment values..., key, from states..., guard values...
UPDATE {table} SET {assignments*, } WHERE {key} = ? AND {status} IN ({from*, }) {guards* };

-- name: sm_audit_insert
-- params: machine, entity_key, event, from_state, to_state, actor
INSERT INTO {audit_table} (machine, entity_key, event, from_state, to_state, actor, at_ms)
VALUES (?, ?, ?, ?, ?, ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED));

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
