-- +goose Up
-- bothy:requires 16
-- A run in one trace (docs/operations.md#following-a-run-in-traces): the
-- W3C traceparent of the request whose message started the run, which
-- adapters send on every call of the run to continue that trace. An
-- expand step: binaries before 17 neither read nor write the column, and
-- a run they start keeps NULL, as a run started while tracing is off or
-- unsampled does.
ALTER TABLE runs ADD COLUMN traceparent text
    CHECK (traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$');

-- +goose Down
ALTER TABLE runs DROP COLUMN traceparent;
