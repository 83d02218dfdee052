-- Issue 23. Declarations of the one version rule (include/sqlguard/version_cas.h) are stored
-- under the table's canonical name, database.table, as the server resolves it. Older builds
-- stored the spelling they were given; rewrite the unqualified ones that name a table of this
-- database (exact letter case: the spelling older builds quoted and wrote through). Rows that
-- do not resolve, or whose canonical name is already declared (IGNORE), stay as they are: the
-- lookup still honours them for their exact spelling.
UPDATE IGNORE sqlguard_versioned_table v
  JOIN information_schema.tables t
    ON t.table_schema = DATABASE() AND BINARY t.table_name = BINARY v.table_name
   SET v.table_name = CONCAT(t.table_schema, '.', t.table_name)
 WHERE LOCATE('.', v.table_name) = 0;
