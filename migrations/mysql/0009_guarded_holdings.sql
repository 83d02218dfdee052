-- Guarded transactions of semaphores and read-write leases (Lock::run_guarded) WRITE
-- their holding's row, as a lease's guarded transaction writes its lock row (0004): on
-- Galera, `SELECT ... FOR UPDATE` is node-local and would certify nothing; MariaDB skips
-- an UPDATE that changes nothing, hence a counter.
ALTER TABLE sqlguard_sync_holder ADD COLUMN IF NOT EXISTS guard_writes BIGINT NOT NULL DEFAULT 0;
