-- sql/mysql/lease.sql — MariaDB >= 10.6 (mysqlcppconn 1.1). Session time zone is pinned to UTC.
-- Lease lock (src/strategies/kinds/lease_lock.cpp). Table sqlguard_lock, migrations/mysql/0001_lease_lock.sql.
-- Every time is the database clock in ms since the Unix epoch; fences come from
-- the sqlguard_fence_seq sequence (NOCACHE), so they never go back.
-- min_release_at is 0 unless a minimum hold was asked for (min_hold_ms > 0): a release or a
-- renewal never keeps an expiry at the acquisition time, so a backward step of the
-- database clock does not hold a released lease for the length of the step.
-- Who may take over (migrations/mysql/0010_watched_takeover.sql, docs/failure-model.md):
-- a RELEASED row (beat = 0) once its minimum hold has passed; an unreleased row only by a
-- compare-and-set on the (fence, beat, expire_at) the caller's process has watched unchanged
-- for the holder's whole ttl on its own monotonic clock (watched_*: -1 = no watch is ripe);
-- or, with LeaseOptions::take_over = kDatabaseClock (db_clock_rule = 1), once the database
-- clock has passed expire_at. Every renewal bumps beat; a release sets it to 0. No wall
-- clock alone decides a take-over under the default rule.
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
-- Takes over a released row, or one this process watched unchanged for its ttl (Galera's
-- plan: read first, then update; see the head of this file): one statement decides and draws
-- one fence. lease_precheck reads first, so a loser never gets here.
-- 1 row affected = acquired; lease_read_mine then reads the fence.
-- GREATEST(..., fence + 1): take-overs of one name are ordered by the row itself (on
-- Galera two take-overs of the row from different nodes conflict at certification, and
-- the winner's successor has applied it first), whatever the sequence says on this node.
-- A row a release handed to the caller's wait (turn_owner: its token for the next turn,
-- handed = 1: see lease_release) is taken too: the attempt confirms it with its own owner
-- token, a new fence and expiry. A take by the wait that has the next turn clears it (a turn
-- asked by another waiter stays for the next release).
-- returns: :execrows
-- params: owner, ttl_ms, ttl_ms, min_hold_ms, min_hold_ms, turn_owner, turn_owner, name, watched_fence, watched_beat, watched_expire_at, db_clock_rule, turn_owner
UPDATE sqlguard_lock SET owner = ?, fence = GREATEST(NEXTVAL(sqlguard_fence_seq), fence + 1), beat = 1, ttl_ms = ?, expire_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?, acquired_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED),
  renewed_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), min_release_at = CASE WHEN ? > 0 THEN CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ? ELSE 0 END,
  handed = 0, next_since = IF(next_owner = ?, 0, next_since), next_owner = IF(next_owner = ?, '', next_owner)
WHERE name = ? AND ((beat = 0 AND min_release_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED))
                    OR (owner <> '' AND fence = ? AND beat = ? AND expire_at = ?)
                    OR (? = 1 AND expire_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED))
                    OR (owner = ? AND handed = 1 AND beat <> 0));

-- name: lease_insert
-- not needed: lease_take creates a name never seen (and Galera's plan uses lease_create)

-- name: lease_create
-- Creates a name never seen before (Galera's plan, only after lease_precheck found no row); a
-- concurrent creator makes it fail with 1062 = already there. No RETURNING (see lease_take):
-- lease_read_mine reads the fence.
-- returns: :execrows
-- params: name, owner, ttl_ms, min_hold_ms, min_hold_ms, ttl_ms
INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at, beat, ttl_ms)
VALUES (?, ?, NEXTVAL(sqlguard_fence_seq), CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), CASE WHEN ? > 0 THEN CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ? ELSE 0 END, 1, ?);

