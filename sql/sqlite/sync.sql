-- sql/sqlite/sync.sql — SQLite >= 3.40.
-- Semaphores (include/sqlguard/semaphore.h), shared/exclusive leases (read_write_lease.h) and
-- the fair lease's queue (LeaseOptions::fair): src/strategies/sync/. Tables sqlguard_sync,
-- sqlguard_sync_holder and sqlguard_lock_queue (migrations/sqlite/0007_synchronizers.sql).
-- Every time is the database clock in ms since the Unix epoch.
-- The acquire protocol is one transaction (READ COMMITTED; SQLite: BEGIN IMMEDIATE):
-- sync_open writes the name's row first, so acquires of one name run one at a time (its row
-- lock; on Galera a concurrent acquire on another node fails certification and is retried);
-- then sync_state and sync_rows read the name's holdings, the strategy decides, and
-- sync_purge_slots / sync_take_slot / sync_draw / sync_hold / sync_set write the outcome. A holder's row is a
-- lease: owner token, fence, expiry, renewed by the lock client (sync_renew_batch).
-- The take-over rule (issue 38; strategies/lease/takeover.h), as for the lease: a released
-- holding (beat = 0, its minimum hold over) is free at once; an unreleased one is taken only
-- after the taker's process has seen it unchanged (fence, beat, expire_at; every renewal
-- bumps beat) for its ttl (watch_ms) on its own monotonic clock, by a compare-and-set on the
-- beat it saw (sync_take_slot). A fair queue's place likewise (fair_gate, fair_take_place).
-- No clock decides alone: expire_at only says what `lock list` shows (sync_holders,
-- sync_list_held) and, under TakeOver::kDatabaseClock, when a take-over may happen.

-- name: sync_open
-- Creates the name's row (kind, permits) or bumps its version: the write that serializes
-- acquires of the name. An existing row keeps its kind and permits (sync_state checks kind).
-- A new row's fence starts at the sequence's last value: every fence granted before is at or
-- below it, so a name whose head cleanup() deleted never grants (or shows shared holders) a
-- smaller fence than before.
-- returns: :execrows
-- params: name, kind, permits
INSERT INTO sqlguard_sync (name, kind, permits, fence) VALUES (?, ?, ?, (SELECT value FROM sqlguard_fence_seq WHERE id = 1))
ON CONFLICT (name) DO UPDATE SET version = version + 1;

-- name: sync_state
-- The name's row as sync_open left it (this transaction holds it), and the database clock.
-- lease_owner: the owner of the name's sqlguard_lock row: '' = the row sync_reserve_name
-- wrote for this name, NULL = none yet, any other value = the name is a lease.
-- returns: :one kind, permits, fence, writer_until, version, db_now_ms, lease_owner
-- params: name
SELECT s.kind, s.permits, s.fence, s.writer_until, s.version, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS db_now_ms,
  (SELECT l.owner FROM sqlguard_lock l WHERE l.name = s.name) AS lease_owner
FROM sqlguard_sync s WHERE s.name = ?;

-- name: sync_reserve_name
-- A name is one lock: a semaphore or read-write lease reserves its name in sqlguard_lock with
-- a row no lease can take (owner '', never expires: expire_at = 2^63 - 1), written in the
-- acquire transaction when sync_state found no lease row. A lease acquire of the name then
-- finds it held for ever and refuses, naming the kind; two first uses of a name as a lease
-- and as a semaphore at once both insert the row's primary key, so one of them waits for the
-- other and finds its row (the plain lease acquire pays nothing for this). 0 rows = a row
-- was there first: sync_state then says whose.
-- returns: :execrows
-- params: name
INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at)
VALUES (?, '', 0, 9223372036854775807, 0, 0, 0)
ON CONFLICT (name) DO NOTHING;

