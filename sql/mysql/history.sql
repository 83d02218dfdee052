-- sql/mysql/history.sql — MariaDB 10.11 (mysql-connector-c++ 1.1). The grant history
-- (include/sqlguard/history.h, docs/history.md; tables: migrations/mysql/0015_grant_history.sql).
-- Recording is done by row triggers on sqlguard_lock (leases, default and fair) and
-- sqlguard_sync_holder (semaphore permits, shared and exclusive holdings), installed by
-- enable_history() and dropped with the last scope, so a database without a scope pays
-- nothing. A trigger runs in the lock statement's own transaction: the event commits or rolls
-- back with it (on Galera it is certified and replicated with it; appliers apply its rows and
-- fire no trigger). Each trigger body is one IF: only the writes that change who holds (a grant,
-- a hand-over, a take-over, a delete) and a renewal that came after its own expiry, of a name
-- some scope covers, insert a row (INSERT ... VALUES); a release or a renewal on time costs the
-- test alone. The scopes are written into the trigger ({retain}: one history_scope_retain_*
-- fragment per scope, prefix as hex bytes, retention as digits), not read from
-- sqlguard_history_scope: any table a trigger reads costs about 20 us a call here (measured),
-- and every statement on the lock tables opens the tables its triggers name. enable_history()
-- and disable_history() therefore rewrite the triggers from the scope table whenever it changes,
-- under the migration lock (a row: cluster-wide on Galera, where GET_LOCK is node-local), the
-- triggers before a new scope's row (CREATE OR REPLACE swaps a trigger under the table's
-- metadata lock: no write goes unrecorded in between). NOW(3) is the triggering statement's
-- time, as in the lock statement's own expire_at.
-- DDL waits at most 2 s for the tables' metadata lock (lock_wait_timeout, default a year): a
-- transaction holding their rows (a guarded transaction) would otherwise hold it up, and every
-- lock statement queued behind it, for as long as it runs. It fails instead (1205: LockBusy).
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

-- name: history_lock_insert_trigger
-- returns: :exec
-- params: 
SET STATEMENT lock_wait_timeout = 2 FOR CREATE OR REPLACE TRIGGER sqlguard_history_lock_ins AFTER INSERT ON sqlguard_lock FOR EACH ROW
IF NEW.owner <> '' AND NEW.beat <> 0 AND (CASE {retain_new* } END) IS NOT NULL THEN
  INSERT INTO sqlguard_history (name, at_ms, event, kind, mode, slot, owner, fence, permits, capacity, until_ms, prev_owner, prev_fence, prev_until_ms, prev_ttl_ms, keep_until)
  VALUES (NEW.name, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), 'grant', 'lease', 'X', 0, NEW.owner, NEW.fence, 1, 1, NEW.expire_at, '', 0, 0, 0, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + (CASE {retain_new* } END));
END IF

-- name: history_lock_update_trigger
-- An event: a new fence on a held row, or a renewal after its own expiry (renew_gap).
-- returns: :exec
-- params: 
SET STATEMENT lock_wait_timeout = 2 FOR CREATE OR REPLACE TRIGGER sqlguard_history_lock_upd AFTER UPDATE ON sqlguard_lock FOR EACH ROW
IF NEW.owner <> '' AND NEW.beat <> 0
   AND (NEW.fence <> OLD.fence OR (OLD.beat <> 0 AND NEW.beat <> OLD.beat AND NEW.renewed_at > OLD.expire_at))
   AND (CASE {retain_new* } END) IS NOT NULL THEN
  INSERT INTO sqlguard_history (name, at_ms, event, kind, mode, slot, owner, fence, permits, capacity, until_ms, prev_owner, prev_fence, prev_until_ms, prev_ttl_ms, keep_until)
  VALUES (NEW.name, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), CASE WHEN NEW.fence = OLD.fence THEN 'renew_gap' WHEN OLD.beat = 0 OR OLD.owner = '' THEN 'grant' WHEN NEW.handed = 1 THEN 'handover' WHEN OLD.handed = 1 THEN 'confirm' ELSE 'takeover' END,
          'lease', 'X', 0, NEW.owner, NEW.fence, 1, 1, NEW.expire_at, OLD.owner, OLD.fence, OLD.expire_at, CASE WHEN OLD.ttl_ms > 0 THEN OLD.ttl_ms ELSE GREATEST(OLD.expire_at - OLD.renewed_at, 0) END, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + (CASE {retain_new* } END));
END IF

