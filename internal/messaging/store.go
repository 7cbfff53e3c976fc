package messaging

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
)

// row is a message as stored, before the author and mentions are resolved.
type row struct {
	Message
	authorID   string
	mentionIDs []string
	hash       []byte
}

const messageColumns = `m.id, m.thread_id, m.thread_seq, m.author_principal_id, m.origin, m.kind, m.content_md,
	coalesce(m.reply_to_message_id::text, ''), coalesce(m.trigger_state, ''), coalesce(m.trigger_reason, ''),
	coalesce(m.system_code, ''), coalesce(m.run_id::text, ''), ` + provenanceColumn + `, m.deleted_at IS NOT NULL, m.created_at,
	coalesce(m.client_payload_sha256, ''::bytea),
	coalesce((SELECT array_agg(mm.principal_id::text ORDER BY mm.ordinal) FROM message_mentions mm WHERE mm.message_id = m.id), '{}')`

func scanRow(r pgx.Row) (row, error) {
	var x row
	err := r.Scan(&x.ID, &x.ThreadID, &x.ThreadSeq, &x.authorID, &x.Origin, &x.Kind, &x.ContentMD, &x.ReplyToMessageID,
		&x.TriggerState, &x.TriggerReason, &x.SystemCode, &x.RunID, &x.Provenance, &x.Deleted, &x.CreatedAt, &x.hash, &x.mentionIDs)
	x.CreatedAt = x.CreatedAt.UTC()
	return x, err
}

// provenanceColumn reads a message's provenance: as stored for an agent's
// message, unverified for one an older binary wrote without it (fail
// closed), empty for every other origin.
const provenanceColumn = `CASE WHEN m.origin = 'agent' THEN coalesce(m.provenance, 'unverified') ELSE '' END`

// ErrNotFound is returned for an unknown message.
var ErrNotFound = fmt.Errorf("messaging: %w", problem.ErrMissing)

func (s *store) loadRow(ctx context.Context, id string) (row, error) {
	q := db.Q(ctx, s.pool)
	x, err := scanRow(q.QueryRow(ctx, `SELECT `+messageColumns+` FROM messages m WHERE m.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return row{}, ErrNotFound
	}
	return x, err
}

// loadByIDs returns the stored messages of ids (the unknown ones are
// missing), in one statement.
func (s *store) loadByIDs(ctx context.Context, list []string) ([]row, error) {
	return s.loadRows(ctx, `m.id = ANY($1::uuid[])`, ids.ArrayParam(list))
}

func (s *store) loadRows(ctx context.Context, where string, args ...any) ([]row, error) {
	q := db.Q(ctx, s.pool)
	rows, err := q.Query(ctx, `SELECT `+messageColumns+` FROM messages m WHERE `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("load messages: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) { return scanRow(r) })
}

// insert stores m (with its mentions) in the transaction of ctx.
func (s *store) insert(ctx context.Context, m Message, clientMsgID string, hash []byte) error {
	tx := db.Q(ctx, s.pool)
	var client any
	if clientMsgID != "" {
		client = clientMsgID
	}
	var hashV any
	if hash != nil {
		hashV = hash
	}
	sqlText, args := db.SQL.Insert("messages").
		Columns("id", "thread_id", "thread_seq", "author_principal_id", "origin", "kind", "content_md", "reply_to_message_id",
			"client_msg_id", "client_payload_sha256", "trigger_state", "trigger_reason", "system_code", "run_id", "provenance", "created_at").
		Values(m.ID, m.ThreadID, m.ThreadSeq, m.Author.ID, m.Origin, m.Kind, m.ContentMD, db.Nullable(m.ReplyToMessageID),
			client, hashV, db.Nullable(string(m.TriggerState)), db.Nullable(m.TriggerReason), db.Nullable(m.SystemCode), db.Nullable(m.RunID),
			db.Nullable(string(m.Provenance)), m.CreatedAt).MustSql()
	if _, err := tx.Exec(ctx, sqlText, args...); err != nil {
		return err
	}
	if len(m.Mentions) > 0 {
		b := db.SQL.Insert("message_mentions").Columns("message_id", "principal_id", "ordinal")
		for i, r := range m.Mentions {
			b = b.Values(m.ID, r.ID, i)
		}
		sqlText, args = b.MustSql()
		if _, err := tx.Exec(ctx, sqlText, args...); err != nil {
			return err
		}
	}
	return nil
}

// byClientID finds the message of author with clientMsgID.
func (s *store) byClientID(ctx context.Context, authorID, clientMsgID string) (row, error) {
	q := db.Q(ctx, s.pool)
	x, err := scanRow(q.QueryRow(ctx, `SELECT `+messageColumns+` FROM messages m WHERE m.author_principal_id = $1 AND m.client_msg_id = $2`, authorID, clientMsgID))
	if errors.Is(err, pgx.ErrNoRows) {
		return row{}, ErrNotFound
	}
	return x, err
}

// SetTrigger records the trigger decision on message id in the transaction of ctx.
func (s *store) SetTrigger(ctx context.Context, id string, state TriggerState, reason string) error {
	tx := db.Q(ctx, s.pool)
	_, err := tx.Exec(ctx, `UPDATE messages SET trigger_state = $2, trigger_reason = $3 WHERE id = $1`, id, db.Nullable(string(state)), db.Nullable(reason))
	return err
}

func now(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// lockRow reads message id and locks it for the rest of the transaction of
// ctx.
func (s *store) lockRow(ctx context.Context, id string) (row, error) {
	return scanRow(db.Q(ctx, s.pool).QueryRow(ctx, `SELECT `+messageColumns+` FROM messages m WHERE m.id = $1 FOR UPDATE`, id))
}

// tombstoneRow empties message id, sets its deletion time and removes its
// mentions.
func (s *store) tombstoneRow(ctx context.Context, id string) error {
	q := db.Q(ctx, s.pool)
	if _, err := q.Exec(ctx, `UPDATE messages SET deleted_at = $2, content_md = '' WHERE id = $1`, id, s.clock.Now()); err != nil {
		return fmt.Errorf("delete message: %w", err)
	}
	if _, err := q.Exec(ctx, `DELETE FROM message_mentions WHERE message_id = $1`, id); err != nil {
		return fmt.Errorf("delete mentions: %w", err)
	}
	return nil
}

// store holds the package's SQL, kept in an unexported field (st) of
// the service that decides what to write (the store convention: README.md#architecture).
type store struct {
	pool  db.Querier
	clock clock.Clock
}

// inThread reports whether message id is in thread threadID.
func (s *store) inThread(ctx context.Context, id, threadID string) (bool, error) {
	var inThread bool
	err := db.Q(ctx, s.pool).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM messages WHERE id = $1 AND thread_id = $2)`, id, threadID).Scan(&inThread)
	return inThread, err
}

// threadAndAuthor returns the thread and author of message id, or
// pgx.ErrNoRows.
func (s *store) threadAndAuthor(ctx context.Context, id string) (threadID, authorID string, err error) {
	err = db.Q(ctx, s.pool).QueryRow(ctx, `SELECT thread_id::text, author_principal_id::text FROM messages WHERE id = $1`, id).Scan(&threadID, &authorID)
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	return threadID, authorID, err
}

// threadRows returns up to limit messages of thread threadID after
// position after, in thread order.
func (s *store) threadRows(ctx context.Context, threadID string, after int64, limit int) ([]row, error) {
	return s.loadRows(ctx, `m.thread_id = $1 AND m.thread_seq > $2 ORDER BY m.thread_seq LIMIT $3`, threadID, after, limit)
}
