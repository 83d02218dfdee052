-- Issue 23. Declarations of the one version rule (include/sqlguard/version_cas.h) are stored
-- under the table's canonical name, schema.table, as the database resolves it. Older builds
-- stored the spelling they were given; rewrite the unqualified ones that resolve now (as this
-- session's search_path resolves them; a schema-qualified spelling already is canonical, since
-- sqlguard quotes identifiers). Rows that do not resolve, or whose canonical name is already
-- declared, stay as they are: the lookup still honours them for their exact spelling.
UPDATE sqlguard_versioned_table v
   SET table_name = n.nspname || '.' || c.relname
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 WHERE strpos(v.table_name, '.') = 0
   AND c.oid = to_regclass(quote_ident(v.table_name))
   AND NOT EXISTS (SELECT 1 FROM sqlguard_versioned_table d WHERE d.table_name = n.nspname || '.' || c.relname);
