package runs

import (
	"context"
	"time"

	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs/domain"
)

// SweepAction is what the sweeper does with one active run.
type SweepAction int

// The sweep actions, in the order SweepVerdict checks them.
const (
	// SweepNone leaves the run alone.
	SweepNone SweepAction = iota
	// SweepTimeout fails the run with reason timeout (run.start_timeout
	// for a queued run, run.stall_timeout for a running or waiting one).
	SweepTimeout
	// SweepRevoked ends the run cancelled with reason trigger_revoked: its
	// person lost trigger more than run.cancel_grace ago.
	SweepRevoked
	// SweepRequeue puts the run back to queued with the next attempt: its
	// holder's lease lapsed.
	SweepRequeue
	// SweepLeaseExpired fails the run with reason lease_expired: its lease
	// lapsed on the last allowed attempt.
	SweepLeaseExpired
	// SweepCancelled ends the run cancelled with reason cancelled: a person
	// asked to cancel it and its holder's lease lapsed before the adapter
	// confirmed. A run asked to cancel never goes back to queued.
	SweepCancelled
	// SweepApprovalExpired decides the approval the run waits for expired
	// and takes the run back to running (the agent learns it from
	// agent.approval_decided).
	SweepApprovalExpired
)

// SweepVerdict decides what the sweeper does with active run r at now. It
// is pure. Activity is the last state change or start (a lease renewal is
// not activity, so a holder that only renews still stalls).
func SweepVerdict(r Run, now time.Time, t Timeouts) SweepAction {
	if !r.State.Active() {
		return SweepNone
	}
	if r.TriggerLostAt != nil && !now.Before(r.TriggerLostAt.Add(t.CancelGrace)) {
		return SweepRevoked
	}
	if r.State == domain.RunQueued {
		if r.LastActivityAt.Before(now.Add(-t.Start)) {
			return SweepTimeout
		}
		return SweepNone
	}
	if r.ApprovalUntil != nil {
		// Waiting for a person's approval pauses the stall timer; the
		// approval's expiry bounds the wait.
		if !now.Before(*r.ApprovalUntil) {
			return SweepApprovalExpired
		}
	} else if r.LastActivityAt.Before(now.Add(-t.Stall)) {
		return SweepTimeout
	}
	if r.LeaseExpiresAt != nil && !now.Before(*r.LeaseExpiresAt) {
		switch {
		case r.TriggerLostAt != nil:
			// Within the cancel grace, but nobody is left to confirm.
			return SweepRevoked
		case r.CancelRequested:
			return SweepCancelled
		}
		if r.Attempt >= t.MaxAttempts {
			return SweepLeaseExpired
		}
		return SweepRequeue
	}
	return SweepNone
}

// SweepOnce looks at every active run past a timeout, its lease or its
// cancel grace and applies SweepVerdict, one unit of work per run; then it
// re-checks the trigger of every active run (expired grants and anything
// else that took trigger away). Rows are taken with SKIP LOCKED, so several
// replicas can sweep at once without doing a run twice. A run it cannot
// settle is logged and left for the next sweep; the others are settled.
// It returns how many runs it changed (each once, however often its unit
// of work was retried) and the first error met.
func (s *Service) SweepOnce(ctx context.Context) (int, error) {
	changed, _, err := s.sweepOnce(ctx)
	return changed, err
}

// sweepOnce is SweepOnce that also says how many runs timed out.
func (s *Service) sweepOnce(ctx context.Context) (changed, ended int, err error) {
	now := s.st.clock.Now()
	list, err := s.st.dueRuns(ctx, now.Add(-s.timeouts.Start), now.Add(-s.timeouts.Stall), now, now.Add(-s.timeouts.CancelGrace))
	if err != nil {
		return 0, 0, err
	}
	var firstErr error
	for _, d := range list {
		timedOut, done := false, false
		err := s.db.InTx(ctx, func(ctx context.Context) error {
			// A retried unit starts over: nothing of an earlier try counts.
			timedOut, done = false, false
			// The thread first, then the run: the lock order of every unit.
			if locked, err := s.chatW.TryLockThread(ctx, d.thread); err != nil || !locked {
				return err // not locked: another unit holds the thread; the next sweep retries
			}
			r, err := s.st.getRun(ctx, d.run, lockSkipLocked)
			if err == ErrNotFound {
				return nil
			}
			if err != nil {
				return err
			}
			action := SweepVerdict(r, s.st.clock.Now(), s.timeouts)
			if action == SweepNone {
				return nil
			}
			t, err := s.chat.GetThread(ctx, r.ThreadID)
			if err != nil {
				return err
			}
			var evs []events.Event
			switch action {
			case SweepTimeout:
				_, evs, err = s.end(ctx, r, domain.RunFailed, "timeout", t.ChannelID)
			case SweepRevoked:
				_, evs, err = s.end(ctx, r, domain.RunCancelled, ReasonTriggerRevoked, t.ChannelID)
			case SweepLeaseExpired:
				_, evs, err = s.end(ctx, r, domain.RunFailed, ReasonLeaseExpired, t.ChannelID)
			case SweepCancelled:
				_, evs, err = s.end(ctx, r, domain.RunCancelled, "cancelled", t.ChannelID)
			case SweepApprovalExpired:
				r, evs, err = s.expireApproval(ctx, r, t.ChannelID)
			case SweepRequeue:
				if err = s.withdrawPending(ctx, &r); err != nil {
					return err
				}
				r.Attempt++
				r, err = s.transition(ctx, r, domain.RunQueued, "")
				evs = []events.Event{s.stateChanged(r, t.ChannelID), invocationEvent(r, t.ChannelID)}
			}
			if err != nil {
				return problem.From("runs.sweepOnce", err)
			}
			done, timedOut = true, action == SweepTimeout
			return s.events.Append(ctx, evs...)
		})
		if err != nil {
			// One run that cannot be settled must not hold up the others
			// (nor the trigger re-check below): log it, go on, retry it on
			// the next sweep.
			if ctx.Err() != nil {
				return changed, ended, err
			}
			s.log.ErrorContext(ctx, "sweep: a run could not be settled", "run_id", d.run, "thread_id", d.thread, "error", err.Error())
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if done {
			changed++
		}
		if timedOut {
			ended++
			// Ids only: an operator follows the run through the API.
			s.log.InfoContext(ctx, "run timed out", "run_id", d.run, "thread_id", d.thread)
		}
	}
	n, err := s.RecheckTriggers(ctx, TriggerScope{})
	if err == nil {
		err = firstErr
	}
	return changed + n, ended, err
}

// Sweep runs SweepOnce every interval until ctx ends, logging failures and
// telling onEnded (when set) how many runs each sweep failed by timeout.
func (s *Service) Sweep(ctx context.Context, interval time.Duration, onEnded func(n int)) {
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
			_, n, err := s.sweepOnce(ctx)
			if onEnded != nil && n > 0 {
				onEnded(n)
			}
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
