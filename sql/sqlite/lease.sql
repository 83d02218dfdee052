-- sql/sqlite/lease.sql — SQLite >= 3.35 (RETURNING). One writer at a time; read-modify-write uses BEGIN IMMEDIATE.
-- Lease lock (src/strategies/kinds/lease_lock.cpp). Table sqlguard_lock, migrations/sqlite/0001_lease_lock.sql.
-- Every time is the database clock in ms since the Unix epoch; fences come from
-- the sqlguard_fence_seq counter row (kept by triggers), so they never go back.
-- min_release_at is 0 unless a minimum hold was asked for (min_hold_ms > 0): a release or a
-- renewal never keeps an expiry at the acquisition time, so a backward step of the
-- database clock does not hold a released lease for the length of the step.
-- Who may take over (migrations/sqlite/0010_watched_takeover.sql, docs/failure-model.md):
-- a RELEASED row (beat = 0) once its minimum hold has passed; an unreleased row only by a
-- compare-and-set on the (fence, beat, expire_at) the caller's process has watched unchanged
-- for the holder's whole ttl on its own monotonic clock (watched_*: -1 = no watch is ripe);
-- or, with LeaseOptions::take_over = kDatabaseClock (db_clock_rule = 1), once the database
-- clock has passed expire_at. Every renewal bumps beat; a release sets it to 0. No wall
-- clock alone decides a take-over under the default rule.

-- name: lease_acquire
-- not needed: read first, then update (lease_precheck, lease_take_expired): SQLite takes the
-- database write lock for any UPDATE, so a one-statement take-over would not stay a read

-- name: lease_take_expired
-- Takes over a released row, or one this process watched unchanged for its ttl (see the
-- head of this file): one statement decides and draws one fence. SQLite takes the database
-- write lock for any UPDATE, so lease_precheck decides first and a loser never gets here.
-- A row comes back only when this call acquired the lease.
-- A row a release handed to the caller's wait (turn_owner: its token for the next turn,
-- handed = 1: see lease_release) is taken too (lease_precheck's granted): the attempt
-- confirms it with its own owner token, a new fence and expiry. A take by the wait that has
-- the next turn clears it (a turn asked by another waiter stays for the next release).
-- returns: :one fence, expire_at
-- params: owner, ttl_ms, ttl_ms, min_hold_ms, min_hold_ms, turn_owner, turn_owner, name, watched_fence, watched_beat, watched_expire_at, db_clock_rule, turn_owner
UPDATE sqlguard_lock SET owner = ?, fence = (SELECT value + 1 FROM sqlguard_fence_seq WHERE id = 1), beat = 1, ttl_ms = ?, expire_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, acquired_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER),
  renewed_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), min_release_at = CASE WHEN ? > 0 THEN CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ? ELSE 0 END,
  handed = 0, next_since = CASE WHEN next_owner = ? THEN 0 ELSE next_since END, next_owner = CASE WHEN next_owner = ? THEN '' ELSE next_owner END
WHERE name = ? AND ((beat = 0 AND min_release_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER))
                    OR (owner <> '' AND fence = ? AND beat = ? AND expire_at = ?)
                    OR (? = 1 AND expire_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER))
                    OR (owner = ? AND handed = 1 AND beat <> 0))
RETURNING fence, expire_at;

-- name: lease_insert
-- Creates a name never seen before (only after no row was found); a concurrent creator
-- wins the primary key and this inserts nothing (no row back).
-- returns: :one fence, expire_at
-- params: name, owner, ttl_ms, min_hold_ms, min_hold_ms, ttl_ms
INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at, beat, ttl_ms)
VALUES (?, ?, (SELECT value + 1 FROM sqlguard_fence_seq WHERE id = 1), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CASE WHEN ? > 0 THEN CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ? ELSE 0 END, 1, ?)
ON CONFLICT (name) DO NOTHING
RETURNING fence, expire_at;

-- name: lease_take
-- not needed: lease_take_expired returns the fence itself (UPDATE ... RETURNING)

-- name: lease_update_expired
-- not needed: lease_take_expired returns the fence itself (UPDATE ... RETURNING)

-- name: lease_create
-- not needed: lease_insert returns the fence itself (INSERT ... RETURNING)

