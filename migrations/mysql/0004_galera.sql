-- Galera (multi-primary MariaDB) support; harmless on a single server.
--
-- 1. Existing installs created the fence sequence with the default CACHE 1000
--    (0001 before 2026-11-30); a Galera node refuses such a sequence and a
--    cache is per node. NOCACHE everywhere (a fresh 0001 already says so).
ALTER SEQUENCE sqlguard_fence_seq NOCACHE;

-- 2. Guarded transactions (run_guarded) WRITE the lock row so that Galera
--    certifies them against a take-over committed on another node:
--    `SELECT ... FOR UPDATE` is node-local and puts no key in the write set.
--    The write must change the row (MariaDB skips an UPDATE that changes
--    nothing), hence a counter.
ALTER TABLE sqlguard_lock ADD COLUMN IF NOT EXISTS guard_writes BIGINT NOT NULL DEFAULT 0;

-- 3. The same for fenced writes: every accepted write bumps a counter, so two
--    fenced writes from different nodes always conflict at certification,
--    even when they carry the same fence.
ALTER TABLE sqlguard_fenced_resource ADD COLUMN IF NOT EXISTS writes BIGINT NOT NULL DEFAULT 0;