-- name: sync_peek
-- A plain read (no lock, no write) that decides a busy attempt without the acquire
-- transaction: the name's row and each of its holdings (one row per holding; none: one row
-- with NULL holding columns). The strategy decides by the take-over rule (head of this file):
-- an unreleased holding counts as held until this process has watched it unchanged for its
-- ttl (watch_ms); released = 1: free. The transaction decides again; this only spares it
-- (and its write of the name's row) when the answer is clearly "busy", and gives every busy
-- poll its sightings. No row: a name never acquired (the transaction creates it).
-- returns: :many kind, permits, writer_until, db_now_ms, slot, mode, held_permits, fence, beat, expire_at, watch_ms, released
-- params: name
SELECT s.kind, s.permits, s.writer_until, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS db_now_ms, h.slot, h.mode, h.permits AS held_permits,
  h.fence, h.beat, h.expire_at, CASE WHEN h.ttl_ms > 0 THEN h.ttl_ms ELSE MAX(h.expire_at - h.renewed_at, 0) END AS watch_ms, CASE WHEN h.beat = 0 AND h.min_release_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) THEN 1 ELSE 0 END AS released
FROM sqlguard_sync s LEFT JOIN sqlguard_sync_holder h ON h.name = s.name WHERE s.name = ? ORDER BY h.slot;

-- name: sync_holders
-- The name's live holders (unexpired on the database clock: what lock_holders() shows; who
-- may take over is not decided here), by slot.
-- returns: :many slot, mode, permits, owner, fence, expire_at, db_now_ms
-- params: name
SELECT slot, mode, permits, owner, fence, expire_at, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS db_now_ms
FROM sqlguard_sync_holder WHERE name = ? AND expire_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) ORDER BY slot;

-- name: sync_purge
-- cleanup(), in sync_head_delete's transaction: the name's released holder rows (all that is
-- left of an idle head). A holding not released is never deleted by a clock: only a
-- take-over that watched it (sync_take_slot) ends it.
-- returns: :execrows
-- params: name
DELETE FROM sqlguard_sync_holder WHERE name = ? AND beat = 0;

-- name: sync_rows
-- Every holder row of the name with what the take-over rule needs (sync_peek's holding
-- columns): the acquire counts what is held and takes the rest by slot (sync_purge_slots, sync_take_slot).
-- returns: :many slot, mode, permits, fence, beat, expire_at, watch_ms, released, db_now_ms
-- params: name
SELECT h.slot, h.mode, h.permits, h.fence, h.beat, h.expire_at, CASE WHEN h.ttl_ms > 0 THEN h.ttl_ms ELSE MAX(h.expire_at - h.renewed_at, 0) END AS watch_ms, CASE WHEN h.beat = 0 AND h.min_release_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) THEN 1 ELSE 0 END AS released,
  CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS db_now_ms
FROM sqlguard_sync_holder h WHERE h.name = ? ORDER BY h.slot;

-- name: sync_purge_slots
-- Deletes the listed released holder rows of the name (beat = 0, minimum hold over: free at
-- once; a released row never changes again). Touches no other row: a live holding inside its
-- guarded transaction never holds it up.
-- {slots}: one sync_slot_ref per slot (padded with -1, which no holding has).
-- returns: :execrows
-- params: name, slots...
DELETE FROM sqlguard_sync_holder WHERE name = ? AND slot IN ({slots*, }) AND beat = 0 AND min_release_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER);

-- fragment: sync_slot_ref
?

-- name: sync_take_slot
-- Takes over one unreleased holding, only as it was seen (slot and beat: a compare-and-set):
-- one this process watched unchanged for its ttl (or, under the database-clock rule, saw
-- expired). A renewal since bumped beat: the row stays (0 rows), and the acquire gives up
-- ("busy"). A holding still inside its guarded transaction holds the delete up until its
-- work commits. By primary key.
-- returns: :execrows
-- params: name, slot, beat
DELETE FROM sqlguard_sync_holder WHERE name = ? AND slot = ? AND beat = ?;

-- name: sync_draw
-- One value of the fence sequence (shared with the lease lock). No row back when every
-- value up to 2^63 - 1 was issued (never wraps): the strategy throws kResourceExhausted.
-- returns: :one value
-- params: 
UPDATE sqlguard_fence_seq SET value = value + 1 WHERE id = 1 AND value < 9223372036854775807 RETURNING value;

