-- +goose Up
-- bothy:requires 1
-- Principals are people (user), agents and apps. Handles are unique and
-- lowercase; the check mirrors the rule of docs/design/model.md#principals.
CREATE TABLE principals (
    id           uuid PRIMARY KEY,
    kind         text NOT NULL CHECK (kind IN ('user', 'agent', 'app')),
    handle       text NOT NULL UNIQUE CHECK (handle ~ '^[a-z0-9][a-z0-9_-]{1,31}$'),
    display_name text NOT NULL,
    email        text,
    status       text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'pending', 'disabled', 'deleted')),
    is_owner     boolean NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL,
    -- Only people have an address and only people own the instance.
    CHECK (kind = 'user' OR (email IS NULL AND NOT is_owner))
);

CREATE TABLE groups (
    id         uuid PRIMARY KEY,
    name       text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL
);

CREATE TABLE group_members (
    group_id     uuid NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    principal_id uuid NOT NULL REFERENCES principals (id) ON DELETE CASCADE,
    PRIMARY KEY (group_id, principal_id)
);
CREATE INDEX group_members_principal ON group_members (principal_id);

-- Tokens are stored only as a SHA-256 hash; the clear text is shown once.
CREATE TABLE tokens (
    id           uuid PRIMARY KEY,
    principal_id uuid NOT NULL REFERENCES principals (id) ON DELETE CASCADE,
    kind         text NOT NULL CHECK (kind IN ('session', 'agent', 'app')),
    hash         bytea NOT NULL UNIQUE,
    label        text NOT NULL DEFAULT '',
    expires_at   timestamptz,
    revoked_at   timestamptz,
    created_at   timestamptz NOT NULL
);
CREATE INDEX tokens_principal ON tokens (principal_id);

-- +goose Down
DROP TABLE tokens;
DROP TABLE group_members;
DROP TABLE groups;
DROP TABLE principals;