-- name: lease_precheck
-- A plain read (WAL: no lock, never blocks behind the writer) that decides first
-- (acquire_common.h, may_take_over): a held lease is busy without taking the database write
-- lock. What it answers of the holder is a sighting for this process's watch of it.
-- granted: a release handed the lease to its owner (the next turn, handed = 1), whose
-- attempt then takes it (lease_take_expired).
-- next_owner, next_since: who holds the lease's next turn ('' nobody) and when its wait began
-- (bounded barging, lease_next_read): a waiter past the limit decides from them whether the
-- turn is its own or open without a read of its own.
-- returns: :one owner, expire_at, db_now_ms, fence, beat, watch_ms, released, granted, next_owner, next_since
-- params: name
SELECT owner, expire_at, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), fence, beat, CASE WHEN ttl_ms > 0 THEN ttl_ms ELSE MAX(expire_at - renewed_at, 0) END,
       beat = 0 AND min_release_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), handed = 1 AND beat <> 0, next_owner, next_since FROM sqlguard_lock WHERE name = ?;

-- name: lease_read_mine
-- Not a lease a release handed to this owner and not yet confirmed (handed = 1: its
-- expiry started at the hand-over, before this caller's attempt; the next attempt takes it).
-- wake_lock: NULL, a release wakes a waiter itself (sqlguard_wake).
-- returns: :one fence, expire_at, wake_lock
-- params: name, owner
SELECT fence, expire_at, NULL AS wake_lock FROM sqlguard_lock WHERE name = ? AND owner = ? AND handed = 0;

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
-- Not released and not taken over is enough (beat <> 0): a renewal that comes after the
-- database clock passed expire_at still keeps the lease when nobody took it over; beat + 1
-- restarts every watch of it.
-- params: ttl_ms, ttl_ms, name, owner, fence
UPDATE sqlguard_lock SET beat = beat + 1, ttl_ms = ?, expire_at = MAX(CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, min_release_at), renewed_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)
WHERE name = ? AND owner = ? AND fence = ? AND beat <> 0;

-- name: lease_renew_batch
-- Many leases in one statement (renew_leases(): the lock client's renewal thread). Each listed
-- lease is checked and extended as lease_renew does (owner and fence, not released, never
-- before min_release_at, on the database clock) with its own ttl; answers the renewed ones.
-- {refs} is one lease_ref per lease (at most 1000: 4000 values).
-- returns: :many name, fence
-- params: refs...
WITH v(name, owner, fence, ttl_ms) AS (VALUES {refs*, })
UPDATE sqlguard_lock SET beat = sqlguard_lock.beat + 1, ttl_ms = v.ttl_ms, expire_at = MAX(CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + v.ttl_ms, sqlguard_lock.min_release_at), renewed_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)
FROM v
WHERE sqlguard_lock.name = v.name AND sqlguard_lock.owner = v.owner AND sqlguard_lock.fence = v.fence
  AND sqlguard_lock.beat <> 0
RETURNING sqlguard_lock.name, sqlguard_lock.fence;

-- fragment: lease_ref
(?, ?, ?, ?)

-- name: lease_poll
-- The lock client's waiter thread: where the lease of each waited name stands, one statement
-- for every name whose head is due to try (a plain read; no row or write lock). A name with
-- no row, or released, or watched unchanged for its ttl (acquire_common.h, may_take_over), is
-- free: its head tries; the poll is a sighting for the watch. {names} is one lease_name_ref
-- per name (at most 1000), padded with '' (no lease has an empty name).
-- handed: a release handed it to a waiter's next turn (that waiter's head tries).
-- returns: :many name, expire_at, db_now_ms, fence, beat, watch_ms, released, handed
-- params: names...
SELECT name, expire_at, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS db_now_ms, fence, beat,
       CASE WHEN ttl_ms > 0 THEN ttl_ms ELSE MAX(expire_at - renewed_at, 0) END, beat = 0 AND min_release_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), handed
FROM sqlguard_lock WHERE name IN ({names*, });

-- fragment: lease_name_ref
?

-- name: lease_acquire_batch
-- not supported: the lock client sends each name alone on SQLite (no batched statement yet; its writers take turns on
-- the one database write lock either way)

