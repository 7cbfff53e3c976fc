-- +goose Up
-- bothy:requires 14
-- Provenance (docs/design/trust.md#provenance): every message an agent
-- writes records the least trust of what it was derived from. An expand
-- step: binaries before 16 neither read nor write the column, and an
-- agent message they write during a rolling upgrade keeps NULL, which
-- every reader takes as unverified (fail closed). Agent messages written
-- before this migration are unverified too: nothing vouches for what they
-- were derived from.
ALTER TABLE messages ADD COLUMN provenance text
    CHECK (provenance IN ('trigger', 'authorized', 'system', 'self', 'unverified'));
UPDATE messages SET provenance = 'unverified' WHERE origin = 'agent';

-- +goose Down
ALTER TABLE messages DROP COLUMN provenance;
