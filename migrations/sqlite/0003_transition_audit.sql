-- Audit trail of state-machine transitions (include/sqlguard/transition.h):
-- one row per APPLIED transition, written in the transition's transaction.
-- at_ms is the database clock in ms since the Unix epoch.
CREATE TABLE sqlguard_transition_audit (
  audit_id   INTEGER PRIMARY KEY AUTOINCREMENT,
  machine    TEXT    NOT NULL,
  entity_key TEXT    NOT NULL,
  event      TEXT    NOT NULL,
  from_state TEXT    NOT NULL,
  to_state   TEXT    NOT NULL,
  actor      TEXT,
  at_ms      INTEGER NOT NULL
);
CREATE INDEX sqlguard_transition_audit_entity ON sqlguard_transition_audit (machine, entity_key);
