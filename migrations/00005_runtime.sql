-- +goose Up
-- bothy:requires 5
-- Run claims (issue 10): the holder that claimed a running or waiting run,
-- until when its lease lives, and the attempt (1 for the first invocation,
-- raised each time an expired lease puts the run back to queued).
ALTER TABLE runs ADD COLUMN holder text;
ALTER TABLE runs ADD COLUMN lease_expires_at timestamptz;
ALTER TABLE runs ADD COLUMN attempt integer NOT NULL DEFAULT 1;
-- When the person who triggered the run lost trigger; from then on the run
-- has no context, and it ends cancelled (trigger_revoked) after
-- run.cancel_grace unless the adapter confirms earlier.
ALTER TABLE runs ADD COLUMN trigger_lost_at timestamptz;
CREATE INDEX runs_lease_sweep ON runs (lease_expires_at) WHERE state IN ('running', 'waiting_input');
CREATE INDEX runs_active_by ON runs (triggered_by) WHERE state IN ('queued', 'running', 'waiting_input');

-- The fact "delivered to the session" (the agent acknowledged the event that
-- carried the follow-up) outlives the follow-up's later state; drop_reason
-- says why a follow-up never reached or never started a run.
ALTER TABLE run_followups ADD COLUMN delivered_at timestamptz;
ALTER TABLE run_followups ADD COLUMN drop_reason text;
UPDATE run_followups SET delivered_at = created_at WHERE state IN ('delivered', 'absorbed');
ALTER TABLE run_followups DROP CONSTRAINT run_followups_state_check;
ALTER TABLE run_followups ADD CONSTRAINT run_followups_state_check
    CHECK (state IN ('pending', 'delivered', 'absorbed', 'promoted', 'dropped'));

-- Each agent's acknowledged position in its stream.
CREATE TABLE agent_cursors (
    agent_id    uuid PRIMARY KEY REFERENCES principals (id),
    acked_seq   bigint NOT NULL,
    updated_at  timestamptz NOT NULL
);

-- +goose Down
DROP TABLE agent_cursors;
ALTER TABLE run_followups DROP CONSTRAINT run_followups_state_check;
UPDATE run_followups SET state = 'absorbed' WHERE state = 'promoted';
ALTER TABLE run_followups ADD CONSTRAINT run_followups_state_check
    CHECK (state IN ('pending', 'delivered', 'absorbed', 'dropped'));
ALTER TABLE run_followups DROP COLUMN drop_reason;
ALTER TABLE run_followups DROP COLUMN delivered_at;
DROP INDEX runs_active_by;
DROP INDEX runs_lease_sweep;
ALTER TABLE runs DROP COLUMN trigger_lost_at;
ALTER TABLE runs DROP COLUMN attempt;
ALTER TABLE runs DROP COLUMN lease_expires_at;
ALTER TABLE runs DROP COLUMN holder;
