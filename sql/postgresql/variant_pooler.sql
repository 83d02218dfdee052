-- sql/postgresql/variant_pooler.sql — PostgreSQL behind a transaction-pooling proxy (PgBouncer
-- pool_mode = transaction), chosen by `?pooler=transaction` in the URI. Not a catalog of its own:
-- each entry here REPLACES the entry of the same name in the other sql/postgresql/ files for
-- such connections (the catalog "postgresql+pooler"). Everything else is the same text.
-- Behind a transaction pooler consecutive transactions may run on different server sessions,
-- so nothing may be left in a session: no session SET, no LISTEN, no session advisory lock, no
-- named prepared statement (the driver uses the unnamed statement in this mode).

-- name: session_statement_timeout
-- not supported: a session-level SET behind a transaction pooler would stay on a server connection other clients then get (PgBouncer transaction pooling); the watchdog's statements are bounded client-side instead

-- name: lease_queue_leave
-- not supported: a session advisory lock would stay on a server connection other clients then get; behind a transaction pooler there is no waiter queue (lease_acquire runs with queue_role '') and waiters poll with backoff
