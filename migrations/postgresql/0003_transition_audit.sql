-- Audit trail of state-machine transitions (include/sqlguard/transition.h):
-- one row per APPLIED transition, written in the transition's transaction.
-- at_ms is the database clock in ms since the Unix epoch.
CREATE TABLE IF NOT EXISTS sqlguard_transition_audit (
  audit_id   BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  machine    VARCHAR(128) NOT NULL,
  entity_key VARCHAR(255) NOT NULL,
  event      VARCHAR(64)  NOT NULL,
  from_state VARCHAR(64)  NOT NULL,
  to_state   VARCHAR(64)  NOT NULL,
  actor      VARCHAR(255),
  at_ms      BIGINT       NOT NULL
);
CREATE INDEX IF NOT EXISTS sqlguard_transition_audit_entity ON sqlguard_transition_audit (machine, entity_key);
