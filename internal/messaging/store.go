package messaging

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/identity"
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

// FactsSQL is the relation (id, thread_id, thread_seq, author_principal_id)
// of every message, as a subquery for a module that must join a message's
// place and author into one statement of its own (the runs module ordering
// follow-ups by their place in the thread, or scoping them by author).
// Messaging owns messages; this is the only shape others may use.
const FactsSQL = `(SELECT id, thread_id, thread_seq, author_principal_id FROM messages)`

const messageColumns = `m.id, m.thread_id, m.thread_seq, m.author_principal_id, m.origin, m.kind, m.content_md,
	coalesce(m.reply_to_message_id::text, ''), coalesce(m.trigger_state, ''), coalesce(m.trigger_reason, ''),
	coalesce(m.system_code, ''), coalesce(m.run_id::text, ''), m.deleted_at IS NOT NULL, m.created_at,
	coalesce(m.client_payload_sha256, ''::bytea),
	coalesce((SELECT array_agg(mm.principal_id::text ORDER BY mm.ordinal) FROM message_mentions mm WHERE mm.message_id = m.id), '{}')`

func scanRow(r pgx.Row) (row, error) {
	var x row
	err := r.Scan(&x.ID, &x.ThreadID, &x.ThreadSeq, &x.authorID, &x.Origin, &x.Kind, &x.ContentMD, &x.ReplyToMessageID,
		&x.TriggerState, &x.TriggerReason, &x.SystemCode, &x.RunID, &x.Deleted, &x.CreatedAt, &x.hash, &x.mentionIDs)
	x.CreatedAt = x.CreatedAt.UTC()
	return x, err
}

// ErrNotFound is returned for an unknown message.
var ErrNotFound = errors.New("messaging: not found")

