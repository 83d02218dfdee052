-- sql/postgresql/history.sql — PostgreSQL 15. The grant history (include/sqlguard/history.h,
-- docs/history.md; tables: migrations/postgresql/0015_grant_history.sql).
-- Recording is done by row triggers on sqlguard_lock (leases, default and fair) and
-- sqlguard_sync_holder (semaphore permits, shared and exclusive holdings), installed by
-- enable_history() and dropped with the last scope, so a database without a scope pays
-- nothing. A trigger runs in the lock statement's own transaction: the event commits or rolls
-- back with it. Only the writes that change who holds (a grant, a hand-over, a take-over, a
-- delete) and a renewal that came after its own expiry are events: the function's first test
-- returns at once for the others (a release, a renewal on time). The triggers have no WHEN
-- clause: PostgreSQL parses and plans a trigger's WHEN for every statement on the table, which
-- measured costlier (about 11 us a statement on this VM for the lease update's) than calling the
-- function for every row and testing there (about 1.5 us a row).
-- A release is recorded with the write that ends its released row, not by a row of its own
-- (one event per lock cycle, not two): the next grant of the name (its prev_* fields are the
-- released holding, prev_until_ms its release time: a release sets expire_at to it), or the
-- purge that deletes the released row (cleanup(); a semaphore's or read-write lease's next
-- acquire), as a `release` event timed at the release. A released row is never written again
-- before one of those, so no release goes unrecorded.
-- Events of a lease row:
--   UPDATE, fence changed, held:  grant (over a released row: its release) | handover (a release
--                                 that granted the next waiter: handed = 1) | confirm (a handed row
--                                 taken with the waiter's own token) | takeover (an unreleased
--                                 holding replaced)
--   UPDATE, same fence, renewed after expire_at: renew_gap
--   DELETE: release (a released row purged) | delete (an unreleased row deleted by an operator)
-- Reservation rows of semaphores and read-write leases (owner '') are never recorded.

-- name: history_lock_function
-- The event test first (plpgsql evaluates it without the executor), then the retention of the
-- scopes that cover the name: {retain_new} / {retain_old} is one history_scope_retain_* fragment
-- per scope, longest retention first (enable_history() / disable_history() rewrite the function
-- whenever the scopes change, under the migration lock, in the scope row's transaction), then
-- one INSERT ... VALUES. Measured (perf, lease-distinct at 16 clients): with the scopes read
-- from sqlguard_history_scope the INSERT ... SELECT's executor start-up (a join, an aggregate, a
-- scan) was about 40% of the trigger's statement time.
-- returns: :exec
-- params: 
CREATE OR REPLACE FUNCTION sqlguard_history_lock() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  keep BIGINT;
  now_ms BIGINT;
BEGIN
  -- Every return is NEW: the UPDATE triggers fire BEFORE the update (NULL would skip it); the
  -- INSERT and DELETE ones fire after (their result is unused; NEW is NULL for a DELETE).
  IF TG_OP = 'UPDATE' THEN
    -- An event: a new fence on a held row, or a renewal after its own expiry.
    IF NEW.owner = '' OR NEW.beat = 0 OR (NEW.fence = OLD.fence AND (OLD.beat = 0 OR NEW.beat = OLD.beat OR NEW.renewed_at <= OLD.expire_at)) THEN
      RETURN NEW;
    END IF;
    keep := CASE {retain_new* } END;
  ELSIF TG_OP = 'INSERT' THEN
    IF NEW.owner = '' OR NEW.beat = 0 THEN  -- a row inserted released: no holder
      RETURN NEW;
    END IF;
    keep := CASE {retain_new* } END;
  ELSE
    IF OLD.owner = '' THEN  -- a semaphore's or read-write lease's reservation row
      RETURN NEW;
    END IF;
    keep := CASE {retain_old* } END;
  END IF;
  IF keep IS NULL THEN  -- no scope covers the name
    RETURN NEW;
  END IF;
  now_ms := (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT;
  IF TG_OP = 'UPDATE' THEN
    INSERT INTO sqlguard_history (name, at_ms, event, kind, mode, slot, owner, fence, permits, capacity, until_ms, prev_owner, prev_fence, prev_until_ms, prev_ttl_ms, keep_until)
    VALUES (NEW.name, now_ms, CASE WHEN NEW.fence = OLD.fence THEN 'renew_gap' WHEN OLD.beat = 0 OR OLD.owner = '' THEN 'grant'
                                  WHEN NEW.handed = 1 THEN 'handover' WHEN OLD.handed = 1 THEN 'confirm' ELSE 'takeover' END,
            'lease', 'X', 0, NEW.owner, NEW.fence, 1, 1, NEW.expire_at, OLD.owner, OLD.fence, OLD.expire_at, CASE WHEN OLD.ttl_ms > 0 THEN OLD.ttl_ms ELSE GREATEST(OLD.expire_at - OLD.renewed_at, 0) END, now_ms + keep);
  ELSIF TG_OP = 'INSERT' THEN
    INSERT INTO sqlguard_history (name, at_ms, event, kind, mode, slot, owner, fence, permits, capacity, until_ms, prev_owner, prev_fence, prev_until_ms, prev_ttl_ms, keep_until)
    VALUES (NEW.name, now_ms, 'grant', 'lease', 'X', 0, NEW.owner, NEW.fence, 1, 1, NEW.expire_at, '', 0, 0, 0, now_ms + keep);
  ELSE
    INSERT INTO sqlguard_history (name, at_ms, event, kind, mode, slot, owner, fence, permits, capacity, until_ms, prev_owner, prev_fence, prev_until_ms, prev_ttl_ms, keep_until)
    VALUES (OLD.name, CASE WHEN OLD.beat = 0 THEN OLD.expire_at ELSE now_ms END, CASE WHEN OLD.beat = 0 THEN 'release' ELSE 'delete' END,
            'lease', 'X', 0, OLD.owner, OLD.fence, 1, 1, OLD.expire_at, OLD.owner, OLD.fence, OLD.expire_at, CASE WHEN OLD.ttl_ms > 0 THEN OLD.ttl_ms ELSE GREATEST(OLD.expire_at - OLD.renewed_at, 0) END, now_ms + keep);
  END IF;
  RETURN NEW;
END
$fn$

-- name: history_holder_function
-- As history_lock_function. A holding's kind and a semaphore's permits come from its head
-- (sqlguard_sync), which the acquire that inserts the holding has just written in the same
-- transaction.
-- returns: :exec
-- params: 
CREATE OR REPLACE FUNCTION sqlguard_history_holder() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  keep BIGINT;
  now_ms BIGINT;
BEGIN
  -- Every return is NEW: the UPDATE triggers fire BEFORE the update (NULL would skip it); the
  -- INSERT and DELETE ones fire after (their result is unused; NEW is NULL for a DELETE).
  IF TG_OP = 'UPDATE' THEN
    -- An event only when renewed after its own expiry.
    IF NEW.beat = 0 OR OLD.beat = 0 OR NEW.beat = OLD.beat OR NEW.renewed_at <= OLD.expire_at THEN
      RETURN NEW;
    END IF;
    keep := CASE {retain_new* } END;
  ELSIF TG_OP = 'INSERT' THEN
    keep := CASE {retain_new* } END;
  ELSE
    keep := CASE {retain_old* } END;
  END IF;
  IF keep IS NULL THEN  -- no scope covers the name
    RETURN NEW;
  END IF;
  now_ms := (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT;
  IF TG_OP = 'UPDATE' THEN
    INSERT INTO sqlguard_history (name, at_ms, event, kind, mode, slot, owner, fence, permits, capacity, until_ms, prev_owner, prev_fence, prev_until_ms, prev_ttl_ms, keep_until)
    VALUES (NEW.name, now_ms, 'renew_gap', COALESCE((SELECT s.kind FROM sqlguard_sync s WHERE s.name = NEW.name), ''), NEW.mode, NEW.slot, NEW.owner, NEW.fence, NEW.permits,
            COALESCE((SELECT CASE WHEN s.kind = 'semaphore' THEN s.permits ELSE 1 END FROM sqlguard_sync s WHERE s.name = NEW.name), 0), NEW.expire_at, OLD.owner, OLD.fence, OLD.expire_at, CASE WHEN OLD.ttl_ms > 0 THEN OLD.ttl_ms ELSE GREATEST(OLD.expire_at - OLD.renewed_at, 0) END, now_ms + keep);
  ELSIF TG_OP = 'INSERT' THEN
    INSERT INTO sqlguard_history (name, at_ms, event, kind, mode, slot, owner, fence, permits, capacity, until_ms, prev_owner, prev_fence, prev_until_ms, prev_ttl_ms, keep_until)
    VALUES (NEW.name, now_ms, 'grant', COALESCE((SELECT s.kind FROM sqlguard_sync s WHERE s.name = NEW.name), ''), NEW.mode, NEW.slot, NEW.owner, NEW.fence, NEW.permits,
            COALESCE((SELECT CASE WHEN s.kind = 'semaphore' THEN s.permits ELSE 1 END FROM sqlguard_sync s WHERE s.name = NEW.name), 0), NEW.expire_at, '', 0, 0, 0, now_ms + keep);
  ELSE
    INSERT INTO sqlguard_history (name, at_ms, event, kind, mode, slot, owner, fence, permits, capacity, until_ms, prev_owner, prev_fence, prev_until_ms, prev_ttl_ms, keep_until)
    VALUES (OLD.name, CASE WHEN OLD.beat = 0 THEN OLD.expire_at ELSE now_ms END, CASE WHEN OLD.beat = 0 THEN 'release' ELSE 'takeover' END,
            COALESCE((SELECT s.kind FROM sqlguard_sync s WHERE s.name = OLD.name), ''), OLD.mode, OLD.slot, OLD.owner, OLD.fence, OLD.permits,
            COALESCE((SELECT CASE WHEN s.kind = 'semaphore' THEN s.permits ELSE 1 END FROM sqlguard_sync s WHERE s.name = OLD.name), 0), OLD.expire_at, OLD.owner, OLD.fence, OLD.expire_at, CASE WHEN OLD.ttl_ms > 0 THEN OLD.ttl_ms ELSE GREATEST(OLD.expire_at - OLD.renewed_at, 0) END, now_ms + keep);
  END IF;
  RETURN NEW;
END
$fn$

-- name: history_lock_insert_trigger
-- returns: :exec
-- params: 
CREATE OR REPLACE TRIGGER sqlguard_history_lock_ins AFTER INSERT ON sqlguard_lock FOR EACH ROW
EXECUTE FUNCTION sqlguard_history_lock()

-- name: history_lock_update_trigger
-- BEFORE: the row is locked (its latest version, rechecked against the statement's WHERE)
-- before a BEFORE ROW trigger runs, so the update then happens or the transaction fails with
-- it; an AFTER trigger's event is queued and both row versions fetched again at the end of
-- the statement (measured: a fifth of the trigger's cost per lock cycle). Not for INSERT: a
-- BEFORE INSERT trigger fires for an INSERT ... ON CONFLICT that turns into an update.
-- returns: :exec
-- params: 
CREATE OR REPLACE TRIGGER sqlguard_history_lock_upd BEFORE UPDATE ON sqlguard_lock FOR EACH ROW
EXECUTE FUNCTION sqlguard_history_lock()

-- name: history_lock_delete_trigger
-- returns: :exec
-- params: 
CREATE OR REPLACE TRIGGER sqlguard_history_lock_del AFTER DELETE ON sqlguard_lock FOR EACH ROW
EXECUTE FUNCTION sqlguard_history_lock()

-- name: history_holder_insert_trigger
-- returns: :exec
-- params: 
CREATE OR REPLACE TRIGGER sqlguard_history_holder_ins AFTER INSERT ON sqlguard_sync_holder FOR EACH ROW
EXECUTE FUNCTION sqlguard_history_holder()

-- name: history_holder_update_trigger
-- returns: :exec
-- params: 
CREATE OR REPLACE TRIGGER sqlguard_history_holder_upd BEFORE UPDATE ON sqlguard_sync_holder FOR EACH ROW
EXECUTE FUNCTION sqlguard_history_holder()

-- name: history_holder_delete_trigger
-- A released holding purged (its release, timed at it) or an unreleased one deleted: a
-- take-over (sync_take_slot) or an operator's delete.
-- returns: :exec
-- params: 
CREATE OR REPLACE TRIGGER sqlguard_history_holder_del AFTER DELETE ON sqlguard_sync_holder FOR EACH ROW
EXECUTE FUNCTION sqlguard_history_holder()

-- fragment: history_scope_retain_new
-- One scope written into the functions: its prefix as UTF-8 bytes (hex, through decode(): no
-- backslash, so standard_conforming_strings cannot change what it reads) and its retention in
-- ms. The list is ordered longest retention first, so the CASE answers the longest of the
-- scopes that cover the name (NULL: none, nothing recorded).
WHEN starts_with(NEW.name, convert_from(decode('{%prefix}', 'hex'), 'UTF8')) THEN {#retain_ms}

-- fragment: history_scope_retain_old
-- The same for a deleted row.
WHEN starts_with(OLD.name, convert_from(decode('{%prefix}', 'hex'), 'UTF8')) THEN {#retain_ms}

-- name: history_drop_lock_function
-- Drops the three sqlguard_lock triggers with it.
-- returns: :exec
-- params: 
DROP FUNCTION IF EXISTS sqlguard_history_lock() CASCADE

-- name: history_drop_holder_function
-- returns: :exec
-- params: 
DROP FUNCTION IF EXISTS sqlguard_history_holder() CASCADE

-- name: history_drop_lock_insert_trigger
-- not needed: history_drop_lock_function drops it (CASCADE)

-- name: history_drop_lock_update_trigger
-- not needed: history_drop_lock_function drops it (CASCADE)

-- name: history_drop_lock_delete_trigger
-- not needed: history_drop_lock_function drops it (CASCADE)

-- name: history_drop_holder_insert_trigger
-- not needed: history_drop_holder_function drops it (CASCADE)

-- name: history_drop_holder_update_trigger
-- not needed: history_drop_holder_function drops it (CASCADE)

-- name: history_drop_holder_delete_trigger
-- not needed: history_drop_holder_function drops it (CASCADE)

-- name: history_scope_set
-- A new scope, or a new retention for one (its since_ms stays).
-- returns: :execrows
-- params: prefix, retain_ms
INSERT INTO sqlguard_history_scope (prefix, retain_ms, since_ms) VALUES (?, ?, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT)
ON CONFLICT (prefix) DO UPDATE SET retain_ms = EXCLUDED.retain_ms

-- name: history_scope_drop
-- returns: :execrows
-- params: prefix
DELETE FROM sqlguard_history_scope WHERE prefix = ?

-- name: history_scopes
-- returns: :many prefix, retain_ms, since_ms
-- params: 
SELECT prefix, retain_ms, since_ms FROM sqlguard_history_scope ORDER BY prefix

-- name: history_read
-- One page of the record, in id order (a name's events in the order of its writes), of the
-- names starting with a prefix ('' = all), from an id on and no older than since_ms.
-- returns: :many id, name, at_ms, event, kind, mode, slot, owner, fence, permits, capacity, until_ms, prev_owner, prev_fence, prev_until_ms, prev_ttl_ms
-- params: prefix, prefix, after_id, since_ms, limit
SELECT id, name, at_ms, event, kind, mode, slot, owner, fence, permits, capacity, until_ms, prev_owner, prev_fence, prev_until_ms, prev_ttl_ms
FROM sqlguard_history WHERE substr(name, 1, length(CAST(? AS VARCHAR))) = ? AND id > ? AND at_ms >= ? ORDER BY id LIMIT ?

-- name: history_read_name
-- One name's page (index sqlguard_history_name).
-- returns: :many id, name, at_ms, event, kind, mode, slot, owner, fence, permits, capacity, until_ms, prev_owner, prev_fence, prev_until_ms, prev_ttl_ms
-- params: name, after_id, since_ms, limit
SELECT id, name, at_ms, event, kind, mode, slot, owner, fence, permits, capacity, until_ms, prev_owner, prev_fence, prev_until_ms, prev_ttl_ms
FROM sqlguard_history WHERE name = ? AND id > ? AND at_ms >= ? ORDER BY id LIMIT ?

-- name: history_any
-- cleanup(): whether the history table has a row at all (none: no purge and no write; a
-- database that never recorded pays one key read).
-- returns: :one id
-- params: 
SELECT id FROM sqlguard_history LIMIT 1

-- name: history_purge
-- cleanup(): one bounded batch of rows past their scope's retention (keep_until), oldest first
-- (by the key: no index on keep_until, the oldest rows expire first).
-- returns: :execrows
-- params: batch
DELETE FROM sqlguard_history WHERE id IN (SELECT id FROM sqlguard_history WHERE keep_until < (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT ORDER BY id LIMIT ?)

-- name: history_ddl_lock_timeout
-- The trigger DDL runs in one transaction (all installed or none, with its scope row) that
-- waits at most 2 s for the tables' locks: CREATE TRIGGER takes SHARE ROW EXCLUSIVE on the
-- table, DROP FUNCTION ... CASCADE ACCESS EXCLUSIVE, and a transaction holding their rows (a
-- guarded transaction) would otherwise hold it up, and every lock statement queued behind it,
-- for as long as it runs. It fails instead (55P03: LockBusy).
-- returns: :exec
-- params: 
SET LOCAL lock_timeout = '2s'