-- name: sync_hold
-- A new holding: its own slot, owner token, fence and expiry (ttl from now, not before the
-- minimum hold ends); beat 1 (held), ttl_ms: how long a watch of it must last.
-- min_release_at is 0 unless a minimum hold was asked for (min_hold_ms > 0): a release or a
-- renewal never keeps an expiry at the acquisition time, so a backward step of the
-- database clock does not hold a released lease for the length of the step.
-- returns: :execrows
-- params: name, slot, mode, permits, owner, fence, ttl_ms, min_hold_ms, min_hold_ms, ttl_ms
INSERT INTO sqlguard_sync_holder (name, slot, mode, permits, owner, fence, expire_at, acquired_at, renewed_at, min_release_at, beat, ttl_ms)
VALUES (?, ?, ?, ?, ?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CASE WHEN ? > 0 THEN CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ? ELSE 0 END, 1, ?);

-- name: sync_set
-- The name's last fence, and a waiting writer's intent (read-write lease): intent_ms > 0
-- publishes it until now + intent_ms, 0 withdraws it, < 0 leaves it.
-- returns: :execrows
-- params: fence, intent_ms, intent_ms, name
UPDATE sqlguard_sync SET fence = ?, writer_until = CASE WHEN ? < 0 THEN writer_until ELSE CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ? END WHERE name = ?;

-- name: sync_set_permits
-- A semaphore's permit count, changed at runtime (inside the acquire protocol's transaction,
-- after sync_open). Holders above a smaller count keep their permits; nobody new gets one
-- until the live count is below it.
-- returns: :execrows
-- params: permits, name
UPDATE sqlguard_sync SET permits = ? WHERE name = ?;

-- name: sync_release
-- Owner-, slot- and fence-checked, not released before (beat <> 0: no clock decides); beat 0
-- marks it released; the row expires now, or when its minimum hold ends (the
-- next acquire of the name purges it). 1 row = it was still held.
-- returns: :execrows
-- params: name, slot, owner, fence
UPDATE sqlguard_sync_holder SET beat = 0, expire_at = MAX(CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), min_release_at)
WHERE name = ? AND slot = ? AND owner = ? AND fence = ? AND beat <> 0;

-- name: sync_guard_check
-- Re-verifies a holding (not released, not taken over: beat <> 0; no clock decides) inside a guarded transaction; BEGIN IMMEDIATE already holds the
-- database write lock, so no acquire can take its permits before it commits.
-- returns: :execrows
-- params: name, slot, owner, fence
SELECT fence FROM sqlguard_sync_holder WHERE name = ? AND slot = ? AND owner = ? AND fence = ? AND beat <> 0;

-- name: sync_list_held
-- Operators (`sqlguard lock list`): every live holding of every semaphore and read-write
-- lease, by name and slot (unexpired on the database clock: a display, not a take-over rule).
-- returns: :many name, kind, mode, permits, owner, fence, expire_at, db_now_ms
-- params: 
SELECT h.name, s.kind, h.mode, h.permits, h.owner, h.fence, h.expire_at, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS db_now_ms
FROM sqlguard_sync_holder h JOIN sqlguard_sync s ON s.name = h.name
WHERE h.expire_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) ORDER BY h.name, h.slot;

-- name: sync_read
-- One holding's row as it stands (why a renewal failed; beat 0: released).
-- returns: :one owner, fence, expire_at, beat, db_now_ms
-- params: name, slot
SELECT owner, fence, expire_at, beat, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS db_now_ms FROM sqlguard_sync_holder WHERE name = ? AND slot = ?;