-- name: lease_take
-- The take-over AND the fence read in one round trip (MariaDB has no UPDATE ... RETURNING;
-- INSERT ... ON DUPLICATE KEY UPDATE ... RETURNING returns the row as the statement left
-- it). Sent only after lease_precheck found the lease free or the name missing, so a
-- busy attempt stays a read. Creates a name never seen, or takes over a released row or one
-- this process watched unchanged for its ttl (see the head of this file). The first
-- assignment decides, on the row as it was, and marks a take-over with beat = -1 (never
-- stored: the last assignment makes it 1); every other column changes only under that mark
-- (MariaDB evaluates ON DUPLICATE KEY UPDATE assignments left to right, each seeing the
-- ones before it). A row another contender took in between comes back unchanged.
-- NOW(3) is one value for the whole statement, so acquired = (owner is ours AND
-- acquired_at = the statement's now). NEXTVAL is drawn for the VALUES row either way;
-- GREATEST(..., fence + 1) orders take-overs of one name by the row itself (Galera: two
-- nodes can draw the same NOCACHE value). The wake_lock column takes the wake-up lock when this
-- call took the lease (GET_LOCK(channel, 0): session-scoped, never waits), unless this
-- session holds it already (a waiter woken by lease_wakeup_wait keeps it; GET_LOCK twice
-- would need two RELEASE_LOCKs).
-- Not on Galera (its plan is lease_update_expired / lease_create, then lease_read_mine): an
-- autocommit INSERT ... RETURNING that certification aborts can leave the client waiting for
-- a result that never comes (seen on MariaDB 10.11 under cross-node take-overs).
-- A row a release handed to the caller's wait (turn_owner: its token for the next turn,
-- handed = 1: see lease_release) is taken too (lease_precheck's granted), with the caller's
-- own owner token; a take by the wait that has the next turn clears it.
-- returns: :one owner, fence, expire_at, acquired_at, db_now_ms, wake_lock, beat, watch_ms, released
-- params: name, owner, ttl_ms, min_hold_ms, min_hold_ms, ttl_ms, watched_fence, watched_beat, watched_expire_at, db_clock_rule, turn_owner, turn_owner, turn_owner, owner, channel, channel
INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at, beat, ttl_ms)
VALUES (?, ?, NEXTVAL(sqlguard_fence_seq), CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), CASE WHEN ? > 0 THEN CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ? ELSE 0 END, 1, ?)
ON DUPLICATE KEY UPDATE
  beat = IF((beat = 0 AND min_release_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED))
                    OR (owner <> '' AND fence = ? AND beat = ? AND expire_at = ?)
                    OR (? = 1 AND expire_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED))
                    OR (owner = ? AND handed = 1 AND beat <> 0), -1, beat),
  owner = IF(beat = -1, VALUES(owner), owner),
  fence = IF(beat = -1, GREATEST(VALUES(fence), fence + 1), fence),
  acquired_at = IF(beat = -1, VALUES(acquired_at), acquired_at),
  renewed_at = IF(beat = -1, VALUES(renewed_at), renewed_at),
  min_release_at = IF(beat = -1, VALUES(min_release_at), min_release_at),
  expire_at = IF(beat = -1, VALUES(expire_at), expire_at),
  ttl_ms = IF(beat = -1, VALUES(ttl_ms), ttl_ms),
  handed = IF(beat = -1, 0, handed),
  next_since = IF(beat = -1 AND next_owner = ?, 0, next_since),
  next_owner = IF(beat = -1 AND next_owner = ?, '', next_owner),
  beat = IF(beat = -1, 1, beat)
RETURNING owner, fence, expire_at, acquired_at, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED),
  IF(owner = ? AND acquired_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), IF(IS_USED_LOCK(?) <=> CONNECTION_ID(), 1, GET_LOCK(?, 0)), 0),
  beat, IF(ttl_ms > 0, ttl_ms, GREATEST(expire_at - renewed_at, 0)), beat = 0 AND min_release_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);

-- name: lease_precheck
-- Causal on Galera (wsrep_sync_wait = 1): sees a take-over committed on another node.
-- A consistent read (no lock, never waits) that decides first (acquire_common.h,
-- may_take_over): a held lease is busy without touching the row. Needed because InnoDB's
-- UPDATE by primary key waits for a row lock even when the row will not match (no
-- semi-consistent read on a unique lookup). What it answers of the holder is a sighting for
-- this process's watch of it.
-- granted: a release handed the lease to its owner (the next turn, handed = 1), whose
-- attempt then takes it (lease_take).
-- next_owner, next_since: who holds the lease's next turn ('' nobody) and when its wait began
-- (bounded barging, lease_next_read): a waiter past the limit decides from them whether the
-- turn is its own or open without a read of its own.
-- returns: :one owner, expire_at, db_now_ms, fence, beat, watch_ms, released, granted, next_owner, next_since
-- params: name
SET STATEMENT wsrep_sync_wait = 1 FOR SELECT owner, expire_at, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), fence, beat, IF(ttl_ms > 0, ttl_ms, GREATEST(expire_at - renewed_at, 0)),
  beat = 0 AND min_release_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), handed = 1 AND beat <> 0, next_owner, next_since FROM sqlguard_lock WHERE name = ?;

