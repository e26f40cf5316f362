-- The parts of a zone's last observation that `status` and a step read (the provider's
-- answer or failure, the parent's evidence), kept beside the whole by every write that
-- sets it, so that no read parses the whole (`store::ObservationText`; members without a
-- value left out).
ALTER TABLE zones ADD COLUMN last_brief TEXT;
UPDATE zones SET last_brief = jsonb_strip_nulls(jsonb_build_object(
    'provider', jsonb_build_object(
        'dnssec', (last_observation::jsonb) -> 'provider' -> 'dnssec',
        'error', (last_observation::jsonb) -> 'provider' -> 'error'),
    'parent', jsonb_build_object('evidence', (last_observation::jsonb) -> 'parent' -> 'evidence')))::text
  WHERE last_observation IS NOT NULL;