-- name: history_lock_delete_trigger
-- A released lease row purged (its release, timed at it: cleanup()) or an unreleased one deleted
-- (an operator's delete_lease or delete_by_prefix).
-- returns: :exec
-- params: 
SET STATEMENT lock_wait_timeout = 2 FOR CREATE OR REPLACE TRIGGER sqlguard_history_lock_del AFTER DELETE ON sqlguard_lock FOR EACH ROW
IF OLD.owner <> '' AND (CASE {retain_old* } END) IS NOT NULL THEN
  INSERT INTO sqlguard_history (name, at_ms, event, kind, mode, slot, owner, fence, permits, capacity, until_ms, prev_owner, prev_fence, prev_until_ms, prev_ttl_ms, keep_until)
  VALUES (OLD.name, CASE WHEN OLD.beat = 0 THEN OLD.expire_at ELSE CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) END, CASE WHEN OLD.beat = 0 THEN 'release' ELSE 'delete' END,
          'lease', 'X', 0, OLD.owner, OLD.fence, 1, 1, OLD.expire_at, OLD.owner, OLD.fence, OLD.expire_at, CASE WHEN OLD.ttl_ms > 0 THEN OLD.ttl_ms ELSE GREATEST(OLD.expire_at - OLD.renewed_at, 0) END, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + (CASE {retain_old* } END));
END IF

-- name: history_holder_insert_trigger
-- A holding's kind and a semaphore's permits come from its head (sqlguard_sync), which the
-- acquire that inserts the holding has written in the same transaction.
-- returns: :exec
-- params: 
SET STATEMENT lock_wait_timeout = 2 FOR CREATE OR REPLACE TRIGGER sqlguard_history_holder_ins AFTER INSERT ON sqlguard_sync_holder FOR EACH ROW
IF (CASE {retain_new* } END) IS NOT NULL THEN
  INSERT INTO sqlguard_history (name, at_ms, event, kind, mode, slot, owner, fence, permits, capacity, until_ms, prev_owner, prev_fence, prev_until_ms, prev_ttl_ms, keep_until)
  VALUES (NEW.name, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), 'grant', COALESCE((SELECT s.kind FROM sqlguard_sync s WHERE s.name = NEW.name), ''), NEW.mode, NEW.slot, NEW.owner, NEW.fence,
          NEW.permits, COALESCE((SELECT CASE WHEN s.kind = 'semaphore' THEN s.permits ELSE 1 END FROM sqlguard_sync s WHERE s.name = NEW.name), 0), NEW.expire_at, '', 0, 0, 0, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + (CASE {retain_new* } END));
END IF

-- name: history_holder_update_trigger
-- An event only when renewed after its own expiry.
-- returns: :exec
-- params: 
SET STATEMENT lock_wait_timeout = 2 FOR CREATE OR REPLACE TRIGGER sqlguard_history_holder_upd AFTER UPDATE ON sqlguard_sync_holder FOR EACH ROW
IF NEW.beat <> 0 AND OLD.beat <> 0 AND NEW.beat <> OLD.beat AND NEW.renewed_at > OLD.expire_at AND (CASE {retain_new* } END) IS NOT NULL THEN
  INSERT INTO sqlguard_history (name, at_ms, event, kind, mode, slot, owner, fence, permits, capacity, until_ms, prev_owner, prev_fence, prev_until_ms, prev_ttl_ms, keep_until)
  VALUES (NEW.name, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), 'renew_gap', COALESCE((SELECT s.kind FROM sqlguard_sync s WHERE s.name = NEW.name), ''), NEW.mode, NEW.slot, NEW.owner, NEW.fence,
          NEW.permits, COALESCE((SELECT CASE WHEN s.kind = 'semaphore' THEN s.permits ELSE 1 END FROM sqlguard_sync s WHERE s.name = NEW.name), 0), NEW.expire_at, OLD.owner, OLD.fence, OLD.expire_at, CASE WHEN OLD.ttl_ms > 0 THEN OLD.ttl_ms ELSE GREATEST(OLD.expire_at - OLD.renewed_at, 0) END, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + (CASE {retain_new* } END));
END IF

