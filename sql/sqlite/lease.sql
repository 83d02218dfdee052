-- sql/sqlite/lease.sql — SQLite >= 3.35 (RETURNING). One writer at a time; read-modify-write uses BEGIN IMMEDIATE.
-- Lease lock (src/strategies/kinds/lease_lock.cpp). Table sqlguard_lock, migrations/sqlite/0001_lease_lock.sql.
-- Every time is the database clock in ms since the Unix epoch; fences come from
-- the sqlguard_fence_seq counter row (kept by triggers), so they never go back.
-- min_release_at is 0 unless a minimum hold was asked for (min_hold_ms > 0): a release or a
-- renewal never keeps an expiry at the acquisition time, so a backward step of the
-- database clock does not hold a released lease for the length of the step.

-- name: lease_acquire
-- not needed: read first, then update (lease_precheck, lease_take_expired): SQLite takes the
-- database write lock for any UPDATE, so a one-statement take-over would not stay a read

-- name: lease_take_expired
-- Takes over an EXPIRED row: one statement decides, on the database clock, and draws one
-- fence. A row that is held does not match the WHERE, so a busy attempt is a read:
-- but SQLite takes the database write lock for any UPDATE, so lease_precheck
-- decides first and a loser never gets here.
-- A row comes back only when this call acquired the lease.
-- returns: :one fence, expire_at
-- params: owner, ttl_ms, min_hold_ms, min_hold_ms, name
UPDATE sqlguard_lock SET owner = ?, fence = (SELECT value + 1 FROM sqlguard_fence_seq WHERE id = 1), expire_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, acquired_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER),
  renewed_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), min_release_at = CASE WHEN ? > 0 THEN CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ? ELSE 0 END
WHERE name = ? AND expire_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)
RETURNING fence, expire_at;

-- name: lease_insert
-- Creates a name never seen before (only after no row was found); a concurrent creator
-- wins the primary key and this inserts nothing (no row back).
-- returns: :one fence, expire_at
-- params: name, owner, ttl_ms, min_hold_ms, min_hold_ms
INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at)
VALUES (?, ?, (SELECT value + 1 FROM sqlguard_fence_seq WHERE id = 1), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CASE WHEN ? > 0 THEN CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ? ELSE 0 END)
ON CONFLICT (name) DO NOTHING
RETURNING fence, expire_at;

-- name: lease_take
-- not needed: lease_take_expired returns the fence itself (UPDATE ... RETURNING)

-- name: lease_update_expired
-- not needed: lease_take_expired returns the fence itself (UPDATE ... RETURNING)

-- name: lease_create
-- not needed: lease_insert returns the fence itself (INSERT ... RETURNING)

-- name: lease_precheck
-- A plain read (WAL: no lock, never blocks behind the writer) that decides first: a held
-- lease is busy without taking the database write lock.
-- returns: :one owner, expire_at, held, db_now_ms
-- params: name
SELECT owner, expire_at, expire_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) FROM sqlguard_lock WHERE name = ?;

-- name: lease_read_mine
-- wake_lock: NULL, a release wakes a waiter itself (sqlguard_wake).
-- returns: :one fence, expire_at, wake_lock
-- params: name, owner
SELECT fence, expire_at, NULL AS wake_lock FROM sqlguard_lock WHERE name = ? AND owner = ?;

-- name: lease_info
-- returns: :one name, owner, fence, expire_at, acquired_at, renewed_at, db_now_ms
-- params: name
SELECT name, owner, fence, expire_at, acquired_at, renewed_at, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)
FROM sqlguard_lock WHERE name = ?;

-- name: lease_renew
-- Owner- and fence-checked (a reused owner string cannot extend a newer lease); 1 row
-- affected = still held and extended. Never ends before min_release_at: a ttl shorter
-- than what is left of the minimum hold does not let another owner in early.
-- returns: :execrows
-- params: ttl_ms, name, owner, fence
UPDATE sqlguard_lock SET expire_at = MAX(CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, min_release_at), renewed_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)
WHERE name = ? AND owner = ? AND fence = ? AND expire_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER);

-- name: lease_renew_batch
-- Many leases in one statement (renew_leases(): the lock client's renewal thread). Each listed
-- lease is checked and extended as lease_renew does (owner and fence, still unexpired, never
-- before min_release_at, on the database clock) with its own ttl; answers the renewed ones.
-- {refs} is one lease_ref per lease (at most 1000: 4000 values).
-- returns: :many name, fence
-- params: refs...
WITH v(name, owner, fence, ttl_ms) AS (VALUES {refs*, })
UPDATE sqlguard_lock SET expire_at = MAX(CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + v.ttl_ms, sqlguard_lock.min_release_at), renewed_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)
FROM v
WHERE sqlguard_lock.name = v.name AND sqlguard_lock.owner = v.owner AND sqlguard_lock.fence = v.fence
  AND sqlguard_lock.expire_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)
RETURNING sqlguard_lock.name, sqlguard_lock.fence;

-- fragment: lease_ref
(?, ?, ?, ?)

