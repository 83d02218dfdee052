-- sql/mysql/lease.sql — MariaDB >= 10.6 (mysqlcppconn 1.1). Session time zone is pinned to UTC.
-- Lease lock (src/strategies/kinds/lease_lock.cpp). Table sqlguard_lock, migrations/mysql/0001_lease_lock.sql.
-- Every time is the database clock in ms since the Unix epoch; fences come from
-- the sqlguard_fence_seq sequence (NOCACHE), so they never go back.
-- min_release_at is 0 unless a minimum hold was asked for (min_hold_ms > 0): a release or a
-- renewal never keeps an expiry at the acquisition time, so a backward step of the
-- database clock does not hold a released lease for the length of the step.
-- Galera (docs/galera.md): statements that decide ownership read the cluster's latest
-- state (`SET STATEMENT wsrep_sync_wait = N FOR ...`: 1 = reads, 2 = UPDATE/DELETE,
-- 4 = INSERT; ignored when wsrep is off), and every statement that must conflict with a
-- take-over on another node WRITES the lock or fence row, because Galera certifies
-- write sets only (FOR UPDATE locks are node-local).

-- name: lease_acquire
-- not needed: read first (lease_precheck): InnoDB's UPDATE by primary key waits for the row
-- lock even when the row will not match, so a one-statement take-over would not stay a read

-- name: lease_take_expired
-- not needed: MariaDB has no UPDATE ... RETURNING: lease_take (read first, then upsert
-- returning), or on Galera lease_update_expired then lease_read_mine

-- name: lease_update_expired
-- Takes over an EXPIRED row (Galera's plan: read first, then update): one statement decides,
-- on the database clock, and draws one fence. lease_precheck reads first, so a loser never
-- gets here.
-- 1 row affected = acquired; lease_read_mine then reads the fence.
-- GREATEST(..., fence + 1): take-overs of one name are ordered by the row itself (on
-- Galera two take-overs of the row from different nodes conflict at certification, and
-- the winner's successor has applied it first), whatever the sequence says on this node.
-- returns: :execrows
-- params: owner, ttl_ms, min_hold_ms, min_hold_ms, name
UPDATE sqlguard_lock SET owner = ?, fence = GREATEST(NEXTVAL(sqlguard_fence_seq), fence + 1), expire_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?, acquired_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED),
  renewed_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), min_release_at = CASE WHEN ? > 0 THEN CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ? ELSE 0 END
WHERE name = ? AND expire_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);

-- name: lease_insert
-- not needed: lease_take creates a name never seen (and Galera's plan uses lease_create)

-- name: lease_create
-- Creates a name never seen before (Galera's plan, only after lease_precheck found no row); a
-- concurrent creator makes it fail with 1062 = already there. No RETURNING (see lease_take):
-- lease_read_mine reads the fence.
-- returns: :execrows
-- params: name, owner, ttl_ms, min_hold_ms, min_hold_ms
INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at)
VALUES (?, ?, NEXTVAL(sqlguard_fence_seq), CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), CASE WHEN ? > 0 THEN CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ? ELSE 0 END);

-- name: lease_take
-- The take-over AND the fence read in one round trip (MariaDB has no UPDATE ... RETURNING;
-- INSERT ... ON DUPLICATE KEY UPDATE ... RETURNING returns the row as the statement left
-- it). Sent only after lease_precheck found the lease expired or the name missing, so a
-- busy attempt stays a read. Creates a name never seen, or takes over an expired row: each
-- column changes only while the row is expired (expire_at is assigned last, so every
-- IF sees the old expiry); a row another contender took in between comes back unchanged.
-- NOW(3) is one value for the whole statement, so acquired = (owner is ours AND
-- acquired_at = the statement's now). NEXTVAL is drawn for the VALUES row either way;
-- GREATEST(..., fence + 1) orders take-overs of one name by the row itself (Galera: two
-- nodes can draw the same NOCACHE value). The last column takes the wake-up lock when this
-- call took the lease (GET_LOCK(channel, 0): session-scoped, never waits), unless this
-- session holds it already (a waiter woken by lease_wakeup_wait keeps it; GET_LOCK twice
-- would need two RELEASE_LOCKs).
-- Not on Galera (its plan is lease_update_expired / lease_create, then lease_read_mine): an
-- autocommit INSERT ... RETURNING that certification aborts can leave the client waiting for
-- a result that never comes (seen on MariaDB 10.11 under cross-node take-overs).
-- returns: :one owner, fence, expire_at, acquired_at, db_now_ms, wake_lock
-- params: name, owner, ttl_ms, min_hold_ms, min_hold_ms, owner, channel, channel
INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at)
VALUES (?, ?, NEXTVAL(sqlguard_fence_seq), CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), CASE WHEN ? > 0 THEN CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ? ELSE 0 END)
ON DUPLICATE KEY UPDATE
  owner = IF(expire_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), VALUES(owner), owner),
  fence = IF(expire_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), GREATEST(VALUES(fence), fence + 1), fence),
  acquired_at = IF(expire_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), VALUES(acquired_at), acquired_at),
  renewed_at = IF(expire_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), VALUES(renewed_at), renewed_at),
  min_release_at = IF(expire_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), VALUES(min_release_at), min_release_at),
  expire_at = IF(expire_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), VALUES(expire_at), expire_at)
