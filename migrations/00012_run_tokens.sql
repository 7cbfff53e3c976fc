-- +goose Up
-- bothy:requires 12
-- Run tokens (docs/mcp.md#token-kinds): a token of kind run is minted by a
-- run's agent for one run and one holder (createRunToken) and hands a
-- runner's child process exactly that run: the door narrows it to the
-- run-bound operations of run_id and reads of its thread. It lives as long
-- as the run is active. Expand step: new columns and a view; binaries that
-- know nothing of run tokens serve this schema unchanged.
ALTER TABLE tokens DROP CONSTRAINT tokens_kind_check;
ALTER TABLE tokens ADD CONSTRAINT tokens_kind_check CHECK (kind IN ('session', 'agent', 'app', 'run'));
ALTER TABLE tokens ADD COLUMN run_id uuid REFERENCES runs (id) ON DELETE CASCADE;
ALTER TABLE tokens ADD COLUMN run_holder text;
ALTER TABLE tokens ADD CONSTRAINT tokens_run_bound CHECK ((kind = 'run') = (run_id IS NOT NULL AND run_holder IS NOT NULL));
CREATE INDEX tokens_run ON tokens (run_id) WHERE run_id IS NOT NULL;

-- active_runs is the runs module's answer to "is this run still active,
-- and in which thread": identity reads it when it authenticates a run
-- token, so that the token dies the moment its run ends, on every replica,
-- without a write. The runs module owns the view (and the meaning of
-- active); nobody else names the runs table.
CREATE VIEW active_runs AS
    SELECT id, thread_id, agent_id FROM runs WHERE state IN ('queued', 'running', 'waiting_input');

-- +goose Down
DROP VIEW active_runs;
DELETE FROM tokens WHERE kind = 'run';
DROP INDEX tokens_run;
ALTER TABLE tokens DROP CONSTRAINT tokens_run_bound;
ALTER TABLE tokens DROP COLUMN run_holder;
ALTER TABLE tokens DROP COLUMN run_id;
ALTER TABLE tokens DROP CONSTRAINT tokens_kind_check;
ALTER TABLE tokens ADD CONSTRAINT tokens_kind_check CHECK (kind IN ('session', 'agent', 'app'));
