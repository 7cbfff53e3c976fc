-- +goose Up
-- bothy:requires 16
-- File text for agents (issue 44 items 4 and 6; docs/design/trust.md#files).
-- Owner: files. An upload is scanned (scan_status) and then its text
-- extracted (text_status, text_content, text_truncated) in the upload's
-- request; a file left pending by a crash is taken up again by the files
-- sweep once it is older than the time any request may take. An expand step:
-- a binary of migration 20 inserts rows without these columns, which then
-- start pending and are processed by a newer binary's sweep.
ALTER TABLE stored_files
    ADD COLUMN text_status text NOT NULL DEFAULT 'pending'
        CHECK (text_status IN ('pending', 'ready', 'unsupported', 'too_large', 'failed')),
    ADD COLUMN text_content text,
    ADD COLUMN text_truncated boolean NOT NULL DEFAULT false,
    ADD CHECK ((text_status = 'ready') = (text_content IS NOT NULL));
CREATE INDEX stored_files_pending ON stored_files (created_at)
    WHERE scan_status = 'pending' OR text_status = 'pending';

-- +goose Down
DROP INDEX stored_files_pending;
ALTER TABLE stored_files DROP COLUMN text_truncated, DROP COLUMN text_content, DROP COLUMN text_status;
