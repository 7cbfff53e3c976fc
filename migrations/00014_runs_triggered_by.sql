-- +goose Up
-- bothy:requires 13
-- A person's own runs, newest first (triggeredRuns, GET /api/v1/me/runs,
-- the MCP tool list_runs): one index range instead of a scan of every
-- run. An expand step: nothing older reads or needs it.
CREATE INDEX runs_triggered_by ON runs (triggered_by, id DESC);

-- +goose Down
DROP INDEX runs_triggered_by;
