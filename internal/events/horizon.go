package events

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// StreamClient names the client event stream (event_log) in
// retention_horizon.
const StreamClient = "event_log"

// Horizon returns the highest seq that retention removed from stream (0
// when nothing was removed): a cursor below it has lost events.
func (l *Log) Horizon(ctx context.Context, stream string) (int64, error) {
	var seq int64
	err := l.pool.QueryRow(ctx, `SELECT seq FROM retention_horizon WHERE stream = $1`, stream).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return seq, err
}
