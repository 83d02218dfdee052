-- sql/mysql/sync.sql — MariaDB >= 10.6 (mysqlcppconn 1.1). Session time zone is pinned to UTC.
-- Semaphores (include/sqlguard/semaphore.h), shared/exclusive leases (read_write_lease.h) and
-- the fair lease's queue (LeaseOptions::fair): src/strategies/sync/. Tables sqlguard_sync,
-- sqlguard_sync_holder and sqlguard_lock_queue (migrations/mysql/0007_synchronizers.sql).
-- Every time is the database clock in ms since the Unix epoch.
-- The acquire protocol is one transaction (READ COMMITTED; SQLite: BEGIN IMMEDIATE):
-- sync_open writes the name's row first, so acquires of one name run one at a time (its row
-- lock; on Galera a concurrent acquire on another node fails certification and is retried);
-- then sync_state and sync_holders read what is live on the database clock, the strategy
-- decides, and sync_purge / sync_draw / sync_hold / sync_set write the outcome. A holder's
-- row is a lease: owner token, fence, expiry, renewed by the lock client (sync_renew_batch).

-- Galera: reads inside the acquire transaction need no causal wait: the transaction writes
-- the name's row, so a decision made on a node that had not yet applied another node's
-- acquire fails certification instead of committing.

-- name: sync_open
-- Creates the name's row (kind, permits) or bumps its version: the write that serializes
-- acquires of the name. An existing row keeps its kind and permits (sync_state checks kind).
-- A new row's fence starts at the sequence's last value (NOCACHE: next_not_cached_value is the
-- next one handed out): every fence granted before is at or below it, so a name whose head
-- cleanup() deleted never grants (or shows shared holders) a smaller fence than before.
-- returns: :execrows
-- params: name, kind, permits
INSERT INTO sqlguard_sync (name, kind, permits, fence) VALUES (?, ?, ?, (SELECT next_not_cached_value - 1 FROM sqlguard_fence_seq))
ON DUPLICATE KEY UPDATE version = version + 1;

-- name: sync_state
-- The name's row as sync_open left it (this transaction holds it), and the database clock.
-- lease_owner: the owner of the name's sqlguard_lock row: '' = the row sync_reserve_name
-- wrote for this name, NULL = none yet, any other value = the name is a lease.
-- returns: :one kind, permits, fence, writer_until, version, db_now_ms, lease_owner
-- params: name
SELECT s.kind, s.permits, s.fence, s.writer_until, s.version, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) AS db_now_ms,
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
INSERT IGNORE INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at)
VALUES (?, '', 0, 9223372036854775807, 0, 0, 0);

-- name: sync_peek
-- A plain read (no lock, no write) that decides a busy attempt without the acquire
-- transaction: the name's row and its live holdings on the database clock. The transaction
-- decides again; this only spares it (and its write of the name's row) when the answer is
-- clearly "busy". No row: a name never acquired (the transaction creates it).
-- Causal on Galera (wsrep_sync_wait = 1).
-- returns: :one kind, permits, writer_until, db_now_ms, live_permits, live_shared, live_exclusive, earliest_expire_at
-- params: name, name, name, name, name
SET STATEMENT wsrep_sync_wait = 1 FOR SELECT s.kind, s.permits, s.writer_until, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) AS db_now_ms,
  COALESCE((SELECT SUM(h.permits) FROM sqlguard_sync_holder h WHERE h.name = ? AND h.mode = 'P' AND h.expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)), 0) AS live_permits,
  (SELECT COUNT(*) FROM sqlguard_sync_holder h WHERE h.name = ? AND h.mode = 'S' AND h.expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)) AS live_shared,
  (SELECT COUNT(*) FROM sqlguard_sync_holder h WHERE h.name = ? AND h.mode = 'X' AND h.expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)) AS live_exclusive,
  COALESCE((SELECT MIN(h.expire_at) FROM sqlguard_sync_holder h WHERE h.name = ? AND h.expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)), 0) AS earliest_expire_at
FROM sqlguard_sync s WHERE s.name = ?;

-- name: sync_holders
-- The name's live holders (unexpired on the database clock), by slot.
-- returns: :many slot, mode, permits, owner, fence, expire_at, db_now_ms
-- params: name
SELECT slot, mode, permits, owner, fence, expire_at, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) AS db_now_ms
FROM sqlguard_sync_holder WHERE name = ? AND expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) ORDER BY slot;