-- name: sync_renew_batch
-- Many holdings in one statement (the lock client's renewal thread), each checked (slot,
-- owner, fence, unexpired) and extended by its own ttl, never before min_release_at; answers
-- the renewed ones. {refs} is one sync_ref per holding (at most 1000).
-- returns: :many name, slot
-- params: refs...
WITH v(name, slot, owner, fence, ttl_ms) AS (VALUES {refs*, })
UPDATE sqlguard_sync_holder SET expire_at = MAX(CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + v.ttl_ms, sqlguard_sync_holder.min_release_at), renewed_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER),
  beat = sqlguard_sync_holder.beat + 1, ttl_ms = v.ttl_ms
FROM v
WHERE sqlguard_sync_holder.name = v.name AND sqlguard_sync_holder.slot = v.slot AND sqlguard_sync_holder.owner = v.owner
  AND sqlguard_sync_holder.fence = v.fence AND sqlguard_sync_holder.beat <> 0
RETURNING sqlguard_sync_holder.name, sqlguard_sync_holder.slot;

-- fragment: sync_ref
(?, ?, ?, ?, ?)

-- name: sync_renew_batch_lock
-- not needed: sync_renew_batch answers the renewed rows itself (UPDATE ... RETURNING)

-- name: sync_renew_batch_update
-- not needed: sync_renew_batch answers the renewed rows itself (UPDATE ... RETURNING)

-- name: fair_enqueue
-- A fair lease's waiter takes its place: the ticket is the name's sqlguard_sync version that
-- sync_open drew in this transaction (tickets of a name are handed out one at a time, in
-- commit order). beat 1 (waiting), bumped by every renewal (fair_renew_batch); a place is
-- taken away only by a waiter behind it that watched it unchanged for ttl_ms (fair_take_place).
-- returns: :execrows
-- params: name, ticket, owner, ttl_ms, ttl_ms
INSERT INTO sqlguard_lock_queue (name, ticket, owner, expire_at, ttl_ms) VALUES (?, ?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, ?);

-- name: fair_join
-- not needed: no INSERT inside a WITH here, and a local transaction costs no round trips: fair_enqueue joins in sync_open's transaction

-- name: fair_purge
-- cleanup(), in sync_head_delete's transaction: the name's places that were left (beat = 0;
-- all that is left of an idle head).
-- returns: :execrows
-- params: name
DELETE FROM sqlguard_lock_queue WHERE name = ? AND beat = 0;

-- name: fair_gate
-- Whether the caller's place is still there (mine = 1), how many places are ahead of it, and
-- the first `places` of them in ticket order with what the take-over rule needs (one row per
-- place; none ahead: one row with NULL place columns). A place counts until the caller has
-- watched it unchanged for its ttl (a waiter that died; fair_take_place then removes it): no
-- clock decides. A plain read. try_acquire asks with the largest ticket: ahead = 0 when nobody
-- waits. holder_expire_at: the lease's expiry (NULL: never taken), a hint for pacing only.
-- granted = 1: the lease's row is held by the caller's place's owner token, handed = 1 (a
-- release that granted it; SQLite's release frees instead, so 0 here); holder_fence,
-- holder_ttl_ms: the row's. wake_lock: NULL (no wake-up lock here).
-- returns: :many mine, ahead, holder_expire_at, db_now_ms, ticket, beat, expire_at, watch_ms, granted, holder_fence, holder_ttl_ms, wake_lock
-- params: name, ticket, owner, name, ticket, owner, name, name, ticket, places
SELECT g.mine, g.ahead, g.holder_expire_at, g.db_now_ms, a.ticket, a.beat, a.expire_at, a.watch_ms,
       g.granted, g.holder_fence, g.holder_ttl_ms, NULL AS wake_lock
FROM (SELECT (SELECT COUNT(*) FROM sqlguard_lock_queue WHERE name = ? AND ticket = ? AND owner = ? AND beat <> 0) AS mine,
             (SELECT COUNT(*) FROM sqlguard_lock_queue WHERE name = ? AND ticket < ? AND beat <> 0) AS ahead,
             l.expire_at AS holder_expire_at,
             CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS db_now_ms,
             CASE WHEN l.owner = ? AND l.owner <> '' AND l.handed = 1 AND l.beat <> 0 THEN 1 ELSE 0 END AS granted,
             l.fence AS holder_fence, l.ttl_ms AS holder_ttl_ms
      FROM (SELECT 1) AS one LEFT JOIN sqlguard_lock l ON l.name = ?) g