-- name: lease_poll
-- The lock client's waiter thread: where the lease of each waited name stands, one statement
-- for every name whose head is due to try (a plain read; no row or write lock). A name with
-- no row, or expire_at <= db_now_ms, is free: its head tries. {names} is one lease_name_ref
-- per name (at most 1000), padded with '' (no lease has an empty name).
-- returns: :many name, expire_at, db_now_ms
-- params: names...
SELECT name, expire_at, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS db_now_ms FROM sqlguard_lock WHERE name IN ({names*, });

-- fragment: lease_name_ref
?

-- name: lease_renew_batch_lock
-- not needed: lease_renew_batch answers the renewed rows itself (UPDATE ... RETURNING)

-- name: lease_renew_batch_update
-- not needed: lease_renew_batch answers the renewed rows itself (UPDATE ... RETURNING)

-- name: lease_release
-- Owner- and fence-checked (a stale holder reusing an owner string cannot free a newer
-- lease); the row stays (its fence history is the sequence) and expires now, or at
-- min_release_at when a minimum hold was asked for. sqlguard_wake(channel) (a function
-- each sqlguard connection registers) wakes the waiters of this lease, on this host, once
-- the release has committed (a futex word in <database>-sqlguard-wake; see
-- src/dialect/sqlite/connection.cpp); it runs only if the row was released. 1 row = released.
-- returns: :execrows
-- params: name, owner, fence, channel
UPDATE sqlguard_lock SET expire_at = MAX(CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), min_release_at)
WHERE name = ? AND owner = ? AND fence = ? AND expire_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)
RETURNING sqlguard_wake(?);

-- name: lease_release_flushed
-- not needed: lease_release does not change how its commit is flushed

-- name: lease_release_fair
-- not needed: a fair lease's release is lease_release and fair_leave in one transaction; the
-- wake-up names no ticket (PostgreSQL's NOTIFY payload has no equivalent here)

-- name: lease_release_fair_flushed
-- not needed: as lease_release_fair

-- name: lease_release_fair_place
-- not needed: a fair release deletes the place (fair_leave) in the release's transaction

-- name: lease_force_release
-- Never a name a semaphore or read-write lease reserved (owner '': sync_reserve_name).
-- Operator override: ends whoever's lease now, IGNORING min_release_at (the minimum hold).
-- Wakes a waiter like lease_release. 1 row = ended.
-- returns: :execrows
-- params: name, channel
UPDATE sqlguard_lock SET expire_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) WHERE name = ? AND owner <> '' AND expire_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)
RETURNING sqlguard_wake(?);

-- name: lease_list_held
-- Leases only: a name a semaphore or read-write lease reserved (owner '', sync_reserve_name)
-- is listed with its holdings (sync_list_held).
-- returns: :many name, owner, fence, expire_at, acquired_at, renewed_at, db_now_ms
-- params: 
SELECT name, owner, fence, expire_at, acquired_at, renewed_at, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)
FROM sqlguard_lock WHERE owner <> '' AND expire_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) ORDER BY name;

-- name: lease_list_all
-- Leases only: a name a semaphore or read-write lease reserved (owner '', sync_reserve_name)
-- is listed with its holdings (sync_list_held).
-- returns: :many name, owner, fence, expire_at, acquired_at, renewed_at, db_now_ms
-- params: 
SELECT name, owner, fence, expire_at, acquired_at, renewed_at, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)
FROM sqlguard_lock WHERE owner <> '' ORDER BY name;

-- name: lease_guard_check
-- Re-verifies the lease inside a guarded transaction; BEGIN IMMEDIATE already holds the
-- database write lock, so no take-over can commit in between.
-- returns: :execrows
-- params: name, owner, fence
SELECT fence FROM sqlguard_lock WHERE name = ? AND owner = ? AND fence = ? AND expire_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER);

-- name: fenced_ensure
-- Creates the resource's fence row if it is missing.
-- returns: :execrows
-- params: resource
INSERT INTO sqlguard_fenced_resource (resource, fence, updated_at) VALUES (?, 0, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER))
ON CONFLICT DO NOTHING;

-- name: fenced_update
-- 1 row affected = the write carries a fence at least as new as any seen before.
-- returns: :execrows
-- params: fence, resource, fence
UPDATE sqlguard_fenced_resource SET fence = ?, updated_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)
WHERE resource = ? AND fence <= ?;

-- name: lock_purge
-- cleanup(): one bounded batch of long-expired rows.
-- returns: :execrows
-- params: grace_ms, batch
DELETE FROM sqlguard_lock WHERE name IN (SELECT name FROM sqlguard_lock WHERE expire_at < CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) - ? LIMIT ?);

-- name: lease_wakeup_signal
-- not needed: the release statement wakes one waiter itself (sqlguard_wake(channel): a futex word in <db>-sqlguard-wake, woken after COMMIT)

-- name: lease_wakeup_wait
-- not needed: the release statement wakes one waiter itself (sqlguard_wake(channel): a futex word in <db>-sqlguard-wake, woken after COMMIT)

-- name: lease_wakeup_pass
-- not needed: the lock client watches the futex words (sqlguard_wake in lease_release)

-- name: lease_queue_leave
-- not needed: a release wakes one waiter (FUTEX_WAKE 1), so there is no herd to queue
