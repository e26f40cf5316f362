-- A zone's facts (`lifecycle::Facts`: what the rules remember across steps) become one
-- JSON object: adding a fact is one field in `Facts`, with no migration. The columns that
-- queries filter or sort on (state, intent, next_check_at, version) stay columns.
--   SELECT name, json_extract(facts, '$.t_gone') FROM zones;   -- one fact
-- Times in it are Unix milliseconds, like every other time in this file.
ALTER TABLE zones ADD COLUMN facts TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(facts));
UPDATE zones SET facts = json_object(
    'ds_line',              ds_line,
    'ds_to_enter',          ds_to_enter,
    'provider_off_since',   provider_off_since,
    'dnskey_everywhere_at', dnskey_everywhere_at,
    'hold_until',           hold_until,
    'ds_announced_at',      ds_announced_at,
    'ds_first_seen_at',     ds_first_seen_at,
    't_gone',               t_gone,
    'max_ds_ttl',           max_ds_ttl,
    'max_dnskey_ttl',       max_dnskey_ttl,
    'partial_since',        partial_since,
    'failing_since',        failing_since,
    'failures',             failures);

-- The status view reads the DS lines from the facts; its columns are unchanged.
DROP VIEW status;
ALTER TABLE zones DROP COLUMN ds_line;
ALTER TABLE zones DROP COLUMN ds_to_enter;
ALTER TABLE zones DROP COLUMN provider_off_since;
ALTER TABLE zones DROP COLUMN dnskey_everywhere_at;
ALTER TABLE zones DROP COLUMN hold_until;
ALTER TABLE zones DROP COLUMN ds_announced_at;
ALTER TABLE zones DROP COLUMN ds_first_seen_at;
ALTER TABLE zones DROP COLUMN t_gone;
ALTER TABLE zones DROP COLUMN max_ds_ttl;
ALTER TABLE zones DROP COLUMN max_dnskey_ttl;
ALTER TABLE zones DROP COLUMN partial_since;
ALTER TABLE zones DROP COLUMN failing_since;
ALTER TABLE zones DROP COLUMN failures;
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

-- Each outbox row's kind (`lifecycle::EffectKind`, the `effect` tag of its JSON) as a
-- column: enable_dnssec | disable_dnssec | announce_ds | request_ds_removal. Every insert
-- sets it; the default only fills the ALTER.
ALTER TABLE outbox ADD COLUMN kind TEXT NOT NULL DEFAULT '';
UPDATE outbox SET kind = coalesce(json_extract(effect, '$.effect'), '');
