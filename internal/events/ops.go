package events

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"bothy.example.com/bothy/internal/platform/db"
)

// StreamClient names the client event stream (event_log) in
// retention_horizon.
const StreamClient = "event_log"

// Horizon returns the highest seq that retention removed from stream (0
// when nothing was removed): a cursor below it has lost events.
func (l *Log) Horizon(ctx context.Context, stream string) (int64, error) {
	var seq int64
	err := db.Q(ctx, l.pool).QueryRow(ctx, `SELECT seq FROM retention_horizon WHERE stream = $1`, stream).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return seq, err
}

// Instrument registers bothy_events_appended_total{stream} in reg. The
// count is of events written by units of work of this replica; a unit that
// rolls back after its append (rare: appends come last) still counts.
func (l *Log) Instrument(reg prometheus.Registerer) {
	l.appended = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bothy_events_appended_total",
		Help: "Events appended by this replica, by stream (client: event_log, agent: agent_events)."}, []string{"stream"})
	l.appended.WithLabelValues("client")
	l.appended.WithLabelValues("agent")
	reg.MustRegister(l.appended)
}

func (l *Log) count(client, agent int) {
	if l.appended == nil {
		return
	}
	l.appended.WithLabelValues("client").Add(float64(client))
	l.appended.WithLabelValues("agent").Add(float64(agent))
}