RETURNING owner, fence, expire_at, acquired_at, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED),
  IF(owner = ? AND acquired_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), IF(IS_USED_LOCK(?) <=> CONNECTION_ID(), 1, GET_LOCK(?, 0)), 0);

-- name: lease_precheck
-- Causal on Galera (wsrep_sync_wait = 1): sees a take-over committed on another node.
-- A consistent read (no lock, never waits) that decides first: a held lease is busy
-- without touching the row. Needed because InnoDB's UPDATE by primary key waits for a
-- row lock even when the row will not match (no semi-consistent read on a unique lookup).
-- returns: :one owner, expire_at, held, db_now_ms
-- params: name
SET STATEMENT wsrep_sync_wait = 1 FOR SELECT owner, expire_at, expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) FROM sqlguard_lock WHERE name = ?;

-- name: lease_read_mine
-- Reads the fence after lease_acquire / lease_insert took the lease, and takes the
-- wake-up lock (GET_LOCK(channel, 0), session-scoped, no wait) in the same round trip:
-- waiters block in lease_wakeup_wait until lease_wakeup_signal or the end of this session.
-- Not taken twice by one session (a woken waiter keeps it; two GET_LOCKs need two releases).
-- returns: :one fence, expire_at, wake_lock
-- params: channel, channel, name, owner
SELECT fence, expire_at, IF(IS_USED_LOCK(?) <=> CONNECTION_ID(), 1, GET_LOCK(?, 0)) AS wake_lock FROM sqlguard_lock WHERE name = ? AND owner = ?;

-- name: lease_info
-- Causal on Galera: it decides why a lease was lost (diagnose) and who holds it.
-- returns: :one name, owner, fence, expire_at, acquired_at, renewed_at, db_now_ms
-- params: name
SET STATEMENT wsrep_sync_wait = 1 FOR SELECT name, owner, fence, expire_at, acquired_at, renewed_at, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)
FROM sqlguard_lock WHERE name = ?;

-- name: lease_renew
-- Owner- and fence-checked (a reused owner string cannot extend a newer lease); 1 row
-- affected = still held and extended. Never ends before min_release_at: a ttl shorter
-- than what is left of the minimum hold does not let another owner in early.
-- Causal on Galera (wsrep_sync_wait = 2): a take-over from another node is seen, not
-- renewed over and then refused at commit.
-- returns: :execrows
-- params: ttl_ms, name, owner, fence
SET STATEMENT wsrep_sync_wait = 2 FOR UPDATE sqlguard_lock SET expire_at = GREATEST(CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?, min_release_at), renewed_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)
WHERE name = ? AND owner = ? AND fence = ? AND expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);

-- name: lease_renew_batch
-- not needed: no UPDATE ... RETURNING here; lease_renew_batch_lock + lease_renew_batch_update run instead

-- name: lease_poll
-- The lock client's waiter thread: where the lease of each waited name stands, one statement
-- for every name whose head is due to try (a plain read; no row or write lock). A name with
-- no row, or expire_at <= db_now_ms, is free: its head tries. {names} is one lease_name_ref
-- per name (at most 1000), padded with '' (no lease has an empty name).
-- returns: :many name, expire_at, db_now_ms
-- params: names...
SELECT name, expire_at, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) AS db_now_ms FROM sqlguard_lock WHERE name IN ({names*, });

-- fragment: lease_name_ref
?