func (s *Service) loadRow(ctx context.Context, id string) (row, error) {
	q := db.Q(ctx, s.pool)
	x, err := scanRow(q.QueryRow(ctx, `SELECT `+messageColumns+` FROM messages m WHERE m.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return row{}, ErrNotFound
	}
	return x, err
}

func (s *Service) loadRows(ctx context.Context, where string, args ...any) ([]row, error) {
	q := db.Q(ctx, s.pool)
	rows, err := q.Query(ctx, `SELECT `+messageColumns+` FROM messages m WHERE `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("load messages: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) { return scanRow(r) })
}

// resolve fills authors and mentions of rows with one identity read, and
// sets the channel of each message.
func (s *Service) resolve(ctx context.Context, rows []row, channelOf func(threadID string) string) ([]Message, error) {
	need := map[string]bool{}
	for _, r := range rows {
		need[r.authorID] = true
		for _, m := range r.mentionIDs {
			need[m] = true
		}
	}
	idList := make([]string, 0, len(need))
	for id := range need {
		idList = append(idList, id)
	}
	people, err := s.ident.GetMany(ctx, idList)
	if err != nil {
		return nil, err
	}
	out := make([]Message, len(rows))
	for i, r := range rows {
		m := r.Message
		m.Author = people[r.authorID].Ref()
		m.Mentions = make([]identity.Ref, 0, len(r.mentionIDs))
		for _, id := range r.mentionIDs {
			if p, ok := people[id]; ok {
				m.Mentions = append(m.Mentions, p.Ref())
			}
		}
		m.Attachments = []Attachment{}
		m.ChannelID = channelOf(m.ThreadID)
		out[i] = m
	}
	return out, nil
}

// insert stores m (with its mentions) in the transaction of ctx.
func (s *Service) insert(ctx context.Context, m Message, clientMsgID string, hash []byte) error {
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
			"client_msg_id", "client_payload_sha256", "trigger_state", "trigger_reason", "system_code", "run_id", "created_at").
		Values(m.ID, m.ThreadID, m.ThreadSeq, m.Author.ID, m.Origin, m.Kind, m.ContentMD, db.Nullable(m.ReplyToMessageID),
			client, hashV, db.Nullable(string(m.TriggerState)), db.Nullable(m.TriggerReason), db.Nullable(m.SystemCode), db.Nullable(m.RunID), m.CreatedAt).MustSql()
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
func (s *Service) byClientID(ctx context.Context, authorID, clientMsgID string) (row, error) {
	q := db.Q(ctx, s.pool)
	x, err := scanRow(q.QueryRow(ctx, `SELECT `+messageColumns+` FROM messages m WHERE m.author_principal_id = $1 AND m.client_msg_id = $2`, authorID, clientMsgID))
	if errors.Is(err, pgx.ErrNoRows) {
		return row{}, ErrNotFound
	}
	return x, err
}

// SetTrigger records the trigger decision on message id in the transaction of ctx.
func (s *Service) SetTrigger(ctx context.Context, id string, state TriggerState, reason string) error {
	tx := db.Q(ctx, s.pool)
	_, err := tx.Exec(ctx, `UPDATE messages SET trigger_state = $2, trigger_reason = $3 WHERE id = $1`, id, db.Nullable(string(state)), db.Nullable(reason))
	return err
}

func now(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// Load returns message id as stored, with author and mentions,
// without any authorization: for a module that decides on a message it
// already holds (the runs module re-deciding a follow-up inside its unit of
// work). channelID is the channel the caller knows the message's thread in.
func (s *Service) Load(ctx context.Context, id, channelID string) (Message, error) {
	r, err := s.loadRow(ctx, id)
	if err != nil {
		return Message{}, err
	}
	ms, err := s.resolve(ctx, []row{r}, func(string) string { return channelID })
	if err != nil {
		return Message{}, err
	}
	return ms[0], nil
}

// lockRow reads message id and locks it for the rest of the transaction of
// ctx.
func (s *Service) lockRow(ctx context.Context, id string) (row, error) {
	return scanRow(db.Q(ctx, s.pool).QueryRow(ctx, `SELECT `+messageColumns+` FROM messages m WHERE m.id = $1 FOR UPDATE`, id))
}

// tombstoneRow empties message id, sets its deletion time and removes its
// mentions.
func (s *Service) tombstoneRow(ctx context.Context, id string) error {
	q := db.Q(ctx, s.pool)
	if _, err := q.Exec(ctx, `UPDATE messages SET deleted_at = $2, content_md = '' WHERE id = $1`, id, s.clock.Now()); err != nil {
		return fmt.Errorf("delete message: %w", err)
	}
	if _, err := q.Exec(ctx, `DELETE FROM message_mentions WHERE message_id = $1`, id); err != nil {
		return fmt.Errorf("delete mentions: %w", err)
	}
	return nil
}

// checkReply requires the replied-to message to be in the same thread.
func (s *Service) checkReply(ctx context.Context, threadID, replyTo, ptr string) error {
	q := db.Q(ctx, s.pool)
	bad := problem.Invalid(problem.FieldError{Pointer: ptr, Code: "invalid_reference", Detail: "must name a message of the same thread"})
	if !ids.Valid(replyTo) {
		return bad
	}
	var inThread bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM messages WHERE id = $1 AND thread_id = $2)`, replyTo, threadID).Scan(&inThread); err != nil {
		return problem.Internal("messaging.checkReply", err)
	}
	if !inThread {
		return bad
	}
	return nil
}

// Path implements authz.Source for messages: the message's thread path with
// its author.
func (s *Service) Path(ctx context.Context, kind authz.ResourceKind, id string) (authz.Path, error) {
	var threadID, authorID string
	err := db.Q(ctx, s.pool).QueryRow(ctx, `SELECT thread_id::text, author_principal_id::text FROM messages WHERE id = $1`, id).Scan(&threadID, &authorID)
	if errors.Is(err, pgx.ErrNoRows) {
		// The thread lookup runs for a missing message too (on the nil
		// UUID), so that a missing and a hidden message take the same
		// statements.
		if _, err := s.chat.ThreadPath(ctx, "00000000-0000-0000-0000-000000000000"); err != nil {
			return authz.Path{}, err
		}
		return authz.Path{Kind: kind, ID: id}, nil
	}
	if err != nil {
		return authz.Path{}, err
	}
	p, err := s.chat.ThreadPath(ctx, threadID)
	if err != nil {
		return authz.Path{}, err
	}
	p.AuthorID = authorID
	return p, nil
}
