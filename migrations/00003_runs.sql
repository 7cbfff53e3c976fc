-- +goose Up
-- bothy:requires 3
CREATE TABLE agent_sessions (
    id            uuid PRIMARY KEY,
    thread_id     uuid NOT NULL REFERENCES threads (id),
    agent_id      uuid NOT NULL REFERENCES principals (id),
    is_current    boolean NOT NULL DEFAULT true,
    started       boolean NOT NULL DEFAULT false,
    external_ref  text,
    created_at    timestamptz NOT NULL
);
-- At most one current session per (thread, agent).
CREATE UNIQUE INDEX agent_sessions_current ON agent_sessions (thread_id, agent_id) WHERE is_current;

CREATE TABLE runs (
    id                     uuid PRIMARY KEY,
    thread_id              uuid NOT NULL REFERENCES threads (id),
    agent_id               uuid NOT NULL REFERENCES principals (id),
    agent_session_id       uuid REFERENCES agent_sessions (id),
    session_mode           text NOT NULL CHECK (session_mode IN ('guest', 'new', 'bind', 'resume')),
    trigger_kind           text NOT NULL CHECK (trigger_kind IN ('message', 'command', 'interaction')),
    triggering_message_id  uuid REFERENCES messages (id),
    -- Where the triggering message lies (messages never change thread), so
    -- that the context floor of a later run needs no second lookup.
    trigger_thread_id      uuid,
    trigger_seq            bigint,
    triggered_by           uuid REFERENCES principals (id),
    state                  text NOT NULL CHECK (state IN ('queued', 'running', 'waiting_input', 'completed', 'failed', 'cancelled')),
    cancel_requested       boolean NOT NULL DEFAULT false,
    end_reason             text,
    version                integer NOT NULL DEFAULT 1,
    queued_at              timestamptz NOT NULL,
    started_at             timestamptz,
    ended_at               timestamptz,
    last_activity_at       timestamptz NOT NULL,
    CHECK ((session_mode = 'guest') = (agent_session_id IS NULL))
);
-- At most one active run per thread (docs/design/runs.md#states).
CREATE UNIQUE INDEX runs_one_active ON runs (thread_id) WHERE state IN ('queued', 'running', 'waiting_input');
CREATE INDEX runs_session ON runs (agent_session_id);
CREATE INDEX runs_active_sweep ON runs (state, last_activity_at) WHERE state IN ('queued', 'running', 'waiting_input');
ALTER TABLE messages ADD FOREIGN KEY (run_id) REFERENCES runs (id);

CREATE TABLE run_followups (
    run_id      uuid NOT NULL REFERENCES runs (id),
    message_id  uuid NOT NULL REFERENCES messages (id),
    state       text NOT NULL CHECK (state IN ('pending', 'delivered', 'absorbed', 'dropped')),
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (run_id, message_id)
);
CREATE INDEX run_followups_message ON run_followups (message_id);

-- Each agent's event stream; payloads carry ids, never content.
CREATE TABLE agent_events (
    seq         bigserial PRIMARY KEY,
    agent_id    uuid NOT NULL REFERENCES principals (id),
    type        text NOT NULL,
    run_id      uuid,
    message_id  uuid,
    payload     jsonb NOT NULL,
    created_at  timestamptz NOT NULL
);
CREATE INDEX agent_events_agent ON agent_events (agent_id, seq);

-- +goose Down
DROP TABLE agent_events;
DROP TABLE run_followups;
ALTER TABLE messages DROP CONSTRAINT messages_run_id_fkey;
DROP TABLE runs;
DROP TABLE agent_sessions;
