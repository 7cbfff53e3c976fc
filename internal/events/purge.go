package events

import (
	"context"
	"fmt"
	"time"

	"bothy.example.com/bothy/internal/platform/db"
)

// The retention module removes old rows through these functions; the
// statements stay with the tables' owner.

// ClientEventsBefore returns the highest client event seq created before
// cutoff (0 when there is none).
func (l *Log) ClientEventsBefore(ctx context.Context, cutoff time.Time) (int64, error) {
	var upto int64
	if err := db.Q(ctx, l.pool).QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM event_log WHERE created_at < $1`, cutoff).Scan(&upto); err != nil {
		return 0, fmt.Errorf("client events before: %w", err)
	}
	return upto, nil
}

// MoveHorizon raises the retention horizon of stream to seq (never lowers
// it): readers behind it get cursor_expired instead of a silent gap.
func (l *Log) MoveHorizon(ctx context.Context, stream string, seq int64) error {
	if _, err := db.Q(ctx, l.pool).Exec(ctx, `INSERT INTO retention_horizon (stream, seq, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (stream) DO UPDATE SET seq = greatest(retention_horizon.seq, excluded.seq), updated_at = excluded.updated_at`,
		stream, seq, l.clock.Now()); err != nil {
		return fmt.Errorf("move retention horizon: %w", err)
	}
	return nil
}

// DeleteClientEvents removes up to limit client events with seq <= upto,
// oldest first, and returns how many it removed.
func (l *Log) DeleteClientEvents(ctx context.Context, upto int64, limit int) (int64, error) {
	tag, err := db.Q(ctx, l.pool).Exec(ctx, `DELETE FROM event_log WHERE seq IN (SELECT seq FROM event_log WHERE seq <= $1 ORDER BY seq LIMIT $2)`, upto, limit)
	if err != nil {
		return 0, fmt.Errorf("delete client events: %w", err)
	}
	return tag.RowsAffected(), nil
}

// DeleteAgentEvents removes up to limit agent events created before cutoff
// whose run is in endedRuns, a subquery of run ids that the runs module
// owns (runs.EndedRunsSQL): an agent never loses an event it may still act
// on. Events without a run are kept.
func (l *Log) DeleteAgentEvents(ctx context.Context, cutoff time.Time, limit int, endedRuns string) (int64, error) {
	tag, err := db.Q(ctx, l.pool).Exec(ctx, `DELETE FROM agent_events WHERE seq IN (
		SELECT e.seq FROM agent_events e WHERE e.created_at < $1 AND e.run_id IN `+endedRuns+` LIMIT $2)`, cutoff, limit)
	if err != nil {
		return 0, fmt.Errorf("delete agent events: %w", err)
	}
	return tag.RowsAffected(), nil
}