-- name: lease_read_mine
-- Not a lease a release handed to this owner and not yet confirmed (handed = 1: its
-- expiry started at the hand-over, before this caller's attempt; the next attempt takes it).
-- Reads the fence after lease_acquire / lease_insert took the lease, and takes the
-- wake-up lock (GET_LOCK(channel, 0), session-scoped, no wait) in the same round trip:
-- waiters block in lease_wakeup_wait until lease_wakeup_signal or the end of this session.
-- Not taken twice by one session (a woken waiter keeps it; two GET_LOCKs need two releases).
-- returns: :one fence, expire_at, wake_lock
-- params: channel, channel, name, owner
SELECT fence, expire_at, IF(IS_USED_LOCK(?) <=> CONNECTION_ID(), 1, GET_LOCK(?, 0)) AS wake_lock FROM sqlguard_lock WHERE name = ? AND owner = ? AND handed = 0;

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
-- Not released and not taken over is enough (beat <> 0): a renewal that comes after the
-- database clock passed expire_at still keeps the lease when nobody took it over; beat + 1
-- restarts every watch of it.
-- params: ttl_ms, ttl_ms, name, owner, fence
SET STATEMENT wsrep_sync_wait = 2 FOR UPDATE sqlguard_lock SET beat = beat + 1, ttl_ms = ?, expire_at = GREATEST(CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?, min_release_at), renewed_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)
WHERE name = ? AND owner = ? AND fence = ? AND beat <> 0;

-- name: lease_renew_batch
-- not needed: no UPDATE ... RETURNING here; lease_renew_batch_lock + lease_renew_batch_update run instead

-- name: lease_poll
-- The lock client's waiter thread: where the lease of each waited name stands, one statement
-- for every name whose head is due to try (a plain read; no row or write lock). A name with
-- no row, or released, or watched unchanged for its ttl (acquire_common.h, may_take_over), is
-- free: its head tries; the poll is a sighting for the watch. {names} is one lease_name_ref
-- per name (at most 1000), padded with '' (no lease has an empty name).
-- handed: a release handed it to a waiter's next turn (that waiter's head tries).
-- returns: :many name, expire_at, db_now_ms, fence, beat, watch_ms, released, handed
-- params: names...
SELECT name, expire_at, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) AS db_now_ms, fence, beat, IF(ttl_ms > 0, ttl_ms, GREATEST(expire_at - renewed_at, 0)),
  beat = 0 AND min_release_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), handed FROM sqlguard_lock WHERE name IN ({names*, });

-- fragment: lease_name_ref
?

-- name: lease_acquire_batch
-- not needed: lease_poll reads the names first, then lease_take_batch takes the free ones

-- fragment: lease_acquire_req
-- not needed: lease_take_batch

-- name: lease_take_batch
-- The lock client's coalesced try-acquires of distinct names (LockClientOptions::batch_max: sent
-- when every work connection is busy; an idle client sends lease_precheck / lease_take). Sent
-- after lease_poll read the names, for the ones it found missing or released only, so a held
-- name costs no row lock: one upsert for up to 64 names, each {reqs} a lease_take_req
-- (name, owner, ttl_ms, min_hold_ms), in name order (two batches never wait on each other in a
-- cycle), padded by repeating the last one (its second row changes nothing). It creates a name
-- never seen or takes a released row (beat = 0, past its minimum hold, not reserved) as
-- lease_take does (beat = -1 marks the take for the assignments after it); every other
-- name (a take-over by the watched rule, a handed turn) is decided per name by lease_take.
-- Each listed row comes back as the statement left it: taken by the caller when its owner is
-- the caller's and acquired_at is this statement's now.
-- returns: :many name, owner, fence, expire_at, acquired_at, db_now_ms
-- params: reqs...
INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at, beat, ttl_ms)
VALUES {reqs*, }
ON DUPLICATE KEY UPDATE
  beat = IF(beat = 0 AND owner <> '' AND min_release_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), -1, beat),
  owner = IF(beat = -1, VALUES(owner), owner),
  fence = IF(beat = -1, GREATEST(VALUES(fence), fence + 1), fence),
  acquired_at = IF(beat = -1, VALUES(acquired_at), acquired_at),
  renewed_at = IF(beat = -1, VALUES(renewed_at), renewed_at),
  min_release_at = IF(beat = -1, VALUES(min_release_at), min_release_at),
  expire_at = IF(beat = -1, VALUES(expire_at), expire_at),
  ttl_ms = IF(beat = -1, VALUES(ttl_ms), ttl_ms),
  handed = IF(beat = -1, 0, handed),
  beat = IF(beat = -1, 1, beat)
