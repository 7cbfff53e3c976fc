-- +goose Up
-- bothy:requires 11
-- Approvals (docs/design/trust.md#approvals): a run's holder asks the
-- person who triggered the run before a consequential action. The card in
-- the thread is a message of kind card naming the run; its detail and
-- options are only for that person (restricted_to), so they live here and
-- not in the message's content (the title). approval_until on the run is
-- the expiry of the approval it waits for: while set the run's stall timer
-- is paused and the sweeper decides the approval expired at that time.
ALTER TABLE runs ADD COLUMN approval_until timestamptz;

CREATE TABLE run_approvals (
    id             uuid PRIMARY KEY,
    run_id         uuid NOT NULL REFERENCES runs (id),
    message_id     uuid NOT NULL REFERENCES messages (id),
    restricted_to  uuid NOT NULL REFERENCES principals (id),
    title          text NOT NULL,
    detail         text NOT NULL DEFAULT '',
    options        jsonb NOT NULL,
    state          text NOT NULL CHECK (state IN ('pending', 'decided', 'expired', 'withdrawn')),
    option_id      text,
    decided_by     uuid REFERENCES principals (id),
    decided_at     timestamptz,
    expires_at     timestamptz NOT NULL,
    created_at     timestamptz NOT NULL
);
CREATE INDEX run_approvals_run ON run_approvals (run_id);
CREATE INDEX run_approvals_message ON run_approvals (message_id);
CREATE INDEX run_approvals_due ON run_approvals (expires_at) WHERE state = 'pending';

-- +goose Down
DROP TABLE run_approvals;
ALTER TABLE runs DROP COLUMN approval_until;