-- name: lease_renew_batch_lock
-- Batched renewal, first half (renew_leases(): the lock client's renewal thread): locks and
-- answers the listed leases still held by their owner under their fence and unexpired, so that
-- lease_renew_batch_update, in the same transaction, extends exactly these. Causal on Galera
-- (wsrep_sync_wait = 3: reads and writes see every take-over certified elsewhere).
-- {refs} is one lease_ref per lease (at most 1000), joined by UNION ALL.
-- The listed rows are reached by primary key from the list (STRAIGHT_JOIN, FORCE INDEX): on
-- a small table the optimizer would otherwise scan it, and FOR UPDATE would lock (and wait
-- for) every row it scans, such as one a guarded transaction holds, stalling the batch.
-- returns: :many name, fence
-- params: refs...
SET STATEMENT wsrep_sync_wait = 3 FOR SELECT STRAIGHT_JOIN l.name, l.fence FROM ({refs* UNION ALL }) v
  JOIN sqlguard_lock l FORCE INDEX (PRIMARY) ON l.name = v.name AND l.owner = v.owner AND l.fence = v.fence
WHERE l.expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) FOR UPDATE;

-- name: lease_renew_batch_update
-- Batched renewal, second half: extends what lease_renew_batch_lock locked, each with its own
-- ttl, never before min_release_at, on the database clock. By primary key from the list, as
-- lease_renew_batch_lock.
-- returns: :execrows
-- params: refs...
UPDATE ({refs* UNION ALL }) v STRAIGHT_JOIN sqlguard_lock l FORCE INDEX (PRIMARY)
  ON l.name = v.name AND l.owner = v.owner AND l.fence = v.fence
SET l.expire_at = GREATEST(CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + v.ttl_ms, l.min_release_at), l.renewed_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)
WHERE l.expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);

-- fragment: lease_ref
SELECT ? AS name, ? AS owner, ? AS fence, ? AS ttl_ms

-- name: lease_release
-- Owner- and fence-checked (a stale holder reusing an owner string cannot free a newer
-- lease); the row stays (its fence history is the sequence) and expires now, or at
-- min_release_at when a minimum hold was asked for.
-- Causal on Galera (wsrep_sync_wait = 2): a take-over from another node means 0 rows, not a
-- certification failure.
-- returns: :execrows
-- params: name, owner, fence
SET STATEMENT wsrep_sync_wait = 2 FOR UPDATE sqlguard_lock SET expire_at = GREATEST(CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), min_release_at)
WHERE name = ? AND owner = ? AND fence = ? AND expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);

-- name: lease_release_flushed
-- not needed: lease_release does not change how its commit is flushed (server-wide on MariaDB)

-- name: lease_release_fair
-- A fair lease's release (LeaseOptions::fair): lease_release that also ends the queue place
-- the holder was acquired from (ticket, place_owner; none: no row joins) in the same
-- statement and commit, so the next waiter, woken by the release, finds it gone. A
-- multi-table statement cannot both update the lease and delete the place, so it expires the
-- place; lease_release_fair_place deletes it after the wake-up. Rows affected: 1 or 2 =
-- released, 0 = not held.
-- returns: :execrows
-- params: ticket, place_owner, name, owner, fence
SET STATEMENT wsrep_sync_wait = 2 FOR UPDATE sqlguard_lock l
LEFT JOIN sqlguard_lock_queue q ON q.name = l.name AND q.ticket = ? AND q.owner = ?
SET l.expire_at = GREATEST(CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), l.min_release_at), q.expire_at = 0
WHERE l.name = ? AND l.owner = ? AND l.fence = ? AND l.expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);

-- name: lease_release_fair_flushed
-- not needed: lease_release_fair does not change how its commit is flushed (server-wide on MariaDB)

-- name: lease_release_fair_place
-- Deletes the place lease_release_fair expired (it cannot delete it: a multi-table UPDATE),
-- after the release committed and woke the next waiter, so the hand-off waits for no extra
-- commit and no expired row is left per acquisition. By primary key: it locks that row only.
-- returns: :execrows
-- params: name, ticket, place_owner
DELETE FROM sqlguard_lock_queue WHERE name = ? AND ticket = ? AND owner = ?;

-- name: lease_force_release
-- Never a name a semaphore or read-write lease reserved (owner '': sync_reserve_name).
-- Operator override: ends whoever's lease now, IGNORING min_release_at (the minimum hold).
-- Causal on Galera (wsrep_sync_wait = 2): ends a lease just taken on another node too.
-- returns: :execrows
-- params: name
SET STATEMENT wsrep_sync_wait = 2 FOR UPDATE sqlguard_lock SET expire_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) WHERE name = ? AND owner <> '' AND expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);

