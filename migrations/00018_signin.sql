-- +goose Up
-- bothy:requires 17
-- Sign-in through the organisation's identity provider (docs/operations.md#sign-in).
-- An expand step: binaries before 18 neither read nor write these tables,
-- and the tokens they create get the default source.
--
-- principal_identities links a person to an account at an OIDC provider:
-- the first sign-in links by verified e-mail and records (issuer, subject),
-- later sign-ins find the person by them alone.
CREATE TABLE principal_identities (
    issuer       text NOT NULL CHECK (issuer <> ''),
    subject      text NOT NULL CHECK (subject <> ''),
    principal_id uuid NOT NULL REFERENCES principals (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (issuer, subject)
);
CREATE INDEX principal_identities_principal ON principal_identities (principal_id);

-- Every token records its source: created by an owner (or the command
-- line), or a session of a sign-in at the provider.
ALTER TABLE tokens ADD COLUMN source text NOT NULL DEFAULT 'owner' CHECK (source IN ('owner', 'oidc'));

-- signin_attempts holds a browser sign-in between /auth/login and
-- /auth/callback: the state that names it, the PKCE verifier and the
-- nonce, for at most ten minutes. In the database, not in a replica's
-- memory, so that the callback may reach any replica.
CREATE TABLE signin_attempts (
    state      text PRIMARY KEY,
    verifier   text NOT NULL,
    nonce      text NOT NULL,
    created_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE signin_attempts;
ALTER TABLE tokens DROP COLUMN source;
DROP TABLE principal_identities;
