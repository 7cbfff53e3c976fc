package chat

import (
	"context"
	"errors"
	"fmt"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
)

// store holds the package's SQL, kept in an unexported field (st) of
// the service that decides what to write (the store convention: README.md#architecture).
type store struct {
	pool  db.Querier
	clock clock.Clock
}

// renameSpace stores name as the name of space id; a taken name answers
// 409 name_taken.
func (s *store) renameSpace(ctx context.Context, id, name string) error {
	tx := db.Q(ctx, s.pool)
	if _, err := tx.Exec(ctx, `UPDATE spaces SET name = $2 WHERE id = $1`, id, name); err != nil {
		return nameConflict(err, "rename space")
	}
	return nil
}

// SetDefaultOperator sets (or, with an empty agentID, clears) the default
// operator agent of space id in the transaction of ctx.
func (s *store) SetDefaultOperator(ctx context.Context, id, agentID string) error {
	tx := db.Q(ctx, s.pool)
	_, err := tx.Exec(ctx, `UPDATE spaces SET default_operator_agent_id = $2 WHERE id = $1`, id, db.Nullable(agentID))
	if err != nil {
		return fmt.Errorf("set default operator: %w", err)
	}
	return nil
}

// UnarchiveSpace clears archived_at of space id in the transaction of ctx.
func (s *store) UnarchiveSpace(ctx context.Context, id string) error {
	tx := db.Q(ctx, s.pool)
	_, err := tx.Exec(ctx, `UPDATE spaces SET archived_at = NULL WHERE id = $1`, id)
	return err
}

// renameChannel stores name as the name of channel id; a name taken in
// the space answers 409 name_taken.
func (s *store) renameChannel(ctx context.Context, id, name string) error {
	tx := db.Q(ctx, s.pool)
	if _, err := tx.Exec(ctx, `UPDATE channels SET name = $2 WHERE id = $1`, id, name); err != nil {
		return nameConflict(err, "rename channel")
	}
	return nil
}

// UnarchiveChannel clears archived_at of channel id in the transaction of ctx.
func (s *store) UnarchiveChannel(ctx context.Context, id string) error {
	tx := db.Q(ctx, s.pool)
	_, err := tx.Exec(ctx, `UPDATE channels SET archived_at = NULL WHERE id = $1`, id)
	return err
}

