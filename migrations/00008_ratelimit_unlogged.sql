-- +goose Up
-- bothy:requires 8
-- The buckets are working state, not records: every request writes its
-- bucket, and a logged table made each of those writes a WAL record whose
-- commit waits for the log to reach the disk. Unlogged, a spend writes no
-- WAL; after a crash of PostgreSQL (or on a standby promoted after a
-- failover) the table is empty, so every bucket starts full again, which a
-- rate limit can afford.
ALTER TABLE ratelimit_buckets SET UNLOGGED;

-- +goose Down
ALTER TABLE ratelimit_buckets SET LOGGED;
