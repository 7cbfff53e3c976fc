package files

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/ids"
)

// store is the stored_files table (migrations/00020_files.sql, 00021_file_text.sql).
type store struct {
	pool db.Querier
}

const fileColumns = `id, uploader_principal_id, name, mime_type, size_bytes, sha256, scan_status,
	coalesce(message_id::text, ''), created_at, storage_key, text_status, text_truncated`

func scanFile(r pgx.Row) (File, error) {
	var f File
	err := r.Scan(&f.ID, &f.UploaderID, &f.Name, &f.MIMEType, &f.Size, &f.SHA256, &f.ScanStatus, &f.MessageID, &f.CreatedAt, &f.storageKey, &f.TextStatus, &f.textTruncated)
	f.CreatedAt = f.CreatedAt.UTC()
	return f, err
}

// errNoFile is a missing (or deleted) file.
var errNoFile = errors.New("files: no such file")

// get returns the live file id (not scheduled for deletion).
func (s store) get(ctx context.Context, id string) (File, error) {
	f, err := scanFile(db.Q(ctx, s.pool).QueryRow(ctx, `SELECT `+fileColumns+` FROM stored_files WHERE id = $1 AND delete_after IS NULL`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return File{}, errNoFile
	}
	return f, err
}

// insert stores f in the transaction of ctx.
func (s store) insert(ctx context.Context, f File) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `INSERT INTO stored_files (id, uploader_principal_id, name, mime_type, size_bytes, sha256,
		storage_key, scan_status, created_at, text_status) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		f.ID, f.UploaderID, f.Name, f.MIMEType, f.Size, f.SHA256, f.storageKey, f.ScanStatus, f.CreatedAt, f.TextStatus)
	return err
}

// held returns the bytes principal holds in live files, after locking the
// principal's files so that two uploads of one principal take turns at the
// quota (an advisory lock of the transaction, keyed by the principal).
func (s store) held(ctx context.Context, principalID string) (int64, error) {
	q := db.Q(ctx, s.pool)
	if _, err := q.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('bothy.files.quota.' || $1::text, 0))`, principalID); err != nil {
		return 0, err
	}
	var n int64
	err := q.QueryRow(ctx, `SELECT coalesce(sum(size_bytes), 0)::bigint FROM stored_files WHERE uploader_principal_id = $1 AND delete_after IS NULL`, principalID).Scan(&n)
	return n, err
}

// lockMany returns the live files of list locked for update, keyed by id.
func (s store) lockMany(ctx context.Context, list []string) (map[string]File, error) {
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT `+fileColumns+` FROM stored_files WHERE id = ANY($1::uuid[]) AND delete_after IS NULL
		ORDER BY id FOR UPDATE`, ids.ArrayParam(list))
	if err != nil {
		return nil, err
	}
	fs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (File, error) { return scanFile(r) })
	if err != nil {
		return nil, err
	}
	out := make(map[string]File, len(fs))
	for _, f := range fs {
		out[f.ID] = f
	}
	return out, nil
}

// attach sets the message of the files of list.
func (s store) attach(ctx context.Context, messageID string, list []string, at time.Time) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE stored_files SET message_id = $1, attached_at = $2 WHERE id = ANY($3::uuid[])`,
		messageID, at, ids.ArrayParam(list))
	return err
}

// byMessages returns the live files attached to the messages of list, in
// upload order per message.
func (s store) byMessages(ctx context.Context, list []string) ([]File, error) {
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT `+fileColumns+` FROM stored_files WHERE message_id = ANY($1::uuid[]) AND delete_after IS NULL
		ORDER BY message_id, created_at, id`, ids.ArrayParam(list))
	if err != nil {
		return nil, fmt.Errorf("files by message: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (File, error) { return scanFile(r) })
}

// scheduleDelete marks the files of message for deletion at after.
func (s store) scheduleDelete(ctx context.Context, messageID string, after time.Time) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE stored_files SET delete_after = $2 WHERE message_id = $1 AND delete_after IS NULL`, messageID, after)
	return err
}

// due returns up to limit files whose time is up: scheduled for deletion
// before now, or unattached since before orphanBefore.
func (s store) due(ctx context.Context, now, orphanBefore time.Time, limit int) ([]File, error) {
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT `+fileColumns+` FROM stored_files
		WHERE (delete_after IS NOT NULL AND delete_after <= $1) OR (message_id IS NULL AND created_at < $2)
		LIMIT $3`, now, orphanBefore, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (File, error) { return scanFile(r) })
}

// remove deletes the row of id.
func (s store) remove(ctx context.Context, id string) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `DELETE FROM stored_files WHERE id = $1`, id)
	return err
}

// keysExist returns which of keys have a row.
func (s store) keysExist(ctx context.Context, keys []string) (map[string]bool, error) {
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT storage_key FROM stored_files WHERE storage_key = ANY($1::text[])`, keys)
	if err != nil {
		return nil, err
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(found))
	for _, k := range found {
		out[k] = true
	}
	return out, nil
}

// setScan stores the scan state of id.
func (s store) setScan(ctx context.Context, id string, status ScanStatus) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE stored_files SET scan_status = $2 WHERE id = $1`, id, status)
	return err
}

// setText stores the text state of id and, when it is ready, the text.
func (s store) setText(ctx context.Context, id string, status TextStatus, text *string, truncated bool) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE stored_files SET text_status = $2, text_content = $3, text_truncated = $4 WHERE id = $1`,
		id, status, text, truncated)
	return err
}

// text returns the stored text of id ("" unless it is ready).
func (s store) text(ctx context.Context, id string) (string, error) {
	var t *string
	err := db.Q(ctx, s.pool).QueryRow(ctx, `SELECT text_content FROM stored_files WHERE id = $1`, id).Scan(&t)
	if errors.Is(err, pgx.ErrNoRows) || t == nil {
		return "", err
	}
	return *t, err
}

// pending returns up to limit live files created before before whose scan
// or extraction has not finished.
func (s store) pending(ctx context.Context, before time.Time, limit int) ([]File, error) {
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT `+fileColumns+` FROM stored_files
		WHERE (scan_status = 'pending' OR text_status = 'pending') AND created_at < $1 AND delete_after IS NULL
		ORDER BY created_at LIMIT $2`, before, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (File, error) { return scanFile(r) })
}