RETURNING name, owner, fence, expire_at, acquired_at, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);

-- fragment: lease_take_req
(?, ?, NEXTVAL(sqlguard_fence_seq), CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), CASE WHEN ? > 0 THEN CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ? ELSE 0 END, 1, ?)

-- name: lease_release_batch
-- not needed: lease_release_batch_lock then lease_release_batch_update (no UPDATE ... RETURNING)

-- name: lease_release_batch_lock
-- The lock client's coalesced releases, first half (see lease_take_batch): locks and answers the
-- listed leases still held by their owner under their fence, so that lease_release_batch_update,
-- in the same transaction, releases exactly these. {refs} is one lease_release_ref per lease
-- (name, owner, fence; at most 64), padded with '' names, joined by UNION ALL; reached by
-- primary key from the list (STRAIGHT_JOIN, FORCE INDEX, as lease_renew_batch_lock). SKIP
-- LOCKED: a row the client's renewer is extending at that instant is left out (released
-- alone with lease_release afterwards), so a batch never waits on a renewal in a cycle.
-- returns: :many name
-- params: refs...
SELECT STRAIGHT_JOIN l.name FROM ({refs* UNION ALL }) v
  JOIN sqlguard_lock l FORCE INDEX (PRIMARY) ON l.name = v.name AND l.owner = v.owner AND l.fence = v.fence
WHERE l.beat <> 0 FOR UPDATE SKIP LOCKED;

-- name: lease_release_batch_update
-- The coalesced releases, second half: lease_release for each row lease_release_batch_lock
-- locked (the same hand-over to a waiter's next turn). A multiple-table UPDATE does not
-- assign left to right (MariaDB: every assignment here saw the row as it was; measured: a
-- row already handed, handed = 1, was "handed" to an empty next_owner), so each assignment
-- tests the hand-over's own condition on columns no assignment before it changes
-- (next_owner is cleared last, min_release_at never), and the owner, fence and ttl are taken
-- from the row as it was either way.
-- returns: :execrows
-- params: refs...
UPDATE ({refs* UNION ALL }) v STRAIGHT_JOIN sqlguard_lock l FORCE INDEX (PRIMARY)
  ON l.name = v.name AND l.owner = v.owner AND l.fence = v.fence
SET
  l.handed = IF(l.next_owner <> '' AND l.min_release_at = 0, 1, 0),
  l.ttl_ms = IF(l.next_owner <> '' AND l.min_release_at = 0, l.next_ttl_ms, l.ttl_ms),
  l.expire_at = IF(l.next_owner <> '' AND l.min_release_at = 0, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + l.next_ttl_ms, GREATEST(CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), l.min_release_at)),
  l.acquired_at = IF(l.next_owner <> '' AND l.min_release_at = 0, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), l.acquired_at),
  l.renewed_at = IF(l.next_owner <> '' AND l.min_release_at = 0, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), l.renewed_at),
  l.beat = IF(l.next_owner <> '' AND l.min_release_at = 0, 1, 0),
  l.fence = IF(l.next_owner <> '' AND l.min_release_at = 0, GREATEST(NEXTVAL(sqlguard_fence_seq), l.fence + 1), l.fence),
  l.owner = IF(l.next_owner <> '' AND l.min_release_at = 0, l.next_owner, l.owner),
  l.next_since = IF(l.next_owner <> '' AND l.min_release_at = 0, 0, l.next_since),
  l.next_owner = IF(l.next_owner <> '' AND l.min_release_at = 0, '', l.next_owner)
WHERE l.beat <> 0;

-- fragment: lease_release_ref
SELECT ? AS name, ? AS owner, ? AS fence

-- name: lease_wakeup_take_batch
-- After lease_take_batch: the wake-up lock of every name it took (as lease_take's wake_lock
-- column: GET_LOCK(channel, 0), never waits; not twice when this session holds it already).
-- {channels}: one lease_channel_ref per name, padded by repeating the last one.
-- returns: :many taken
-- params: channels...
SELECT IF(IS_USED_LOCK(v.channel) <=> CONNECTION_ID(), 1, GET_LOCK(v.channel, 0)) FROM ({channels* UNION ALL }) v;