LEFT JOIN (SELECT ticket, beat, expire_at, ttl_ms AS watch_ms FROM sqlguard_lock_queue
           WHERE name = ? AND ticket < ? AND beat <> 0 ORDER BY ticket LIMIT ?) a ON 1 = 1
ORDER BY a.ticket;

-- name: fair_grant_read
-- not needed: a fair release grants nothing here (lease_release_fair); the woken head takes the lease

-- name: fair_take_place
-- Removes a place ahead of the caller that it watched unchanged for its ttl (its waiter died:
-- no renewal), only as it was seen (ticket and beat: a compare-and-set); a place renewed since
-- stays. By primary key.
-- returns: :execrows
-- params: name, ticket, beat
DELETE FROM sqlguard_lock_queue WHERE name = ? AND ticket = ? AND beat = ?;

-- name: fair_leave
-- The caller leaves the queue (it acquired, gave up or was cancelled).
-- returns: :execrows
-- params: name, ticket, owner
DELETE FROM sqlguard_lock_queue WHERE name = ? AND ticket = ? AND owner = ?;

-- name: fair_leave_wake
-- not needed: fair_leave; waiters are not woken per ticket here (lease_release_fair)

-- name: fair_ungrant
-- not needed: the release does not grant the lease to a place (it frees it; the next waiter takes it)

-- name: fair_renew_batch
-- Keeps many waiters' places (the lock client's renewal thread): each live place listed is
-- extended by its own ttl and its beat bumped (a waiter behind it sees it renewed). A place
-- taken away stays gone (its waiter takes a new one).
-- returns: :execrows
-- params: refs...
WITH v(name, ticket, owner, ttl_ms) AS (VALUES {refs*, })
UPDATE sqlguard_lock_queue SET expire_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + v.ttl_ms,
  beat = sqlguard_lock_queue.beat + 1, ttl_ms = v.ttl_ms
FROM v
WHERE sqlguard_lock_queue.name = v.name AND sqlguard_lock_queue.ticket = v.ticket AND sqlguard_lock_queue.owner = v.owner
  AND sqlguard_lock_queue.beat <> 0;

-- fragment: fair_ref
(?, ?, ?, ?)

-- name: sync_purge_all
-- cleanup(): one bounded batch (at most `batch` rows) of holder rows released more than grace_ms
-- ago. A holding not released is never deleted by a clock (only a watched take-over ends it).
-- returns: :execrows
-- params: grace_ms, batch
DELETE FROM sqlguard_sync_holder WHERE (name, slot) IN (SELECT name, slot FROM sqlguard_sync_holder WHERE beat = 0 AND expire_at < CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) - ? LIMIT ?);

-- name: fair_purge_all
-- cleanup(): one bounded batch (at most `batch` rows) of places left (beat = 0) more than
-- grace_ms ago. A waiting place is never deleted by a clock.
-- returns: :execrows
-- params: grace_ms, batch
DELETE FROM sqlguard_lock_queue WHERE (name, ticket) IN (SELECT name, ticket FROM sqlguard_lock_queue WHERE beat = 0 AND expire_at < CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) - ? LIMIT ?);

-- name: sync_head_candidates
-- cleanup(): up to `batch` heads after `after` (by name) with no holding and no queue place
-- that is unreleased (whatever its expiry says) or released for less than grace_ms. A plain read: sync_head_lock and
-- sync_head_delete decide, one head per transaction.
-- returns: :many name
-- params: after, grace_ms, grace_ms, batch
SELECT s.name FROM sqlguard_sync s
WHERE s.name > ?
  AND NOT EXISTS (SELECT 1 FROM sqlguard_sync_holder h WHERE h.name = s.name AND (h.beat <> 0 OR h.expire_at >= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) - ?))
  AND NOT EXISTS (SELECT 1 FROM sqlguard_lock_queue q WHERE q.name = s.name AND (q.beat <> 0 OR q.expire_at >= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) - ?))
