-- sqlguard bench --emit-sql, dialect postgresql. Statements as sqlguard sends them (`?` = bound value; the driver numbers them $1..$n).

-- op: lease-distinct
-- name, owner, ttl_ms, min_hold_ms(0)
INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at) VALUES (?, ?, nextval('sqlguard_fence_seq'), (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + ?, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + ?) ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, fence = nextval('sqlguard_fence_seq'), expire_at = excluded.expire_at, acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at, min_release_at = excluded.min_release_at WHERE sqlguard_lock.expire_at <= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT RETURNING fence, expire_at;
-- native: INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at) VALUES ($1, $2, nextval('sqlguard_fence_seq'), (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + $3, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + $4) ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, fence = nextval('sqlguard_fence_seq'), expire_at = excluded.expire_at, acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at, min_release_at = excluded.min_release_at WHERE sqlguard_lock.expire_at <= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT RETURNING fence, expire_at;
-- name, owner
UPDATE sqlguard_lock SET expire_at = GREATEST((EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, min_release_at) WHERE name = ? AND owner = ? AND expire_at > (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT;
-- native: UPDATE sqlguard_lock SET expire_at = GREATEST((EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, min_release_at) WHERE name = $1 AND owner = $2 AND expire_at > (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT;
-- channel 'sqlguard_' || left(sha256(name), 24)  (wakes blocked waiters)
SELECT pg_notify(?, '');
-- native: SELECT pg_notify($1, '');

-- op: lease-hot
-- name, owner, ttl_ms, min_hold_ms(0)
INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at) VALUES (?, ?, nextval('sqlguard_fence_seq'), (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + ?, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + ?) ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, fence = nextval('sqlguard_fence_seq'), expire_at = excluded.expire_at, acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at, min_release_at = excluded.min_release_at WHERE sqlguard_lock.expire_at <= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT RETURNING fence, expire_at;
-- native: INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at) VALUES ($1, $2, nextval('sqlguard_fence_seq'), (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + $3, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + $4) ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, fence = nextval('sqlguard_fence_seq'), expire_at = excluded.expire_at, acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at, min_release_at = excluded.min_release_at WHERE sqlguard_lock.expire_at <= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT RETURNING fence, expire_at;
-- name, owner
UPDATE sqlguard_lock SET expire_at = GREATEST((EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, min_release_at) WHERE name = ? AND owner = ? AND expire_at > (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT;
-- native: UPDATE sqlguard_lock SET expire_at = GREATEST((EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, min_release_at) WHERE name = $1 AND owner = $2 AND expire_at > (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT;
-- channel 'sqlguard_' || left(sha256(name), 24)  (wakes blocked waiters)
SELECT pg_notify(?, '');
-- native: SELECT pg_notify($1, '');

-- op: handoff
-- waiters: LISTEN "sqlguard_<sha256(name)[:24]>" once, then the acquire on each NOTIFY or backoff tick;
-- name, owner, ttl_ms, min_hold_ms(0)
INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at) VALUES (?, ?, nextval('sqlguard_fence_seq'), (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + ?, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + ?) ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, fence = nextval('sqlguard_fence_seq'), expire_at = excluded.expire_at, acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at, min_release_at = excluded.min_release_at WHERE sqlguard_lock.expire_at <= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT RETURNING fence, expire_at;
-- native: INSERT INTO sqlguard_lock (name, owner, fence, expire_at, acquired_at, renewed_at, min_release_at) VALUES ($1, $2, nextval('sqlguard_fence_seq'), (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + $3, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + $4) ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, fence = nextval('sqlguard_fence_seq'), expire_at = excluded.expire_at, acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at, min_release_at = excluded.min_release_at WHERE sqlguard_lock.expire_at <= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT RETURNING fence, expire_at;
-- name, owner
UPDATE sqlguard_lock SET expire_at = GREATEST((EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, min_release_at) WHERE name = ? AND owner = ? AND expire_at > (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT;
-- native: UPDATE sqlguard_lock SET expire_at = GREATEST((EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, min_release_at) WHERE name = $1 AND owner = $2 AND expire_at > (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT;
-- channel 'sqlguard_' || left(sha256(name), 24)  (wakes blocked waiters)
SELECT pg_notify(?, '');
-- native: SELECT pg_notify($1, '');

-- op: guarded-decrement
-- 1, id, 1
UPDATE "sqlguard_bench_stock" SET "qty" = "qty" - ? WHERE "id" = ? AND "qty" >= ?;
-- native: UPDATE "sqlguard_bench_stock" SET "qty" = "qty" - $1 WHERE "id" = $2 AND "qty" >= $3;

-- op: rowlock-decrement
BEGIN;
-- '5000ms'
SELECT set_config('lock_timeout', ?, true);
-- native: SELECT set_config('lock_timeout', $1, true);
-- id
SELECT "id", "qty" FROM "sqlguard_bench_stock" WHERE "id" = ? FOR UPDATE;
-- native: SELECT "id", "qty" FROM "sqlguard_bench_stock" WHERE "id" = $1 FOR UPDATE;
-- qty - 1, id
UPDATE "sqlguard_bench_stock" SET "qty" = ? WHERE "id" = ?;
-- native: UPDATE "sqlguard_bench_stock" SET "qty" = $1 WHERE "id" = $2;
COMMIT;

-- op: cas-decrement
BEGIN;
-- id
SELECT "version", "qty" FROM "sqlguard_bench_stock" WHERE "id" = ?;
-- native: SELECT "version", "qty" FROM "sqlguard_bench_stock" WHERE "id" = $1;
-- qty - 1, id, version
UPDATE "sqlguard_bench_stock" SET "qty" = ?, "version" = "version" + 1 WHERE "id" = ? AND "version" = ?;
-- native: UPDATE "sqlguard_bench_stock" SET "qty" = $1, "version" = "version" + 1 WHERE "id" = $2 AND "version" = $3;
COMMIT;

-- op: idem-first
-- scope, key, fingerprint, owner, lease_ms, lease_ms + retention_ms
INSERT INTO sqlguard_idempotency (scope, idem_key, status, fingerprint, owner, locked_until, created_at, expire_at) VALUES (?, ?, 'in_progress', ?, ?, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + ?, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + ?) ON CONFLICT (scope, idem_key) DO NOTHING;
-- native: INSERT INTO sqlguard_idempotency (scope, idem_key, status, fingerprint, owner, locked_until, created_at, expire_at) VALUES ($1, $2, 'in_progress', $3, $4, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + $5, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + $6) ON CONFLICT (scope, idem_key) DO NOTHING;
-- 'completed', 201, body (blob), retention_ms, scope, key, owner
UPDATE sqlguard_idempotency SET status = ?, response_code = ?, response_body = ?, completed_at = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, locked_until = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, expire_at = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + ? WHERE scope = ? AND idem_key = ? AND owner = ? AND status = 'in_progress';
-- native: UPDATE sqlguard_idempotency SET status = $1, response_code = $2, response_body = $3, completed_at = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, locked_until = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, expire_at = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + $4 WHERE scope = $5 AND idem_key = $6 AND owner = $7 AND status = 'in_progress';

-- op: idem-replay
-- scope, key, ... (the key exists: 0 rows)
INSERT INTO sqlguard_idempotency (scope, idem_key, status, fingerprint, owner, locked_until, created_at, expire_at) VALUES (?, ?, 'in_progress', ?, ?, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + ?, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + ?) ON CONFLICT (scope, idem_key) DO NOTHING;
-- native: INSERT INTO sqlguard_idempotency (scope, idem_key, status, fingerprint, owner, locked_until, created_at, expire_at) VALUES ($1, $2, 'in_progress', $3, $4, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + $5, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + $6) ON CONFLICT (scope, idem_key) DO NOTHING;
-- scope, key
SELECT status, fingerprint, response_code, response_body, CASE WHEN locked_until <= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT THEN 1 ELSE 0 END, CASE WHEN expire_at <= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT THEN 1 ELSE 0 END FROM sqlguard_idempotency WHERE scope = ? AND idem_key = ?;
-- native: SELECT status, fingerprint, response_code, response_body, CASE WHEN locked_until <= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT THEN 1 ELSE 0 END, CASE WHEN expire_at <= (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT THEN 1 ELSE 0 END FROM sqlguard_idempotency WHERE scope = $1 AND idem_key = $2;

-- op: inbox
BEGIN;
-- consumer, message_id, retention_ms
INSERT INTO sqlguard_inbox (consumer, message_id, processed_at, expire_at) VALUES (?, ?, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + ?) ON CONFLICT (consumer, message_id) DO NOTHING;
-- native: INSERT INTO sqlguard_inbox (consumer, message_id, processed_at, expire_at) VALUES ($1, $2, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + $3) ON CONFLICT (consumer, message_id) DO NOTHING;
-- id  (the handler's business write)
UPDATE "sqlguard_bench_stock" SET "qty" = "qty" - 1 WHERE "id" = ?;
-- native: UPDATE "sqlguard_bench_stock" SET "qty" = "qty" - 1 WHERE "id" = $1;
COMMIT;