-- name: lease_wakeup_signal_batch
-- After lease_release_batch_update committed: frees the wake-up lock of every released name
-- (lease_wakeup_signal for each). {channels} as in lease_wakeup_take_batch.
-- returns: :many released
-- params: channels...
SELECT RELEASE_LOCK(v.channel) FROM ({channels* UNION ALL }) v;

-- fragment: lease_channel_ref
SELECT ? AS channel

-- name: lease_renew_batch_lock
-- Batched renewal, first half (renew_leases(): the lock client's renewal thread): locks and
-- answers the listed leases still held by their owner under their fence and not released, so that
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
WHERE l.beat <> 0 FOR UPDATE;

-- name: lease_renew_batch_update
-- Batched renewal, second half: extends what lease_renew_batch_lock locked, each with its own
-- ttl, never before min_release_at, on the database clock. By primary key from the list, as
-- lease_renew_batch_lock.
-- returns: :execrows
-- params: refs...
UPDATE ({refs* UNION ALL }) v STRAIGHT_JOIN sqlguard_lock l FORCE INDEX (PRIMARY)
  ON l.name = v.name AND l.owner = v.owner AND l.fence = v.fence
SET l.beat = l.beat + 1, l.ttl_ms = v.ttl_ms, l.expire_at = GREATEST(CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + v.ttl_ms, l.min_release_at), l.renewed_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)
WHERE l.beat <> 0;

-- fragment: lease_ref
SELECT ? AS name, ? AS owner, ? AS fence, ? AS ttl_ms

-- name: lease_release
-- Owner- and fence-checked (a stale holder reusing an owner string cannot free a newer
-- lease); the row stays (its fence history is the sequence) and expires now, or at
-- min_release_at when a minimum hold was asked for.
-- Causal on Galera (wsrep_sync_wait = 2): a take-over from another node means 0 rows, not a
-- certification failure.
-- The next turn (bounded barging, LeaseOptions::barging_limit): when a waiter asked for it
-- (next_owner, lease_next_set) and the holder asked for no minimum hold (min_release_at =
-- 0), the release hands the lease to that waiter in the same statement instead of freeing
-- it: owner = next_owner, a new fence, expire_at = now + next_ttl_ms, beat 1 and handed = 1
-- (not yet confirmed: the new owner's next attempt takes it); the turn is free again. MariaDB
-- assigns left to right, each assignment seeing the ones before: handed decides first (1 =
-- handed over) and every other column follows it; the turn is cleared last.
-- returns: :execrows
-- params: name, owner, fence
SET STATEMENT wsrep_sync_wait = 2 FOR UPDATE sqlguard_lock SET
  handed = IF(next_owner <> '' AND min_release_at = 0, 1, 0),
  owner = IF(handed = 1, next_owner, owner),
  fence = IF(handed = 1, GREATEST(NEXTVAL(sqlguard_fence_seq), fence + 1), fence),
  beat = IF(handed = 1, 1, 0),
  ttl_ms = IF(handed = 1, next_ttl_ms, ttl_ms),
  expire_at = IF(handed = 1, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + next_ttl_ms, GREATEST(CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), min_release_at)),
  acquired_at = IF(handed = 1, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), acquired_at),
  renewed_at = IF(handed = 1, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), renewed_at),
  next_since = IF(handed = 1, 0, next_since),
  next_owner = IF(handed = 1, '', next_owner)
WHERE name = ? AND owner = ? AND fence = ? AND beat <> 0;

-- name: lease_release_flushed
-- not needed: lease_release does not change how its commit is flushed (server-wide on MariaDB)

