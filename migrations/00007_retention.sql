-- +goose Up
-- bothy:requires 7
-- Retention (issue 13): what the purge removed from each cursor stream, so
-- that an older cursor answers cursor_expired instead of silently skipping
-- events, and indexes for the age predicates of the purge.
CREATE TABLE retention_horizon (
    stream     text PRIMARY KEY,
    seq        bigint NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX event_log_created ON event_log (created_at);
CREATE INDEX agent_events_created ON agent_events (created_at);
CREATE INDEX audit_log_last ON audit_log (last_at);

-- +goose Down
DROP INDEX audit_log_last;
DROP INDEX agent_events_created;
DROP INDEX event_log_created;
DROP TABLE retention_horizon;