-- name: history_holder_delete_trigger
-- A released holding purged (its release, timed at it) or an unreleased one deleted: a
-- take-over (sync_take_slot) or an operator's delete.
-- returns: :exec
-- params: 
SET STATEMENT lock_wait_timeout = 2 FOR CREATE OR REPLACE TRIGGER sqlguard_history_holder_del AFTER DELETE ON sqlguard_sync_holder FOR EACH ROW
IF (CASE {retain_old* } END) IS NOT NULL THEN
  INSERT INTO sqlguard_history (name, at_ms, event, kind, mode, slot, owner, fence, permits, capacity, until_ms, prev_owner, prev_fence, prev_until_ms, prev_ttl_ms, keep_until)
  VALUES (OLD.name, CASE WHEN OLD.beat = 0 THEN OLD.expire_at ELSE CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) END, CASE WHEN OLD.beat = 0 THEN 'release' ELSE 'takeover' END,
          COALESCE((SELECT s.kind FROM sqlguard_sync s WHERE s.name = OLD.name), ''), OLD.mode, OLD.slot, OLD.owner, OLD.fence, OLD.permits, COALESCE((SELECT CASE WHEN s.kind = 'semaphore' THEN s.permits ELSE 1 END FROM sqlguard_sync s WHERE s.name = OLD.name), 0), OLD.expire_at, OLD.owner, OLD.fence, OLD.expire_at, CASE WHEN OLD.ttl_ms > 0 THEN OLD.ttl_ms ELSE GREATEST(OLD.expire_at - OLD.renewed_at, 0) END, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + (CASE {retain_old* } END));
END IF

-- fragment: history_scope_retain_new
-- One scope written into a trigger: its prefix as bytes (hex) and its retention in ms. The list
-- is ordered longest retention first, so the CASE answers the longest of the scopes that cover
-- the name (NULL: none, nothing recorded).
WHEN substr(NEW.name, 1, {#len}) = X'{%prefix}' THEN {#retain_ms}

-- fragment: history_scope_retain_old
-- The same for a deleted row (the delete triggers).
WHEN substr(OLD.name, 1, {#len}) = X'{%prefix}' THEN {#retain_ms}

-- name: history_lock_function
-- not needed: the trigger bodies are statements of their own (PostgreSQL's need a function)

-- name: history_holder_function
-- not needed: the trigger bodies are statements of their own (PostgreSQL's need a function)

-- name: history_drop_lock_function
-- not needed: no function (the history_drop_*_trigger entries drop each trigger)

-- name: history_drop_holder_function
-- not needed: no function (the history_drop_*_trigger entries drop each trigger)

-- name: history_drop_lock_insert_trigger
-- returns: :exec
-- params: 
SET STATEMENT lock_wait_timeout = 2 FOR DROP TRIGGER IF EXISTS sqlguard_history_lock_ins

-- name: history_drop_lock_update_trigger
-- returns: :exec
-- params: 
SET STATEMENT lock_wait_timeout = 2 FOR DROP TRIGGER IF EXISTS sqlguard_history_lock_upd

-- name: history_drop_lock_delete_trigger
-- returns: :exec
-- params: 
SET STATEMENT lock_wait_timeout = 2 FOR DROP TRIGGER IF EXISTS sqlguard_history_lock_del

-- name: history_drop_holder_insert_trigger
-- returns: :exec
-- params: 
SET STATEMENT lock_wait_timeout = 2 FOR DROP TRIGGER IF EXISTS sqlguard_history_holder_ins

-- name: history_drop_holder_update_trigger
-- returns: :exec
-- params: 
SET STATEMENT lock_wait_timeout = 2 FOR DROP TRIGGER IF EXISTS sqlguard_history_holder_upd

-- name: history_drop_holder_delete_trigger
-- returns: :exec
-- params: 
SET STATEMENT lock_wait_timeout = 2 FOR DROP TRIGGER IF EXISTS sqlguard_history_holder_del

-- name: history_scope_set
-- A new scope, or a new retention for one (its since_ms stays).
-- returns: :execrows
-- params: prefix, retain_ms
INSERT INTO sqlguard_history_scope (prefix, retain_ms, since_ms) VALUES (?, ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED))
ON DUPLICATE KEY UPDATE retain_ms = VALUES(retain_ms)

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
FROM sqlguard_history WHERE substr(name, 1, length(?)) = ? AND id > ? AND at_ms >= ? ORDER BY id LIMIT ?

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
-- (by the key: no index on keep_until, the oldest rows expire first; MariaDB refuses LIMIT inside
-- IN (subquery)). At READ COMMITTED a row the scan passes and does not delete is not kept locked.
-- returns: :execrows
-- params: batch
DELETE FROM sqlguard_history WHERE keep_until < CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) ORDER BY id LIMIT ?

-- name: history_ddl_lock_timeout
-- not needed: each DDL statement carries its own lock_wait_timeout (SET STATEMENT)
