-- The DS that belongs at the registrar (safety rule 8): set only once announced, while
-- the last observation showed the provider on with that key and every child address
-- serving it; NULL when the instruction is withheld or withdrawn.
ALTER TABLE zones ADD COLUMN ds_to_enter TEXT;
-- Since when the provider says DNSSEC is off while the zone is on the enable path.
ALTER TABLE zones ADD COLUMN provider_off_since INTEGER;

-- The status view gains the DS to enter (`ds` stays: the DS of the key being followed).
DROP VIEW status;
CREATE VIEW status AS
SELECT z.name                                           AS zone,
       coalesce(z.state, '(not yet observed)')          AS state,
       z.intent                                         AS intent,
       datetime(z.state_since / 1000, 'unixepoch')      AS since,
       datetime(z.next_check_at / 1000, 'unixepoch')    AS next_check,
       z.ds_line                                        AS ds,
       z.ds_to_enter                                    AS ds_to_enter,
       (SELECT count(*) FROM alerts a
         WHERE a.zone = z.name AND a.resolved_at IS NULL) AS open_alerts
  FROM zones z
 ORDER BY z.name;

-- A condition seen again and again (a zone the provider does not know, at every poll) is
-- one event with a count: the events table stays append-only, the repeats are counted
-- here. `count` is how many times it was seen after the event itself.
CREATE TABLE event_repeats (
    event_id INTEGER PRIMARY KEY REFERENCES events (id),
    count    INTEGER NOT NULL,
    last_at  INTEGER NOT NULL
);

DROP VIEW history;
CREATE VIEW history AS
SELECT e.zone                                   AS zone,
       datetime(e.at / 1000, 'unixepoch')       AS at,
       e.kind                                   AS kind,
       coalesce(e.from_state, '-') || ' -> ' || coalesce(e.to_state, '-') AS states,
       e.reason                                 AS reason,
       coalesce(r.count, 0)                     AS repeats,
       datetime(r.last_at / 1000, 'unixepoch')  AS last_seen
  FROM events e LEFT JOIN event_repeats r ON r.event_id = e.id
 ORDER BY e.zone, e.id;

-- Provider calls whose outcome is unknown (a timeout after sending, a 5xx, a crash while
-- the call was in flight) are recorded as such and settled by the next observation.
-- `started_at`: when a provider call was begun (set before the request leaves).
-- pending → done | failed | refused | superseded | unknown → done | failed (settled)
CREATE TABLE outbox_v3 (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    zone        TEXT NOT NULL REFERENCES zones (name),
    created_at  INTEGER NOT NULL,
    effect      TEXT NOT NULL,
    status      TEXT NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'done', 'failed', 'refused', 'superseded', 'unknown')),
    attempts    INTEGER NOT NULL DEFAULT 0,
    finished_at INTEGER,
    last_error  TEXT,
    started_at  INTEGER
);
INSERT INTO outbox_v3 (id, zone, created_at, effect, status, attempts, finished_at, last_error)
    SELECT id, zone, created_at, effect, status, attempts, finished_at, last_error FROM outbox;
DROP TABLE outbox;
ALTER TABLE outbox_v3 RENAME TO outbox;
CREATE INDEX outbox_pending ON outbox (zone, id) WHERE status = 'pending';
CREATE INDEX outbox_unknown ON outbox (zone, id) WHERE status = 'unknown';
