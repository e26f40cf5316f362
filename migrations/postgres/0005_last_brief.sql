-- The parts of a zone's last observation that `status` and a step read (the provider's
-- answer, the parent's evidence), kept beside the whole by every write that sets it, so
-- that no read parses the whole (`store::ObservationText`).
ALTER TABLE zones ADD COLUMN last_brief TEXT;
UPDATE zones SET last_brief = jsonb_build_object(
    'provider', (last_observation::jsonb) -> 'provider',
    'parent', jsonb_build_object('evidence', (last_observation::jsonb) -> 'parent' -> 'evidence'))::text
  WHERE last_observation IS NOT NULL;
