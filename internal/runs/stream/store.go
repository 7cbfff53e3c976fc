package stream

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/db"
)

// store is the stream's SQL: the agents' acknowledged positions
// (agent_cursors) and the hub's LISTEN.
type store struct {
	pool  db.Querier
	clock clock.Clock
}

// listenSQL subscribes the hub's dedicated connection to the channel every
// event commit notifies.
const listenSQL = "LISTEN " + events.NotifyChannel

// ackedSeq returns the agent's acknowledged position (0 before its first ack).
func (s *store) ackedSeq(ctx context.Context, agentID string) (int64, error) {
	var seq int64
	err := db.Q(ctx, s.pool).QueryRow(ctx, `SELECT acked_seq FROM agent_cursors WHERE agent_id = $1`, agentID).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return seq, err
}

// lockCursor makes sure agent agentID has a cursor row (created at now),
// locks it for the transaction of ctx, and returns its acknowledged
// position.
func (s *store) lockCursor(ctx context.Context, agentID string, now time.Time) (int64, error) {
	tx := db.Q(ctx, s.pool)
	if _, err := tx.Exec(ctx, `INSERT INTO agent_cursors (agent_id, acked_seq, updated_at) VALUES ($1, 0, $2) ON CONFLICT (agent_id) DO NOTHING`,
		agentID, now); err != nil {
		return 0, err
	}
	var from int64
	if err := tx.QueryRow(ctx, `SELECT acked_seq FROM agent_cursors WHERE agent_id = $1 FOR UPDATE`, agentID).Scan(&from); err != nil {
		return 0, err
	}
	return from, nil
}

// setCursor stores to as agent agentID's acknowledged position.
func (s *store) setCursor(ctx context.Context, agentID string, to int64, now time.Time) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE agent_cursors SET acked_seq = $2, updated_at = $3 WHERE agent_id = $1`, agentID, to, now)
	return err
}
