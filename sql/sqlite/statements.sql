-- sqlguard bench --emit-sql, dialect sqlite. Statements as sqlguard sends them (`?` = bound value).

-- op: lease-distinct
-- name, owner, ttl_ms, min_hold_ms(0)
INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at) VALUES (?, ?, (SELECT value + 1 FROM sqlguard_fence_seq WHERE id = 1), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?) ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, fence = (SELECT value + 1 FROM sqlguard_fence_seq WHERE id = 1), expire_at = excluded.expire_at, acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at, min_release_at = excluded.min_release_at WHERE sqlguard_lock.expire_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) RETURNING fence, expire_at;
-- name, owner
UPDATE sqlguard_lock SET expire_at = MAX(CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), min_release_at) WHERE name = ? AND owner = ? AND expire_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER);

-- op: lease-hot
-- name, owner, ttl_ms, min_hold_ms(0)
INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at) VALUES (?, ?, (SELECT value + 1 FROM sqlguard_fence_seq WHERE id = 1), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?) ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, fence = (SELECT value + 1 FROM sqlguard_fence_seq WHERE id = 1), expire_at = excluded.expire_at, acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at, min_release_at = excluded.min_release_at WHERE sqlguard_lock.expire_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) RETURNING fence, expire_at;
-- name, owner
UPDATE sqlguard_lock SET expire_at = MAX(CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), min_release_at) WHERE name = ? AND owner = ? AND expire_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER);

-- op: handoff
-- name, owner, ttl_ms, min_hold_ms(0)
INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at) VALUES (?, ?, (SELECT value + 1 FROM sqlguard_fence_seq WHERE id = 1), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?) ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, fence = (SELECT value + 1 FROM sqlguard_fence_seq WHERE id = 1), expire_at = excluded.expire_at, acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at, min_release_at = excluded.min_release_at WHERE sqlguard_lock.expire_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) RETURNING fence, expire_at;
-- name, owner
UPDATE sqlguard_lock SET expire_at = MAX(CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), min_release_at) WHERE name = ? AND owner = ? AND expire_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER);

-- op: guarded-decrement
-- 1, id, 1
UPDATE "sqlguard_bench_stock" SET "qty" = "qty" - ? WHERE "id" = ? AND "qty" >= ?;

-- op: rowlock-decrement
-- then sqlite3_busy_timeout(5000) (C API, no SQL)
PRAGMA busy_timeout;
BEGIN IMMEDIATE;
-- id
SELECT "id", "qty" FROM "sqlguard_bench_stock" WHERE "id" = ?;
-- qty - 1, id
UPDATE "sqlguard_bench_stock" SET "qty" = ? WHERE "id" = ?;
COMMIT;

-- op: cas-decrement
BEGIN IMMEDIATE;
-- id
SELECT "version", "qty" FROM "sqlguard_bench_stock" WHERE "id" = ?;
-- qty - 1, id, version
UPDATE "sqlguard_bench_stock" SET "qty" = ?, "version" = "version" + 1 WHERE "id" = ? AND "version" = ?;
COMMIT;

-- op: idem-first
-- scope, key, fingerprint, owner, lease_ms, lease_ms + retention_ms
INSERT INTO sqlguard_idempotency (scope, idem_key, status, fingerprint, owner, locked_until, created_at, expire_at) VALUES (?, ?, 'in_progress', ?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?) ON CONFLICT (scope, idem_key) DO NOTHING;
-- 'completed', 201, body (blob), retention_ms, scope, key, owner
UPDATE sqlguard_idempotency SET status = ?, response_code = ?, response_body = ?, completed_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), locked_until = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), expire_at = CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ? WHERE scope = ? AND idem_key = ? AND owner = ? AND status = 'in_progress';

-- op: idem-replay
-- scope, key, ... (the key exists: 0 rows)
INSERT INTO sqlguard_idempotency (scope, idem_key, status, fingerprint, owner, locked_until, created_at, expire_at) VALUES (?, ?, 'in_progress', ?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?) ON CONFLICT (scope, idem_key) DO NOTHING;
-- scope, key
SELECT status, fingerprint, response_code, response_body, CASE WHEN locked_until <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) THEN 1 ELSE 0 END, CASE WHEN expire_at <= CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) THEN 1 ELSE 0 END FROM sqlguard_idempotency WHERE scope = ? AND idem_key = ?;

-- op: inbox
BEGIN IMMEDIATE;
-- consumer, message_id, retention_ms
INSERT INTO sqlguard_inbox (consumer, message_id, processed_at, expire_at) VALUES (?, ?, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER), CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?) ON CONFLICT (consumer, message_id) DO NOTHING;
-- id  (the handler's business write)
UPDATE "sqlguard_bench_stock" SET "qty" = "qty" - 1 WHERE "id" = ?;
COMMIT;
