-- The database's identity (DESIGN.md, "The store's integrity"): drawn once, when this
-- table is made. Notification ids carry it, so that two databases never send the same
-- one. (`generation` is SQLite's: there a file can be restored under a running daemon.)
CREATE TABLE database_meta (
    single      INTEGER PRIMARY KEY CHECK (single = 1),
    id          TEXT NOT NULL,
    generation  BIGINT NOT NULL
);
INSERT INTO database_meta (single, id, generation)
    VALUES (1, replace(gen_random_uuid()::text, '-', ''), 0);
