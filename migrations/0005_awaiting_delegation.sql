-- A new state, `awaiting_delegation` (moving a zone in: DESIGN.md section 2, safety rule
-- 9). The state column's CHECK lists every state, and SQLite cannot alter a CHECK: the
-- table is rebuilt with the same columns. Events, alerts and the outbox reference
-- zones (name): their checks are deferred to the commit, by which time every zone row is
-- back. The status view reads zones, so it is made again (unchanged).
PRAGMA defer_foreign_keys = ON;
CREATE TEMP TABLE zones_v4 AS SELECT * FROM zones;
DROP VIEW status;
DROP TABLE zones;
CREATE TABLE zones (
    name                  TEXT PRIMARY KEY,
    -- What the operator asked for: none (watch only), enabled, disabled.
    intent                TEXT NOT NULL DEFAULT 'none'
                          CHECK (intent IN ('none', 'enabled', 'disabled')),
    -- The operator stated the DS announced in awaiting_ds was never submitted.
    ds_never_submitted    INTEGER NOT NULL DEFAULT 0 CHECK (ds_never_submitted IN (0, 1)),
    -- NULL until the first observation adopts the zone; else a state of DESIGN.md §2.
    state                 TEXT CHECK (state IN ('disabled', 'awaiting_delegation', 'enabling',
                          'awaiting_ds', 'ds_observed', 'active', 'awaiting_ds_removal',
                          'ttl_wait', 'disabling')),
    state_since           INTEGER NOT NULL,
    -- When the daemon looks at the zone next (a persisted deadline, not a sleeping task).
    next_check_at         INTEGER NOT NULL,
    last_observed_at      INTEGER,
    -- JSON summary of the last observation: provider, parent and child answers.
    last_observation      TEXT,
    -- Optimistic lock: every write bumps it; a write with a stale version is refused.
    version               INTEGER NOT NULL DEFAULT 0,
    -- `lifecycle::Facts` as one JSON object (migration 0004).
    facts                 TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(facts))
);
INSERT INTO zones (name, intent, ds_never_submitted, state, state_since, next_check_at,
                   last_observed_at, last_observation, version, facts)
    SELECT name, intent, ds_never_submitted, state, state_since, next_check_at,
           last_observed_at, last_observation, version, facts FROM temp.zones_v4;
DROP TABLE temp.zones_v4;
CREATE INDEX zones_due ON zones (next_check_at);
CREATE VIEW status AS
SELECT z.name                                           AS zone,
       coalesce(z.state, '(not yet observed)')          AS state,
       z.intent                                         AS intent,
       datetime(z.state_since / 1000, 'unixepoch')      AS since,
       datetime(z.next_check_at / 1000, 'unixepoch')    AS next_check,
       json_extract(z.facts, '$.ds_line')               AS ds,
       json_extract(z.facts, '$.ds_to_enter')           AS ds_to_enter,
       (SELECT count(*) FROM alerts a
         WHERE a.zone = z.name AND a.resolved_at IS NULL) AS open_alerts
  FROM zones z
 ORDER BY z.name;