-- name: sync_purge
-- Deletes the name's expired holder rows (a released holding expires at once, or when its
-- minimum hold ends; a dead holder's at its expiry): its permits come back. Bounded by
-- the name's holders.
-- returns: :execrows
-- params: name
DELETE FROM sqlguard_sync_holder WHERE name = ? AND expire_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);

-- name: sync_rows
-- Every holder row of the name, live or expired on the database clock (the acquire counts the
-- live ones and purges the expired ones by slot).
-- returns: :many slot, mode, permits, expire_at, db_now_ms
-- params: name
SELECT slot, mode, permits, expire_at, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) AS db_now_ms
FROM sqlguard_sync_holder WHERE name = ? ORDER BY slot;

-- name: sync_purge_slots
-- Deletes the listed holder rows of the name that are expired (a released holding expires at
-- once, or when its minimum hold ends; a dead holder's at its expiry): their permits come back.
-- Touches no other row: a live holding inside its guarded transaction never holds it up, while an
-- expired one that is still inside its guarded transaction does (its work commits first).
-- By primary key (FORCE INDEX): a range scan of the name's rows, or of the expiry index,
-- would wait for the row lock of a live holding inside its guarded transaction
-- (run_guarded), and every acquire of the name with it.
-- {slots}: one sync_slot_ref per slot (padded with -1, which no holding has).
-- returns: :execrows
-- params: name, slots...
DELETE h FROM sqlguard_sync_holder h FORCE INDEX (PRIMARY) WHERE h.name = ? AND h.slot IN ({slots*, }) AND h.expire_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);

-- fragment: sync_slot_ref
?

-- name: sync_draw
-- One value of the fence sequence (shared with the lease lock, NOCACHE). Two Galera nodes
-- can draw the same value: the strategy takes max(value, the name's fence + 1).
-- returns: :one value
-- params: 
SELECT NEXTVAL(sqlguard_fence_seq) AS value;

-- name: sync_hold
-- A new holding: its own slot, owner token, fence and expiry (ttl from now, not before the
-- minimum hold ends).
-- min_release_at is 0 unless a minimum hold was asked for (min_hold_ms > 0): a release or a
-- renewal never keeps an expiry at the acquisition time, so a backward step of the
-- database clock does not hold a released lease for the length of the step.
-- returns: :execrows
-- params: name, slot, mode, permits, owner, fence, ttl_ms, min_hold_ms, min_hold_ms
INSERT INTO sqlguard_sync_holder (name, slot, mode, permits, owner, fence, expire_at, acquired_at, renewed_at, min_release_at)
VALUES (?, ?, ?, ?, ?, ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), CASE WHEN ? > 0 THEN CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ? ELSE 0 END);

-- name: sync_set
-- The name's last fence, and a waiting writer's intent (read-write lease): intent_ms > 0
-- publishes it until now + intent_ms, 0 withdraws it, < 0 leaves it.
-- returns: :execrows
-- params: fence, intent_ms, intent_ms, name
UPDATE sqlguard_sync SET fence = ?, writer_until = CASE WHEN ? < 0 THEN writer_until ELSE CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ? END WHERE name = ?;

-- name: sync_set_permits
-- A semaphore's permit count, changed at runtime (inside the acquire protocol's transaction,
-- after sync_open). Holders above a smaller count keep their permits; nobody new gets one
-- until the live count is below it.
-- returns: :execrows
-- params: permits, name
UPDATE sqlguard_sync SET permits = ? WHERE name = ?;

-- name: sync_release
-- Owner-, slot- and fence-checked; the row expires now, or when its minimum hold ends (the
-- next acquire of the name purges it). 1 row = it was still held.
-- returns: :execrows
-- params: name, slot, owner, fence
UPDATE sqlguard_sync_holder SET expire_at = GREATEST(CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), min_release_at)
WHERE name = ? AND slot = ? AND owner = ? AND fence = ? AND expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);

-- name: sync_guard_check
-- Re-verifies a holding inside a guarded transaction (1 row affected = still held) and
-- WRITES its row, locking it until commit: an acquire that would count it expired must
-- first delete it (sync_purge), and waits on one server; on Galera that delete, committed
-- on another node, makes this transaction fail certification. guard_writes: 0009.
-- returns: :execrows
-- params: name, slot, owner, fence
SET STATEMENT wsrep_sync_wait = 2 FOR UPDATE sqlguard_sync_holder SET guard_writes = guard_writes + 1
WHERE name = ? AND slot = ? AND owner = ? AND fence = ? AND expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);

