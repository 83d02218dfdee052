-- Issue 17. Recovery points of phased idempotent handlers (include/sqlguard/idempotency.h):
-- the last committed phase, its state blob, and which execution attempt holds the key.
ALTER TABLE sqlguard_idempotency
  ADD COLUMN IF NOT EXISTS recovery_point VARBINARY(64),
  ADD COLUMN IF NOT EXISTS phase_state LONGBLOB,
  ADD COLUMN IF NOT EXISTS attempt INT NOT NULL DEFAULT 1;

-- The one version rule (include/sqlguard/version_cas.h): a user table declared
-- versioned once; every sqlguard writer on it bumps version_column.
CREATE TABLE IF NOT EXISTS sqlguard_versioned_table (
  table_name     VARBINARY(128) NOT NULL PRIMARY KEY,
  version_column VARBINARY(128) NOT NULL,
  declared_at    BIGINT         NOT NULL
) ENGINE = InnoDB;
