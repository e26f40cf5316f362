-- The database's identity and generation (DESIGN.md, "The store's integrity"). `id` is
-- drawn once, when this table is made; `generation` grows by one with every write
-- transaction. A running daemon remembers both: a copy restored in place (an older
-- generation) or another database (another id) at its path is noticed and never written
-- on; notification ids carry `id`, so that two databases never send the same one.
-- `last_seq` numbers the outbox rows (`outbox.seq`, the DS request's `seq`): one more than
-- the last, and never below the time of the request in milliseconds, so that a request
-- from a restored or a new database still carries a larger number than any before it.
CREATE TABLE database_meta (
    single      INTEGER PRIMARY KEY CHECK (single = 1),
    id          TEXT NOT NULL,
    generation  INTEGER NOT NULL,
    last_seq    INTEGER NOT NULL DEFAULT 0
);
INSERT INTO database_meta (single, id, generation) VALUES (1, lower(hex(randomblob(16))), 0);
-- NULL for the rows made before: their `id` stands in.
ALTER TABLE outbox ADD COLUMN seq INTEGER;
