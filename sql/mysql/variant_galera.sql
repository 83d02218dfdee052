-- sql/mysql/variant_galera.sql — MariaDB Galera Cluster nodes (wsrep_on = 1, detected at connect).
-- Not a catalog of its own: each entry here REPLACES the entry of the same name in the other
-- sql/mysql/ files for such connections (the catalog "mysql+galera"). Everything else is the
-- same text.

-- name: lease_take
-- not supported: on a Galera node an autocommit INSERT ... RETURNING that certification aborts can leave the client waiting for a result that never comes (seen on MariaDB 10.11 under cross-node take-overs); the take-over is the UPDATE (lease_acquire) and lease_read_mine reads the fence
