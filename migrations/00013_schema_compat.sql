-- +goose Up
-- bothy:requires 12
-- Upgrades that cannot go wrong silently (docs/operations.md#upgrades):
-- every migration file states, in its "bothy:requires N" line, the oldest
-- binary (by the newest migration it embeds) that can still serve the
-- schema once the migration is applied: an expand step (a new table, a
-- new nullable column nobody old reads) keeps older binaries serving, a
-- contract step requires its own version. bothy migrate records the line
-- of every migration it knows here, so that an older binary, which does
-- not embed the newer files, can read whether it may serve. An expand step
-- itself: binaries of migration 12 serve this schema.
CREATE TABLE schema_compat (
    version     bigint PRIMARY KEY,
    requires    bigint NOT NULL CHECK (requires >= 0 AND requires <= version),
    recorded_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE schema_compat;
