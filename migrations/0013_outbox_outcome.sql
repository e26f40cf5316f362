-- What came of a performed effect that a later step reads, as JSON: a NOTIFY(CDS)'s
-- target, the address that answered and its answer (`lifecycle::registry::CdsNotified`).
-- The next step learns from it whether the registry acknowledged the NOTIFY.
ALTER TABLE outbox ADD COLUMN outcome TEXT;
