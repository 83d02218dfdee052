-- Lease locks. Times are BIGINT milliseconds since the Unix epoch (UTC) on
-- the database clock; no session time zone or DST change can shift them.
-- Names are VARBINARY: byte-exact, case-sensitive, no PAD SPACE surprises.
CREATE TABLE IF NOT EXISTS sqlguard_lock (
  name           VARBINARY(255) NOT NULL PRIMARY KEY,
  owner          VARBINARY(255) NOT NULL,
  fence          BIGINT         NOT NULL,
  expire_at      BIGINT         NOT NULL,
  acquired_at    BIGINT         NOT NULL,
  renewed_at     BIGINT         NOT NULL,
  min_release_at BIGINT         NOT NULL DEFAULT 0,
  KEY sqlguard_lock_expire (expire_at)
) ENGINE = InnoDB;

-- Fencing tokens: a MariaDB SEQUENCE (10.3+) survives row deletes and
-- server restarts and never goes back. NOCACHE: a Galera cluster refuses a
-- cached sequence (1235 "CACHE without INCREMENT BY 0 in Galera cluster"),
-- and a cache would hand out values out of order across nodes anyway.
-- This line said `ENGINE = InnoDB` without NOCACHE until 2026-11-30; a
-- database that applied that text is equivalent once 0004_galera has run
-- (it sets NOCACHE), so migrate accepts the old checksum:
-- sqlguard-accepts-checksum: 768663b3584d558415462ee6a6bd60c1e21fa9583cdb77bfd4bd37eb2464be63
CREATE SEQUENCE IF NOT EXISTS sqlguard_fence_seq NOCACHE ENGINE = InnoDB;

-- Highest fencing token accepted per protected resource (fenced writes).
CREATE TABLE IF NOT EXISTS sqlguard_fenced_resource (
  resource   VARBINARY(255) NOT NULL PRIMARY KEY,
  fence      BIGINT         NOT NULL,
  updated_at BIGINT         NOT NULL
) ENGINE = InnoDB;