// SpaceExists reports whether a space with name exists (for scripts that
// must not build twice).
func (s *store) SpaceExists(ctx context.Context, name string) (bool, error) {
	var ok bool
	err := db.Q(ctx, s.pool).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM spaces WHERE name = $1)`, name).Scan(&ok)
	return ok, err
}

// insertSpace stores a space with an optional default operator agent; a
// taken name answers 409 name_taken.
func (s *store) insertSpace(ctx context.Context, name, defaultOperator string) (Space, error) {
	q := db.Q(ctx, s.pool)
	sp := Space{ID: ids.New(), Name: name, DefaultOperatorAgentID: defaultOperator}
	sqlText, args := db.SQL.Insert("spaces").Columns("id", "name", "default_operator_agent_id", "created_at").
		Values(sp.ID, name, db.Nullable(defaultOperator), s.clock.Now()).MustSql()
	if _, err := q.Exec(ctx, sqlText, args...); err != nil {
		return Space{}, nameConflict(err, "create space")
	}
	return sp, nil
}

// insertChannel stores channel id of nc with switches sw, created at now.
func (s *store) insertChannel(ctx context.Context, id string, nc NewChannel, sw Switches, now time.Time) error {
	q := db.Q(ctx, s.pool)
	sqlText, args := db.SQL.Insert("channels").
		Columns("id", "space_id", "name", "kind", "operator_mode", "operator_agent_id", "free_response", "allow_mentioned_agents", "auto_thread", "history_backfill_limit", "created_at").
		Values(id, nc.SpaceID, nc.Name, nc.Kind, nc.OperatorMode, db.Nullable(nc.OperatorAgentID), sw.FreeResponse, sw.AllowMentionedAgents, sw.AutoThread, sw.HistoryBackfillLimit, now).MustSql()
	if _, err := q.Exec(ctx, sqlText, args...); err != nil {
		return nameConflict(err, "create channel")
	}
	return nil
}

// insertMainThread stores the main thread of channel channelID.
func (s *store) insertMainThread(ctx context.Context, channelID, createdBy string, now time.Time) error {
	q := db.Q(ctx, s.pool)
	sqlText, args := db.SQL.Insert("threads").Columns("id", "channel_id", "kind", "created_by", "created_at").
		Values(ids.New(), channelID, ThreadMain, createdBy, now).MustSql()
	if _, err := q.Exec(ctx, sqlText, args...); err != nil {
		return fmt.Errorf("create main thread: %w", err)
	}
	return nil
}

const channelSelect = `SELECT c.id, c.space_id, c.name, c.kind, c.archived_at, c.operator_mode, coalesce(c.operator_agent_id::text, ''),
	c.free_response, c.allow_mentioned_agents, c.auto_thread, c.history_backfill_limit,
	coalesce(s.default_operator_agent_id::text, ''), s.archived_at IS NOT NULL,
	coalesce((SELECT t.id::text FROM threads t WHERE t.channel_id = c.id AND t.kind = 'main'), '')
	FROM channels c JOIN spaces s ON s.id = c.space_id`

// GetChannel returns the channel with id, or ErrNotFound.
func (s *store) GetChannel(ctx context.Context, id string) (Channel, error) {
	q := db.Q(ctx, s.pool)
	if !ids.Valid(id) {
		return Channel{}, ErrNotFound
	}
	return scanChannel(q.QueryRow(ctx, channelSelect+` WHERE c.id = $1`, id))
}

// GetSpace returns the space with id, or ErrNotFound.
func (s *store) GetSpace(ctx context.Context, id string) (Space, error) {
	q := db.Q(ctx, s.pool)
	if !ids.Valid(id) {
		return Space{}, ErrNotFound
	}
	var sp Space
	var def *string
	err := q.QueryRow(ctx, `SELECT id, name, default_operator_agent_id::text, archived_at FROM spaces WHERE id = $1`, id).
		Scan(&sp.ID, &sp.Name, &def, &sp.ArchivedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Space{}, ErrNotFound
	}
	if def != nil {
		sp.DefaultOperatorAgentID = *def
	}
	return sp, err
}

// GetThread returns the thread with id, or ErrNotFound.
func (s *store) GetThread(ctx context.Context, id string) (Thread, error) {
	q := db.Q(ctx, s.pool)
	if !ids.Valid(id) {
		return Thread{}, ErrNotFound
	}
	return scanThread(q.QueryRow(ctx, `SELECT `+threadColumns+` FROM threads t WHERE t.id = $1`, id))
}

// GetThreads returns the threads with the given ids in one statement,
// keyed by id; unknown and malformed ids are absent.
func (s *store) GetThreads(ctx context.Context, idList []string) (map[string]Thread, error) {
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT `+threadColumns+` FROM threads t WHERE t.id = ANY($1::uuid[])`, validIDs(idList))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]Thread, len(idList))
	for rows.Next() {
		t, err := scanThread(rows)
		if err != nil {
			return nil, err
		}
		out[t.ID] = t
	}
	return out, rows.Err()
}

// LockThread returns the thread with id locked FOR UPDATE in the transaction of ctx. Writers of
// one thread serialise on this row lock, which keeps thread_seq gap-free.
func (s *store) LockThread(ctx context.Context, id string) (Thread, error) {
	tx := db.Q(ctx, s.pool)
	return scanThread(tx.QueryRow(ctx, `SELECT `+threadColumns+` FROM threads t WHERE t.id = $1 FOR UPDATE`, id))
}

// NextSeq raises the thread's last_seq by one in the transaction of ctx and returns it. The
// caller holds the thread's row lock (LockThread); a rollback returns the
// number, so committed messages have no gaps.
func (s *store) NextSeq(ctx context.Context, threadID string) (int64, error) {
	tx := db.Q(ctx, s.pool)
	var seq int64
	err := tx.QueryRow(ctx, `UPDATE threads SET last_seq = last_seq + 1 WHERE id = $1 RETURNING last_seq`, threadID).Scan(&seq)
	return seq, err
}

// SetState sets the thread's state (open or done) in the transaction of ctx.
func (s *store) SetState(ctx context.Context, threadID string, state ThreadState) error {
	tx := db.Q(ctx, s.pool)
	_, err := tx.Exec(ctx, `UPDATE threads SET state = $2 WHERE id = $1`, threadID, state)
	return err
}

