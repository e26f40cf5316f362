-- The largest DNSKEY TTL the child's name servers gave. A resolver may validate the
-- DNSKEY with a DS cached until its last second and then trust the key for the DNSKEY
-- TTL: DNSSEC goes off only after T_gone + max DS TTL + max DNSKEY TTL + margin.
ALTER TABLE zones ADD COLUMN max_dnskey_ttl INTEGER;
