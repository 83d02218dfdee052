-- Idempotency keys: the (scope, idem_key) primary key is the mutex.
-- status: in_progress | completed | failed. locked_until is the lease of the
-- execution in progress (DB clock); expire_at is the retention horizon.
CREATE TABLE IF NOT EXISTS sqlguard_idempotency (
  scope         VARBINARY(64)  NOT NULL,
  idem_key      VARBINARY(255) NOT NULL,
  status        VARCHAR(16)    NOT NULL,
  fingerprint   VARCHAR(64)    NOT NULL,
  owner         VARBINARY(255) NOT NULL,
  locked_until  BIGINT         NOT NULL,
  response_code INT,
  response_body LONGBLOB,
  created_at    BIGINT         NOT NULL,
  completed_at  BIGINT,
  expire_at     BIGINT         NOT NULL,
  PRIMARY KEY (scope, idem_key),
  KEY sqlguard_idempotency_expire (expire_at)
) ENGINE = InnoDB;

-- Consumer-side message dedup, written in the business transaction.
CREATE TABLE IF NOT EXISTS sqlguard_inbox (
  consumer     VARBINARY(128) NOT NULL,
  message_id   VARBINARY(255) NOT NULL,
  processed_at BIGINT         NOT NULL,
  expire_at    BIGINT         NOT NULL,
  PRIMARY KEY (consumer, message_id),
  KEY sqlguard_inbox_expire (expire_at)
) ENGINE = InnoDB;
