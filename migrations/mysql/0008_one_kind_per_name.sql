-- Issue 36: a name is one lock. A semaphore or read-write lease reserves its
-- name in sqlguard_lock with a row no lease can take (owner '', expire_at =
-- 2^63 - 1: held for ever), so a lease of the same name is refused instead of
-- running beside its holders (sql/<dialect>/sync.sql, sync_reserve_name).
-- This reserves the names already in use as semaphores and read-write leases;
-- a name that is ALSO a lease already keeps its lease row, and its
-- semaphore / read-write acquires are refused from now on, naming both kinds.
INSERT IGNORE INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at)
SELECT name, '', 0, 9223372036854775807, 0, 0, 0 FROM sqlguard_sync WHERE kind IN ('semaphore', 'rw');
