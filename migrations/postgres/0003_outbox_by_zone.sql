-- Every step reads its zone's outbox (a DS request's hook failure, calls of unknown
-- outcome, effects owed) in the same statement as the zone row: by zone, not by a scan
-- of every zone's rows.
CREATE INDEX outbox_by_zone ON outbox (zone, id);
