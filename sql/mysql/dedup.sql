-- sql/mysql/dedup.sql — MariaDB >= 10.6 (mysqlcppconn 1.1). Session time zone is pinned to UTC.
-- Idempotency keys and consumer inbox (src/strategies/idempotency.cpp, inbox.cpp).
-- Tables sqlguard_idempotency and sqlguard_inbox, migrations/mysql/0002_dedup.sql.

-- name: idem_insert
-- The placeholder: the primary key decides who executes. An existing key is a 1062
-- error (plain INSERT: INSERT IGNORE would also hide data errors).
-- Causal on Galera (wsrep_sync_wait = 4): a key inserted on another node is a 1062 here,
-- not a certification failure at commit.
-- returns: :execrows
-- params: scope, key, fingerprint, owner, lease_ms, expiry_ms
SET STATEMENT wsrep_sync_wait = 4 FOR INSERT INTO sqlguard_idempotency (scope, idem_key, status, fingerprint, owner, locked_until, created_at, expire_at)
VALUES (?, ?, 'in_progress', ?, ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?);

-- name: idem_select
-- Causal on Galera (wsrep_sync_wait = 1): the replay read sees a completion committed on
-- another node.
-- returns: :one status, fingerprint, response_code, response_body, lock_expired, expired
-- params: scope, key
SET STATEMENT wsrep_sync_wait = 1 FOR SELECT status, fingerprint, response_code, response_body,
  CASE WHEN locked_until <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) THEN 1 ELSE 0 END, CASE WHEN expire_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) THEN 1 ELSE 0 END
FROM sqlguard_idempotency WHERE scope = ? AND idem_key = ?;

-- name: idem_renew
-- returns: :execrows
-- params: lease_ms, expiry_ms, scope, key, owner
UPDATE sqlguard_idempotency SET locked_until = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?, expire_at = GREATEST(expire_at, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?)
WHERE scope = ? AND idem_key = ? AND owner = ? AND status = 'in_progress';

-- name: idem_takeover
-- Matches only a crashed placeholder (lease expired, same request) or a finished row past
-- its retention; concurrent retries serialize on the row and the first one wins.
-- returns: :execrows
-- params: fingerprint, owner, lease_ms, expiry_ms, scope, key, fingerprint
UPDATE sqlguard_idempotency SET status = 'in_progress', fingerprint = ?, owner = ?, locked_until = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?,
  response_code = NULL, response_body = NULL, created_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), completed_at = NULL, expire_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?
WHERE scope = ? AND idem_key = ?
  AND ((status = 'in_progress' AND locked_until <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) AND fingerprint = ?) OR (status <> 'in_progress' AND expire_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)));

-- name: idem_remove
-- returns: :execrows
-- params: scope, key, owner
DELETE FROM sqlguard_idempotency WHERE scope = ? AND idem_key = ? AND owner = ? AND status = 'in_progress';

-- name: idem_complete
-- returns: :execrows
-- params: status, response_code, response_body, retention_ms, scope, key, owner
UPDATE sqlguard_idempotency SET status = ?, response_code = ?, response_body = ?, completed_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED),
  locked_until = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), expire_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?
WHERE scope = ? AND idem_key = ? AND owner = ? AND status = 'in_progress';

-- name: idem_purge
-- One bounded batch of expired keys; a live in-progress placeholder is never deleted.
-- returns: :execrows
-- params: batch
DELETE FROM sqlguard_idempotency WHERE expire_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) AND (status <> 'in_progress' OR locked_until <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)) LIMIT ?;

-- name: inbox_insert
-- Runs first in the handler's transaction: a concurrent delivery of the same message
-- waits here for our commit. An existing id is a 1062 error. Causal on Galera
-- (wsrep_sync_wait = 4): a delivery recorded on another node is a 1062 here too.
-- returns: :execrows
-- params: consumer, message_id, retention_ms
SET STATEMENT wsrep_sync_wait = 4 FOR INSERT INTO sqlguard_inbox (consumer, message_id, processed_at, expire_at) VALUES (?, ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?);

-- name: inbox_purge
-- returns: :execrows
-- params: batch
DELETE FROM sqlguard_inbox WHERE expire_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) LIMIT ?;

-- ---- issue 17: recovery points of phased handlers ------------------------------------------

-- name: idem_phase_takeover
-- idem_takeover for phased handlers: a crashed execution's row keeps its recovery point and
-- phase state and counts one more attempt; a finished row past its retention starts over.
-- The CASEs come first: MariaDB evaluates SET left to right and would see the new status.
-- returns: :execrows
-- params: fingerprint, owner, lease_ms, expiry_ms, scope, key, fingerprint
UPDATE sqlguard_idempotency SET
  attempt = CASE WHEN status = 'in_progress' THEN attempt + 1 ELSE 1 END,
  recovery_point = CASE WHEN status = 'in_progress' THEN recovery_point ELSE NULL END,
  phase_state = CASE WHEN status = 'in_progress' THEN phase_state ELSE NULL END,
  status = 'in_progress', fingerprint = ?, owner = ?, locked_until = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?,
  response_code = NULL, response_body = NULL, created_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), completed_at = NULL, expire_at = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?
WHERE scope = ? AND idem_key = ?
  AND ((status = 'in_progress' AND locked_until <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) AND fingerprint = ?) OR (status <> 'in_progress' AND expire_at <= CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)));

-- name: idem_phase_state
-- The recovery point, phase state and attempt number of the execution holding the key.
-- returns: :one recovery_point, phase_state, attempt
-- params: scope, key, owner
SELECT recovery_point, phase_state, attempt FROM sqlguard_idempotency WHERE scope = ? AND idem_key = ? AND owner = ? AND status = 'in_progress';

-- name: idem_phase_commit
-- Stores a recovery point in the phase's own transaction (owner-checked: 0 rows = the key
-- was taken over, and the phase rolls back) and extends the lease.
-- returns: :execrows
-- params: recovery_point, phase_state, lease_ms, expiry_ms, scope, key, owner
UPDATE sqlguard_idempotency SET recovery_point = ?, phase_state = ?, locked_until = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?, expire_at = GREATEST(expire_at, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) + ?)
WHERE scope = ? AND idem_key = ? AND owner = ? AND status = 'in_progress';

-- name: idem_unlock
-- Ends the lease now (serialization failure, failed phase): a retry resumes at once.
-- returns: :execrows
-- params: scope, key, owner
UPDATE sqlguard_idempotency SET locked_until = CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) WHERE scope = ? AND idem_key = ? AND owner = ? AND status = 'in_progress';
