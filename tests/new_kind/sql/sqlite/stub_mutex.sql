-- sql/sqlite/stub_mutex.sql — the stub kind "stubmutex" of tests/new_kind/ (a one-permit
-- mutex on the holdings of sqlguard_sync_holder). Declared in its source file,
-- src/strategies/kinds/stub_mutex.cpp.

-- name: stub_mutex_holders
-- The name's live holder rows (unexpired on the database clock).
-- returns: :many owner, fence, expire_at, db_now_ms
-- params: name
SELECT owner, fence, expire_at, CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) AS db_now_ms
FROM sqlguard_sync_holder WHERE name = ? AND expire_at > CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) ORDER BY slot;