// insertThread stores thread t.
func (s *store) insertThread(ctx context.Context, t Thread) error {
	var titleV, sourceV any
	if t.Title != "" {
		titleV, sourceV = t.Title, t.TitleSource
	}
	sqlText, args := db.SQL.Insert("threads").
		Columns("id", "channel_id", "kind", "parent_message_id", "operator_agent_id", "title", "title_source", "created_by", "state", "created_at").
		Values(t.ID, t.ChannelID, t.Kind, db.Nullable(t.ParentMessageID), db.Nullable(t.OperatorAgentID), titleV, sourceV, t.CreatedBy, t.State, t.CreatedAt).MustSql()
	if _, err := db.Q(ctx, s.pool).Exec(ctx, sqlText, args...); err != nil {
		if db.IsUniqueViolation(err, "threads_parent_unique") {
			return problem.Newf(problem.Conflict, "parent_has_thread", "the parent message already has a thread")
		}
		return fmt.Errorf("create thread: %w", err)
	}
	return nil
}

// TryLockThread locks thread id for the rest of the transaction of ctx
// unless another transaction holds it; it reports whether it got the lock
// (false for an unknown thread too).
func (s *store) TryLockThread(ctx context.Context, id string) (bool, error) {
	var locked string
	err := db.Q(ctx, s.pool).QueryRow(ctx, `SELECT id::text FROM threads WHERE id = $1 FOR UPDATE SKIP LOCKED`, id).Scan(&locked)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("try lock thread: %w", err)
	}
	return true, nil
}

