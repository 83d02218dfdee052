-- sql/postgresql/lease.sql — PostgreSQL 15 (libpqxx 6.4). `?` placeholders are numbered $1..$n by the driver.
-- Lease lock (src/strategies/kinds/lease_lock.cpp). Table sqlguard_lock, migrations/postgresql/0001_lease_lock.sql.
-- Every time is the database clock in ms since the Unix epoch; fences come from
-- the sqlguard_fence_seq sequence, so they never go back.
-- min_release_at is 0 unless a minimum hold was asked for (min_hold_ms > 0): a release or a
-- renewal never keeps an expiry at the acquisition time, so a backward step of the
-- database clock does not hold a released lease for the length of the step.
-- Who may take over (migrations/postgresql/0010_watched_takeover.sql, docs/failure-model.md):
-- a RELEASED row (beat = 0) once its minimum hold has passed; an unreleased row only by a
-- compare-and-set on the (fence, beat, expire_at) the caller's process has watched unchanged
-- for the holder's whole ttl on its own monotonic clock (watched_*: -1 = no watch is ripe);
-- or, with LeaseOptions::take_over = kDatabaseClock (db_clock_rule = 1), once the database
-- clock has passed expire_at. Every renewal bumps beat; a release sets it to 0. No wall
-- clock alone decides a take-over under the default rule.

-- name: lease_acquire
-- Takes over a released row, or one this process watched unchanged for its ttl (see the
-- head of this file): one statement decides and draws one fence. A row that is held does not
-- match the WHERE, so a busy attempt is a read:
-- no row lock, no xid, no WAL, no commit flush (an ON CONFLICT DO UPDATE would
-- lock the row and write WAL even when its WHERE is false). SKIP LOCKED: when many
-- waiters wake on one release, the losers skip the row the winner is taking over
-- instead of queueing on its row lock (which would also delay the winner's release).
-- Always one row back: (fence, expire_at) of the lease this call took, NULL when it took
-- none; then the holder's expire_at as the statement's snapshot saw it (NULL = no such
-- name yet: lease_insert creates it) and the database clock, so a busy attempt learns how
-- long the holder's lease still runs in the same round trip.
-- The waiter queue (LeaseLock::acquire; only the head LISTENs, see lease_queue_leave) rides
-- in the same round trip, by queue_role: 'join' = a waiter that is not the head yet; a busy
-- attempt also tries to become the head (a session advisory lock on the channel, never
-- waited for: a backend blocked on a lock keeps a snapshot, and the hot row's dead
-- versions pile up behind it); 'head' = the head; its take-over leaves the head's place
-- before this commits (the next head then finds the row being taken over and waits for
-- the next release); '' = no queue (try_acquire, behind a transaction pooler).
-- Two more columns: whether a take-over left the head's place, whether a busy 'join'
-- attempt became the head (only when the row exists: a missing name goes on to lease_insert,
-- and a session lock taken by an attempt that then fails would outlive it).
-- The holder's row as the statement saw it rides back too (holder_*: its fence, beat, the ttl
-- a watch of it must last, whether it is released), so a busy attempt starts or continues
-- this process's watch of it in the same round trip.
-- A row a release handed to the caller's wait (turn_owner: its token for the next turn,
-- handed = 1: see lease_release) is taken too: the attempt confirms it with its own owner
-- token, a new fence and expiry. A take by the wait that has the next turn clears it (a turn
-- asked by another waiter stays for the next release).
-- The lease's next turn as the statement saw it rides back too (next_owner: '' nobody asked;
-- next_since: when its wait began; bounded barging, lease_next_read): a waiter past the limit
-- decides from it whether the turn is its own or open without a read of its own.
-- returns: :one fence, expire_at, holder_expire_at, db_now_ms, left_queue, joined_queue, holder_fence, holder_beat, holder_watch_ms, holder_released, next_owner, next_since
-- params: name, owner, ttl_ms, ttl_ms, min_hold_ms, min_hold_ms, turn_owner, turn_owner, name, watched_fence, watched_beat, watched_expire_at, db_clock_rule, turn_owner, queue_role, channel, queue_role, channel
WITH seen AS (SELECT expire_at, fence, beat, next_owner, next_since, CASE WHEN ttl_ms > 0 THEN ttl_ms ELSE GREATEST(expire_at - renewed_at, 0) END AS watch_ms,
                     CASE WHEN beat = 0 AND min_release_at <= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT THEN 1 ELSE 0 END AS released
              FROM sqlguard_lock WHERE name = ?),