-- name: sync_list_held
-- Operators (`sqlguard lock list`): every live holding of every semaphore and read-write
-- lease, by name and slot.
-- returns: :many name, kind, mode, permits, owner, fence, expire_at, db_now_ms
-- params: 
SELECT h.name, s.kind, h.mode, h.permits, h.owner, h.fence, h.expire_at, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) AS db_now_ms
FROM sqlguard_sync_holder h JOIN sqlguard_sync s ON s.name = h.name
WHERE h.expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) ORDER BY h.name, h.slot;

-- name: sync_read
-- One holding's row as it stands (why a renewal failed).
-- returns: :one owner, fence, expire_at, db_now_ms
-- params: name, slot
SELECT owner, fence, expire_at, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) AS db_now_ms FROM sqlguard_sync_holder WHERE name = ? AND slot = ?;

-- name: sync_renew_batch
-- not needed: no UPDATE ... RETURNING here; sync_renew_batch_lock + sync_renew_batch_update run instead

-- name: sync_renew_batch_lock
-- Batched renewal, first half: locks and answers the listed holdings still held (slot, owner,
-- fence, unexpired), so that sync_renew_batch_update in the same transaction extends exactly
-- these. Causal on Galera (wsrep_sync_wait = 3). By primary key from the list (STRAIGHT_JOIN,
-- FORCE INDEX: FOR UPDATE must not lock rows it merely scans). {refs}: one sync_ref per holding.
-- returns: :many name, slot
-- params: refs...
SET STATEMENT wsrep_sync_wait = 3 FOR SELECT STRAIGHT_JOIN h.name, h.slot FROM ({refs* UNION ALL }) v
  JOIN sqlguard_sync_holder h FORCE INDEX (PRIMARY) ON h.name = v.name AND h.slot = v.slot AND h.owner = v.owner AND h.fence = v.fence
WHERE h.expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) FOR UPDATE;

-- name: sync_renew_batch_update
-- Batched renewal, second half: extends what sync_renew_batch_lock locked, each by its own
-- ttl, never before min_release_at, on the database clock.
-- returns: :execrows
-- params: refs...
UPDATE ({refs* UNION ALL }) v STRAIGHT_JOIN sqlguard_sync_holder h FORCE INDEX (PRIMARY)
  ON h.name = v.name AND h.slot = v.slot AND h.owner = v.owner AND h.fence = v.fence
SET h.expire_at = GREATEST(CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + v.ttl_ms, h.min_release_at), h.renewed_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)
WHERE h.expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);

-- fragment: sync_ref
SELECT ? AS name, ? AS slot, ? AS owner, ? AS fence, ? AS ttl_ms

-- name: fair_enqueue
-- A fair lease's waiter takes its place: the ticket is the name's sqlguard_sync version that
-- sync_open drew in this transaction (tickets of a name are handed out one at a time, in
-- commit order). The place expires on the database clock unless renewed (fair_renew_batch).
-- returns: :execrows
-- params: name, ticket, owner, ttl_ms
INSERT INTO sqlguard_lock_queue (name, ticket, owner, expire_at) VALUES (?, ?, ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?);

-- name: fair_purge
-- The name's expired places (waiters that gave up without leaving, or died).
-- returns: :execrows
-- params: name
DELETE FROM sqlguard_lock_queue WHERE name = ? AND expire_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);

-- name: fair_gate
-- Whether the caller's place is still live (mine = 1) and how many live places are ahead of
-- it (ahead = 0: its turn). A plain read. try_acquire asks with the largest ticket: ahead = 0
-- when nobody waits. holder_expire_at: the lease's expiry (NULL: never taken), so a waiter
-- whose turn it is learns in the same read whether the lease is free yet.
-- Causal on Galera (wsrep_sync_wait = 1): sees places and leaves certified on other nodes.
-- returns: :one mine, ahead, holder_expire_at, db_now_ms
-- params: name, ticket, owner, name, ticket, name
SET STATEMENT wsrep_sync_wait = 1 FOR SELECT (SELECT COUNT(*) FROM sqlguard_lock_queue WHERE name = ? AND ticket = ? AND owner = ? AND expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)) AS mine,
       (SELECT COUNT(*) FROM sqlguard_lock_queue WHERE name = ? AND ticket < ? AND expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)) AS ahead,
       (SELECT expire_at FROM sqlguard_lock WHERE name = ?) AS holder_expire_at,
       CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) AS db_now_ms;

