-- sql/sqlite/doctor.sql — SQLite 3.35+. What `sqlguard doctor` (check_environment()) reads;
-- nothing here changes the file. Checks: src/dialect/sqlite/doctor.cpp.

-- name: doctor_settings
-- (name, value) rows: journal mode, synchronous level (0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA) and the
-- main database's file ('' for an in-memory database).
-- returns: :many name, value
-- params: 
SELECT 'journal_mode', journal_mode FROM pragma_journal_mode
UNION ALL SELECT 'synchronous', CAST(synchronous AS TEXT) FROM pragma_synchronous
UNION ALL SELECT 'file', file FROM pragma_database_list WHERE name = 'main';

-- name: doctor_standbys
-- not needed: no server, no replication

-- name: doctor_backend_pid
-- not needed: no server, no pooler

-- name: doctor_engine
-- not needed: an embedded library, not a server that could be another engine
