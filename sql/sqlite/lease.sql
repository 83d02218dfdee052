-- sql/sqlite/lease.sql — SQLite >= 3.35 (RETURNING). One writer at a time; read-modify-write uses BEGIN IMMEDIATE.
-- Lease lock (src/strategies/lease_lock.cpp). Table sqlguard_lock, migrations/sqlite/0001_lease_lock.sql.
-- Every time is the database clock in ms since the Unix epoch; fences come from
-- the sqlguard_fence_seq counter row (kept by triggers), so they never go back.

-- name: lease_acquire
-- Inserts a new name or takes over an expired row in ONE statement; a row comes back
-- only when this call acquired the lease (fence, expire_at).
-- params: name, owner, ttl_ms, min_hold_ms
INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at)
VALUES (?, ?, (SELECT value + 1 FROM sqlguard_fence_seq WHERE id = 1), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?)
ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, fence = (SELECT value + 1 FROM sqlguard_fence_seq WHERE id = 1), expire_at = excluded.expire_at,
  acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at, min_release_at = excluded.min_release_at
WHERE sqlguard_lock.expire_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)
RETURNING fence, expire_at;

-- name: lease_insert
-- not needed: lease_acquire inserts a name it has never seen itself (ON CONFLICT)

-- name: lease_read_mine
-- params: name, owner
SELECT fence, expire_at FROM sqlguard_lock WHERE name = ? AND owner = ?;

-- name: lease_info
-- params: name
SELECT name, owner, fence, expire_at, acquired_at, renewed_at, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)
FROM sqlguard_lock WHERE name = ?;

-- name: lease_renew
-- Owner- and fence-checked (a reused owner string cannot extend a newer lease); 1 row
-- affected = still held and extended. Never ends before min_release_at: a ttl shorter
-- than what is left of the minimum hold does not let another owner in early.
-- params: ttl_ms, name, owner, fence
UPDATE sqlguard_lock SET expire_at = MAX(CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, min_release_at), renewed_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)
WHERE name = ? AND owner = ? AND fence = ? AND expire_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER);

-- name: lease_release
-- Owner- and fence-checked (a stale holder reusing an owner string cannot free a newer
-- lease); the row stays (its fence history is the sequence) and expires now, or at
-- min_release_at when a minimum hold was asked for.
-- params: name, owner, fence
UPDATE sqlguard_lock SET expire_at = MAX(CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), min_release_at)
WHERE name = ? AND owner = ? AND fence = ? AND expire_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER);

-- name: lease_force_release
-- Operator override: ends whoever's lease now, IGNORING min_release_at (the minimum hold).
-- params: name
UPDATE sqlguard_lock SET expire_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) WHERE name = ? AND expire_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER);

-- name: lease_list_held
-- params: 
SELECT name, owner, fence, expire_at, acquired_at, renewed_at, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)
FROM sqlguard_lock WHERE expire_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) ORDER BY name;

-- name: lease_list_all
-- params: 
SELECT name, owner, fence, expire_at, acquired_at, renewed_at, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)
FROM sqlguard_lock ORDER BY name;

-- name: lease_guard_check
-- Re-verifies the lease inside a guarded transaction; BEGIN IMMEDIATE already holds the
-- database write lock, so no take-over can commit in between.
-- params: name, owner, fence
SELECT fence FROM sqlguard_lock WHERE name = ? AND owner = ? AND fence = ? AND expire_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER);

-- name: lease_notify
-- not supported: no LISTEN/NOTIFY; waiters poll with backoff

-- name: fenced_ensure
-- Creates the resource's fence row if it is missing.
-- params: resource
INSERT INTO sqlguard_fenced_resource (resource, fence, updated_at) VALUES (?, 0, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER))
ON CONFLICT DO NOTHING;

-- name: fenced_update
-- 1 row affected = the write carries a fence at least as new as any seen before.
-- params: fence, resource, fence
UPDATE sqlguard_fenced_resource SET fence = ?, updated_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)
WHERE resource = ? AND fence <= ?;

-- name: lock_purge
-- cleanup(): one bounded batch of long-expired rows.
-- params: grace_ms, batch
DELETE FROM sqlguard_lock WHERE name IN (SELECT name FROM sqlguard_lock WHERE expire_at < CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) - ? LIMIT ?);
