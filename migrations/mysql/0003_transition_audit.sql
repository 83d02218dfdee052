-- Audit trail of state-machine transitions (include/sqlguard/transition.h):
-- one row per APPLIED transition, written in the transition's transaction.
-- at_ms is the database clock in ms since the Unix epoch.
CREATE TABLE IF NOT EXISTS sqlguard_transition_audit (
  audit_id   BIGINT         NOT NULL AUTO_INCREMENT,
  machine    VARBINARY(128) NOT NULL,
  entity_key VARBINARY(255) NOT NULL,
  event      VARBINARY(64)  NOT NULL,
  from_state VARBINARY(64)  NOT NULL,
  to_state   VARBINARY(64)  NOT NULL,
  actor      VARBINARY(255),
  at_ms      BIGINT         NOT NULL,
  PRIMARY KEY (audit_id),
  KEY sqlguard_transition_audit_entity (machine, entity_key)
) ENGINE = InnoDB;
