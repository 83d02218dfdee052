-- The fence counter never wraps. At 2^63 - 1, `value + 1` in lease_acquire
-- does not overflow in SQLite: it becomes a REAL (9.223372036854776e18),
-- which the INTEGER column keeps as a REAL, so every later token would be the
-- same inexact number. These triggers refuse any fence that is not an
-- integer before it is stored; the acquire then fails with
-- "sqlguard_fence_seq exhausted" (classified resource_exhausted).
CREATE TRIGGER sqlguard_lock_fence_exhausted_ins BEFORE INSERT ON sqlguard_lock
WHEN typeof(NEW.fence) <> 'integer'
BEGIN
  SELECT RAISE(ABORT, 'sqlguard_fence_seq exhausted: every fencing token up to 9223372036854775807 has been issued');
END;
CREATE TRIGGER sqlguard_lock_fence_exhausted_upd BEFORE UPDATE OF fence ON sqlguard_lock
WHEN typeof(NEW.fence) <> 'integer'
BEGIN
  SELECT RAISE(ABORT, 'sqlguard_fence_seq exhausted: every fencing token up to 9223372036854775807 has been issued');
END;
