-- dnssec-warden's state, one SQLite file (WAL mode). Read it with `sqlite3 state.db`:
--   SELECT * FROM status;                               -- one line per zone
--   SELECT * FROM history WHERE zone = 'example.com.';  -- the audit trail, readable
-- Every time is Unix milliseconds, UTC: datetime(at / 1000, 'unixepoch') shows it.
-- Zone names are lower case with the trailing dot.

-- One row per zone: where it stands, and the facts the safety rules need.
CREATE TABLE zones (
    name                  TEXT PRIMARY KEY,
    -- What the operator asked for: none (watch only), enabled, disabled.
    intent                TEXT NOT NULL DEFAULT 'none'
                          CHECK (intent IN ('none', 'enabled', 'disabled')),
    -- The operator stated the DS announced in awaiting_ds was never submitted.
    ds_never_submitted    INTEGER NOT NULL DEFAULT 0 CHECK (ds_never_submitted IN (0, 1)),
    -- NULL until the first observation adopts the zone; else a state of DESIGN.md §2.
    state                 TEXT CHECK (state IN ('disabled', 'enabling', 'awaiting_ds',
                          'ds_observed', 'active', 'awaiting_ds_removal', 'ttl_wait', 'disabling')),
    state_since           INTEGER NOT NULL,
    -- The DS line of the provider key being followed (as told to the operator).
    ds_line               TEXT,
    -- Every child server first seen serving the key; end of the propagation hold.
    dnskey_everywhere_at  INTEGER,
    hold_until            INTEGER,
    ds_announced_at       INTEGER,
    ds_first_seen_at      INTEGER,
    -- Every parent server first answered "no DS" (T_gone), and the largest DS TTL seen.
    t_gone                INTEGER,
    max_ds_ttl            INTEGER,
    partial_since         INTEGER,
    -- Incomplete observations in a row, and since when.
    failing_since         INTEGER,
    failures              INTEGER NOT NULL DEFAULT 0,
    -- When the daemon looks at the zone next (a persisted deadline, not a sleeping task).
    next_check_at         INTEGER NOT NULL,
    last_observed_at      INTEGER,
    -- JSON summary of the last observation: provider, parent and child answers.
    last_observation      TEXT,
    -- Optimistic lock: every write bumps it; a write with a stale version is refused.
    version               INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX zones_due ON zones (next_check_at);

-- The audit trail: append-only (triggers below refuse UPDATE and DELETE).
CREATE TABLE events (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    zone         TEXT NOT NULL REFERENCES zones (name),
    at           INTEGER NOT NULL,
    -- transition | note | intent | effect | guard | alert
    kind         TEXT NOT NULL,
    from_state   TEXT,
    to_state     TEXT,
    reason       TEXT NOT NULL,
    observation  TEXT
);
CREATE INDEX events_by_zone ON events (zone, id);
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;

-- One row per alert episode: opened when a condition starts, resolved when it clears.
CREATE TABLE alerts (
    id                    INTEGER PRIMARY KEY AUTOINCREMENT,
    zone                  TEXT NOT NULL REFERENCES zones (name),
    kind                  TEXT NOT NULL,
    severity              TEXT NOT NULL CHECK (severity IN ('warning', 'critical')),
    message               TEXT NOT NULL,
    opened_at             INTEGER NOT NULL,
    -- NULL: the opening notification is still to be sent.
    last_notified_at      INTEGER,
    notifications         INTEGER NOT NULL DEFAULT 0,
    resolved_at           INTEGER,
    -- NULL while a resolved alert's "resolved" notification is still to be sent.
    resolved_notified_at  INTEGER
);
CREATE UNIQUE INDEX alerts_one_open_episode ON alerts (zone, kind) WHERE resolved_at IS NULL;

-- Side effects decided by a committed step, performed after the commit.
CREATE TABLE outbox (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    zone        TEXT NOT NULL REFERENCES zones (name),
    created_at  INTEGER NOT NULL,
    -- JSON: {"effect":"enable_dnssec"} | {"effect":"disable_dnssec"} |
    --       {"effect":"announce_ds","ds_line":…} | {"effect":"request_ds_removal",…}
    effect      TEXT NOT NULL,
    -- pending → done | failed | refused (by the safety guard) | superseded (by a newer step)
    status      TEXT NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'done', 'failed', 'refused', 'superseded')),
    attempts    INTEGER NOT NULL DEFAULT 0,
    finished_at INTEGER,
    last_error  TEXT
);
CREATE INDEX outbox_pending ON outbox (zone, id) WHERE status = 'pending';

CREATE VIEW status AS
SELECT z.name                                           AS zone,
       coalesce(z.state, '(not yet observed)')          AS state,
       z.intent                                         AS intent,
       datetime(z.state_since / 1000, 'unixepoch')      AS since,
       datetime(z.next_check_at / 1000, 'unixepoch')    AS next_check,
       z.ds_line                                        AS ds,
       (SELECT count(*) FROM alerts a
         WHERE a.zone = z.name AND a.resolved_at IS NULL) AS open_alerts
  FROM zones z
 ORDER BY z.name;

CREATE VIEW history AS
SELECT e.zone                                   AS zone,
       datetime(e.at / 1000, 'unixepoch')       AS at,
       e.kind                                   AS kind,
       coalesce(e.from_state, '-') || ' -> ' || coalesce(e.to_state, '-') AS states,
       e.reason                                 AS reason
  FROM events e
 ORDER BY e.zone, e.id;
