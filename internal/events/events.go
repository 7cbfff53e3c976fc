// Package events owns the client event log: events are written in the unit
// of work of their change, numbered in commit order, and listed after a
// cursor.
package events

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/db"
)

// Type is the type of an event: a client event's or an agent event's.
type Type string

// The client event types (docs/design/model.md#events).
const (
	MessageCreated  Type = "message.created"
	MessageDeleted  Type = "message.deleted"
	ThreadCreated   Type = "thread.created"
	ThreadReopened  Type = "thread.reopened"
	ThreadClosed    Type = "thread.closed"
	ThreadMoved     Type = "thread.moved"
	RunStateChanged Type = "run.state_changed"
	AccessChanged   Type = "access.changed"
	// Administration: a space or channel was created or changed. Space
	// events belong to the space (no channel); channel events to the
	// channel.
	SpaceCreated   Type = "space.created"
	SpaceUpdated   Type = "space.updated"
	ChannelCreated Type = "channel.created"
	ChannelUpdated Type = "channel.updated"
)

// The agent event types (docs/design/model.md#events); they go to one agent's
// stream.
const (
	AgentInvocation    Type = "agent.invocation"
	AgentFollowup      Type = "agent.followup"
	RunCancelRequested Type = "run.cancel_requested"
)

// NotifyChannel is the PostgreSQL LISTEN/NOTIFY channel that wakes long
// polls and subscriptions on every replica. Its payload is the new agent
// stream cursor, or NotifyClientEvents when the client event log grew; it
// names no content.
const NotifyChannel = "bothy_agent_events"

// NotifyClientEvents is the payload of the notification sent when client
// events commit: the wake-up of events subscriptions.
const NotifyClientEvents = "events"

// Event is an event to write or as read. An event with AgentID goes to that
// agent's stream (agent_events) instead of the client event log.
type Event struct {
	AgentID   string
	RunID     string
	Seq       int64
	Type      Type
	ChannelID string
	// SpaceID is set instead of ChannelID for events about a space as a
	// whole (space.created, space.updated).
	SpaceID   string
	ThreadID  string
	MessageID string
	Payload   map[string]any
	CreatedAt time.Time
}

// Log is the event log.
type Log struct {
	pool     db.Querier
	clock    clock.Clock
	appended *prometheus.CounterVec // nil until Instrument
}

// NewLog returns the event log over pool.
func NewLog(pool db.Querier, c clock.Clock) *Log { return &Log{pool: pool, clock: c} }

// appendLockKey is the advisory lock that orders event writers. Held from
// the first append until commit, it makes seq order equal commit order, so
// a reader that has seen seq n never later finds a smaller seq appear.
const appendLockKey = 0x626f746879_01

// Append writes evs in the transaction of ctx, in order: client events to the event log,
// agent events to their agent's stream. Call it at the end of a unit of
// work: it takes the transaction-scoped lock that serialises event writers
// until the commit, and schedules a NOTIFY (sent at commit, so a woken
// reader finds the events) for the client log and for agent streams.
func (l *Log) Append(ctx context.Context, evs ...Event) error {
	tx := db.Q(ctx, l.pool)
	if len(evs) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(appendLockKey)); err != nil {
		return fmt.Errorf("event lock: %w", err)
	}
	now := l.clock.Now()
	client := db.SQL.Insert("event_log").Columns("type", "channel_id", "space_id", "thread_id", "message_id", "payload", "created_at")
	agent := db.SQL.Insert("agent_events").Columns("agent_id", "type", "run_id", "message_id", "payload", "created_at").Suffix("RETURNING seq")
	var nClient, nAgent int
	for _, e := range evs {
		payload, err := json.Marshal(e.Payload)
		if err != nil {
			return fmt.Errorf("event payload: %w", err)
		}
		if e.AgentID != "" {
			agent = agent.Values(e.AgentID, e.Type, db.Nullable(e.RunID), db.Nullable(e.MessageID), payload, now)
			nAgent++
		} else {
			client = client.Values(e.Type, db.Nullable(e.ChannelID), db.Nullable(e.SpaceID), db.Nullable(e.ThreadID), db.Nullable(e.MessageID), payload, now)
			nClient++
		}
	}
	if nClient > 0 {
		sqlText, args := client.MustSql()
		if _, err := tx.Exec(ctx, sqlText, args...); err != nil {
			return fmt.Errorf("append events: %w", err)
		}
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, NotifyChannel, NotifyClientEvents); err != nil {
			return fmt.Errorf("notify: %w", err)
		}
	}
	if nAgent > 0 {
		sqlText, args := agent.MustSql()
		rows, err := tx.Query(ctx, sqlText, args...)
		if err != nil {
			return fmt.Errorf("append agent events: %w", err)
		}
		seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return fmt.Errorf("append agent events: %w", err)
		}
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, NotifyChannel, strconv.FormatInt(seqs[len(seqs)-1], 10)); err != nil {
			return fmt.Errorf("notify: %w", err)
		}
	}
	l.count(nClient, nAgent)
	return nil
}

