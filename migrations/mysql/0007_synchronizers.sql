-- Issue 28: semaphores, shared/exclusive leases and the fair lease's queue
-- (include/sqlguard/semaphore.h, read_write_lease.h, LeaseOptions::fair).
-- Times are BIGINT ms since the Unix epoch on the database clock. Every table
-- has a primary key (Galera replicates by it).

-- One row per semaphore / read-write lease / fair queue name. Every acquire
-- writes it first (version + 1), so acquires of one name are serialized by
-- its row lock and, on Galera, conflict at certification (FOR UPDATE is node-local).
CREATE TABLE IF NOT EXISTS sqlguard_sync (
  name         VARBINARY(255) NOT NULL PRIMARY KEY,
  kind         VARCHAR(16)    NOT NULL,
  permits      BIGINT         NOT NULL DEFAULT 0,
  fence        BIGINT         NOT NULL DEFAULT 0,
  writer_until BIGINT         NOT NULL DEFAULT 0,
  version      BIGINT         NOT NULL DEFAULT 0
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS sqlguard_sync_holder (
  name           VARBINARY(255) NOT NULL,
  slot           BIGINT         NOT NULL,
  mode           VARCHAR(1)     NOT NULL,
  permits        BIGINT         NOT NULL,
  owner          VARBINARY(255) NOT NULL,
  fence          BIGINT         NOT NULL,
  expire_at      BIGINT         NOT NULL,
  acquired_at    BIGINT         NOT NULL,
  renewed_at     BIGINT         NOT NULL,
  min_release_at BIGINT         NOT NULL DEFAULT 0,
  PRIMARY KEY (name, slot),
  KEY sqlguard_sync_holder_expire (expire_at)
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS sqlguard_lock_queue (
  name      VARBINARY(255) NOT NULL,
  ticket    BIGINT         NOT NULL,
  owner     VARBINARY(255) NOT NULL,
  expire_at BIGINT         NOT NULL,
  PRIMARY KEY (name, ticket),
  KEY sqlguard_lock_queue_expire (expire_at)
) ENGINE = InnoDB;
