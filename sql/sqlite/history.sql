-- sql/sqlite/history.sql — SQLite 3. The grant history (include/sqlguard/history.h,
-- docs/history.md; tables: migrations/sqlite/0015_grant_history.sql).
-- Recording is done by row triggers on sqlguard_lock (leases, default and fair) and
-- sqlguard_sync_holder (semaphore permits, shared and exclusive holdings), installed by
-- enable_history() and dropped with the last scope, so a database without a scope pays
-- nothing. A trigger runs in the lock statement's own transaction: the event commits or rolls
-- back with it. Each trigger's WHEN lets only the writes that change who holds (a grant, a
-- hand-over, a take-over, a delete) and a renewal that came after its own expiry through. julianday('now') is the triggering statement's time.
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
CREATE TRIGGER IF NOT EXISTS sqlguard_history_lock_ins AFTER INSERT ON sqlguard_lock FOR EACH ROW
WHEN NEW.owner <> '' AND NEW.beat <> 0
BEGIN
  INSERT INTO sqlguard_history (name, at_ms, event, kind, mode, slot, owner, fence, permits, capacity, until_ms, prev_owner, prev_fence, prev_until_ms, prev_ttl_ms, keep_until)
  SELECT NEW.name, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), (CASE WHEN NEW.owner <> '' AND NEW.beat <> 0 THEN 'grant' END), 'lease', 'X', 0, NEW.owner, NEW.fence, 1, 1, NEW.expire_at, '', 0, 0, 0, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + MAX(s.retain_ms)
  FROM sqlguard_history_scope s
  WHERE substr(NEW.name, 1, length(s.prefix)) = s.prefix AND (CASE WHEN NEW.owner <> '' AND NEW.beat <> 0 THEN 'grant' END) IS NOT NULL
  HAVING COUNT(*) > 0;
END

-- name: history_lock_update_trigger
-- returns: :exec
-- params: 
CREATE TRIGGER IF NOT EXISTS sqlguard_history_lock_upd AFTER UPDATE ON sqlguard_lock FOR EACH ROW
WHEN NEW.owner <> '' AND ((NEW.fence <> OLD.fence AND NEW.beat <> 0)
      OR (NEW.fence = OLD.fence AND NEW.beat <> 0 AND OLD.beat <> 0 AND NEW.beat <> OLD.beat AND NEW.renewed_at > OLD.expire_at))
BEGIN
  INSERT INTO sqlguard_history (name, at_ms, event, kind, mode, slot, owner, fence, permits, capacity, until_ms, prev_owner, prev_fence, prev_until_ms, prev_ttl_ms, keep_until)
  SELECT NEW.name, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), (CASE WHEN NEW.owner = '' THEN NULL WHEN NEW.fence <> OLD.fence AND NEW.beat <> 0 THEN CASE WHEN OLD.beat = 0 OR OLD.owner = '' THEN 'grant' WHEN NEW.handed = 1 THEN 'handover' WHEN OLD.handed = 1 THEN 'confirm' ELSE 'takeover' END WHEN NEW.fence = OLD.fence AND NEW.beat <> 0 AND OLD.beat <> 0 AND NEW.beat <> OLD.beat AND NEW.renewed_at > OLD.expire_at THEN 'renew_gap' END), 'lease', 'X', 0, NEW.owner, NEW.fence, 1, 1, NEW.expire_at, OLD.owner, OLD.fence, OLD.expire_at, CASE WHEN OLD.ttl_ms > 0 THEN OLD.ttl_ms ELSE MAX(OLD.expire_at - OLD.renewed_at, 0) END, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + MAX(s.retain_ms)
  FROM sqlguard_history_scope s
  WHERE substr(NEW.name, 1, length(s.prefix)) = s.prefix AND (CASE WHEN NEW.owner = '' THEN NULL WHEN NEW.fence <> OLD.fence AND NEW.beat <> 0 THEN CASE WHEN OLD.beat = 0 OR OLD.owner = '' THEN 'grant' WHEN NEW.handed = 1 THEN 'handover' WHEN OLD.handed = 1 THEN 'confirm' ELSE 'takeover' END WHEN NEW.fence = OLD.fence AND NEW.beat <> 0 AND OLD.beat <> 0 AND NEW.beat <> OLD.beat AND NEW.renewed_at > OLD.expire_at THEN 'renew_gap' END) IS NOT NULL
  HAVING COUNT(*) > 0;
END

