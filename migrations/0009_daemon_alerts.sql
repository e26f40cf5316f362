-- Conditions of the whole daemon, not of one zone (the provider refusing the account, a
-- zone listing that fails, a host without IPv6): one row per episode, as `alerts` has per
-- zone. Written by `cli::daemon` from `crate::condition`; read by `status`, the metrics and
-- the alert sinks.
CREATE TABLE daemon_alerts (
    id                    INTEGER PRIMARY KEY,
    kind                  TEXT NOT NULL,
    -- '' for the provider account (every daemon on the database shares it), the node's
    -- name for a condition of one host: one open episode per (kind, scope).
    scope                 TEXT NOT NULL DEFAULT '',
    severity              TEXT NOT NULL CHECK (severity IN ('warning', 'critical')),
    message               TEXT NOT NULL,
    opened_at             INTEGER NOT NULL,
    -- Notified from then on: a condition may have to last before it alerts.
    alert_at              INTEGER NOT NULL,
    last_notified_at      INTEGER,
    notifications         INTEGER NOT NULL DEFAULT 0,
    resolved_at           INTEGER,
    resolved_notified_at  INTEGER,
    -- A daemon is delivering its notification until then (several daemons: one sends).
    claimed_until         INTEGER
);
CREATE UNIQUE INDEX daemon_alerts_one_open_episode ON daemon_alerts (kind, scope)
    WHERE resolved_at IS NULL;