-- name: lease_release_fair
-- A fair lease's release (LeaseOptions::fair): lease_release that also ends the queue place
-- the holder was acquired from (ticket, place_owner; none: no row joins) in the same
-- statement and commit, and GRANTS the lease to the queue's next place (the lowest other live
-- place, whatever its expiry says): owner = that place's owner token, a new fence, expire_at =
-- now + the lease's ttl_ms, beat 1, handed = 1. The woken waiter holds it from its queue read
-- (fair_gate: granted, which also takes the wake-up lock for it) without a write of its own;
-- where its trust window (from its join) leaves less than half a ttl it confirms by a take
-- (lease_take: owner = turn_owner AND handed = 1). Not when the holder asked for a minimum
-- hold (min_release_at <> 0) or the row has no ttl_ms (an older sqlguard's): then released,
-- and the next waiter takes it.
-- The next place is found by a derived table (materialized: MariaDB allows it beside an
-- update of the same table) and joined again by primary key as an UPDATED table (n: a no-op
-- assignment), so the statement holds its row lock until it commits: a waiter leaving at that
-- moment (fair_leave, fair_ungrant) either deleted it first (no grant) or finds the grant
-- committed and releases it. On Galera a leave certified on another node at the same moment
-- can leave the grant to a place that is gone: the lease then waits out its ttl (as for a
-- waiter that dies with a grant).
-- A multi-table UPDATE assigns in no guaranteed order: every assignment repeats the grant's
-- condition on columns no assignment changes (n.owner, l.min_release_at, l.ttl_ms).
-- A multi-table statement cannot both update the lease and delete the place, so it marks the
-- holder's place left (beat = 0); lease_release_fair_place deletes it after the wake-up.
-- Rows affected: 1 or 2 = released or granted, 0 = not held.
-- returns: :execrows
-- params: ticket, place_owner, name, ticket, name, owner, fence
SET STATEMENT wsrep_sync_wait = 2 FOR UPDATE sqlguard_lock l
LEFT JOIN sqlguard_lock_queue q ON q.name = l.name AND q.ticket = ? AND q.owner = ?
LEFT JOIN (SELECT ticket FROM sqlguard_lock_queue WHERE name = ? AND ticket <> ? AND beat <> 0 ORDER BY ticket LIMIT 1) nt ON 1 = 1
LEFT JOIN sqlguard_lock_queue n ON n.name = l.name AND n.ticket = nt.ticket AND n.beat <> 0
SET l.owner = IF(n.owner IS NOT NULL AND l.min_release_at = 0 AND l.ttl_ms > 0, n.owner, l.owner),
    l.fence = IF(n.owner IS NOT NULL AND l.min_release_at = 0 AND l.ttl_ms > 0, GREATEST(NEXTVAL(sqlguard_fence_seq), l.fence + 1), l.fence),
    l.beat = IF(n.owner IS NOT NULL AND l.min_release_at = 0 AND l.ttl_ms > 0, 1, 0),
    l.handed = IF(n.owner IS NOT NULL AND l.min_release_at = 0 AND l.ttl_ms > 0, 1, 0),
    l.expire_at = IF(n.owner IS NOT NULL AND l.min_release_at = 0 AND l.ttl_ms > 0, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + l.ttl_ms, GREATEST(CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), l.min_release_at)),
    l.acquired_at = IF(n.owner IS NOT NULL AND l.min_release_at = 0 AND l.ttl_ms > 0, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), l.acquired_at),
    l.renewed_at = IF(n.owner IS NOT NULL AND l.min_release_at = 0 AND l.ttl_ms > 0, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), l.renewed_at),
    q.beat = 0, q.expire_at = 0, n.ttl_ms = n.ttl_ms
WHERE l.name = ? AND l.owner = ? AND l.fence = ? AND l.beat <> 0;

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
-- Operator override: ends whoever's lease now, IGNORING min_release_at (the minimum hold): also
-- a released lease still kept by its minimum hold.
-- Causal on Galera (wsrep_sync_wait = 2): ends a lease just taken on another node too.
-- returns: :execrows
-- params: name
SET STATEMENT wsrep_sync_wait = 2 FOR UPDATE sqlguard_lock SET beat = 0, min_release_at = 0, expire_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), next_owner = '', next_since = 0, handed = 0 WHERE name = ? AND owner <> '' AND (beat <> 0 OR min_release_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED));

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
WHERE name = ? AND owner = ? AND fence = ? AND beat <> 0;

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
-- cleanup(): one bounded batch of rows RELEASED longer than grace_ms ago (MariaDB refuses
-- LIMIT inside IN (subquery)). An unreleased row is never deleted on the database clock (a
-- forward step would end a live lease): the next acquirer takes it over after watching it.
-- returns: :execrows
-- params: grace_ms, batch
DELETE FROM sqlguard_lock WHERE beat = 0 AND expire_at < CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) - ? LIMIT ?;

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
ON DUPLICATE KEY UPDATE fence = VALUES(fence), beat = VALUES(beat), expire_at = VALUES(expire_at),
  first_seen_ms = VALUES(first_seen_ms);