// DropAutoTitle removes the auto title that came from message messageID,
// which was deleted: the title of the thread whose parent it is, or, when
// first is set (the message is the first of thread threadID), of that
// thread when it has no parent.
func (s *store) DropAutoTitle(ctx context.Context, messageID, threadID string, first bool) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE threads SET title = NULL, title_source = NULL
		WHERE title_source = 'auto' AND (parent_message_id = $1 OR (id = $2 AND parent_message_id IS NULL AND $3))`,
		messageID, threadID, first)
	if err != nil {
		return fmt.Errorf("drop auto title: %w", err)
	}
	return nil
}

// MoveThread sets the thread's channel in the transaction of ctx. parent_message_id keeps
// pointing into the source channel.
func (s *store) MoveThread(ctx context.Context, threadID, channelID string) error {
	tx := db.Q(ctx, s.pool)
	// An auto title taken from the parent message (a main-thread message
	// of the source channel, which stays there) does not follow the thread:
	// readers of the target may not read that message.
	_, err := tx.Exec(ctx, `UPDATE threads SET channel_id = $2,
		title = CASE WHEN title_source = 'auto' AND parent_message_id IS NOT NULL THEN NULL ELSE title END,
		title_source = CASE WHEN title_source = 'auto' AND parent_message_id IS NOT NULL THEN NULL ELSE title_source END
		WHERE id = $1`, threadID, channelID)
	return err
}

// SetOperator sets the operator mode (and agent for mode agent) of a channel.
func (s *store) SetOperator(ctx context.Context, channelID string, mode OperatorMode, agentID string) error {
	tx := db.Q(ctx, s.pool)
	_, err := tx.Exec(ctx, `UPDATE channels SET operator_mode = $2, operator_agent_id = $3 WHERE id = $1`, channelID, mode, db.Nullable(agentID))
	return err
}

// updateSwitches writes the switches p sets (none: no statement).
func (s *store) updateSwitches(ctx context.Context, channelID string, p SwitchesPatch) error {
	tx := db.Q(ctx, s.pool)
	set := map[string]any{}
	if p.FreeResponse != nil {
		set["free_response"] = *p.FreeResponse
	}
	if p.AllowMentionedAgents != nil {
		set["allow_mentioned_agents"] = *p.AllowMentionedAgents
	}
	if p.AutoThread != nil {
		set["auto_thread"] = *p.AutoThread
	}
	if p.HistoryBackfillLimit != nil {
		set["history_backfill_limit"] = *p.HistoryBackfillLimit
	}
	if len(set) == 0 {
		return nil
	}
	sqlText, args := db.SQL.Update("channels").SetMap(set).Where(sq.Eq{"id": channelID}).MustSql()
	_, err := tx.Exec(ctx, sqlText, args...)
	return err
}

// ArchiveChannel sets archived_at of the channel (once).
func (s *store) ArchiveChannel(ctx context.Context, id string) error {
	tx := db.Q(ctx, s.pool)
	_, err := tx.Exec(ctx, `UPDATE channels SET archived_at = $2 WHERE id = $1 AND archived_at IS NULL`, id, s.clock.Now())
	return err
}

// ArchiveSpace sets archived_at of the space (once).
func (s *store) ArchiveSpace(ctx context.Context, id string) error {
	tx := db.Q(ctx, s.pool)
	_, err := tx.Exec(ctx, `UPDATE spaces SET archived_at = $2 WHERE id = $1 AND archived_at IS NULL`, id, s.clock.Now())
	return err
}

// ChannelsOfSpace returns the ids of the channels of space id.
func (s *store) ChannelsOfSpace(ctx context.Context, id string) ([]string, error) {
	q := db.Q(ctx, s.pool)
	rows, err := q.Query(ctx, `SELECT id::text FROM channels WHERE space_id = $1 ORDER BY id`, id)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// ThreadInfo returns thread id with its current channel (and that channel's
// space facts) in one statement, or ErrNotFound.
func (s *store) ThreadInfo(ctx context.Context, id string) (Thread, Channel, error) {
	q := db.Q(ctx, s.pool)
	if !ids.Valid(id) {
		return Thread{}, Channel{}, ErrNotFound
	}
	var t Thread
	var c Channel
	err := q.QueryRow(ctx, `SELECT ti.* FROM thread_info ti WHERE ti.ti_thread_id = $1`, id).Scan(ThreadInfoDest(&t, &c)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return Thread{}, Channel{}, ErrNotFound
	}
	return t, c, err
}

// ThreadInfoDest returns the scan destinations, into t and c, of the
// columns of chat's shared view thread_info (SELECT ti.*), in their order:
// every thread with its current channel and that channel's space facts
// (migrations/00015_module_views.sql), which ThreadInfo reads and a module
// reads in one statement of its own (the runs module reading a run with
// its thread). Chat owns threads, channels and spaces; the view is the
// only shape others may use.
func ThreadInfoDest(t *Thread, c *Channel) []any {
	return []any{&t.ID, &t.ChannelID, &t.Kind, &t.ParentMessageID, &t.OperatorAgentID, &t.Title, &t.TitleSource, &t.CreatedBy, &t.State, &t.LastSeq, &t.CreatedAt,
		&c.ID, &c.SpaceID, &c.Name, &c.Kind, &c.ArchivedAt, &c.OperatorMode, &c.OperatorAgentID,
		&c.Switches.FreeResponse, &c.Switches.AllowMentionedAgents, &c.Switches.AutoThread, &c.Switches.HistoryBackfillLimit,
		&c.SpaceDefaultOperator, &c.SpaceArchived, &c.MainThreadID}
}

// StartedThreadIDs returns, for each of messageIDs that started a thread
// (the thread's parent message), the id of that thread, in one statement.
// Messages that started none are absent from the map. It decides nothing
// about visibility: callers decide thread.read on each thread.
func (s *store) StartedThreadIDs(ctx context.Context, messageIDs []string) (map[string]string, error) {
	valid := validIDs(messageIDs)
	out := make(map[string]string, len(valid))
	if len(valid) == 0 {
		return out, nil
	}
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT parent_message_id::text, id::text FROM threads WHERE parent_message_id = ANY($1::uuid[])`, valid)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var msg, thread string
		if err := rows.Scan(&msg, &thread); err != nil {
			return nil, err
		}
		out[msg] = thread
	}
	return out, rows.Err()
}

// validIDs returns the well-formed ids of list: a malformed one names
// nothing, and would fail the whole statement.
func validIDs(list []string) []string {
	out := make([]string, 0, len(list))
	for _, id := range list {
		if ids.Valid(id) {
			out = append(out, id)
		}
	}
	return out
}

func scanChannel(row pgx.Row) (Channel, error) {
	var c Channel
	err := row.Scan(&c.ID, &c.SpaceID, &c.Name, &c.Kind, &c.ArchivedAt, &c.OperatorMode, &c.OperatorAgentID,
		&c.Switches.FreeResponse, &c.Switches.AllowMentionedAgents, &c.Switches.AutoThread, &c.Switches.HistoryBackfillLimit,
		&c.SpaceDefaultOperator, &c.SpaceArchived, &c.MainThreadID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Channel{}, ErrNotFound
	}
	return c, err
}

const threadColumns = `t.id, t.channel_id, t.kind, coalesce(t.parent_message_id::text, ''), coalesce(t.operator_agent_id::text, ''),
	coalesce(t.title, ''), coalesce(t.title_source, ''), t.created_by, t.state, t.last_seq, t.created_at`

