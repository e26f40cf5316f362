-- The database's identity (DESIGN.md, "The store's integrity"): drawn once, when this
-- table is made. Notification ids carry it, so that two databases never send the same
-- one. (`generation` is SQLite's: there a file can be restored under a running daemon.)
-- `last_seq` numbers the outbox rows (`outbox.seq`, the DS request's `seq`): one more than
-- the last, and never below the time of the request in milliseconds, so that a request
-- from a restored or a new database still carries a larger number than any before it.
CREATE TABLE database_meta (
    single      INTEGER PRIMARY KEY CHECK (single = 1),
    id          TEXT NOT NULL,
    generation  BIGINT NOT NULL,
    last_seq    BIGINT NOT NULL DEFAULT 0
);
INSERT INTO database_meta (single, id, generation)
    VALUES (1, replace(gen_random_uuid()::text, '-', ''), 0);
-- NULL for the rows made before: their `id` stands in.
ALTER TABLE outbox ADD COLUMN seq BIGINT;
