-- Idempotency keys: the (scope, idem_key) primary key is the mutex.
-- status: in_progress | completed | failed. locked_until is the lease of the
-- execution in progress (DB clock); expire_at is the retention horizon.
CREATE TABLE IF NOT EXISTS sqlguard_idempotency (
  scope         VARCHAR(64)  NOT NULL,
  idem_key      VARCHAR(255) NOT NULL,
  status        VARCHAR(16)  NOT NULL,
  fingerprint   VARCHAR(64)  NOT NULL,
  owner         VARCHAR(255) NOT NULL,
  locked_until  BIGINT       NOT NULL,
  response_code INTEGER,
  response_body BYTEA,
  created_at    BIGINT       NOT NULL,
  completed_at  BIGINT,
  expire_at     BIGINT       NOT NULL,
  PRIMARY KEY (scope, idem_key)
);
CREATE INDEX IF NOT EXISTS sqlguard_idempotency_expire ON sqlguard_idempotency (expire_at);

-- Consumer-side message dedup, written in the business transaction.
CREATE TABLE IF NOT EXISTS sqlguard_inbox (
  consumer     VARCHAR(128) NOT NULL,
  message_id   VARCHAR(255) NOT NULL,
  processed_at BIGINT       NOT NULL,
  expire_at    BIGINT       NOT NULL,
  PRIMARY KEY (consumer, message_id)
);
CREATE INDEX IF NOT EXISTS sqlguard_inbox_expire ON sqlguard_inbox (expire_at);
