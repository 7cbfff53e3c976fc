-- +goose Up
-- bothy:requires 6
-- Token buckets of the rate-limit classes, shared by every replica: one row
-- per class and principal holding the tokens left at updated_at. Refill is
-- computed from the elapsed time when a token is taken; nothing sweeps.
CREATE TABLE ratelimit_buckets (
    key         text PRIMARY KEY,
    tokens      double precision NOT NULL,
    updated_at  timestamptz NOT NULL
);

-- +goose Down
DROP TABLE ratelimit_buckets;
