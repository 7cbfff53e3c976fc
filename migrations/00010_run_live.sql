-- +goose Up
-- bothy:requires 10
-- A run's live box (docs/design/runs.md#live-box): what its anchor shows
-- while the agent writes. Every replica holds the current box in memory
-- (updates travel as notifications in one order); this row is its stored
-- copy, written at most every run.live_flush_interval and at the end.
-- created_xid tells a replica whether it has heard every update of the
-- box since the run began (the run committed after its listener's
-- snapshot) or must ask another replica for the box first.
CREATE TABLE run_live (
    run_id       uuid PRIMARY KEY REFERENCES runs (id),
    anchor_id    uuid NOT NULL REFERENCES messages (id),
    version      integer NOT NULL DEFAULT 0,
    text         text NOT NULL DEFAULT '',
    status       text NOT NULL DEFAULT '',
    done         boolean NOT NULL DEFAULT false,
    ended        boolean NOT NULL DEFAULT false,
    updated_at   timestamptz,
    created_xid  xid8 NOT NULL DEFAULT pg_current_xact_id()
);
-- The boxes of the runs that exist already: empty, and done once the run
-- ended.
INSERT INTO run_live (run_id, anchor_id, done, ended)
SELECT m.run_id, m.id, r.state NOT IN ('queued', 'running', 'waiting_input'), r.state NOT IN ('queued', 'running', 'waiting_input')
FROM messages m JOIN runs r ON r.id = m.run_id WHERE m.kind = 'run';

-- Live box operations too large for a notification's payload (8,000
-- bytes): the notification names the row, every replica reads it.
CREATE TABLE run_live_ops (
    id          text PRIMARY KEY,
    body        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE run_live_ops;
DROP TABLE run_live;
