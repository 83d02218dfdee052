-- Issue 23. Declarations of the one version rule (include/sqlguard/version_cas.h) are stored
-- under the table's canonical name, schema.table with the table's own letter case, as SQLite
-- resolves it (names ignore case; temp, then main, then attached databases). Older builds
-- stored the spelling they were given; rewrite those that resolve now. Rows that do not
-- resolve, or whose canonical name is already declared (OR IGNORE), stay as they are: the
-- lookup still honours them for their exact spelling.
UPDATE OR IGNORE sqlguard_versioned_table
   SET table_name = (
     SELECT t.schema || '.' || t.name FROM pragma_table_list t LEFT JOIN pragma_database_list d ON d.name = t.schema
      WHERE t.name = (CASE WHEN instr(sqlguard_versioned_table.table_name, '.') > 0
                           THEN substr(sqlguard_versioned_table.table_name, instr(sqlguard_versioned_table.table_name, '.') + 1)
                           ELSE sqlguard_versioned_table.table_name END) COLLATE NOCASE
        AND (instr(sqlguard_versioned_table.table_name, '.') = 0
             OR t.schema = substr(sqlguard_versioned_table.table_name, 1, instr(sqlguard_versioned_table.table_name, '.') - 1) COLLATE NOCASE)
      ORDER BY CASE t.schema WHEN 'temp' THEN -1 WHEN 'main' THEN 0 ELSE COALESCE(d.seq, 1000) END LIMIT 1)
 WHERE EXISTS (
     SELECT 1 FROM pragma_table_list t
      WHERE t.name = (CASE WHEN instr(sqlguard_versioned_table.table_name, '.') > 0
                           THEN substr(sqlguard_versioned_table.table_name, instr(sqlguard_versioned_table.table_name, '.') + 1)
                           ELSE sqlguard_versioned_table.table_name END) COLLATE NOCASE
        AND (instr(sqlguard_versioned_table.table_name, '.') = 0
             OR t.schema = substr(sqlguard_versioned_table.table_name, 1, instr(sqlguard_versioned_table.table_name, '.') - 1) COLLATE NOCASE));