-- name: history_lock_delete_trigger
-- A released lease row purged (its release, timed at it: cleanup()) or an unreleased one deleted
-- (an operator's delete_lease or delete_by_prefix).
-- returns: :exec
-- params: 
CREATE TRIGGER IF NOT EXISTS sqlguard_history_lock_del AFTER DELETE ON sqlguard_lock FOR EACH ROW
WHEN OLD.owner <> ''
BEGIN
  INSERT INTO sqlguard_history (name, at_ms, event, kind, mode, slot, owner, fence, permits, capacity, until_ms, prev_owner, prev_fence, prev_until_ms, prev_ttl_ms, keep_until)
  SELECT OLD.name, CASE WHEN OLD.beat = 0 THEN OLD.expire_at ELSE CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) END, (CASE WHEN OLD.owner = '' THEN NULL WHEN OLD.beat = 0 THEN 'release' ELSE 'delete' END), 'lease', 'X', 0, OLD.owner, OLD.fence, 1, 1, OLD.expire_at, OLD.owner, OLD.fence, OLD.expire_at, CASE WHEN OLD.ttl_ms > 0 THEN OLD.ttl_ms ELSE MAX(OLD.expire_at - OLD.renewed_at, 0) END, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + MAX(s.retain_ms)
  FROM sqlguard_history_scope s
  WHERE substr(OLD.name, 1, length(s.prefix)) = s.prefix AND (CASE WHEN OLD.owner = '' THEN NULL WHEN OLD.beat = 0 THEN 'release' ELSE 'delete' END) IS NOT NULL
  HAVING COUNT(*) > 0;
END

-- name: history_holder_insert_trigger
-- A holding's kind and a semaphore's permits come from its head (sqlguard_sync), which the
-- acquire that inserts the holding has written in the same transaction.
-- returns: :exec
-- params: 
CREATE TRIGGER IF NOT EXISTS sqlguard_history_holder_ins AFTER INSERT ON sqlguard_sync_holder FOR EACH ROW
BEGIN
  INSERT INTO sqlguard_history (name, at_ms, event, kind, mode, slot, owner, fence, permits, capacity, until_ms, prev_owner, prev_fence, prev_until_ms, prev_ttl_ms, keep_until)
  SELECT NEW.name, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), ('grant'), COALESCE((SELECT s.kind FROM sqlguard_sync s WHERE s.name = NEW.name), ''), NEW.mode, NEW.slot, NEW.owner, NEW.fence, NEW.permits, COALESCE((SELECT CASE WHEN s.kind = 'semaphore' THEN s.permits ELSE 1 END FROM sqlguard_sync s WHERE s.name = NEW.name), 0), NEW.expire_at, '', 0, 0, 0, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + MAX(s.retain_ms)
  FROM sqlguard_history_scope s
  WHERE substr(NEW.name, 1, length(s.prefix)) = s.prefix AND ('grant') IS NOT NULL
  HAVING COUNT(*) > 0;
END

-- name: history_holder_update_trigger
-- returns: :exec
-- params: 
CREATE TRIGGER IF NOT EXISTS sqlguard_history_holder_upd AFTER UPDATE ON sqlguard_sync_holder FOR EACH ROW
WHEN (NEW.beat <> 0 AND OLD.beat <> 0 AND NEW.beat <> OLD.beat AND NEW.renewed_at > OLD.expire_at)
BEGIN
  INSERT INTO sqlguard_history (name, at_ms, event, kind, mode, slot, owner, fence, permits, capacity, until_ms, prev_owner, prev_fence, prev_until_ms, prev_ttl_ms, keep_until)
  SELECT NEW.name, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), (CASE WHEN NEW.beat <> 0 AND OLD.beat <> 0 AND NEW.beat <> OLD.beat AND NEW.renewed_at > OLD.expire_at THEN 'renew_gap' END), COALESCE((SELECT s.kind FROM sqlguard_sync s WHERE s.name = NEW.name), ''), NEW.mode, NEW.slot, NEW.owner, NEW.fence, NEW.permits, COALESCE((SELECT CASE WHEN s.kind = 'semaphore' THEN s.permits ELSE 1 END FROM sqlguard_sync s WHERE s.name = NEW.name), 0), NEW.expire_at, OLD.owner, OLD.fence, OLD.expire_at, CASE WHEN OLD.ttl_ms > 0 THEN OLD.ttl_ms ELSE MAX(OLD.expire_at - OLD.renewed_at, 0) END, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + MAX(s.retain_ms)
  FROM sqlguard_history_scope s
  WHERE substr(NEW.name, 1, length(s.prefix)) = s.prefix AND (CASE WHEN NEW.beat <> 0 AND OLD.beat <> 0 AND NEW.beat <> OLD.beat AND NEW.renewed_at > OLD.expire_at THEN 'renew_gap' END) IS NOT NULL
  HAVING COUNT(*) > 0;
