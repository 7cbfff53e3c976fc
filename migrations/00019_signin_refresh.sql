-- +goose Up
-- bothy:requires 18
-- Leavers (docs/operations.md#sign-in): the provider's refresh token of
-- each session a sign-in made, so that the server can ask the provider
-- every auth.oidc.recheck_interval whether the person may still sign in.
-- An expand step: binaries before 19 neither read nor write the table.
--
-- The refresh token is kept as the provider gave it (it must be sent back):
-- it is bound to Bothy's client at the provider and useless without the
-- client secret, which is not in the database. It goes with its session.
CREATE TABLE signin_refresh (
    token_id      uuid PRIMARY KEY REFERENCES tokens (id) ON DELETE CASCADE,
    principal_id  uuid NOT NULL REFERENCES principals (id) ON DELETE CASCADE,
    refresh_token text NOT NULL CHECK (refresh_token <> ''),
    checked_at    timestamptz NOT NULL
);
CREATE INDEX signin_refresh_checked ON signin_refresh (checked_at);

-- +goose Down
DROP TABLE signin_refresh;
