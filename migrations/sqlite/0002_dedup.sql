-- Idempotency keys: the (scope, idem_key) primary key is the mutex.
-- status: in_progress | completed | failed. locked_until is the lease of the
-- execution in progress (DB clock); expire_at is the retention horizon.
CREATE TABLE sqlguard_idempotency (
  scope         TEXT    NOT NULL,
  idem_key      TEXT    NOT NULL,
  status        TEXT    NOT NULL,
  fingerprint   TEXT    NOT NULL,
  owner         TEXT    NOT NULL,
  locked_until  INTEGER NOT NULL,
  response_code INTEGER,
  response_body BLOB,
  created_at    INTEGER NOT NULL,
  completed_at  INTEGER,
  expire_at     INTEGER NOT NULL,
  PRIMARY KEY (scope, idem_key)
) WITHOUT ROWID;
CREATE INDEX sqlguard_idempotency_expire ON sqlguard_idempotency (expire_at);

-- Consumer-side message dedup, written in the business transaction.
CREATE TABLE sqlguard_inbox (
  consumer     TEXT    NOT NULL,
  message_id   TEXT    NOT NULL,
  processed_at INTEGER NOT NULL,
  expire_at    INTEGER NOT NULL,
  PRIMARY KEY (consumer, message_id)
) WITHOUT ROWID;
CREATE INDEX sqlguard_inbox_expire ON sqlguard_inbox (expire_at);
