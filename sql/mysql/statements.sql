-- sqlguard bench --emit-sql, dialect mysql. Statements as sqlguard sends them (`?` = bound value).

-- op: lease-distinct
-- owner, ttl_ms, min_hold_ms(0), name  (takes over the expired row)
UPDATE sqlguard_lock SET owner = ?, fence = NEXTVAL(sqlguard_fence_seq), expire_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?, acquired_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), renewed_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), min_release_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ? WHERE name = ? AND expire_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);
-- name, owner  (only when the UPDATE matched: read the new fence)
SELECT fence, expire_at FROM sqlguard_lock WHERE name = ? AND owner = ?;
-- name, owner
UPDATE sqlguard_lock SET expire_at = GREATEST(CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), min_release_at) WHERE name = ? AND owner = ? AND expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);

-- op: lease-hot
-- owner, ttl_ms, min_hold_ms(0), name  (takes over the expired row)
UPDATE sqlguard_lock SET owner = ?, fence = NEXTVAL(sqlguard_fence_seq), expire_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?, acquired_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), renewed_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), min_release_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ? WHERE name = ? AND expire_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);
-- name, owner  (only when the UPDATE matched: read the new fence)
SELECT fence, expire_at FROM sqlguard_lock WHERE name = ? AND owner = ?;
-- name, owner
UPDATE sqlguard_lock SET expire_at = GREATEST(CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), min_release_at) WHERE name = ? AND owner = ? AND expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);

-- op: handoff
-- owner, ttl_ms, min_hold_ms(0), name  (takes over the expired row)
UPDATE sqlguard_lock SET owner = ?, fence = NEXTVAL(sqlguard_fence_seq), expire_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?, acquired_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), renewed_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), min_release_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ? WHERE name = ? AND expire_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);
-- name, owner  (only when the UPDATE matched: read the new fence)
SELECT fence, expire_at FROM sqlguard_lock WHERE name = ? AND owner = ?;
-- name, owner
UPDATE sqlguard_lock SET expire_at = GREATEST(CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), min_release_at) WHERE name = ? AND owner = ? AND expire_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED);

-- op: guarded-decrement
-- 1, id, 1
UPDATE `sqlguard_bench_stock` SET `qty` = `qty` - ? WHERE `id` = ? AND `qty` >= ?;

-- op: rowlock-decrement
SELECT @@SESSION.innodb_lock_wait_timeout;
-- 5 (lock_timeout, whole seconds)
SET SESSION innodb_lock_wait_timeout = ?;
START TRANSACTION;
-- id
SELECT `id`, `qty` FROM `sqlguard_bench_stock` WHERE `id` = ? FOR UPDATE;
-- previous timeout
SET SESSION innodb_lock_wait_timeout = ?;
-- qty - 1, id
UPDATE `sqlguard_bench_stock` SET `qty` = ? WHERE `id` = ?;
COMMIT;

-- op: cas-decrement
START TRANSACTION;
-- id
SELECT `version`, `qty` FROM `sqlguard_bench_stock` WHERE `id` = ?;
-- qty - 1, id, version
UPDATE `sqlguard_bench_stock` SET `qty` = ?, `version` = `version` + 1 WHERE `id` = ? AND `version` = ?;
COMMIT;

-- op: idem-first
-- scope, key, fingerprint, owner, lease_ms, lease_ms + retention_ms
INSERT INTO sqlguard_idempotency (scope, idem_key, status, fingerprint, owner, locked_until, created_at, expire_at) VALUES (?, ?, 'in_progress', ?, ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?);
-- 'completed', 201, body (blob), retention_ms, scope, key, owner
UPDATE sqlguard_idempotency SET status = ?, response_code = ?, response_body = ?, completed_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), locked_until = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), expire_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ? WHERE scope = ? AND idem_key = ? AND owner = ? AND status = 'in_progress';

-- op: idem-replay
-- scope, key, ... (the key exists: error 1062)
INSERT INTO sqlguard_idempotency (scope, idem_key, status, fingerprint, owner, locked_until, created_at, expire_at) VALUES (?, ?, 'in_progress', ?, ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?);
-- scope, key
SELECT status, fingerprint, response_code, response_body, CASE WHEN locked_until <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) THEN 1 ELSE 0 END, CASE WHEN expire_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) THEN 1 ELSE 0 END FROM sqlguard_idempotency WHERE scope = ? AND idem_key = ?;

-- op: inbox
START TRANSACTION;
-- consumer, message_id, retention_ms
INSERT INTO sqlguard_inbox (consumer, message_id, processed_at, expire_at) VALUES (?, ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?);
-- id  (the handler's business write)
UPDATE `sqlguard_bench_stock` SET `qty` = `qty` - 1 WHERE `id` = ?;
COMMIT;