-- fragment: lease_acquire_req
-- not needed: no batch

-- name: lease_take_batch
-- not supported: see lease_acquire_batch

-- fragment: lease_take_req
-- not needed: no batch

-- name: lease_release_batch
-- not supported: see lease_acquire_batch

-- name: lease_release_batch_lock
-- not supported: see lease_acquire_batch

-- name: lease_release_batch_update
-- not supported: see lease_acquire_batch

-- fragment: lease_release_ref
-- not needed: no batch

-- name: lease_wakeup_take_batch
-- not needed: futex words: a holder keeps no wake-up lock

-- name: lease_wakeup_signal_batch
-- not needed: no batch

-- fragment: lease_channel_ref
-- not needed: no wake-up locks

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
-- The next turn (bounded barging, LeaseOptions::barging_limit): when a waiter asked for it
-- (next_owner, lease_next_set) and the holder asked for no minimum hold (min_release_at =
-- 0), the release hands the lease to that waiter in the same statement instead of freeing
-- it: owner = next_owner, a new fence, expire_at = now + next_ttl_ms, beat 1 and handed = 1
-- (not yet confirmed: the new owner's next attempt takes it); the turn is free again.
-- returns: :execrows
-- params: name, owner, fence, channel
UPDATE sqlguard_lock SET
  owner = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN next_owner ELSE owner END,
  fence = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN (SELECT value + 1 FROM sqlguard_fence_seq WHERE id = 1) ELSE fence END,
  beat = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN 1 ELSE 0 END,
  ttl_ms = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN next_ttl_ms ELSE ttl_ms END,
  expire_at = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + next_ttl_ms ELSE MAX(CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), min_release_at) END,
  acquired_at = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) ELSE acquired_at END,
  renewed_at = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) ELSE renewed_at END,
  handed = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN 1 ELSE 0 END,
  next_since = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN 0 ELSE next_since END,
  next_owner = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN '' ELSE next_owner END
WHERE name = ? AND owner = ? AND fence = ? AND beat <> 0
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
-- Operator override: ends whoever's lease now, IGNORING min_release_at (the minimum hold): also
-- a released lease still kept by its minimum hold.
-- Wakes a waiter like lease_release. 1 row = ended.
-- returns: :execrows
-- params: name, channel
UPDATE sqlguard_lock SET beat = 0, min_release_at = 0, expire_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), next_owner = '', next_since = 0, handed = 0 WHERE name = ? AND owner <> '' AND (beat <> 0 OR min_release_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER))
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
SELECT fence FROM sqlguard_lock WHERE name = ? AND owner = ? AND fence = ? AND beat <> 0;

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
-- cleanup(): one bounded batch of rows RELEASED longer than grace_ms ago. An unreleased row
-- is never deleted on the database clock (a forward step would end a live lease): the next
-- acquirer takes it over after watching it (see the head of this file).
-- returns: :execrows
-- params: grace_ms, batch
DELETE FROM sqlguard_lock WHERE name IN (SELECT name FROM sqlguard_lock WHERE beat = 0 AND expire_at < CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) - ? LIMIT ?);

-- name: lease_watch_read
-- This machine's sighting of lease `name` (sqlguard_lock_watch, 0010): the row version an
-- earlier process on the same machine saw unchanged, and since when on the machine's
-- monotonic clock (strategies/lease/takeover.h). Read by a process's first busy attempt.
-- returns: :one fence, beat, expire_at, first_seen_ms
-- params: name, watcher
SELECT fence, beat, expire_at, first_seen_ms FROM sqlguard_lock_watch WHERE name = ? AND watcher = ?;

-- name: lease_watch_write
-- Records this machine's sighting of a version of lease `name` it had not seen before.
-- returns: :execrows
-- params: name, watcher, fence, beat, expire_at, first_seen_ms
INSERT INTO sqlguard_lock_watch (name, watcher, fence, beat, expire_at, first_seen_ms) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (name, watcher) DO UPDATE SET fence = excluded.fence, beat = excluded.beat, expire_at = excluded.expire_at,
  first_seen_ms = excluded.first_seen_ms;

