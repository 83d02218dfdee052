-- Lease locks. Times are INTEGER milliseconds since the Unix epoch (UTC) on
-- the database clock; no time zone can shift them.
CREATE TABLE sqlguard_lock (
  name           TEXT    NOT NULL PRIMARY KEY,
  owner          TEXT    NOT NULL,
  fence          INTEGER NOT NULL,
  expire_at      INTEGER NOT NULL,
  acquired_at    INTEGER NOT NULL,
  renewed_at     INTEGER NOT NULL,
  min_release_at INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX sqlguard_lock_expire ON sqlguard_lock (expire_at);

-- Fencing tokens come from one counter that never goes back, so a lock row
-- deleted by cleanup and created again still gets a larger token. SQLite
-- has one writer at a time; the triggers keep the counter inside the same
-- statement that issues a token.
CREATE TABLE sqlguard_fence_seq (
  id    INTEGER PRIMARY KEY CHECK (id = 1),
  value INTEGER NOT NULL
);
INSERT INTO sqlguard_fence_seq (id, value) VALUES (1, 0);
CREATE TRIGGER sqlguard_lock_fence_ins AFTER INSERT ON sqlguard_lock
BEGIN
  UPDATE sqlguard_fence_seq SET value = NEW.fence WHERE id = 1 AND value < NEW.fence;
END;
CREATE TRIGGER sqlguard_lock_fence_upd AFTER UPDATE OF fence ON sqlguard_lock
BEGIN
  UPDATE sqlguard_fence_seq SET value = NEW.fence WHERE id = 1 AND value < NEW.fence;
END;

-- Highest fencing token accepted per protected resource (fenced writes).
CREATE TABLE sqlguard_fenced_resource (
  resource   TEXT    NOT NULL PRIMARY KEY,
  fence      INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) WITHOUT ROWID;
