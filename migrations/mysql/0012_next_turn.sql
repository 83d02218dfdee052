-- Issue 40: bounded barging. A waiter of the default lease that has waited
-- LeaseOptions::barging_limit asks for the next turn: next_owner (its owner token for
-- this wait), next_since (the database clock when it began to wait: the earliest waiter
-- wins the turn) and next_ttl_ms (the ttl it asked for). The release hands the lease to
-- next_owner in its own commit (owner, a new fence, expire_at = now + next_ttl_ms,
-- handed = 1 until the new owner confirms it with its next acquire attempt) and the
-- turn is free again. next_owner = '': nobody asked.
ALTER TABLE sqlguard_lock ADD COLUMN IF NOT EXISTS next_owner VARBINARY(255) NOT NULL DEFAULT '';
ALTER TABLE sqlguard_lock ADD COLUMN IF NOT EXISTS next_since BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sqlguard_lock ADD COLUMN IF NOT EXISTS next_ttl_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sqlguard_lock ADD COLUMN IF NOT EXISTS handed BIGINT NOT NULL DEFAULT 0;
