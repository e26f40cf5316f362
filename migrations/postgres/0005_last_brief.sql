-- The parts of a zone's last observation that `status` and a step read (the provider's
-- answer or failure, the parent's evidence), kept beside the whole by every write that
-- sets it, so that no read parses the whole (`store::ObservationText`; members without a
-- value left out).
CREATE FUNCTION warden_brief(observation TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT jsonb_strip_nulls(jsonb_build_object(
        'provider', jsonb_build_object(
            'dnssec', (observation::jsonb) -> 'provider' -> 'dnssec',
            'error', (observation::jsonb) -> 'provider' -> 'error'),
        'parent', jsonb_build_object(
            'evidence', (observation::jsonb) -> 'parent' -> 'evidence')))::text
$$;
ALTER TABLE zones ADD COLUMN last_brief TEXT;
UPDATE zones SET last_brief = warden_brief(last_observation)
  WHERE last_observation IS NOT NULL;
-- A daemon of the previous version, still running beside upgraded ones until its own
-- restart, writes the whole without the brief: a write that changes the whole but not
-- the brief gets the brief cut out of the whole, so that `status` never shows a brief
-- older than the observation.
CREATE FUNCTION warden_last_brief() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.last_observation IS DISTINCT FROM OLD.last_observation
       AND NEW.last_brief IS NOT DISTINCT FROM OLD.last_brief THEN
        NEW.last_brief := warden_brief(NEW.last_observation);
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER zones_last_brief BEFORE UPDATE OF last_observation ON zones
    FOR EACH ROW EXECUTE FUNCTION warden_last_brief();
