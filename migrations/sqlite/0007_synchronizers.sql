-- Issue 28: semaphores, shared/exclusive leases and the fair lease's queue
-- (include/sqlguard/semaphore.h, read_write_lease.h, LeaseOptions::fair).
-- Times are INTEGER ms since the Unix epoch on the database clock. Acquires of
-- a name are serialized by the database write lock (BEGIN IMMEDIATE); they
-- also write the sqlguard_sync row as on the server dialects.
CREATE TABLE sqlguard_sync (
  name         TEXT    NOT NULL PRIMARY KEY,
  kind         TEXT    NOT NULL,
  permits      INTEGER NOT NULL DEFAULT 0,
  fence        INTEGER NOT NULL DEFAULT 0,
  writer_until INTEGER NOT NULL DEFAULT 0,
  version      INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

CREATE TABLE sqlguard_sync_holder (
  name           TEXT    NOT NULL,
  slot           INTEGER NOT NULL,
  mode           TEXT    NOT NULL,
  permits        INTEGER NOT NULL,
  owner          TEXT    NOT NULL,
  fence          INTEGER NOT NULL,
  expire_at      INTEGER NOT NULL,
  acquired_at    INTEGER NOT NULL,
  renewed_at     INTEGER NOT NULL,
  min_release_at INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (name, slot)
) WITHOUT ROWID;
CREATE INDEX sqlguard_sync_holder_expire ON sqlguard_sync_holder (expire_at);

CREATE TABLE sqlguard_lock_queue (
  name      TEXT    NOT NULL,
  ticket    INTEGER NOT NULL,
  owner     TEXT    NOT NULL,
  expire_at INTEGER NOT NULL,
  PRIMARY KEY (name, ticket)
) WITHOUT ROWID;
CREATE INDEX sqlguard_lock_queue_expire ON sqlguard_lock_queue (expire_at);
