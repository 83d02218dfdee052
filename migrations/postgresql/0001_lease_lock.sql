-- Lease locks. Times are BIGINT milliseconds since the Unix epoch (UTC) on
-- the database clock (clock_timestamp()); no time zone can shift them.
CREATE TABLE IF NOT EXISTS sqlguard_lock (
  name           VARCHAR(255) NOT NULL PRIMARY KEY,
  owner          VARCHAR(255) NOT NULL,
  fence          BIGINT       NOT NULL,
  expire_at      BIGINT       NOT NULL,
  acquired_at    BIGINT       NOT NULL,
  renewed_at     BIGINT       NOT NULL,
  min_release_at BIGINT       NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS sqlguard_lock_expire ON sqlguard_lock (expire_at);

-- Fencing tokens: a sequence survives row deletes and server restarts and
-- never goes back (after a crash it may skip values, which is fine).
CREATE SEQUENCE IF NOT EXISTS sqlguard_fence_seq AS BIGINT;

-- Highest fencing token accepted per protected resource (fenced writes).
CREATE TABLE IF NOT EXISTS sqlguard_fenced_resource (
  resource   VARCHAR(255) NOT NULL PRIMARY KEY,
  fence      BIGINT       NOT NULL,
  updated_at BIGINT       NOT NULL
);