-- name: lease_watch_purge
-- cleanup(): one bounded batch of sightings of a lease that has changed since (renewed,
-- released, taken over or deleted): no later take-over can use them.
-- returns: :execrows
-- params: batch
DELETE FROM sqlguard_lock_watch WHERE (name, watcher) IN (
  SELECT w.name, w.watcher FROM sqlguard_lock_watch w LEFT JOIN sqlguard_lock l ON l.name = w.name
  WHERE l.name IS NULL OR l.fence <> w.fence OR l.beat <> w.beat OR l.expire_at <> w.expire_at LIMIT ?);

-- name: lease_wakeup_signal
-- not needed: the release statement wakes one waiter itself (sqlguard_wake(channel): a futex word in <db>-sqlguard-wake, woken after COMMIT)

-- name: lease_wakeup_wait
-- not needed: the release statement wakes one waiter itself (sqlguard_wake(channel): a futex word in <db>-sqlguard-wake, woken after COMMIT)

-- name: lease_wakeup_pass
-- not needed: the lock client watches the futex words (sqlguard_wake in lease_release)

-- name: lease_queue_leave
-- not needed: a release wakes one waiter (FUTEX_WAKE 1), so there is no herd to queue

-- name: lease_next_read
-- Bounded barging (lease_release, LeaseOptions::barging_limit): where the caller stands for
-- the next turn of a held lease, a plain read. mine: it has the next turn; granted: a
-- release handed the lease to it (its next acquire attempt confirms it); open: it may ask
-- for the turn (lease_next_set: held by another owner, and nobody asked or a waiter that
-- began to wait later did; ties go to the smaller owner token).
-- free: it is released (the caller tries again at once). fence: the holder's (a waiter past the
-- limit looks less often while it stays the same: a long hold is not a hot lock).
-- returns: :one mine, granted, open, free, fence
-- params: owner, owner, owner, owner, since, since, owner, name
SELECT CASE WHEN next_owner = ? AND beat <> 0 THEN 1 ELSE 0 END,
       CASE WHEN owner = ? AND handed = 1 AND beat <> 0 THEN 1 ELSE 0 END,
       CASE WHEN beat <> 0 AND owner <> '' AND owner <> ? AND next_owner <> ?
                 AND (next_owner = '' OR next_since > ? OR (next_since = ? AND next_owner > ?)) THEN 1 ELSE 0 END,
       CASE WHEN beat = 0 THEN 1 ELSE 0 END, fence
FROM sqlguard_lock WHERE name = ?;

-- name: lease_next_set
-- The caller asks for the next turn of a held lease (see lease_next_read: only when open,
-- decided again on the row as it is). A hint for the next release, not a lock.
-- 1 row = the turn is the caller's.
-- returns: :execrows
-- params: owner, since, ttl_ms, name, owner, owner, since, since, owner
UPDATE sqlguard_lock SET next_owner = ?, next_since = ?, next_ttl_ms = ?
WHERE name = ? AND beat <> 0 AND owner <> '' AND owner <> ? AND next_owner <> ?
  AND (next_owner = '' OR next_since > ? OR (next_since = ? AND next_owner > ?));

-- name: lease_next_drop
-- A waiter that asked for the next turn gives up (its wait ended or was cancelled): the turn
-- goes, and a lease a release already handed to it (handed = 1) is released, waking the
-- waiters.
-- 1 row = it had the turn or the lease.
-- returns: :execrows
-- params: owner, owner, owner, owner, owner, name, owner, owner, channel
UPDATE sqlguard_lock SET beat = CASE WHEN owner = ? AND handed = 1 THEN 0 ELSE beat END,
  expire_at = CASE WHEN owner = ? AND handed = 1 THEN CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) ELSE expire_at END,
  handed = CASE WHEN owner = ? THEN 0 ELSE handed END,
  next_since = CASE WHEN next_owner = ? THEN 0 ELSE next_since END,
  next_owner = CASE WHEN next_owner = ? THEN '' ELSE next_owner END
WHERE name = ? AND (next_owner = ? OR (owner = ? AND handed = 1 AND beat <> 0))
RETURNING CASE WHEN beat = 0 THEN sqlguard_wake(?) END;
