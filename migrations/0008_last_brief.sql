-- The parts of a zone's last observation that `status` and a step read (the provider's
-- answer or failure, the parent's evidence), kept beside the whole by every write that
-- sets it: cut out of the whole at every read, they had SQLite parse a kilobyte or more
-- of JSON per zone (a third of `status`'s time over 100,000 zones).
-- `store::ObservationText`; `json_patch` onto `{}` leaves out the members without a value.
ALTER TABLE zones ADD COLUMN last_brief TEXT;
UPDATE zones SET last_brief = json_patch('{}', json_object(
    'provider', json_object(
        'dnssec', last_observation -> '$.provider.dnssec',
        'error', last_observation -> '$.provider.error'),
    'parent', json_object('evidence', last_observation -> '$.parent.evidence')))
  WHERE json_valid(last_observation);
