-- +goose Up
-- bothy:requires 2
CREATE TABLE spaces (
    id                         uuid PRIMARY KEY,
    name                       text NOT NULL UNIQUE,
    default_operator_agent_id  uuid REFERENCES principals (id),
    archived_at                timestamptz,
    created_at                 timestamptz NOT NULL
);

CREATE TABLE channels (
    id                      uuid PRIMARY KEY,
    space_id                uuid NOT NULL REFERENCES spaces (id),
    name                    text NOT NULL,
    kind                    text NOT NULL CHECK (kind IN ('text', 'forum')),
    archived_at             timestamptz,
    operator_mode           text NOT NULL DEFAULT 'inherit' CHECK (operator_mode IN ('inherit', 'agent', 'none')),
    operator_agent_id       uuid REFERENCES principals (id),
    free_response           boolean NOT NULL DEFAULT false,
    allow_mentioned_agents  boolean NOT NULL DEFAULT false,
    auto_thread             boolean NOT NULL DEFAULT true,
    history_backfill_limit  integer NOT NULL CHECK (history_backfill_limit >= 0),
    created_at              timestamptz NOT NULL,
    UNIQUE (space_id, name),
    CHECK ((operator_mode = 'agent') = (operator_agent_id IS NOT NULL))
);

CREATE TABLE threads (
    id                 uuid PRIMARY KEY,
    channel_id         uuid NOT NULL REFERENCES channels (id),
    kind               text NOT NULL CHECK (kind IN ('main', 'thread', 'post')),
    parent_message_id  uuid,
    operator_agent_id  uuid REFERENCES principals (id),
    title              text,
    title_source       text CHECK (title_source IN ('user', 'auto')),
    created_by         uuid NOT NULL REFERENCES principals (id),
    state              text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'done')),
    last_seq           bigint NOT NULL DEFAULT 0,
    created_at         timestamptz NOT NULL,
    -- A main thread has no fixed operator: the channel's operator answers there.
    CHECK (kind <> 'main' OR (operator_agent_id IS NULL AND parent_message_id IS NULL))
);
-- A text channel has exactly one main thread.
CREATE UNIQUE INDEX threads_one_main ON threads (channel_id) WHERE kind = 'main';
CREATE INDEX threads_channel ON threads (channel_id);
-- A message starts at most one thread.
CREATE UNIQUE INDEX threads_parent_unique ON threads (parent_message_id) WHERE parent_message_id IS NOT NULL;

CREATE TABLE messages (
    id                     uuid PRIMARY KEY,
    thread_id              uuid NOT NULL REFERENCES threads (id),
    thread_seq             bigint NOT NULL,
    author_principal_id    uuid NOT NULL REFERENCES principals (id),
    origin                 text NOT NULL CHECK (origin IN ('human', 'agent', 'app', 'import', 'system')),
    kind                   text NOT NULL CHECK (kind IN ('text', 'voice', 'card', 'run', 'system')),
    content_md             text NOT NULL,
    reply_to_message_id    uuid REFERENCES messages (id),
    client_msg_id          text,
    client_payload_sha256  bytea,
    trigger_state          text CHECK (trigger_state IN ('accepted', 'followup', 'failed')),
    trigger_reason         text,
    system_code            text,
    run_id                 uuid,
    deleted_at             timestamptz,
    created_at             timestamptz NOT NULL,
    UNIQUE (thread_id, thread_seq),
    UNIQUE (author_principal_id, client_msg_id),
    CHECK ((kind = 'run') = (run_id IS NOT NULL)),
    CHECK (trigger_state IS NULL OR origin = 'human'),
    CHECK ((kind = 'system') = (origin = 'system')),
    CHECK ((system_code IS NOT NULL) = (kind = 'system'))
);
CREATE UNIQUE INDEX messages_run ON messages (run_id) WHERE run_id IS NOT NULL;
ALTER TABLE threads ADD FOREIGN KEY (parent_message_id) REFERENCES messages (id);

CREATE TABLE message_mentions (
    message_id    uuid NOT NULL REFERENCES messages (id),
    principal_id  uuid NOT NULL REFERENCES principals (id),
    ordinal       integer NOT NULL,
    PRIMARY KEY (message_id, principal_id)
);

CREATE TABLE grants (
    id                    uuid PRIMARY KEY,
    subject_principal_id  uuid REFERENCES principals (id),
    subject_group_id      uuid REFERENCES groups (id),
    target_space_id       uuid REFERENCES spaces (id),
    target_channel_id     uuid REFERENCES channels (id),
    level                 text NOT NULL CHECK (level IN ('read', 'write', 'trigger')),
    expires_at            timestamptz,
    created_by            uuid NOT NULL REFERENCES principals (id),
    created_at            timestamptz NOT NULL,
    revoked_at            timestamptz,
    CHECK ((subject_principal_id IS NULL) <> (subject_group_id IS NULL)),
    CHECK ((target_space_id IS NULL) <> (target_channel_id IS NULL))
);
CREATE INDEX grants_principal ON grants (subject_principal_id) WHERE revoked_at IS NULL;
CREATE INDEX grants_group ON grants (subject_group_id) WHERE revoked_at IS NULL;

-- Denials are aggregated: one row per actor, action and reason per window.
CREATE TABLE audit_log (
    id            uuid PRIMARY KEY,
    actor_id      uuid NOT NULL,
    action        text NOT NULL,
    decision      text NOT NULL CHECK (decision IN ('allow', 'deny')),
    reason        text NOT NULL DEFAULT '',
    resource_kind text NOT NULL,
    resource_id   uuid,
    window_start  timestamptz NOT NULL,
    count         integer NOT NULL DEFAULT 1,
    first_at      timestamptz NOT NULL,
    last_at       timestamptz NOT NULL
);
CREATE UNIQUE INDEX audit_deny_window ON audit_log (actor_id, action, reason, window_start) WHERE decision = 'deny';

CREATE TABLE event_log (
    seq         bigserial PRIMARY KEY,
    type        text NOT NULL,
    channel_id  uuid NOT NULL,
    thread_id   uuid,
    -- The message of message events, so that a deletion can tombstone them.
    message_id  uuid,
    payload     jsonb NOT NULL,
    created_at  timestamptz NOT NULL
);
CREATE INDEX event_log_channel ON event_log (channel_id, seq);
CREATE INDEX event_log_message ON event_log (message_id) WHERE message_id IS NOT NULL;

-- +goose Down
DROP TABLE event_log;
DROP TABLE audit_log;
DROP TABLE grants;
DROP TABLE message_mentions;
ALTER TABLE threads DROP CONSTRAINT threads_parent_message_id_fkey;
DROP TABLE messages;
DROP TABLE threads;
DROP TABLE channels;
DROP TABLE spaces;
