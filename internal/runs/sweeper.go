package runs

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/platform/problem"
)

// SweepOnce fails with reason timeout every queued run not started within
// run.start_timeout and every running or waiting run without activity for
// run.stall_timeout, one unit of work per run. Rows are taken with SKIP
// LOCKED, so several replicas can sweep at once without doing a run twice.
// It returns how many runs it ended.
func (s *Service) SweepOnce(ctx context.Context) (int, error) {
	now := s.clock.Now()
	rows, err := s.pool.Query(ctx, `SELECT id::text, thread_id::text FROM runs
		WHERE (state = 'queued' AND queued_at < $1) OR (state IN ('running', 'waiting_input') AND last_activity_at < $2)
		ORDER BY queued_at LIMIT 100`, now.Add(-s.timeouts.Start), now.Add(-s.timeouts.Stall))
	if err != nil {
		return 0, err
	}
	type due struct{ run, thread string }
	var list []due
	for rows.Next() {
		var d due
		if err := rows.Scan(&d.run, &d.thread); err != nil {
			rows.Close()
			return 0, err
		}
		list = append(list, d)
	}
	rows.Close()
	ended := 0
	for _, d := range list {
		err := s.uow.Do(ctx, func(tx pgx.Tx) error {
			var locked string
			// The thread first, then the run: the lock order of every unit.
			if err := tx.QueryRow(ctx, `SELECT id::text FROM threads WHERE id = $1 FOR UPDATE SKIP LOCKED`, d.thread).Scan(&locked); err != nil {
				if errors.Is(err, pgx.ErrNoRows) {
					return nil // another unit holds the thread; the next sweep retries
				}
				return err
			}
			r, err := getRun(ctx, tx, d.run, "FOR UPDATE SKIP LOCKED")
			if err == ErrNotFound {
				return nil
			}
			if err != nil {
				return err
			}
			stale := (r.State == Queued && r.QueuedAt.Before(now.Add(-s.timeouts.Start))) ||
				((r.State == Running || r.State == WaitingInput) && r.LastActivityAt.Before(now.Add(-s.timeouts.Stall)))
			if !stale {
				return nil
			}
			t, err := s.chat.GetThread(ctx, tx, r.ThreadID)
			if err != nil {
				return err
			}
			_, evs, err := s.end(ctx, tx, r, FailedState, "timeout", t.ChannelID)
			if err != nil {
				return problem.From(err)
			}
			ended++
			return s.events.Append(ctx, tx, evs...)
		})
		if err != nil {
			return ended, err
		}
	}
	return ended, nil
}

// Sweep runs SweepOnce every interval until ctx ends, logging failures.
func (s *Service) Sweep(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	// While the sweep keeps failing (a database outage) one line says so,
	// and one more when it works again.
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, err := s.SweepOnce(ctx)
			switch {
			case err != nil && ctx.Err() == nil && !failing:
				s.log.ErrorContext(ctx, "run sweep failed", "error", err.Error())
				failing = true
			case err == nil && failing:
				s.log.InfoContext(ctx, "run sweep works again")
				failing = false
			}
		}
	}
}
