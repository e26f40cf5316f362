-- The provider account (`[providers.NAME]`) a provider call was sent to, as the step that
-- decided it looked at the zone there (a signed move's call: the account it names). A
-- call of unknown outcome is settled by what that account says, asked by name, even
-- after the zone moved (DESIGN.md rule 13). NULL: a row written before this column (or
-- one going to no account): settled by what the zone's account says now, as before.
ALTER TABLE outbox ADD COLUMN account TEXT;
