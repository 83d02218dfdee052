-- Issue 38: no clock can break the lock, for the holdings of semaphores and
-- read-write leases (sqlguard_sync_holder) and the fair queue's places
-- (sqlguard_lock_queue), as 0010 did for the lease: an unreleased holding or a
-- place is taken over only by a compare-and-set on the (fence, beat, expire_at)
-- the taker's process watched unchanged for its ttl on its own monotonic clock
-- (sql/sqlite/sync.sql, head). beat: 0 = released (a holding) or left (a place),
-- >= 1 = held or waiting (bumped by every renewal). ttl_ms: the ttl of the last
-- acquisition or renewal (how long a watch must last). A row written by an older
-- sqlguard keeps beat = 1 and ttl_ms = 0; a watch of it lasts expire_at - renewed_at
-- (a place: its ttl as 0 says, the lease's own ttl).
ALTER TABLE sqlguard_sync_holder ADD COLUMN beat BIGINT NOT NULL DEFAULT 1;
ALTER TABLE sqlguard_sync_holder ADD COLUMN ttl_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sqlguard_lock_queue ADD COLUMN beat BIGINT NOT NULL DEFAULT 1;
ALTER TABLE sqlguard_lock_queue ADD COLUMN ttl_ms BIGINT NOT NULL DEFAULT 0;
-- What is expired now was released or abandoned: released (the next acquire takes
-- it at once, as before this migration). What still runs keeps its ttl.
UPDATE sqlguard_sync_holder SET beat = 0 WHERE expire_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER);
UPDATE sqlguard_sync_holder SET ttl_ms = MAX(expire_at - renewed_at, 0) WHERE beat <> 0;
UPDATE sqlguard_lock_queue SET beat = 0 WHERE expire_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER);

-- What a process saw of an unreleased holding or a place it waited behind, shared
-- with later processes on the same machine (as sqlguard_lock_watch for a lease):
-- part = the holding's slot or the place's ticket (both versions of the name's head:
-- never equal). One row per (name, part, machine); cleanup() deletes rows whose
-- holding or place has changed since.
CREATE TABLE IF NOT EXISTS sqlguard_sync_watch (
  name          VARCHAR(255) NOT NULL,
  part          BIGINT       NOT NULL,
  watcher       VARCHAR(80)  NOT NULL,
  fence         BIGINT       NOT NULL,
  beat          BIGINT       NOT NULL,
  expire_at     BIGINT       NOT NULL,
  first_seen_ms BIGINT       NOT NULL,
  PRIMARY KEY (name, part, watcher)
);
