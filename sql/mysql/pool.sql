-- Connection pool (include/sqlguard/pool.h).

-- name: pool_ping
-- Health check on borrow: one round trip, touches no table.
-- params:
SELECT 1;
