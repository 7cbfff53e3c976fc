package runs

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/platform/tracing"
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
	if len(list) > 0 {
		// A sweep that has runs to settle is a trace of its own (when the
		// server traces); one that finds none exports nothing, so an idle
		// server sends no trace every run.sweep_interval.
		var span trace.Span
		ctx, span = tracing.StartRoot(ctx, "runs.sweep")
		defer span.End()
		span.SetAttributes(sweepDueKey.Int(len(list)))
	}
	var firstErr error
	for _, d := range list {
		took, done, err := s.sweepRun(ctx, d)
		timedOut := done && took == SweepTimeout
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

// sweepRun settles one due run in a unit of its own, under a span of its
// own, and returns what the sweep did (SweepNone when the run needed
// nothing or was gone) and whether it changed the run.
func (s *Service) sweepRun(ctx context.Context, d dueRun) (took SweepAction, done bool, err error) {
	runCtx, span := tracing.Start(ctx, "runs.sweep.run", trace.SpanKindInternal)
	if span.IsRecording() {
		span.SetAttributes(tracing.RunIDKey.String(d.run), tracing.ThreadIDKey.String(d.thread))
	}
	var traceparent string
	err = s.db.InTx(runCtx, func(ctx context.Context) error {
		// A retried unit starts over: nothing of an earlier try counts.
		done = false
		// The thread first, then the run: the lock order of every unit.
		if locked, err := s.chatW.TryLockThread(ctx, d.thread); err != nil || !locked {
			return err // not locked: another unit holds the thread; the next sweep retries
		}
		r, err := s.st.getRun(ctx, d.run, lockSkipLocked)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		action := SweepVerdict(r, s.st.clock.Now(), s.timeouts)
		took, traceparent = action, r.Traceparent
		if action == SweepNone {
			return nil
		}
		t, err := s.chat.GetThread(ctx, r.ThreadID)
		if err != nil {
			return err
		}
		evs, err := s.applySweep(ctx, r, action, t.ChannelID)
		if err != nil {
			return problem.From("runs.sweepOnce", err)
		}
		done = true
		return s.events.Append(ctx, evs...)
	})
	s.endSweepSpan(span, took, traceparent, err)
	return took, done, err
}

// applySweep does what the sweep decided for the locked run r of channel
// channelID and returns the events to append in the same unit.
func (s *Service) applySweep(ctx context.Context, r Run, action SweepAction, channelID string) ([]events.Event, error) {
	var evs []events.Event
	var err error
	switch action {
	case SweepNone:
		// Nothing to settle; sweepRun does not call it for this one.
	case SweepTimeout:
		_, evs, err = s.end(ctx, r, domain.RunFailed, "timeout", channelID)
	case SweepRevoked:
		_, evs, err = s.end(ctx, r, domain.RunCancelled, ReasonTriggerRevoked, channelID)
	case SweepLeaseExpired:
		_, evs, err = s.end(ctx, r, domain.RunFailed, ReasonLeaseExpired, channelID)
	case SweepCancelled:
		_, evs, err = s.end(ctx, r, domain.RunCancelled, "cancelled", channelID)
	case SweepApprovalExpired:
		_, evs, err = s.expireApproval(ctx, r, channelID)
	case SweepRequeue:
		if err = s.withdrawPending(ctx, &r); err != nil {
			return nil, err
		}
		r.Attempt++
		r, err = s.transition(ctx, r, domain.RunQueued, "")
		evs = []events.Event{s.stateChanged(r, channelID), invocationEvent(r, channelID)}
	}
	return evs, err
}

// The attributes of the sweep's spans: how many runs a sweep found due,
// and what it did with one.
const (
	sweepDueKey    = attribute.Key("bothy.runs.due")
	sweepActionKey = attribute.Key("bothy.runs.sweep_action")
)

// sweepActionNames name the sweep actions on spans.
var sweepActionNames = map[SweepAction]string{SweepNone: "none", SweepTimeout: "timeout", SweepRevoked: "trigger_revoked",
	SweepRequeue: "requeue", SweepLeaseExpired: "lease_expired", SweepCancelled: "cancelled", SweepApprovalExpired: "approval_expired"}

// endSweepSpan ends the span of one run's settling with what the sweep did
// and a link to the run's own trace (its traceparent), so that a run's
// timeout or requeue can be found from the run and the other way round.
func (s *Service) endSweepSpan(span trace.Span, action SweepAction, traceparent string, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(sweepActionKey.String(sweepActionNames[action]))
	if link, ok := tracing.LinkTo(traceparent); ok {
		span.AddLink(link)
	}
	if err != nil {
		span.SetStatus(codes.Error, "")
	}
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
