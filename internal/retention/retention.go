// Package retention removes rows that have outlived their retention keys:
// client events (event_log), agent events of ended runs (agent_events),
// audit rows (audit_log) and revoked or expired tokens. Every replica runs
// it; the statements are idempotent, so replicas that purge at the same time
// only repeat each other's work.
package retention

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/runs/domain"
)

// Keep says how long each kind of row lives; zero keeps it forever.
type Keep struct {
	EventLog    time.Duration // retention.event_log
	AgentEvents time.Duration // retention.agent_events
	AuditLog    time.Duration // retention.audit_log
	Tokens      time.Duration // retention.tokens
}

// Removed counts the rows one purge removed.
type Removed struct {
	EventLog, AgentEvents, AuditLog, Tokens int64
}

// Service purges.
type Service struct {
	pool  *pgxpool.Pool
	clock clock.Clock
	keep  Keep
	log   *slog.Logger
}

// New returns the purge over pool.
func New(pool *pgxpool.Pool, c clock.Clock, keep Keep, log *slog.Logger) *Service {
	return &Service{pool: pool, clock: c, keep: keep, log: log}
}

// batch bounds the rows one statement removes, so that no purge holds long
// locks or a long transaction on a busy table.
const batch = 5000

// PurgeOnce removes every row past its retention at the clock's now.
func (s *Service) PurgeOnce(ctx context.Context) (Removed, error) {
	now := s.clock.Now()
	var r Removed
	var err error
	if s.keep.EventLog > 0 {
		if r.EventLog, err = s.purgeEventLog(ctx, now.Add(-s.keep.EventLog)); err != nil {
			return r, err
		}
	}
	if s.keep.AgentEvents > 0 {
		// Only events of runs that have ended: an agent never loses an event
		// it may still act on, however long it was away. (Events without a
		// run are kept.)
		if r.AgentEvents, err = s.batched(ctx, `DELETE FROM agent_events WHERE seq IN (
			SELECT e.seq FROM agent_events e JOIN runs ON runs.id = e.run_id
			WHERE e.created_at < $1 AND runs.state NOT IN (`+domain.ActiveRunStatesSQL+`) LIMIT $2)`, now.Add(-s.keep.AgentEvents)); err != nil {
			return r, err
		}
	}
	if s.keep.AuditLog > 0 {
		if r.AuditLog, err = s.batched(ctx, `DELETE FROM audit_log WHERE id IN (
			SELECT id FROM audit_log WHERE last_at < $1 LIMIT $2)`, now.Add(-s.keep.AuditLog)); err != nil {
			return r, err
		}
	}
	if s.keep.Tokens > 0 {
		if r.Tokens, err = s.batched(ctx, `DELETE FROM tokens WHERE id IN (
			SELECT id FROM tokens WHERE revoked_at < $1 OR expires_at < $1 LIMIT $2)`, now.Add(-s.keep.Tokens)); err != nil {
			return r, err
		}
	}
	return r, nil
}

// purgeEventLog removes the client events created before cutoff. The
// horizon moves first, in the same transaction as the first batch, so that
// no reader sees a gap without the cursor_expired answer.
func (s *Service) purgeEventLog(ctx context.Context, cutoff time.Time) (int64, error) {
	var upto int64
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM event_log WHERE created_at < $1`, cutoff).Scan(&upto); err != nil || upto == 0 {
		return 0, err
	}
	var total int64
	for {
		var n int64
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO retention_horizon (stream, seq, updated_at) VALUES ($1, $2, $3)
				ON CONFLICT (stream) DO UPDATE SET seq = greatest(retention_horizon.seq, excluded.seq), updated_at = excluded.updated_at`,
				events.StreamClient, upto, s.clock.Now()); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, `DELETE FROM event_log WHERE seq IN (SELECT seq FROM event_log WHERE seq <= $1 ORDER BY seq LIMIT $2)`, upto, batch)
			n = tag.RowsAffected()
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < batch {
			return total, nil
		}
	}
}

// batched runs a DELETE with parameters ($1 cutoff, $2 batch size) until it
// removes fewer rows than a batch.
func (s *Service) batched(ctx context.Context, sql string, cutoff time.Time) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, sql, cutoff, batch)
		if err != nil {
			return total, err
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < batch {
			return total, nil
		}
	}
}

// Run purges every interval until ctx ends, logging what it removed (counts
// only) and failures.
func (s *Service) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r, err := s.PurgeOnce(ctx)
			if err != nil && ctx.Err() == nil {
				s.log.ErrorContext(ctx, "retention purge failed", "error", err.Error())
			}
			if r != (Removed{}) {
				s.log.InfoContext(ctx, "retention purge", "event_log", r.EventLog, "agent_events", r.AgentEvents,
					"audit_log", r.AuditLog, "tokens", r.Tokens)
			}
		}
	}
}
