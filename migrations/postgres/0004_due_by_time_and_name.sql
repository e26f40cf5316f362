-- A tick reads the due zones in (next_check_at, name) order with a LIMIT: the index gives
-- that order, so zones due at the same moment are not all read and sorted at every tick.
DROP INDEX IF EXISTS zones_due;
CREATE INDEX zones_due ON zones (next_check_at, name);
