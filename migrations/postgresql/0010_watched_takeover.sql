-- Issue 38: no clock can break the lock. An unreleased lease is taken over only by
-- a compare-and-set on the (fence, beat, expire_at) the taker's process watched
-- unchanged for the holder's ttl on its own monotonic clock (sql/postgresql/lease.sql,
-- head); a released one (beat = 0) at once. beat: 0 = released, >= 1 = held (bumped
-- by every renewal). ttl_ms: the ttl of the last acquisition or renewal (how long a
-- watch must last). A row written by an older sqlguard keeps beat = 1 (held) and
-- ttl_ms = 0; a watch of it lasts expire_at - renewed_at.
ALTER TABLE sqlguard_lock ADD COLUMN IF NOT EXISTS beat BIGINT NOT NULL DEFAULT 1;
ALTER TABLE sqlguard_lock ADD COLUMN IF NOT EXISTS ttl_ms BIGINT NOT NULL DEFAULT 0;
-- What is expired now was released or abandoned: released (the next acquire takes
-- it at once, as before this migration). What still runs keeps its ttl.
UPDATE sqlguard_lock SET beat = 0 WHERE owner <> '' AND expire_at <= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT;
UPDATE sqlguard_lock SET ttl_ms = GREATEST(expire_at - renewed_at, 0) WHERE owner <> '' AND beat <> 0;

-- What a process saw of an unreleased lease it could not take, shared with later
-- processes on the same machine (a CLI call, a cron job: each a new process): the row
-- version and when it was first seen, on the machine's monotonic clock (watcher = the
-- kernel's boot id and the process's time namespace, so only a process reading the
-- same monotonic clock uses it). One row per name and machine; cleanup() deletes rows
-- whose lease has changed since.
CREATE TABLE IF NOT EXISTS sqlguard_lock_watch (
  name          VARCHAR(255) NOT NULL,
  watcher       VARCHAR(80)  NOT NULL,
  fence         BIGINT       NOT NULL,
  beat          BIGINT       NOT NULL,
  expire_at     BIGINT       NOT NULL,
  first_seen_ms BIGINT       NOT NULL,
  PRIMARY KEY (name, watcher)
);
