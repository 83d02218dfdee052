-- Issue 40 (numbered 0014: a 0013 of an experiment that never landed may be recorded in
-- development databases). Every acquire, renewal and release of a lease (and every renewal of a
-- semaphore's or read-write lease's holding, and of a fair waiter's queue place) changes
-- expire_at. An index on expire_at makes each of those updates a non-HOT update: a new
-- entry in every index of the table and a new heap tuple that only VACUUM reclaims. Measured
-- on this project's bench machine (PostgreSQL 15, durable): 2,672 of 4,085,921 updates of
-- sqlguard_lock were HOT with the index; all of them without it; the table had grown to
-- 35 MB holding no row; WAL written per acquire+release (bench lease-distinct, 16 clients,
-- same server, two runs each): 748-750 bytes with the index, 410 without. Without these indexes the rows are updated in place (HOT) and the
-- primary keys stay small. The only statements that used them are cleanup()'s purges of
-- released rows (lock_purge, sync_purge_all, fair_purge_all): they now scan the table for
-- released rows, batch by batch (measured: 200,000 released rows behind 200,000 held ones
-- purged in 1.01 s without the index, 1.05 s with it). MariaDB and SQLite keep their
-- indexes (no HOT; an InnoDB DELETE without one would lock every row it scans).
DROP INDEX IF EXISTS sqlguard_lock_expire;
DROP INDEX IF EXISTS sqlguard_sync_holder_expire;
DROP INDEX IF EXISTS sqlguard_lock_queue_expire;
