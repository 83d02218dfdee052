-- Issue 28: semaphores, shared/exclusive leases and the fair lease's queue
-- (include/sqlguard/semaphore.h, read_write_lease.h, LeaseOptions::fair).
-- Times are BIGINT ms since the Unix epoch on the database clock.

-- One row per semaphore / read-write lease / fair queue name. Every acquire
-- writes it first (version + 1), so acquires of one name are serialized by
-- its row lock (and, on Galera, conflict at certification).
CREATE TABLE IF NOT EXISTS sqlguard_sync (
  name         VARCHAR(255) NOT NULL PRIMARY KEY,
  kind         VARCHAR(16)  NOT NULL,            -- 'semaphore', 'rw' or 'fair'
  permits      BIGINT       NOT NULL DEFAULT 0,  -- semaphore: how many permits
  fence        BIGINT       NOT NULL DEFAULT 0,  -- the last fence granted (rw: of the last exclusive hold)
  writer_until BIGINT       NOT NULL DEFAULT 0,  -- rw: a waiting writer's intent; new readers wait until then
  version      BIGINT       NOT NULL DEFAULT 0   -- bumped by every acquire; fair: the last ticket
);

-- The holders of a semaphore or read-write lease: one leased row per holding.
CREATE TABLE IF NOT EXISTS sqlguard_sync_holder (
  name           VARCHAR(255) NOT NULL,
  slot           BIGINT       NOT NULL,   -- unique per name (the head's version when granted)
  mode           VARCHAR(1)   NOT NULL,   -- 'P' permits, 'S' shared, 'X' exclusive
  permits        BIGINT       NOT NULL,
  owner          VARCHAR(255) NOT NULL,
  fence          BIGINT       NOT NULL,
  expire_at      BIGINT       NOT NULL,
  acquired_at    BIGINT       NOT NULL,
  renewed_at     BIGINT       NOT NULL,
  min_release_at BIGINT       NOT NULL DEFAULT 0,
  PRIMARY KEY (name, slot)
);
CREATE INDEX IF NOT EXISTS sqlguard_sync_holder_expire ON sqlguard_sync_holder (expire_at);

-- The fair lease's waiters: one place per waiting acquire, in ticket order.
CREATE TABLE IF NOT EXISTS sqlguard_lock_queue (
  name      VARCHAR(255) NOT NULL,
  ticket    BIGINT       NOT NULL,
  owner     VARCHAR(255) NOT NULL,
  expire_at BIGINT       NOT NULL,
  PRIMARY KEY (name, ticket)
);
CREATE INDEX IF NOT EXISTS sqlguard_lock_queue_expire ON sqlguard_lock_queue (expire_at);
