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