took AS (
  UPDATE sqlguard_lock SET owner = ?, fence = nextval('sqlguard_fence_seq'), beat = 1, ttl_ms = ?, expire_at = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + ?, acquired_at = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT,
    renewed_at = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, min_release_at = CASE WHEN ?::bigint > 0 THEN (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + ? ELSE 0 END,
    handed = 0, next_since = CASE WHEN next_owner = ? THEN 0 ELSE next_since END, next_owner = CASE WHEN next_owner = ? THEN '' ELSE next_owner END
  WHERE name = (SELECT name FROM sqlguard_lock
                WHERE name = ? AND ((beat = 0 AND min_release_at <= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT)
                                    OR (owner <> '' AND fence = ? AND beat = ? AND expire_at = ?)
                                    OR (?::int = 1 AND expire_at <= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT)
                                    OR (owner = ? AND handed = 1 AND beat <> 0))
                FOR UPDATE SKIP LOCKED)
  RETURNING fence, expire_at, CASE WHEN ?::text = 'head' THEN pg_advisory_unlock(1397836871, hashtext(?)) END AS left_queue)
SELECT took.fence, took.expire_at, seen.expire_at, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT,
       took.left_queue,
       CASE WHEN took.fence IS NULL AND seen.expire_at IS NOT NULL AND ?::text = 'join'
            THEN pg_try_advisory_lock(1397836871, hashtext(?)) END AS joined,
       seen.fence, seen.beat, seen.watch_ms, seen.released, seen.next_owner, seen.next_since
FROM (SELECT 1) AS one LEFT JOIN took ON true LEFT JOIN seen ON true;

-- name: lease_insert
-- Creates a name never seen before (only after no row was found); a concurrent creator
-- wins the primary key and this inserts nothing (no row back).
-- returns: :one fence, expire_at
-- params: name, owner, ttl_ms, min_hold_ms, min_hold_ms, ttl_ms
INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at, beat, ttl_ms)
VALUES (?, ?, nextval('sqlguard_fence_seq'), (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + ?, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, CASE WHEN ?::bigint > 0 THEN (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + ? ELSE 0 END, 1, ?)
ON CONFLICT (name) DO NOTHING
RETURNING fence, expire_at;

-- name: lease_take
-- not needed: the one-statement take-over (lease_acquire) returns the fence itself

-- name: lease_take_expired
-- not needed: the one-statement take-over (lease_acquire)

-- name: lease_update_expired
-- not needed: the one-statement take-over (lease_acquire)

-- name: lease_create
-- not needed: lease_insert returns the fence itself (INSERT ... RETURNING)

-- name: lease_precheck
-- not needed: lease_acquire takes no lock and writes nothing when the lease is held

-- name: lease_read_mine
-- Not a lease a release handed to this owner and not yet confirmed (handed = 1: its
-- expiry started at the hand-over, before this caller's attempt; the next attempt takes it).
-- wake_lock: NULL, a release's NOTIFY needs no wake-up lock.
-- returns: :one fence, expire_at, wake_lock
-- params: name, owner
SELECT fence, expire_at, NULL::int AS wake_lock FROM sqlguard_lock WHERE name = ? AND owner = ? AND handed = 0;

-- name: lease_info
-- returns: :one name, owner, fence, expire_at, acquired_at, renewed_at, db_now_ms
-- params: name
SELECT name, owner, fence, expire_at, acquired_at, renewed_at, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT
FROM sqlguard_lock WHERE name = ?;

-- name: lease_renew
-- Owner- and fence-checked (a reused owner string cannot extend a newer lease); 1 row
-- affected = still held and extended. Never ends before min_release_at: a ttl shorter
-- than what is left of the minimum hold does not let another owner in early.
-- returns: :execrows
-- Not released and not taken over is enough (beat <> 0): a renewal that comes after the
-- database clock passed expire_at still keeps the lease when nobody took it over (a forward
-- step of that clock takes nothing away); beat + 1 restarts every watch of it.
-- params: ttl_ms, ttl_ms, name, owner, fence
UPDATE sqlguard_lock SET beat = beat + 1, ttl_ms = ?, expire_at = GREATEST((EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + ?, min_release_at), renewed_at = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT
WHERE name = ? AND owner = ? AND fence = ? AND beat <> 0;

-- name: lease_renew_batch
-- Many leases in one statement (renew_leases(): the lock client's renewal thread). Each listed
-- lease is checked and extended as lease_renew does (owner and fence, not released, never
-- before min_release_at, on the database clock) with its own ttl; answers the renewed ones.
-- {refs} is one lease_ref per lease (at most 1000: 4000 values).
-- returns: :many name, fence
-- params: refs...
UPDATE sqlguard_lock AS l SET beat = l.beat + 1, ttl_ms = v.ttl_ms, expire_at = GREATEST((EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + v.ttl_ms, l.min_release_at), renewed_at = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT
FROM (VALUES {refs*, }) AS v(name, owner, fence, ttl_ms)
WHERE l.name = v.name AND l.owner = v.owner AND l.fence = v.fence AND l.beat <> 0
RETURNING l.name, l.fence;

-- fragment: lease_ref
(CAST(? AS VARCHAR), CAST(? AS VARCHAR), CAST(? AS BIGINT), CAST(? AS BIGINT))

-- name: lease_poll
-- The lock client's waiter thread: where the lease of each waited name stands, one statement
-- for every name whose head is due to try (a plain read; no row or write lock). A name with
-- no row, or released, or watched unchanged for its ttl (acquire_common.h, may_take_over), is
-- free: its head tries; the poll is a sighting for the watch. {names} is one lease_name_ref
-- per name (at most 1000), padded with '' (no lease has an empty name).
-- handed: a release handed it to a waiter's next turn (that waiter's head tries).
-- returns: :many name, expire_at, db_now_ms, fence, beat, watch_ms, released, handed
-- params: names...
SELECT name, expire_at, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT AS db_now_ms, fence, beat,
       CASE WHEN ttl_ms > 0 THEN ttl_ms ELSE GREATEST(expire_at - renewed_at, 0) END,
       CASE WHEN beat = 0 AND min_release_at <= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT THEN 1 ELSE 0 END, handed
FROM sqlguard_lock WHERE name IN ({names*, });

-- fragment: lease_name_ref
CAST(? AS VARCHAR)

-- name: lease_acquire_batch
-- The lock client's coalesced try-acquires of distinct names (LockClientOptions::batch_max: sent
-- when every work connection is busy; an idle client sends lease_acquire). One statement for up
-- to 64 names, each {reqs} a lease_acquire_req (name, owner, ttl_ms, min_hold_ms), padded with
-- '' names (ignored). It takes only what needs no watch: a name never seen (inserted, in name
-- order: two batches creating the same names never wait on each other in a cycle) and a
-- released row (beat = 0, past its minimum hold; SKIP LOCKED: a row another statement is
-- taking or releasing is left alone and reported as seen). Every other name comes back with
-- the holder's row as the statement saw it (holder_*: a sighting for this process's watch);
-- the client decides the rest (busy, or a take-over by the watched rule, a handed turn, a
-- reserved name) with lease_acquire per name. One row per listed name; fence NULL = not
-- taken, holder_expire_at NULL = no row seen.
-- returns: :many name, fence, expire_at, holder_expire_at, db_now_ms, holder_fence, holder_beat, holder_watch_ms, holder_released
-- params: reqs...
WITH req AS (SELECT * FROM (VALUES {reqs*, }) AS v(name, owner, ttl_ms, min_hold_ms) WHERE v.name <> ''),
seen AS (SELECT l.name, l.expire_at, l.fence, l.beat,
                CASE WHEN l.ttl_ms > 0 THEN l.ttl_ms ELSE GREATEST(l.expire_at - l.renewed_at, 0) END AS watch_ms,
                CASE WHEN l.beat = 0 AND l.min_release_at <= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT THEN 1 ELSE 0 END AS released
         FROM sqlguard_lock l JOIN req ON l.name = req.name),
took AS (
  UPDATE sqlguard_lock l SET owner = req.owner, fence = nextval('sqlguard_fence_seq'), beat = 1, ttl_ms = req.ttl_ms,
    expire_at = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + req.ttl_ms, acquired_at = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, renewed_at = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT,
    min_release_at = CASE WHEN req.min_hold_ms > 0 THEN (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + req.min_hold_ms ELSE 0 END, handed = 0
  FROM req
  WHERE l.name = req.name AND l.name IN (SELECT x.name FROM sqlguard_lock x
                                         WHERE x.name IN (SELECT r.name FROM req r) AND x.beat = 0 AND x.owner <> ''
                                           AND x.min_release_at <= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT
                                         ORDER BY x.name FOR UPDATE SKIP LOCKED)
  RETURNING l.name, l.fence, l.expire_at),
made AS (
  INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at, beat, ttl_ms)
  SELECT req.name, req.owner, nextval('sqlguard_fence_seq'), (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + req.ttl_ms, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT,
         CASE WHEN req.min_hold_ms > 0 THEN (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + req.min_hold_ms ELSE 0 END, 1, req.ttl_ms
  FROM req WHERE NOT EXISTS (SELECT 1 FROM seen WHERE seen.name = req.name) ORDER BY req.name
  ON CONFLICT (name) DO NOTHING
  RETURNING name, fence, expire_at)
SELECT req.name, COALESCE(took.fence, made.fence), COALESCE(took.expire_at, made.expire_at), seen.expire_at,
       (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, seen.fence, seen.beat, seen.watch_ms, seen.released
FROM req LEFT JOIN took ON took.name = req.name LEFT JOIN made ON made.name = req.name
  LEFT JOIN seen ON seen.name = req.name;

-- fragment: lease_acquire_req
(CAST(? AS VARCHAR), CAST(? AS VARCHAR), CAST(? AS BIGINT), CAST(? AS BIGINT))

-- name: lease_take_batch
-- not needed: lease_acquire_batch decides and takes in one statement

-- fragment: lease_take_req
-- not needed: lease_acquire_batch

-- name: lease_release_batch
-- The lock client's coalesced releases (see lease_acquire_batch), each {refs} a
-- lease_release_ref (name, owner, fence), padded with '' names: lease_release for up to 64
-- leases in one statement (the same hand-over to a waiter's next turn, the same NOTIFY per
-- released name, the same commit without a WAL flush). The rows are locked in name order
-- and SKIP LOCKED: a row the client's renewer is extending at that instant is left out, so
-- two batches never wait on each other in a cycle; what is not answered is released alone
-- (lease_release). Answers the released names (the NOTIFY and the commit setting are in the
-- RETURNING list: a data-modifying WITH runs to completion, each row's RETURNING with it).
-- returns: :many name
-- params: refs...
WITH req AS (SELECT * FROM (VALUES {refs*, }) AS v(name, owner, fence) WHERE v.name <> ''),
released AS (
  UPDATE sqlguard_lock l SET
    owner = CASE WHEN (l.next_owner <> '' AND l.min_release_at = 0) THEN l.next_owner ELSE l.owner END,
    fence = CASE WHEN (l.next_owner <> '' AND l.min_release_at = 0) THEN nextval('sqlguard_fence_seq') ELSE l.fence END,
    beat = CASE WHEN (l.next_owner <> '' AND l.min_release_at = 0) THEN 1 ELSE 0 END,
    ttl_ms = CASE WHEN (l.next_owner <> '' AND l.min_release_at = 0) THEN l.next_ttl_ms ELSE l.ttl_ms END,
    expire_at = CASE WHEN (l.next_owner <> '' AND l.min_release_at = 0) THEN (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + l.next_ttl_ms ELSE GREATEST((EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, l.min_release_at) END,
    acquired_at = CASE WHEN (l.next_owner <> '' AND l.min_release_at = 0) THEN (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT ELSE l.acquired_at END,
    renewed_at = CASE WHEN (l.next_owner <> '' AND l.min_release_at = 0) THEN (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT ELSE l.renewed_at END,
    handed = CASE WHEN (l.next_owner <> '' AND l.min_release_at = 0) THEN 1 ELSE 0 END,
    next_since = CASE WHEN (l.next_owner <> '' AND l.min_release_at = 0) THEN 0 ELSE l.next_since END,
    next_owner = CASE WHEN (l.next_owner <> '' AND l.min_release_at = 0) THEN '' ELSE l.next_owner END
  FROM req
  WHERE l.name = req.name AND l.owner = req.owner AND l.fence = req.fence AND l.beat <> 0
    AND l.name IN (SELECT x.name FROM sqlguard_lock x WHERE x.name IN (SELECT r.name FROM req r)
                   ORDER BY x.name FOR UPDATE SKIP LOCKED)
  RETURNING l.name, pg_notify('sqlguard_' || left(encode(sha256(convert_to(l.name, 'UTF8')), 'hex'), 24), '') AS notified,
            set_config('synchronous_commit', 'off', true) AS async_commit)
SELECT name FROM released;

-- fragment: lease_release_ref
(CAST(? AS VARCHAR), CAST(? AS VARCHAR), CAST(? AS BIGINT))

-- name: lease_release_batch_lock
-- not needed: lease_release_batch answers the released rows itself (UPDATE ... RETURNING)

-- name: lease_release_batch_update
-- not needed: lease_release_batch

-- name: lease_wakeup_take_batch
-- not needed: LISTEN/NOTIFY: a holder keeps no wake-up lock

-- name: lease_wakeup_signal_batch
-- not needed: lease_release_batch sends the NOTIFYs

-- fragment: lease_channel_ref
-- not needed: no wake-up locks

-- name: lease_renew_batch_lock
-- not needed: lease_renew_batch answers the renewed rows itself (UPDATE ... RETURNING)

-- name: lease_renew_batch_update
-- not needed: lease_renew_batch answers the renewed rows itself (UPDATE ... RETURNING)

-- name: lease_release
-- Owner- and fence-checked (a stale holder reusing an owner string cannot free a newer
-- lease); the row stays (its fence history is the sequence) and expires now, or at
-- min_release_at when a minimum hold was asked for. The NOTIFY that wakes waiters rides
-- in the same statement (one round trip, one commit; sent only if released), on the
-- channel lease_wakeup_channel(name) computes: 'sqlguard_' + sha256(name)[:24].
-- Run on its own (autocommit; inside a caller's transaction, or asked to be durable,
-- lease_release_flushed runs instead), the release commits WITHOUT waiting for the WAL
-- flush: set_config(..., true) lasts until this statement's own commit. Losing a release in a crash or a failover is
-- the same as a holder that died: the lease runs to its expiry. It never weakens an
-- acquire: the next take-over (a durable commit) comes later in the WAL, so its flush
-- (and its wait for the synchronous standby) covers this release too. One flush per lock
-- cycle instead of two.
-- The next turn (bounded barging, LeaseOptions::barging_limit): when a waiter asked for it
-- (next_owner, lease_next_set) and the holder asked for no minimum hold (min_release_at = 0:
-- the hand-over is decided without a clock, once for every column), the release hands the
-- lease to that waiter in the same statement instead of freeing it: owner = next_owner, a
-- new fence, expire_at = now + next_ttl_ms, beat 1 (held: a dead new owner is taken over
-- like any holder) and handed = 1; the turn is free again. A barger finds it held. A
-- hand-over commits FLUSHED (synchronous_commit as the session has it, not 'off') and its
-- NOTIFY carries the grant, 'turn:<owner>|<fence>|<expire_at>|<ttl_ms>': the turn's owner,
-- woken by it, holds the lease as handed with no statement of its own (a hand-over whose
-- wake-up it missed, or held too late, is confirmed by its next lease_acquire, which takes
-- it with its own fence and expiry).
-- 1 row = released (or handed over).
-- returns: :execrows
-- params: name, owner, fence
WITH released AS (
  UPDATE sqlguard_lock SET
    owner = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN next_owner ELSE owner END,
    fence = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN nextval('sqlguard_fence_seq') ELSE fence END,
    beat = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN 1 ELSE 0 END,
    ttl_ms = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN next_ttl_ms ELSE ttl_ms END,
    expire_at = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + next_ttl_ms ELSE GREATEST((EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, min_release_at) END,
    acquired_at = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT ELSE acquired_at END,
    renewed_at = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT ELSE renewed_at END,
    handed = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN 1 ELSE 0 END,
    next_since = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN 0 ELSE next_since END,
    next_owner = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN '' ELSE next_owner END
  WHERE name = ? AND owner = ? AND fence = ? AND beat <> 0
  RETURNING name, owner, fence, expire_at, ttl_ms, handed)
SELECT pg_notify('sqlguard_' || left(encode(sha256(convert_to(name, 'UTF8')), 'hex'), 24),
                 CASE WHEN handed = 1 THEN 'turn:' || owner || '|' || fence || '|' || expire_at || '|' || ttl_ms ELSE '' END),
       set_config('synchronous_commit', CASE WHEN handed = 1 THEN current_setting('synchronous_commit') ELSE 'off' END, true)
FROM released;

-- name: lease_release_flushed
-- lease_release whose commit is flushed like every other commit of the session: it leaves
-- synchronous_commit alone. Runs inside a caller's transaction (the caller's own writes
-- commit with it) and for a release asked to be durable (ReleaseCommit::kDurable: two
-- flushes per lock cycle, the acquire's and the release's).
-- returns: :execrows
-- params: name, owner, fence
WITH released AS (
  UPDATE sqlguard_lock SET
    owner = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN next_owner ELSE owner END,
    fence = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN nextval('sqlguard_fence_seq') ELSE fence END,
    beat = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN 1 ELSE 0 END,
    ttl_ms = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN next_ttl_ms ELSE ttl_ms END,
    expire_at = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + next_ttl_ms ELSE GREATEST((EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, min_release_at) END,
    acquired_at = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT ELSE acquired_at END,
    renewed_at = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT ELSE renewed_at END,
    handed = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN 1 ELSE 0 END,
    next_since = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN 0 ELSE next_since END,
    next_owner = CASE WHEN (next_owner <> '' AND min_release_at = 0) THEN '' ELSE next_owner END
  WHERE name = ? AND owner = ? AND fence = ? AND beat <> 0
  RETURNING name, owner, fence, expire_at, ttl_ms, handed)
SELECT pg_notify('sqlguard_' || left(encode(sha256(convert_to(name, 'UTF8')), 'hex'), 24),
                 CASE WHEN handed = 1 THEN 'turn:' || owner || '|' || fence || '|' || expire_at || '|' || ttl_ms ELSE '' END)
FROM released;

-- name: lease_release_fair
-- A fair lease's release (LeaseOptions::fair): lease_release that also removes the queue
-- place the holder was acquired from (ticket, place_owner; an empty place_owner: none) in the
-- same commit and GRANTS the lease to the queue's next place (the lowest other live place,
-- whatever its expiry says, locked FOR UPDATE so a waiter leaving at that moment either left
-- before, or finds the grant: fair_leave) in the same statement: owner = that place's owner
-- token, a new fence, expire_at = now + the lease's ttl_ms, beat 1, handed = 1. The woken
-- waiter holds it without a statement of its own (one round trip and one commit less per
-- hand-off); its trust window starts before the grant (its place's last renewal), and where
-- that leaves it less than half a ttl it confirms by a take (lease_acquire: owner = turn_owner
-- AND handed = 1). Not when the holder asked for a minimum hold (min_release_at <> 0: the
-- lease stays its until then) or the row has no ttl_ms (written by an older sqlguard): then
-- released as before, and the next waiter takes it.
-- The NOTIFY carries the next ticket as its payload, 'ticket:place owner', and when granted
-- '|fence|expire_at|ttl_ms' after it; the lock client's listener wakes only the waiter holding
-- that ticket. The same NOTIFY goes to that ticket's own channel ('<channel>_<ticket>', where
-- this version's fair waiters listen: no other waiter's session hears it); with nobody waiting,
-- to the channel of the ticket the next join will draw (the name's version + 1: a waiter
-- joining while this release runs, whose place this statement cannot see, is still woken).
-- A release that only releases commits without waiting for the WAL flush (as lease_release);
-- one that grants is an acquisition and commits flushed (the session's synchronous_commit).
-- 1 row = released (or granted).
-- returns: :execrows
-- params: name, ticket, name, owner, fence, name, ticket, place_owner, name
WITH nxt AS (
  SELECT q.ticket, q.owner FROM sqlguard_lock_queue q
  WHERE q.name = ? AND q.ticket <> ? AND q.beat <> 0
  ORDER BY q.ticket LIMIT 1 FOR UPDATE),
released AS (
  UPDATE sqlguard_lock l SET
    owner = CASE WHEN n.owner IS NOT NULL AND l.min_release_at = 0 AND l.ttl_ms > 0 THEN n.owner ELSE l.owner END,
    fence = CASE WHEN n.owner IS NOT NULL AND l.min_release_at = 0 AND l.ttl_ms > 0 THEN nextval('sqlguard_fence_seq') ELSE l.fence END,
    beat = CASE WHEN n.owner IS NOT NULL AND l.min_release_at = 0 AND l.ttl_ms > 0 THEN 1 ELSE 0 END,
    expire_at = CASE WHEN n.owner IS NOT NULL AND l.min_release_at = 0 AND l.ttl_ms > 0 THEN (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + l.ttl_ms ELSE GREATEST((EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, l.min_release_at) END,
    acquired_at = CASE WHEN n.owner IS NOT NULL AND l.min_release_at = 0 AND l.ttl_ms > 0 THEN (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT ELSE l.acquired_at END,
    renewed_at = CASE WHEN n.owner IS NOT NULL AND l.min_release_at = 0 AND l.ttl_ms > 0 THEN (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT ELSE l.renewed_at END,
    handed = CASE WHEN n.owner IS NOT NULL AND l.min_release_at = 0 AND l.ttl_ms > 0 THEN 1 ELSE 0 END
  FROM (SELECT 1) AS one LEFT JOIN nxt n ON true
  WHERE l.name = ? AND l.owner = ? AND l.fence = ? AND l.beat <> 0
  RETURNING l.name, l.handed AS granted, l.fence, l.expire_at, l.ttl_ms, n.ticket, n.owner AS next_owner),
left_place AS (
  DELETE FROM sqlguard_lock_queue WHERE name = ? AND ticket = ? AND owner = ?)
SELECT pg_notify(w.channel, w.payload), pg_notify(w.channel || '_' || w.next_ticket::TEXT, w.payload),
       set_config('synchronous_commit', CASE WHEN w.granted = 1 THEN current_setting('synchronous_commit') ELSE 'off' END, true)
FROM (SELECT 'sqlguard_' || left(encode(sha256(convert_to(r.name, 'UTF8')), 'hex'), 24) AS channel,
             COALESCE(r.ticket::TEXT || ':' || r.next_owner ||
                      CASE WHEN r.granted = 1 THEN '|' || r.fence::TEXT || '|' || r.expire_at::TEXT || '|' || r.ttl_ms::TEXT ELSE '' END, '') AS payload,
             COALESCE(r.ticket, (SELECT s.version + 1 FROM sqlguard_sync s WHERE s.name = ?), 0) AS next_ticket,
             r.granted
      FROM released r) w;

-- name: lease_release_fair_flushed
-- lease_release_fair whose commit is flushed like every other commit of the session, granting
-- or not (inside a caller's transaction, or ReleaseCommit::kDurable), as lease_release_flushed.
-- returns: :execrows
-- params: name, ticket, name, owner, fence, name, ticket, place_owner, name
WITH nxt AS (
  SELECT q.ticket, q.owner FROM sqlguard_lock_queue q
  WHERE q.name = ? AND q.ticket <> ? AND q.beat <> 0
  ORDER BY q.ticket LIMIT 1 FOR UPDATE),
released AS (
  UPDATE sqlguard_lock l SET
    owner = CASE WHEN n.owner IS NOT NULL AND l.min_release_at = 0 AND l.ttl_ms > 0 THEN n.owner ELSE l.owner END,
    fence = CASE WHEN n.owner IS NOT NULL AND l.min_release_at = 0 AND l.ttl_ms > 0 THEN nextval('sqlguard_fence_seq') ELSE l.fence END,
    beat = CASE WHEN n.owner IS NOT NULL AND l.min_release_at = 0 AND l.ttl_ms > 0 THEN 1 ELSE 0 END,
    expire_at = CASE WHEN n.owner IS NOT NULL AND l.min_release_at = 0 AND l.ttl_ms > 0 THEN (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + l.ttl_ms ELSE GREATEST((EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, l.min_release_at) END,
    acquired_at = CASE WHEN n.owner IS NOT NULL AND l.min_release_at = 0 AND l.ttl_ms > 0 THEN (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT ELSE l.acquired_at END,
    renewed_at = CASE WHEN n.owner IS NOT NULL AND l.min_release_at = 0 AND l.ttl_ms > 0 THEN (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT ELSE l.renewed_at END,
    handed = CASE WHEN n.owner IS NOT NULL AND l.min_release_at = 0 AND l.ttl_ms > 0 THEN 1 ELSE 0 END
  FROM (SELECT 1) AS one LEFT JOIN nxt n ON true
  WHERE l.name = ? AND l.owner = ? AND l.fence = ? AND l.beat <> 0
  RETURNING l.name, l.handed AS granted, l.fence, l.expire_at, l.ttl_ms, n.ticket, n.owner AS next_owner),
left_place AS (
  DELETE FROM sqlguard_lock_queue WHERE name = ? AND ticket = ? AND owner = ?)
SELECT pg_notify(w.channel, w.payload), pg_notify(w.channel || '_' || w.next_ticket::TEXT, w.payload)
FROM (SELECT 'sqlguard_' || left(encode(sha256(convert_to(r.name, 'UTF8')), 'hex'), 24) AS channel,
             COALESCE(r.ticket::TEXT || ':' || r.next_owner ||
                      CASE WHEN r.granted = 1 THEN '|' || r.fence::TEXT || '|' || r.expire_at::TEXT || '|' || r.ttl_ms::TEXT ELSE '' END, '') AS payload,
             COALESCE(r.ticket, (SELECT s.version + 1 FROM sqlguard_sync s WHERE s.name = ?), 0) AS next_ticket
      FROM released r) w;

-- name: lease_release_fair_place
-- not needed: lease_release_fair deletes the place in its own statement (a data-modifying CTE)

-- name: lease_force_release
-- Never a name a semaphore or read-write lease reserved (owner '': sync_reserve_name).
-- Operator override: ends whoever's lease now, IGNORING min_release_at (the minimum hold);
-- wakes waiters like lease_release. 1 row = ended.
-- returns: :execrows
-- params: name
WITH ended AS (
  UPDATE sqlguard_lock SET beat = 0, min_release_at = 0, expire_at = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, next_owner = '', next_since = 0, handed = 0 WHERE name = ? AND owner <> '' AND (beat <> 0 OR min_release_at > (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT)
  RETURNING name)
SELECT pg_notify('sqlguard_' || left(encode(sha256(convert_to(name, 'UTF8')), 'hex'), 24), '') FROM ended;

-- name: lease_list_held
-- Leases only: a name a semaphore or read-write lease reserved (owner '', sync_reserve_name)
-- is listed with its holdings (sync_list_held).
-- returns: :many name, owner, fence, expire_at, acquired_at, renewed_at, db_now_ms
-- params: 
SELECT name, owner, fence, expire_at, acquired_at, renewed_at, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT
FROM sqlguard_lock WHERE owner <> '' AND expire_at > (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT ORDER BY name;

-- name: lease_list_all
-- Leases only: a name a semaphore or read-write lease reserved (owner '', sync_reserve_name)
-- is listed with its holdings (sync_list_held).
-- returns: :many name, owner, fence, expire_at, acquired_at, renewed_at, db_now_ms
-- params: 
SELECT name, owner, fence, expire_at, acquired_at, renewed_at, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT
FROM sqlguard_lock WHERE owner <> '' ORDER BY name;

-- name: lease_guard_check
-- Re-verifies the lease inside a guarded transaction and row-locks it until commit, so
-- no take-over can commit in between.
-- returns: :execrows
-- params: name, owner, fence
SELECT fence FROM sqlguard_lock WHERE name = ? AND owner = ? AND fence = ? AND beat <> 0 FOR UPDATE;

-- name: fenced_ensure
-- Creates the resource's fence row if it is missing.
-- returns: :execrows
-- params: resource
INSERT INTO sqlguard_fenced_resource (resource, fence, updated_at) VALUES (?, 0, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT)
ON CONFLICT DO NOTHING;

-- name: fenced_update
-- 1 row affected = the write carries a fence at least as new as any seen before.
-- returns: :execrows
-- params: fence, resource, fence
UPDATE sqlguard_fenced_resource SET fence = ?, updated_at = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT
WHERE resource = ? AND fence <= ?;

-- name: lock_purge
-- cleanup(): one bounded batch of rows RELEASED longer than grace_ms ago. An unreleased row
-- is never deleted on the database clock (a forward step would end a live lease): the next
-- acquirer takes it over after watching it (see the head of this file).
-- returns: :execrows
-- params: grace_ms, batch
DELETE FROM sqlguard_lock WHERE name IN (SELECT name FROM sqlguard_lock WHERE beat = 0 AND expire_at < (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT - ? LIMIT ?);

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
ON CONFLICT (name, watcher) DO UPDATE SET fence = EXCLUDED.fence, beat = EXCLUDED.beat, expire_at = EXCLUDED.expire_at,
  first_seen_ms = EXCLUDED.first_seen_ms;

-- name: lease_watch_purge
-- cleanup(): one bounded batch of sightings of a lease that has changed since (renewed,
-- released, taken over or deleted): no later take-over can use them.
-- returns: :execrows
-- params: batch
DELETE FROM sqlguard_lock_watch WHERE (name, watcher) IN (
  SELECT w.name, w.watcher FROM sqlguard_lock_watch w LEFT JOIN sqlguard_lock l ON l.name = w.name
  WHERE l.name IS NULL OR l.fence <> w.fence OR l.beat <> w.beat OR l.expire_at <> w.expire_at LIMIT ?);

-- name: lease_wakeup_signal
-- not needed: LISTEN/NOTIFY: lease_release sends the NOTIFY

-- name: lease_wakeup_wait
-- not needed: LISTEN/NOTIFY: lease_release sends the NOTIFY

-- name: lease_wakeup_pass
-- not needed: the lock client LISTENs (lease_release sends the NOTIFY)

-- name: lease_queue_leave
-- The waiters of one lease take turns: the waiter holding a session advisory lock (class
-- 1397836871 = 'SQLG', key hashtext(channel); taken by lease_acquire with queue_role 'join')
-- is the head, the only one that LISTENs, is woken by the release's NOTIFY and tries at
-- once; the others poll (naps sized to the holder's lease) and try for the head's place in the same
-- statement. A release thus wakes one waiter instead of all of them: PostgreSQL signals
-- EVERY listening backend of the database on each NOTIFY, whatever its channel, so each
-- extra listener costs every lock cycle. A head that dies leaves with its session.
-- This statement: the head gave up waiting; another waiter may become the head.
-- returns: :one left_queue
-- params: channel
SELECT pg_advisory_unlock(1397836871, hashtext(?));

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
-- decided again on the row as it is). A hint for the next release, not a lock. Its commit
-- does not wait for the WAL flush (lost in a crash, the waiter asks again). SKIP LOCKED: never
-- queues behind the holder's release on the row lock.
-- 1 row = the turn is the caller's.
-- returns: :execrows
-- params: owner, since, ttl_ms, name, owner, owner, since, since, owner
WITH asked AS (
  UPDATE sqlguard_lock SET next_owner = ?, next_since = ?, next_ttl_ms = ?
  WHERE name = (SELECT name FROM sqlguard_lock
                WHERE name = ? AND beat <> 0 AND owner <> '' AND owner <> ? AND next_owner <> ?
                  AND (next_owner = '' OR next_since > ? OR (next_since = ? AND next_owner > ?))
                FOR UPDATE SKIP LOCKED)
  RETURNING name)
SELECT set_config('synchronous_commit', 'off', true) FROM asked;

-- name: lease_next_drop
-- A waiter that asked for the next turn gives up (its wait ended or was cancelled): the turn
-- goes, and a lease a release already handed to it (handed = 1) is released, waking the
-- waiters.
-- 1 row = it had the turn or the lease.
-- returns: :execrows
-- params: owner, owner, owner, owner, owner, name, owner, owner
WITH dropped AS (
  UPDATE sqlguard_lock SET beat = CASE WHEN owner = ? AND handed = 1 THEN 0 ELSE beat END,
    expire_at = CASE WHEN owner = ? AND handed = 1 THEN (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT ELSE expire_at END,
    handed = CASE WHEN owner = ? THEN 0 ELSE handed END,
    next_since = CASE WHEN next_owner = ? THEN 0 ELSE next_since END,
    next_owner = CASE WHEN next_owner = ? THEN '' ELSE next_owner END
  WHERE name = ? AND (next_owner = ? OR (owner = ? AND handed = 1 AND beat <> 0))
  RETURNING name, beat)
SELECT CASE WHEN beat = 0 THEN pg_notify('sqlguard_' || left(encode(sha256(convert_to(name, 'UTF8')), 'hex'), 24), '') END
FROM dropped;
