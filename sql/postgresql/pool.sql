-- Connection pool (include/sqlguard/pool.h).

-- name: pool_ping
-- Health check on borrow: one round trip, touches no table.
-- returns: :one one
-- params:
SELECT 1;
