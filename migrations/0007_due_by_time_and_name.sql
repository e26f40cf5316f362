-- A tick reads the due zones in (next_check_at, name) order with a LIMIT. Indexed on the
-- time alone, zones due at the same moment (all of them after an import, or after
-- `intent` for many at once) were read whole and sorted at every tick, each with its
-- outbox and alert subqueries: a pass over N such zones cost N^2 / tick size rows.
DROP INDEX zones_due;
CREATE INDEX zones_due ON zones (next_check_at, name);
