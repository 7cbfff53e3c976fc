package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/db"
)

// store holds the package's SQL, kept in an unexported field (st) of
// the service that decides what to write (the store convention: README.md#architecture).
type store struct {
	pool  db.Querier
	clock clock.Clock
}

// appendEvents writes evs for Append and says how many went to each stream.
func (l *store) appendEvents(ctx context.Context, evs []Event) (nClient, nAgent int, err error) {
	tx := db.Q(ctx, l.pool)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(appendLockKey)); err != nil {
		return 0, 0, fmt.Errorf("event lock: %w", err)
	}
	now := l.clock.Now()
	client := db.SQL.Insert("event_log").Columns("type", "channel_id", "space_id", "thread_id", "message_id", "payload", "created_at")
	agent := db.SQL.Insert("agent_events").Columns("agent_id", "type", "run_id", "message_id", "payload", "created_at").Suffix("RETURNING seq")
	for _, e := range evs {
		payload, err := json.Marshal(e.Payload)
		if err != nil {
			return 0, 0, fmt.Errorf("event payload: %w", err)
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
			return 0, 0, fmt.Errorf("append events: %w", err)
		}
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, NotifyChannel, NotifyClientEvents); err != nil {
			return 0, 0, fmt.Errorf("notify: %w", err)
		}
	}
	if nAgent > 0 {
		sqlText, args := agent.MustSql()
		rows, err := tx.Query(ctx, sqlText, args...)
		if err != nil {
			return 0, 0, fmt.Errorf("append agent events: %w", err)
		}
		seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return 0, 0, fmt.Errorf("append agent events: %w", err)
		}
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, NotifyChannel, strconv.FormatInt(seqs[len(seqs)-1], 10)); err != nil {
			return 0, 0, fmt.Errorf("notify: %w", err)
		}
	}
	return nClient, nAgent, nil
}

// AgentAfter returns up to limit events of agent's stream after seq after.
func (l *store) AgentAfter(ctx context.Context, agentID string, after int64, limit int) ([]Event, error) {
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
func (l *store) Tombstone(ctx context.Context, messageID string, payload map[string]any) error {
	tx := db.Q(ctx, l.pool)
	data, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE event_log SET payload = $2 WHERE message_id = $1`, messageID, data)
	return err
}

// AfterIn returns up to limit client events with seq above after, oldest
// first, of the given channels or threads, or about the given spaces as a
// whole (every event when all is set): the visibility predicate of
// listEvents.
func (l *store) AfterIn(ctx context.Context, after int64, limit int, all bool, channels, threads, spaces []string) ([]Event, error) {
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
func (l *store) End(ctx context.Context) (int64, error) {
	var end int64
	err := db.Q(ctx, l.pool).QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM event_log`).Scan(&end)
	return end, err
}

// AgentEnd returns the highest committed agent event seq (0 for an empty
// stream): the end of every agent's stream, since seqs are shared by all
// agents and commit in order.
func (l *store) AgentEnd(ctx context.Context) (int64, error) {
	var end int64
	if err := db.Q(ctx, l.pool).QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM agent_events`).Scan(&end); err != nil {
		return 0, fmt.Errorf("agent stream end: %w", err)
	}
	return end, nil
}

// WakeStreams schedules in the transaction of ctx a notification (sent at
// commit) that wakes every waiting long poll and subscription on every
// replica, with no new event: they re-check their token and principal
// (after a revocation or a disabled principal) and answer or close.
func (l *store) WakeStreams(ctx context.Context) error {
	if _, err := db.Q(ctx, l.pool).Exec(ctx, `SELECT pg_notify($1, '0')`, NotifyChannel); err != nil {
		return fmt.Errorf("wake streams: %w", err)
	}
	return nil
}

// Horizon returns the highest seq that retention removed from stream (0
// when nothing was removed): a cursor below it has lost events.
func (l *store) Horizon(ctx context.Context, stream string) (int64, error) {
	var seq int64
	err := db.Q(ctx, l.pool).QueryRow(ctx, `SELECT seq FROM retention_horizon WHERE stream = $1`, stream).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return seq, err
}

// ClientEventsBefore returns the highest client event seq created before
// cutoff (0 when there is none).
func (l *store) ClientEventsBefore(ctx context.Context, cutoff time.Time) (int64, error) {
	var upto int64
	if err := db.Q(ctx, l.pool).QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM event_log WHERE created_at < $1`, cutoff).Scan(&upto); err != nil {
		return 0, fmt.Errorf("client events before: %w", err)
	}
	return upto, nil
}

// MoveHorizon raises the retention horizon of stream to seq (never lowers
// it): readers behind it get cursor_expired instead of a silent gap.
func (l *store) MoveHorizon(ctx context.Context, stream string, seq int64) error {
	if _, err := db.Q(ctx, l.pool).Exec(ctx, `INSERT INTO retention_horizon (stream, seq, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (stream) DO UPDATE SET seq = greatest(retention_horizon.seq, excluded.seq), updated_at = excluded.updated_at`,
		stream, seq, l.clock.Now()); err != nil {
		return fmt.Errorf("move retention horizon: %w", err)
	}
	return nil
}

// DeleteClientEvents removes up to limit client events with seq <= upto,
// oldest first, and returns how many it removed.
func (l *store) DeleteClientEvents(ctx context.Context, upto int64, limit int) (int64, error) {
	tag, err := db.Q(ctx, l.pool).Exec(ctx, `DELETE FROM event_log WHERE seq IN (SELECT seq FROM event_log WHERE seq <= $1 ORDER BY seq LIMIT $2)`, upto, limit)
	if err != nil {
		return 0, fmt.Errorf("delete client events: %w", err)
	}
	return tag.RowsAffected(), nil
}

// DeleteAgentEvents removes up to limit agent events created before cutoff
// whose run has ended (the runs module's shared view ended_runs,
// migrations/00015_module_views.sql): an agent never loses an event it may
// still act on. Events without a run, or of a run that does not exist, are
// kept.
func (l *store) DeleteAgentEvents(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	tag, err := db.Q(ctx, l.pool).Exec(ctx, `DELETE FROM agent_events WHERE seq IN (
		SELECT e.seq FROM agent_events e WHERE e.created_at < $1 AND e.run_id IN (SELECT id FROM ended_runs) LIMIT $2)`, cutoff, limit)
	if err != nil {
		return 0, fmt.Errorf("delete agent events: %w", err)
	}
	return tag.RowsAffected(), nil
}
