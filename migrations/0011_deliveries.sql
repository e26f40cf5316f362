-- Each alert sink's own queue (issue 33): one row per notification and sink, written when
-- the notification is made, delivered by that sink's worker outside any zone's step, so
-- that a slow or failing sink holds up neither a zone nor another sink, and what a sink
-- still owes survives a restart. `seq` is the DS or NS request's number (0 for an
-- alert), so that a later request for the same DS is a notification of its own.
CREATE TABLE deliveries (
    id            INTEGER PRIMARY KEY,
    -- The sink's configuration key: alerts.webhook[0], alerts.exec[1].
    sink          TEXT NOT NULL,
    event_id      TEXT NOT NULL,
    seq           INTEGER NOT NULL DEFAULT 0,
    -- '' for a daemon-wide alert; else delivered only by the zone's holder.
    zone          TEXT NOT NULL DEFAULT '',
    -- The notification as sent (the webhook's JSON).
    event         TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    attempts      INTEGER NOT NULL DEFAULT 0,
    last_error    TEXT,
    delivered_at  INTEGER,
    -- A daemon is delivering it until then (several daemons: one sends).
    claimed_until INTEGER
);
CREATE UNIQUE INDEX deliveries_once ON deliveries (sink, event_id, seq);
CREATE INDEX deliveries_owed ON deliveries (sink, id) WHERE delivered_at IS NULL;
