-- +goose Up
-- bothy:requires 4
-- Administration (issue 9): token bookkeeping, deletable groups and events
-- about a space as a whole.

-- When a token was last used, written at most once a minute per token.
ALTER TABLE tokens ADD COLUMN last_used_at timestamptz;

-- A deleted group keeps its row so that the grants that named it stay in
-- the history (revoked); its name is free again.
ALTER TABLE groups ADD COLUMN deleted_at timestamptz;
ALTER TABLE groups DROP CONSTRAINT groups_name_key;
CREATE UNIQUE INDEX groups_live_name ON groups (name) WHERE deleted_at IS NULL;

-- Events about a space (space.created, space.updated) belong to no channel.
ALTER TABLE event_log ALTER COLUMN channel_id DROP NOT NULL;
ALTER TABLE event_log ADD COLUMN space_id uuid;
ALTER TABLE event_log ADD CONSTRAINT event_log_scope CHECK (channel_id IS NOT NULL OR space_id IS NOT NULL);
CREATE INDEX event_log_space ON event_log (space_id, seq) WHERE channel_id IS NULL;

-- +goose Down
DROP INDEX event_log_space;
ALTER TABLE event_log DROP CONSTRAINT event_log_scope;
DELETE FROM event_log WHERE channel_id IS NULL;
ALTER TABLE event_log DROP COLUMN space_id;
ALTER TABLE event_log ALTER COLUMN channel_id SET NOT NULL;
DROP INDEX groups_live_name;
ALTER TABLE groups ADD CONSTRAINT groups_name_key UNIQUE (name);
ALTER TABLE groups DROP COLUMN deleted_at;
ALTER TABLE tokens DROP COLUMN last_used_at;
