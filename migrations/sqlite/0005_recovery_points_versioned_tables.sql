-- Issue 17. Recovery points of phased idempotent handlers (include/sqlguard/idempotency.h):
-- the last committed phase, its state blob, and which execution attempt holds the key.
ALTER TABLE sqlguard_idempotency ADD COLUMN recovery_point TEXT;
ALTER TABLE sqlguard_idempotency ADD COLUMN phase_state BLOB;
ALTER TABLE sqlguard_idempotency ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1;

-- The one version rule (include/sqlguard/version_cas.h): a user table declared
-- versioned once; every sqlguard writer on it bumps version_column.
CREATE TABLE sqlguard_versioned_table (
  table_name     TEXT    NOT NULL PRIMARY KEY,
  version_column TEXT    NOT NULL,
  declared_at    INTEGER NOT NULL
) WITHOUT ROWID;
