-- Issue 41 item 3: the grant history (include/sqlguard/history.h, docs/history.md).
-- Opt-in per name prefix (sqlguard_history_scope; '' = every name). Nothing records until a
-- scope exists: enable_history() then installs the row triggers (sql/mysql/history.sql)
-- that write one row here per grant, hand-over, release, take-over and late renewal, in the
-- same transaction as the lock's own write; disable_history() removes them with the last scope.
-- Names are VARBINARY as in sqlguard_lock. On Galera each node draws ids of its own
-- (auto_increment_increment), but a node applying another's row moves its counter past it, and
-- a name's writes are ordered by certification: a name's events still come in id order.
-- Times are BIGINT ms since the Unix epoch on the database clock.
CREATE TABLE IF NOT EXISTS sqlguard_history_scope (
  prefix     VARBINARY(255) NOT NULL PRIMARY KEY,
  retain_ms  BIGINT       NOT NULL,  -- rows of this scope are kept this long (cleanup deletes them after)
  since_ms   BIGINT       NOT NULL   -- when this scope was enabled
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS sqlguard_history (
  id            BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,  -- a name's events in the order of its writes
  name          VARBINARY(255) NOT NULL,
  at_ms         BIGINT       NOT NULL,  -- the database clock at the event
  event         VARCHAR(16)  NOT NULL,  -- grant, handover, confirm, takeover, release, delete, renew_gap
  kind          VARCHAR(16)  NOT NULL,  -- lease (default and fair), semaphore, rw
  mode          VARCHAR(1)   NOT NULL,  -- lease: X; semaphore: P; rw: S or X
  slot          BIGINT       NOT NULL,  -- 0 for a lease; the holding's slot otherwise
  owner         VARBINARY(255) NOT NULL,  -- the holding the event is about (after it)
  fence         BIGINT       NOT NULL,
  permits       BIGINT       NOT NULL,  -- permits of this holding (1 for a lease, shared or exclusive)
  capacity      BIGINT       NOT NULL,  -- a semaphore's permits when the event happened; 1 otherwise
  until_ms      BIGINT       NOT NULL,  -- the holding's expiry after the event: its trust window ends before it
  prev_owner    VARBINARY(255) NOT NULL,  -- hand-over, confirm, take-over, delete: the holding that ended
  prev_fence    BIGINT       NOT NULL,
  prev_until_ms BIGINT       NOT NULL,  -- its expiry as last renewed: its holder's trust window ended before it
  prev_ttl_ms   BIGINT       NOT NULL,  -- its ttl (the clock-rate allowance of `verify` is ttl / 1000)
  keep_until    BIGINT       NOT NULL   -- at_ms + the longest retain_ms of the scopes that cover the name
) ENGINE = InnoDB;
-- One index besides the key: every index is written by every recorded event (measured: each
-- one costs a lock cycle on SQLite about a tenth). `history NAME` needs this one; cleanup's purge
-- reads keep_until in id order instead (the oldest rows, which expire first, come first).
CREATE INDEX IF NOT EXISTS sqlguard_history_name ON sqlguard_history (name, id);