ORDER BY s.name LIMIT ?;

-- name: sync_head_lock
-- cleanup(), first in a head's transaction: BEGIN IMMEDIATE already holds the database: a plain
-- read. Every acquire writes the head first (sync_open), so once this holds it no acquire of
-- the name can add a holding or a place before the transaction ends.
-- returns: :one name
-- params: name
SELECT name FROM sqlguard_sync WHERE name = ?;

-- name: sync_head_delete
-- cleanup(), after sync_head_lock: deletes the head if it is still idle, read after the lock
-- (a new statement: what an acquire committed before the lock is seen). Then sync_purge and
-- fair_purge delete its leftover rows in the same transaction, so a recreated head (version 0
-- again: slots and tickets are versions) never meets a row of the old one.
-- returns: :execrows
-- params: name, name, grace_ms, name, grace_ms
DELETE FROM sqlguard_sync WHERE name = ?
  AND NOT EXISTS (SELECT 1 FROM sqlguard_sync_holder h WHERE h.name = ? AND (h.beat <> 0 OR h.expire_at >= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) - ?))
  AND NOT EXISTS (SELECT 1 FROM sqlguard_lock_queue q WHERE q.name = ? AND (q.beat <> 0 OR q.expire_at >= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) - ?));

-- name: sync_unreserve_name
-- cleanup(), in sync_head_delete's transaction: the name's reservation (sync_reserve_name's
-- row in sqlguard_lock, owner '') goes with its head, so a name no longer used as a semaphore
-- or read-write lease may be used as any kind again. A lease row (any other owner) stays.
-- returns: :execrows
-- params: name
DELETE FROM sqlguard_lock WHERE name = ? AND owner = '';

-- name: sync_watch_read
-- This machine's sightings of the holdings and places of `name` (sqlguard_sync_watch, 0011):
-- for each part (a holding's slot, a place's ticket) the version an earlier process on the
-- same machine saw unchanged, and since when on the machine's monotonic clock
-- (strategies/lease/takeover.h). Read by a process's first busy look at a name whose rows the
-- database clock says ran out.
-- returns: :many part, fence, beat, expire_at, first_seen_ms
-- params: name, watcher
SELECT part, fence, beat, expire_at, first_seen_ms FROM sqlguard_sync_watch WHERE name = ? AND watcher = ?;

-- name: sync_watch_write
-- Records this machine's sighting of a version of a holding or place it had not seen before.
-- returns: :execrows
-- params: name, part, watcher, fence, beat, expire_at, first_seen_ms
INSERT INTO sqlguard_sync_watch (name, part, watcher, fence, beat, expire_at, first_seen_ms) VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (name, part, watcher) DO UPDATE SET fence = excluded.fence, beat = excluded.beat, expire_at = excluded.expire_at,
  first_seen_ms = excluded.first_seen_ms;

-- name: sync_watch_purge
-- cleanup(): one bounded batch of sightings of a holding or place that has changed since
-- (renewed, released, left, taken over or deleted): no later take-over can use them.
-- returns: :execrows
-- params: batch
DELETE FROM sqlguard_sync_watch WHERE (name, part, watcher) IN (
  SELECT w.name, w.part, w.watcher FROM sqlguard_sync_watch w
  LEFT JOIN sqlguard_sync_holder h ON h.name = w.name AND h.slot = w.part
  LEFT JOIN sqlguard_lock_queue q ON q.name = w.name AND q.ticket = w.part
  WHERE (h.name IS NULL AND q.name IS NULL)
     OR (h.name IS NOT NULL AND (h.fence <> w.fence OR h.beat <> w.beat OR h.expire_at <> w.expire_at))
     OR (q.name IS NOT NULL AND (q.beat <> w.beat OR q.expire_at <> w.expire_at)) LIMIT ?);