END

-- name: history_holder_delete_trigger
-- A released holding purged (its release, timed at it) or an unreleased one deleted: a
-- take-over (sync_take_slot) or an operator's delete.
-- returns: :exec
-- params: 
CREATE TRIGGER IF NOT EXISTS sqlguard_history_holder_del AFTER DELETE ON sqlguard_sync_holder FOR EACH ROW
BEGIN
  INSERT INTO sqlguard_history (name, at_ms, event, kind, mode, slot, owner, fence, permits, capacity, until_ms, prev_owner, prev_fence, prev_until_ms, prev_ttl_ms, keep_until)
  SELECT OLD.name, CASE WHEN OLD.beat = 0 THEN OLD.expire_at ELSE CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) END, (CASE WHEN OLD.beat = 0 THEN 'release' ELSE 'takeover' END), COALESCE((SELECT s.kind FROM sqlguard_sync s WHERE s.name = OLD.name), ''), OLD.mode, OLD.slot, OLD.owner, OLD.fence, OLD.permits, COALESCE((SELECT CASE WHEN s.kind = 'semaphore' THEN s.permits ELSE 1 END FROM sqlguard_sync s WHERE s.name = OLD.name), 0), OLD.expire_at, OLD.owner, OLD.fence, OLD.expire_at, CASE WHEN OLD.ttl_ms > 0 THEN OLD.ttl_ms ELSE MAX(OLD.expire_at - OLD.renewed_at, 0) END, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + MAX(s.retain_ms)
  FROM sqlguard_history_scope s
  WHERE substr(OLD.name, 1, length(s.prefix)) = s.prefix AND (CASE WHEN OLD.beat = 0 THEN 'release' ELSE 'takeover' END) IS NOT NULL
  HAVING COUNT(*) > 0;
END

-- name: history_lock_function
-- not needed: the trigger bodies are statements of their own (PostgreSQL's need a function)

-- name: history_holder_function
-- not needed: the trigger bodies are statements of their own (PostgreSQL's need a function)

-- fragment: history_scope_retain_new
-- not needed: the triggers read the scopes from sqlguard_history_scope

-- fragment: history_scope_retain_old
-- not needed: the triggers read the scopes from sqlguard_history_scope

-- name: history_drop_lock_function
-- not needed: no function (the history_drop_*_trigger entries drop each trigger)

-- name: history_drop_holder_function
-- not needed: no function (the history_drop_*_trigger entries drop each trigger)

-- name: history_drop_lock_insert_trigger
-- returns: :exec
-- params: 
DROP TRIGGER IF EXISTS sqlguard_history_lock_ins

-- name: history_drop_lock_update_trigger
-- returns: :exec
-- params: 
DROP TRIGGER IF EXISTS sqlguard_history_lock_upd

-- name: history_drop_lock_delete_trigger
-- returns: :exec
-- params: 
DROP TRIGGER IF EXISTS sqlguard_history_lock_del

-- name: history_drop_holder_insert_trigger
-- returns: :exec
-- params: 
DROP TRIGGER IF EXISTS sqlguard_history_holder_ins

-- name: history_drop_holder_update_trigger
-- returns: :exec
-- params: 
DROP TRIGGER IF EXISTS sqlguard_history_holder_upd

-- name: history_drop_holder_delete_trigger
-- returns: :exec
-- params: 
DROP TRIGGER IF EXISTS sqlguard_history_holder_del

-- name: history_scope_set
-- A new scope, or a new retention for one (its since_ms stays).
-- returns: :execrows
-- params: prefix, retain_ms
INSERT INTO sqlguard_history_scope (prefix, retain_ms, since_ms) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER))
ON CONFLICT (prefix) DO UPDATE SET retain_ms = excluded.retain_ms

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
-- (by the key: no index on keep_until, the oldest rows expire first).
-- returns: :execrows
-- params: batch
DELETE FROM sqlguard_history WHERE id IN (SELECT id FROM sqlguard_history WHERE keep_until < CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) ORDER BY id LIMIT ?)

-- name: history_ddl_lock_timeout
-- not needed: DDL waits for the write lock like any write (the connection's busy timeout), then SQLITE_BUSY
