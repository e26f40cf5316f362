-- Several daemons on one database (DESIGN.md, "Several daemons"): a zone is stepped by the
-- daemon holding its lease; every write of a step and every effect carries the lease's
-- epoch and is refused once that epoch is no longer current.
-- Lease times are the database's clock (warden_now_ms), never a daemon's: hosts disagree.

CREATE FUNCTION warden_now_ms() RETURNS BIGINT LANGUAGE sql VOLATILE AS $$
    SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint
$$;

-- `<node>/<pid>` of the daemon holding the zone; NULL when nobody does.
ALTER TABLE zones ADD COLUMN lease_holder TEXT;
-- Bumped at every acquisition: a daemon that lost the zone holds a stale epoch.
ALTER TABLE zones ADD COLUMN lease_epoch BIGINT NOT NULL DEFAULT 0;
-- Since when the holder has held it, and until when (renewed every lease/3).
ALTER TABLE zones ADD COLUMN lease_since BIGINT;
ALTER TABLE zones ADD COLUMN lease_until BIGINT;
CREATE INDEX zones_lease ON zones (lease_holder, next_check_at);

-- Who wrote each audit event, decided each effect, and under which epoch (NULL: a CLI
-- command, or a store without leases).
ALTER TABLE events ADD COLUMN holder TEXT;
ALTER TABLE events ADD COLUMN epoch BIGINT;
ALTER TABLE outbox ADD COLUMN holder TEXT;
ALTER TABLE outbox ADD COLUMN epoch BIGINT;

-- The daemons sharing the database, for the fair share each claims (zones / live daemons).
-- A row seen within a lease is alive; a cleanly stopped daemon deletes its own.
CREATE TABLE daemons (
    holder      TEXT COLLATE "C" PRIMARY KEY,
    node        TEXT NOT NULL,
    pid         BIGINT NOT NULL,
    started_at  BIGINT NOT NULL,
    seen_at     BIGINT NOT NULL
);

CREATE OR REPLACE VIEW status AS
SELECT z.name                                           AS zone,
       coalesce(z.state, '(not yet observed)')          AS state,
       z.intent                                         AS intent,
       warden_datetime(z.state_since)                   AS since,
       warden_datetime(z.next_check_at)                 AS next_check,
       (z.facts::jsonb) ->> 'ds_line'                   AS ds,
       (z.facts::jsonb) ->> 'ds_to_enter'               AS ds_to_enter,
       (SELECT count(*) FROM alerts a
         WHERE a.zone = z.name AND a.resolved_at IS NULL) AS open_alerts,
       CASE WHEN z.lease_until > warden_now_ms() THEN z.lease_holder END AS held_by,
       CASE WHEN z.lease_until > warden_now_ms() THEN warden_datetime(z.lease_since) END
                                                        AS held_since
  FROM zones z
 ORDER BY z.name;