-- name: fair_leave
-- The caller leaves the queue (it acquired, gave up or was cancelled).
-- returns: :execrows
-- params: name, ticket, owner
DELETE FROM sqlguard_lock_queue WHERE name = ? AND ticket = ? AND owner = ?;

-- name: fair_leave_wake
-- not needed: fair_leave; waiters are not woken per ticket here (lease_release_fair)

-- name: fair_renew_batch
-- Keeps many waiters' places (the lock client's renewal thread): each live place listed is
-- extended by its own ttl. A place that expired stays gone (its waiter takes a new one). By
-- primary key from the list (STRAIGHT_JOIN, FORCE INDEX).
-- returns: :execrows
-- params: refs...
UPDATE ({refs* UNION ALL }) v STRAIGHT_JOIN sqlguard_lock_queue q FORCE INDEX (PRIMARY)
  ON q.name = v.name AND q.ticket = v.ticket AND q.owner = v.owner
SET q.expire_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + v.ttl_ms
WHERE q.expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);

-- fragment: fair_ref
SELECT ? AS name, ? AS ticket, ? AS owner, ? AS ttl_ms

-- name: sync_purge_all
-- cleanup(): one bounded batch (at most `batch` rows) of long-expired holder rows.
-- returns: :execrows
-- params: grace_ms, batch
DELETE FROM sqlguard_sync_holder WHERE expire_at < CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) - ? ORDER BY expire_at LIMIT ?;

-- name: fair_purge_all
-- cleanup(): one bounded batch (at most `batch` rows) of long-expired queue places.
-- returns: :execrows
-- params: grace_ms, batch
DELETE FROM sqlguard_lock_queue WHERE expire_at < CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) - ? ORDER BY expire_at LIMIT ?;

-- name: sync_head_candidates
-- cleanup(): up to `batch` heads after `after` (by name) with no holding and no queue place
-- that is live or expired for less than grace_ms. A plain read: sync_head_lock and
-- sync_head_delete decide, one head per transaction.
-- returns: :many name
-- params: after, grace_ms, grace_ms, batch
SELECT s.name FROM sqlguard_sync s
WHERE s.name > ?
  AND NOT EXISTS (SELECT 1 FROM sqlguard_sync_holder h WHERE h.name = s.name AND h.expire_at >= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) - ?)
  AND NOT EXISTS (SELECT 1 FROM sqlguard_lock_queue q WHERE q.name = s.name AND q.expire_at >= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) - ?)
ORDER BY s.name LIMIT ?;

-- name: sync_head_lock
-- cleanup(), first in a head's transaction: Locks the head unless an acquire holds it now (SKIP
-- LOCKED: no row back, the head is busy). Node-local on Galera: an acquire on another node
-- conflicts with the delete at certification (1213, retried). Every acquire writes the head
-- first (sync_open), so once this holds it no acquire of the name can add a holding or a place
-- before the transaction ends.
-- returns: :one name
-- params: name
SELECT name FROM sqlguard_sync WHERE name = ? FOR UPDATE SKIP LOCKED;

-- name: sync_head_delete
-- cleanup(), after sync_head_lock: deletes the head if it is still idle, read after the lock
-- (a new statement: what an acquire committed before the lock is seen). Then sync_purge and
-- fair_purge delete its leftover rows in the same transaction, so a recreated head (version 0
-- again: slots and tickets are versions) never meets a row of the old one.
-- returns: :execrows
-- params: name, name, grace_ms, name, grace_ms
DELETE FROM sqlguard_sync WHERE name = ?
  AND NOT EXISTS (SELECT 1 FROM sqlguard_sync_holder h WHERE h.name = ? AND h.expire_at >= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) - ?)
  AND NOT EXISTS (SELECT 1 FROM sqlguard_lock_queue q WHERE q.name = ? AND q.expire_at >= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) - ?);

-- name: sync_unreserve_name
-- cleanup(), in sync_head_delete's transaction: the name's reservation (sync_reserve_name's
-- row in sqlguard_lock, owner '') goes with its head, so a name no longer used as a semaphore
-- or read-write lease may be used as any kind again. A lease row (any other owner) stays.
-- returns: :execrows
-- params: name
DELETE FROM sqlguard_lock WHERE name = ? AND owner = '';