-- name: lease_watch_purge
-- cleanup(): one bounded batch of sightings of a lease that has changed since (renewed,
-- released, taken over or deleted): no later take-over can use them. (MariaDB refuses LIMIT
-- inside IN (subquery): a derived table.)
-- returns: :execrows
-- params: batch
DELETE w FROM sqlguard_lock_watch w JOIN (
  SELECT w2.name, w2.watcher FROM sqlguard_lock_watch w2 LEFT JOIN sqlguard_lock l ON l.name = w2.name
  WHERE l.name IS NULL OR l.fence <> w2.fence OR l.beat <> w2.beat OR l.expire_at <> w2.expire_at LIMIT ?) s
  ON s.name = w.name AND s.watcher = w.watcher;

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
-- A session that holds it already (a woken waiter whose attempt found the lease handed to
-- it, await_wakeup_lock) gets 1 at once without taking it again: MariaDB's named locks are
-- recursive, and a second GET_LOCK would need a second RELEASE_LOCK, so the release's one
-- would leave it held and every waiter blocked until its timeout.
-- returns: :one granted
-- params: channel, channel, timeout_s
SELECT IF(IS_USED_LOCK(?) <=> CONNECTION_ID(), 1, GET_LOCK(?, ?));

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

-- name: lease_next_read
-- Bounded barging (lease_release, LeaseOptions::barging_limit): where the caller stands for
-- the next turn of a held lease, a plain read (causal on Galera). mine: it has the next turn; granted: a
-- release handed the lease to it (its next acquire attempt confirms it); open: it may ask
-- for the turn (lease_next_set: held by another owner, and nobody asked or a waiter that
-- began to wait later did; ties go to the smaller owner token).
-- free: it is released (the caller tries again at once). fence: the holder's (a waiter past the
-- limit looks less often while it stays the same: a long hold is not a hot lock).
-- returns: :one mine, granted, open, free, fence
-- params: owner, owner, owner, owner, since, since, owner, name
SET STATEMENT wsrep_sync_wait = 1 FOR SELECT IF(next_owner = ? AND beat <> 0, 1, 0),
       IF(owner = ? AND handed = 1 AND beat <> 0, 1, 0),
       IF(beat <> 0 AND owner <> '' AND owner <> ? AND next_owner <> ?
          AND (next_owner = '' OR next_since > ? OR (next_since = ? AND next_owner > ?)), 1, 0),
       IF(beat = 0, 1, 0), fence
FROM sqlguard_lock WHERE name = ?;

-- name: lease_next_set
-- The caller asks for the next turn of a held lease (see lease_next_read: only when open,
-- decided again on the row as it is). A hint for the next release, not a lock. Causal on
-- Galera.
-- 1 row = the turn is the caller's.
-- returns: :execrows
-- params: owner, since, ttl_ms, name, owner, owner, since, since, owner
SET STATEMENT wsrep_sync_wait = 2 FOR UPDATE sqlguard_lock SET next_owner = ?, next_since = ?, next_ttl_ms = ?
WHERE name = ? AND beat <> 0 AND owner <> '' AND owner <> ? AND next_owner <> ?
  AND (next_owner = '' OR next_since > ? OR (next_since = ? AND next_owner > ?));

-- name: lease_next_drop
-- A waiter that asked for the next turn gives up (its wait ended or was cancelled): the turn
-- goes, and a lease a release already handed to it (handed = 1) is released (its waiters
-- are woken by the wait plan after it). Left to right: beat decides first (0 = the
-- handed lease is released), expire_at and handed follow it; the turn is cleared last.
-- 1 row = it had the turn or the lease.
-- returns: :execrows
-- params: owner, owner, owner, name, owner, owner
SET STATEMENT wsrep_sync_wait = 2 FOR UPDATE sqlguard_lock SET beat = IF(owner = ? AND handed = 1, 0, beat),
  expire_at = IF(beat = 0 AND handed = 1, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), expire_at),
  handed = IF(beat = 0, 0, handed),
  next_since = IF(next_owner = ?, 0, next_since),
  next_owner = IF(next_owner = ?, '', next_owner)
WHERE name = ? AND (next_owner = ? OR (owner = ? AND handed = 1 AND beat <> 0));
