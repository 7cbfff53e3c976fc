package messaging

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/trust"
)

// ContextMessages returns the messages with the given ids (the triggering
// message and the thread's parent message) in one statement, keyed by id,
// tombstones as stored. The caller checks each with message.read.
func (s *store) ContextMessages(ctx context.Context, idList []string) (map[string]ContextItem, error) {
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT `+contextColumns+` FROM messages m WHERE m.id = ANY($1::uuid[])`, idList)
	if err != nil {
		return nil, fmt.Errorf("context messages: %w", err)
	}
	items, err := pgx.CollectRows(rows, scanItem)
	if err != nil {
		return nil, fmt.Errorf("context messages: %w", err)
	}
	out := make(map[string]ContextItem, len(items))
	for _, it := range items {
		out[it.ID] = it
	}
	return out, nil
}

// ContextWindow returns the newest Limit selectable messages of q: never
// tombstones, never run anchors (UI, not conversation), never the excluded
// author; the limit counts only selectable messages. One statement over the
// unique index (thread_id, thread_seq), with HasOlder from one row more than
// the limit.
func (s *store) ContextWindow(ctx context.Context, q ContextQuery) (ContextPage, error) {
	if q.BeforeSeq <= q.AfterSeq+1 {
		return ContextPage{Items: []ContextItem{}}, nil
	}
	var exclude any
	if q.ExcludeAuthorID != "" {
		exclude = q.ExcludeAuthorID
	}
	if q.Limit <= 0 {
		// Nothing is kept, but the caller still learns whether something
		// older was left out (truncated_before_seq).
		page := ContextPage{Items: []ContextItem{}}
		err := db.Q(ctx, s.pool).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM messages o WHERE o.thread_id = $1 AND o.thread_seq > $2 AND o.thread_seq < $3
			AND o.deleted_at IS NULL AND o.kind <> 'run' AND ($4::uuid IS NULL OR o.author_principal_id <> $4::uuid))`,
			q.ThreadID, q.AfterSeq, q.BeforeSeq, exclude).Scan(&page.HasOlder)
		if err != nil {
			return ContextPage{}, fmt.Errorf("context window: %w", err)
		}
		return page, nil
	}
	// One row more than the limit says whether something older was left
	// out: no second look at the index, no materialized window, no sort
	// in the database (the rows come newest first and are turned here).
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT `+contextColumns+` FROM messages m
		WHERE `+windowWhere+` ORDER BY m.thread_seq DESC LIMIT $4`, q.ThreadID, q.AfterSeq, q.BeforeSeq, q.Limit+1, exclude)
	if err != nil {
		return ContextPage{}, fmt.Errorf("context window: %w", err)
	}
	defer rows.Close()
	page := ContextPage{Items: make([]ContextItem, 0, q.room())}
	var sc itemScan
	dest := sc.dest()
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return ContextPage{}, fmt.Errorf("context window: %w", err)
		}
		page.Items = append(page.Items, sc.item(q.ThreadID))
	}
	if err := rows.Err(); err != nil {
		return ContextPage{}, fmt.Errorf("context window: %w", err)
	}
	page.finish(q.Limit)
	return page, nil
}

// room is how many rows the window statement of q can return at most
// (one more than the limit, no more than the range holds, and no more
// than 1024 reserved before the rows arrive).
func (q ContextQuery) room() int {
	return int(min(int64(q.Limit)+1, q.BeforeSeq-q.AfterSeq-1, 1024))
}

// windowWhere selects the messages of a context window: $1 thread, $2
// floor (exclusive), $3 ceiling (exclusive), $5 the excluded author or
// null. Tombstones and run anchors are never selected. The shared function
// context_authors (migrations/00015_module_views.sql) selects the same
// rows; TestContextWindow compares the two.
const windowWhere = `m.thread_id = $1 AND m.thread_seq > $2 AND m.thread_seq < $3 AND m.deleted_at IS NULL AND m.kind <> 'run'
		AND ($5::uuid IS NULL OR m.author_principal_id <> $5::uuid)`

// ContextAuthors names the authors of what ContextMessagesAndWindow(idList,
// q) reads (the rows of q's window, the extra row that tells has_older
// included, and the messages asked by id) as messaging's shared function
// context_authors (migrations/00015_module_views.sql) with its arguments:
// for a module that reads the people of a context in a statement of its
// own beside that read (authz's PeopleWithTriggerIn).
func ContextAuthors(idList []string, q ContextQuery) authz.Relation {
	var exclude any
	if q.ExcludeAuthorID != "" {
		exclude = q.ExcludeAuthorID
	}
	return authz.Relation{Func: "context_authors", Args: []any{q.ThreadID, q.AfterSeq, q.BeforeSeq, q.Limit + 1, exclude, ids.ArrayParam(idList)}}
}

// finish turns the window's rows, read with one more than limit, into the
// page: ascending by thread_seq, at most limit items, HasOlder when the
// extra row came back (it is the oldest, and is dropped).
func (p *ContextPage) finish(limit int) {
	slices.SortFunc(p.Items, func(a, b ContextItem) int { return cmp.Compare(a.ThreadSeq, b.ThreadSeq) })
	if len(p.Items) > limit {
		p.HasOlder = true
		p.Items = p.Items[len(p.Items)-limit:]
	}
}

// ContextMessagesAndWindow answers ContextMessages(idList) and
// ContextWindow(q) together in one statement (one round trip instead of
// two): a run context reads its triggering message and the thread window
// before it, and the run row already names where the trigger lies, so the
// window does not have to wait for the message. Where the window needs no
// rows (an empty range, or Limit 0) the two are read as before.
func (s *store) ContextMessagesAndWindow(ctx context.Context, idList []string, q ContextQuery) (map[string]ContextItem, ContextPage, error) {
	if q.BeforeSeq <= q.AfterSeq+1 || q.Limit <= 0 {
		msgs, err := s.ContextMessages(ctx, idList)
		if err != nil {
			return nil, ContextPage{}, err
		}
		page, err := s.ContextWindow(ctx, q)
		return msgs, page, err
	}
	var exclude any
	if q.ExcludeAuthorID != "" {
		exclude = q.ExcludeAuthorID
	}
	// The first column tells the two parts apart: false for the window
	// (ascending by thread_seq, with HasOlder as ContextWindow computes
	// it), true for the messages asked by id.
	rows, err := db.Q(ctx, s.pool).Query(ctx, `(SELECT false, `+contextColumns+` FROM messages m
			WHERE `+windowWhere+` ORDER BY m.thread_seq DESC LIMIT $4)
		UNION ALL
		SELECT true, `+contextColumns+` FROM messages m WHERE m.id = ANY($6::uuid[])`,
		q.ThreadID, q.AfterSeq, q.BeforeSeq, q.Limit+1, exclude, idList)
	if err != nil {
		return nil, ContextPage{}, fmt.Errorf("context messages and window: %w", err)
	}
	defer rows.Close()
	msgs := make(map[string]ContextItem, len(idList))
	page := ContextPage{Items: make([]ContextItem, 0, q.room())}
	var byID bool
	var sc itemScan
	dest := append([]any{&byID}, sc.dest()...)
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, ContextPage{}, fmt.Errorf("context messages and window: %w", err)
		}
		x := sc.item(q.ThreadID)
		if byID {
			msgs[x.ID] = x
			continue
		}
		page.Items = append(page.Items, x)
	}
	if err := rows.Err(); err != nil {
		return nil, ContextPage{}, fmt.Errorf("context messages and window: %w", err)
	}
	page.finish(q.Limit)
	return msgs, page, nil
}

const contextColumns = `m.id::text, m.thread_id::text, m.thread_seq, m.author_principal_id::text, m.origin, m.kind, m.content_md,
	coalesce(m.reply_to_message_id::text, ''), m.deleted_at IS NOT NULL, m.created_at, ` + provenanceColumn

// itemScan is one set of destinations for every row of a context
// statement (contextColumns): the row's values are copied out by item, so
// nothing per row escapes but the strings themselves. The columns that
// repeat across a window (its thread, the origin, the kind) are read as
// the driver's bytes and turned into shared strings: a window of 200 rows
// does not make 600 copies of a few words.
type itemScan struct {
	x                                ContextItem
	thread, origin, kind, provenance pgtype.DriverBytes
}

// dest returns the scan destinations of contextColumns.
func (s *itemScan) dest() []any {
	return []any{&s.x.ID, &s.thread, &s.x.ThreadSeq, &s.x.AuthorID, &s.origin, &s.kind, &s.x.ContentMD, &s.x.ReplyToMessageID, &s.x.Deleted, &s.x.CreatedAt, &s.provenance}
}

// item returns the row just scanned; threadID is the thread most rows lie
// in, whose string they share.
func (s *itemScan) item(threadID string) ContextItem {
	x := s.x
	x.CreatedAt = x.CreatedAt.UTC()
	if string(s.thread) == threadID {
		x.ThreadID = threadID
	} else {
		x.ThreadID = string(s.thread)
	}
	x.Origin = Origin(word(s.origin, string(OriginHuman), string(OriginAgent), string(OriginApp), string(OriginImport), string(OriginSystem)))
	x.Kind = Kind(word(s.kind, string(KindText), string(KindVoice), string(KindCard), string(KindRun), string(KindSystem)))
	x.Provenance = trust.Level(word(s.provenance, "", string(trust.Unverified), string(trust.Self), string(trust.System),
		string(trust.Authorized), string(trust.Trigger)))
	return x
}

// word returns the one of known that b spells (no copy), or a copy of b.
func word(b []byte, known ...string) string {
	for _, k := range known {
		if string(b) == k {
			return k
		}
	}
	return string(b)
}

func scanItem(r pgx.CollectableRow) (ContextItem, error) {
	var s itemScan
	err := r.Scan(s.dest()...)
	return s.item(""), err
}