func scanThread(row pgx.Row) (Thread, error) {
	var t Thread
	err := row.Scan(&t.ID, &t.ChannelID, &t.Kind, &t.ParentMessageID, &t.OperatorAgentID, &t.Title, &t.TitleSource,
		&t.CreatedBy, &t.State, &t.LastSeq, &t.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Thread{}, ErrNotFound
	}
	return t, err
}

// scopedChannel is a channel that may be visible in a scope: named tells
// whether the scope's spaces or channels name it.
type scopedChannel struct {
	Channel
	named bool
}

// scopeChannels reads the channels in spaces or channels, and those whose
// own or space default operator is agent (nil: none), with their operator
// columns.
func (s *store) scopeChannels(ctx context.Context, spaces, channels []string, agent any) ([]scopedChannel, error) {
	// The operator columns only narrow the candidates; which of them the
	// agent operates now is EffectiveOperator's answer.
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT c.id::text, coalesce(c.space_id = ANY($1::uuid[]) OR c.id = ANY($2::uuid[]), false), c.operator_mode,
		coalesce(c.operator_agent_id::text, ''), coalesce(s.default_operator_agent_id::text, '')
		FROM channels c JOIN spaces s ON s.id = c.space_id
		WHERE c.space_id = ANY($1::uuid[]) OR c.id = ANY($2::uuid[])
		OR ($3::uuid IS NOT NULL AND (c.operator_agent_id = $3 OR s.default_operator_agent_id = $3))`,
		spaces, channels, agent)
	if err != nil {
		return nil, fmt.Errorf("visible channels: %w", err)
	}
	defer rows.Close()
	var out []scopedChannel
	for rows.Next() {
		var c scopedChannel
		if err := rows.Scan(&c.ID, &c.named, &c.OperatorMode, &c.OperatorAgentID, &c.SpaceDefaultOperator); err != nil {
			return nil, fmt.Errorf("visible channels: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("visible channels: %w", err)
	}
	return out, nil
}

// operatedThreads lists the threads whose fixed operator is agentID.
func (s *store) operatedThreads(ctx context.Context, agentID string) ([]string, error) {
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT id::text FROM threads WHERE operator_agent_id = $1`, agentID)
	if err != nil {
		return nil, fmt.Errorf("operated threads: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// channelsByID reads the channels with the given ids, keyed by id.
func (s *store) channelsByID(ctx context.Context, idList []string) (map[string]Channel, error) {
	channels := map[string]Channel{}
	rows, err := db.Q(ctx, s.pool).Query(ctx, channelSelect+` WHERE c.id = ANY($1::uuid[])`, idList)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Channel, error) { return scanChannel(r) })
	if err != nil {
		return nil, err
	}
	for _, c := range list {
		channels[c.ID] = c
	}
	return channels, nil
}

// channelPage reads at most limit channels after the channel id after
// (empty: from the first), in id order (creation order): every channel
// when all, else those of idList.
func (s *store) channelPage(ctx context.Context, all bool, idList []string, after string, limit int) ([]Channel, error) {
	var afterID any
	if after != "" {
		afterID = after
	}
	rows, err := db.Q(ctx, s.pool).Query(ctx, channelSelect+` WHERE ($1 OR c.id = ANY($2::uuid[])) AND ($3::uuid IS NULL OR c.id > $3)
		ORDER BY c.id LIMIT $4`, all, idList, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("channel page: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Channel, error) { return scanChannel(r) })
}

// threadChannels reads the channel of each thread in idList (threads that
// do not exist are absent).
func (s *store) threadChannels(ctx context.Context, idList []string) (map[string]string, error) {
	out := map[string]string{}
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT id::text, channel_id::text FROM threads WHERE id = ANY($1::uuid[])`, idList)
	if err != nil {
		return nil, fmt.Errorf("thread channels: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, ch string
		if err := rows.Scan(&id, &ch); err != nil {
			return nil, fmt.Errorf("thread channels: %w", err)
		}
		out[id] = ch
	}
	return out, rows.Err()
}

// threadOperators reads the fixed operator of each thread in idList.
func (s *store) threadOperators(ctx context.Context, idList []string) (map[string]string, error) {
	ops := map[string]string{}
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT id::text, coalesce(operator_agent_id::text, '') FROM threads WHERE id = ANY($1::uuid[])`, idList)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, op string
		if err := rows.Scan(&id, &op); err != nil {
			return nil, err
		}
		ops[id] = op
	}
	return ops, rows.Err()
}
