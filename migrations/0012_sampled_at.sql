-- When a settled zone's last sampled look (one parent and one child address, DESIGN.md
-- section 4) agreed with its last full look: such a look writes nothing else, and
-- `status` and the metrics count it as a look.
ALTER TABLE zones ADD COLUMN sampled_at INTEGER;
