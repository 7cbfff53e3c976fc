-- +goose Up
-- bothy:requires 16
-- Files (issue 44, table stored_files; docs/design/trust.md#files, docs/operations.md#files).
-- Owner: files. The bytes live in the blob store
-- of files.storage under storage_key, written before the row commits; a
-- blob without a row is an orphan the sweep deletes. A file is attached to
-- at most one message (message_id, set once by its uploader's create); an
-- unattached file is deleted after files.orphan_ttl, the files of a
-- deleted message after files.deleted_ttl (delete_after). An expand step:
-- binaries before 19 never read the table, and the capability column of
-- principals has a default that denies.
CREATE TABLE stored_files (
    id                     uuid PRIMARY KEY,
    uploader_principal_id  uuid NOT NULL REFERENCES principals (id),
    name                   text NOT NULL CHECK (name <> ''),
    mime_type              text NOT NULL,
    size_bytes             bigint NOT NULL CHECK (size_bytes >= 0),
    sha256                 bytea NOT NULL CHECK (length(sha256) = 32),
    storage_key            text NOT NULL UNIQUE,
    scan_status            text NOT NULL
        CHECK (scan_status IN ('pending', 'clean', 'infected', 'failed', 'not_scanned')),
    message_id             uuid REFERENCES messages (id),
    attached_at            timestamptz,
    delete_after           timestamptz,
    created_at             timestamptz NOT NULL,
    CHECK ((message_id IS NULL) = (attached_at IS NULL))
);
CREATE INDEX stored_files_message ON stored_files (message_id) WHERE message_id IS NOT NULL;
CREATE INDEX stored_files_uploader ON stored_files (uploader_principal_id);
CREATE INDEX stored_files_unattached ON stored_files (created_at) WHERE message_id IS NULL;
CREATE INDEX stored_files_delete_after ON stored_files (delete_after) WHERE delete_after IS NOT NULL;

-- Agent capabilities (owner-granted; principal.capabilities). Owner:
-- identity. files_out lets an agent attach files it uploaded.
ALTER TABLE principals ADD COLUMN files_out boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE principals DROP COLUMN files_out;
DROP TABLE stored_files;