// AgentAfter returns up to limit events of agent's stream after seq after.
func (l *Log) AgentAfter(ctx context.Context, agentID string, after int64, limit int) ([]Event, error) {
	rows, err := db.Q(ctx, l.pool).Query(ctx, `SELECT seq, type, coalesce(run_id::text, ''), coalesce(message_id::text, ''), payload, created_at
		FROM agent_events WHERE agent_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, agentID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("agent events: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		e := Event{AgentID: agentID}
		var payload []byte
		if err := r.Scan(&e.Seq, &e.Type, &e.RunID, &e.MessageID, &payload, &e.CreatedAt); err != nil {
			return e, err
		}
		return e, json.Unmarshal(payload, &e.Payload)
	})
}

// Tombstone replaces the payload of every earlier event of message id with
// payload (the tombstone representation), so that deleted content leaves
// the event log too.
func (l *Log) Tombstone(ctx context.Context, messageID string, payload map[string]any) error {
	tx := db.Q(ctx, l.pool)
	data, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE event_log SET payload = $2 WHERE message_id = $1`, messageID, data)
	return err
}

// ParseCursor reads a cursor ("" is the start). ok is false for a cursor
// that is not a non-negative integer.
func ParseCursor(s string) (int64, bool) {
	if s == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0
}

// AfterIn returns up to limit client events with seq above after, oldest
// first, of the given channels or threads, or about the given spaces as a
// whole (every event when all is set): the visibility predicate of
// listEvents.
func (l *Log) AfterIn(ctx context.Context, after int64, limit int, all bool, channels, threads, spaces []string) ([]Event, error) {
	rows, err := db.Q(ctx, l.pool).Query(ctx, `SELECT seq, type, coalesce(channel_id::text, ''), coalesce(space_id::text, ''), coalesce(thread_id::text, ''), coalesce(message_id::text, ''), payload, created_at
		FROM event_log WHERE seq > $1 AND ($3 OR channel_id = ANY($4::uuid[]) OR thread_id = ANY($5::uuid[])
			OR (channel_id IS NULL AND space_id = ANY($6::uuid[]))) ORDER BY seq LIMIT $2`,
		after, limit, all, channels, threads, spaces)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		var e Event
		var payload []byte
		if err := r.Scan(&e.Seq, &e.Type, &e.ChannelID, &e.SpaceID, &e.ThreadID, &e.MessageID, &payload, &e.CreatedAt); err != nil {
			return e, err
		}
		return e, json.Unmarshal(payload, &e.Payload)
	})
}

// End returns the highest committed client event seq (0 for an empty log):
// where a subscription without a cursor starts.
func (l *Log) End(ctx context.Context) (int64, error) {
	var end int64
	err := db.Q(ctx, l.pool).QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM event_log`).Scan(&end)
	return end, err
}

// AgentEnd returns the highest committed agent event seq (0 for an empty
// stream): the end of every agent's stream, since seqs are shared by all
// agents and commit in order.
func (l *Log) AgentEnd(ctx context.Context) (int64, error) {
	var end int64
	if err := db.Q(ctx, l.pool).QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM agent_events`).Scan(&end); err != nil {
		return 0, fmt.Errorf("agent stream end: %w", err)
	}
	return end, nil
}

// AgentEventsSQL is the relation (agent_id, seq, type, run_id, message_id)
// of the agent stream, as a subquery for a module that must join delivered
// events into one statement of its own (the runs module marking follow-ups
// delivered when an agent acknowledges them). Events owns agent_events;
// this is the only shape others may use.
const AgentEventsSQL = `(SELECT agent_id, seq, type, run_id, message_id FROM agent_events)`

// WakeStreams schedules in the transaction of ctx a notification (sent at
// commit) that wakes every waiting long poll and subscription on every
// replica, with no new event: they re-check their token and principal
// (after a revocation or a disabled principal) and answer or close.
func (l *Log) WakeStreams(ctx context.Context) error {
	if _, err := db.Q(ctx, l.pool).Exec(ctx, `SELECT pg_notify($1, '0')`, NotifyChannel); err != nil {
		return fmt.Errorf("wake streams: %w", err)
	}
	return nil
}