-- name: lease_list_held
-- Leases only: a name a semaphore or read-write lease reserved (owner '', sync_reserve_name)
-- is listed with its holdings (sync_list_held).
-- returns: :many name, owner, fence, expire_at, acquired_at, renewed_at, db_now_ms
-- params: 
SELECT name, owner, fence, expire_at, acquired_at, renewed_at, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)
FROM sqlguard_lock WHERE owner <> '' AND expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) ORDER BY name;

-- name: lease_list_all
-- Leases only: a name a semaphore or read-write lease reserved (owner '', sync_reserve_name)
-- is listed with its holdings (sync_list_held).
-- returns: :many name, owner, fence, expire_at, acquired_at, renewed_at, db_now_ms
-- params: 
SELECT name, owner, fence, expire_at, acquired_at, renewed_at, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)
FROM sqlguard_lock WHERE owner <> '' ORDER BY name;

-- name: lease_guard_check
-- Re-verifies the lease inside a guarded transaction (1 row affected = still held) and
-- WRITES the row, locking it until commit: on one server no take-over can commit in
-- between; on Galera a take-over committed on another node makes this transaction fail
-- certification (1213 = Conflict at COMMIT or earlier), never commit. A read with
-- FOR UPDATE would be node-local and certify nothing. guard_writes: 0004_galera.
-- returns: :execrows
-- params: name, owner, fence
SET STATEMENT wsrep_sync_wait = 2 FOR UPDATE sqlguard_lock SET guard_writes = guard_writes + 1
WHERE name = ? AND owner = ? AND fence = ? AND expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);

-- name: fenced_ensure
-- Creates the resource's fence row if it is missing (not INSERT IGNORE: that also turns data
-- errors into truncating warnings).
-- returns: :execrows
-- params: resource
INSERT INTO sqlguard_fenced_resource (resource, fence, updated_at) VALUES (?, 0, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED))
ON DUPLICATE KEY UPDATE resource = resource;

-- name: fenced_update
-- 1 row affected = the write carries a fence at least as new as any seen before.
-- `writes + 1` always changes the row, so on Galera two fenced writes from different
-- nodes conflict at certification even with equal fences (0004_galera).
-- returns: :execrows
-- params: fence, resource, fence
SET STATEMENT wsrep_sync_wait = 2 FOR UPDATE sqlguard_fenced_resource SET fence = ?, writes = writes + 1, updated_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)
WHERE resource = ? AND fence <= ?;

-- name: lock_purge
-- cleanup(): one bounded batch of long-expired rows (MariaDB refuses LIMIT inside IN (subquery)).
-- returns: :execrows
-- params: grace_ms, batch
DELETE FROM sqlguard_lock WHERE expire_at < CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) - ? LIMIT ?;

-- name: lease_wakeup_signal
-- After a release: frees the wake-up lock, so every waiter blocked in lease_wakeup_wait
-- returns at once (a crashed holder's session frees it too).
-- returns: :one released
-- params: channel
SELECT RELEASE_LOCK(?);

-- name: lease_wakeup_wait
-- A waiter blocks on the holder's wake-up lock (timeout in seconds, fractions allowed):
-- 1 = woken (or nobody held it), 0 = timed out. The woken waiter KEEPS the lock while it
-- tries (the queue head: the other waiters stay blocked behind it, one wake-up per
-- release, in the server's queue order); it becomes the holder's wake-up lock when the
-- take-over succeeds, and is freed with lease_wakeup_signal when the waiter gives up.
-- returns: :one granted
-- params: channel, timeout_s
SELECT GET_LOCK(?, ?);

-- name: lease_wakeup_pass
-- The lock client's listener (one session for every waited name): waits up to timeout_s
-- for the holder's wake-up lock and frees it in the same statement when granted, so the
-- head's take-over (lease_take: GET_LOCK(channel, 0)) finds it free for the new holder.
-- 1 = the holder released (or nobody held it), 0 = timed out.
-- returns: :one passed
-- params: channel, timeout_s, channel
SELECT IF(GET_LOCK(?, ?) = 1, RELEASE_LOCK(?), 0) AS passed;

-- name: lease_queue_leave
-- not needed: the wake-up lock is the queue (GET_LOCK waiters are granted one at a time)
