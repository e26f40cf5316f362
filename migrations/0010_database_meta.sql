-- The database's identity and generation (DESIGN.md, "The store's integrity"). `id` is
-- drawn once, when this table is made; `generation` grows by one with every write
-- transaction. A running daemon remembers both: a copy restored in place (an older
-- generation) or another database (another id) at its path is noticed and never written
-- on; notification ids carry `id`, so that two databases never send the same one.
CREATE TABLE database_meta (
    single      INTEGER PRIMARY KEY CHECK (single = 1),
    id          TEXT NOT NULL,
    generation  INTEGER NOT NULL
);
INSERT INTO database_meta (single, id, generation) VALUES (1, lower(hex(randomblob(16))), 0);
