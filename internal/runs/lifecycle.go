package runs

import (
	"context"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs/domain"
)

// errNotActive answers an agent-self action on an ended run: 409 conflict.
func errNotActive() error {
	return problem.Newf(problem.Conflict, "run_not_active", "the run has ended")
}

// change authorizes action on run id, then runs fn on the locked run in
// one unit of work (thread row first, then run row, the lock order of every
// unit that touches both) and appends fn's events.
func (s *Service) change(ctx context.Context, actor identity.Principal, action authz.Action, id string,
	fn func(ctx context.Context, r Run, channelID string) (Run, []events.Event, error)) (Run, error) {
	_, path, err := s.authz.Authorize(ctx, actor, action, authz.Resource{Kind: authz.KindRun, ID: id})
	if err != nil {
		return Run{}, err
	}
	var out Run
	err = s.db.InTx(ctx, func(ctx context.Context) error {
		if _, err := s.chat.LockThread(ctx, path.ThreadID); err != nil {
			return problem.Internal("runs.change", err)
		}
		r, err := s.getRun(ctx, id, "FOR UPDATE")
		if err != nil {
			return problem.Internal("runs.change", err)
		}
		r, evs, err := fn(ctx, r, path.ChannelID)
		if err != nil {
			return err
		}
		out = r
		return s.events.Append(ctx, evs...)
	})
	return out, err
}

// HolderMaxLen bounds a holder name.
const HolderMaxLen = 128

// ValidHolder reports whether h is a holder name: 1 to 128 characters out
// of letters, digits and . _ : - (an opaque id per adapter process).
func ValidHolder(h string) bool {
	if len(h) == 0 || len(h) > HolderMaxLen {
		return false
	}
	for _, c := range h {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// checkHolder validates an optional holder: absent is the anonymous
// holder "" of adapters that predate claims.
func checkHolder(h string) error {
	if h != "" && !ValidHolder(h) {
		return problem.Invalid(problem.FieldError{Pointer: "/holder", Code: "invalid_format", Detail: "1 to 128 letters, digits, '.', '_', ':' or '-'"})
	}
	return nil
}

// errClaimed answers a call on a run that another holder claimed.
func errClaimed() error {
	return problem.Newf(problem.Conflict, "run_claimed", "another adapter process holds this run")
}

// Renew extends holder's lease on the agent's own run (run.renew): 409
// run_claimed when holder does not hold the run (another holder claimed it,
// or it went back to queued after the lease lapsed), run_not_active once it
// ended.
func (s *Service) Renew(ctx context.Context, actor identity.Principal, id, holder string) (Run, error) {
	if err := checkHolder(holder); err != nil {
		return Run{}, err
	}
	return s.change(ctx, actor, authz.RunRenew, id, func(ctx context.Context, r Run, channelID string) (Run, []events.Event, error) {
		if !r.State.Active() {
			return Run{}, nil, errNotActive()
		}
		if r.State == domain.RunQueued || r.Holder != holder {
			return Run{}, nil, errClaimed()
		}
		r, err := s.extendLease(ctx, r)
		return r, nil, err
	})
}

// AwaitInput moves the agent's own running run to waiting_input
// (run.await_input).
func (s *Service) AwaitInput(ctx context.Context, actor identity.Principal, id string) (Run, error) {
	return s.change(ctx, actor, authz.RunAwaitInput, id, func(ctx context.Context, r Run, channelID string) (Run, []events.Event, error) {
		switch r.State {
		case domain.RunWaitingInput:
			r, err := s.extendLease(ctx, r)
			return r, nil, err
		case domain.RunRunning:
		case domain.RunQueued:
			return Run{}, nil, problem.Newf(problem.Conflict, "run_not_started", "start the run first")
		default:
			return Run{}, nil, errNotActive()
		}
		until := s.clock.Now().Add(s.timeouts.Lease)
		r.LeaseExpiresAt = &until
		r, err := s.transition(ctx, r, domain.RunWaitingInput, "")
		if err != nil {
			return Run{}, nil, err
		}
		return r, []events.Event{s.stateChanged(r, channelID)}, nil
	})
}

// Outcomes of finishRun: the end states an adapter may ask for.
var outcomes = map[domain.RunState]bool{domain.RunCompleted: true, domain.RunFailed: true, domain.RunCancelled: true}

// ReasonMaxLen bounds the free end reason an adapter may give.
const ReasonMaxLen = 200

// Finish ends the agent's own active run with outcome completed, failed
// (with a reason) or cancelled (the adapter's confirmation of a cancel).
func (s *Service) Finish(ctx context.Context, actor identity.Principal, id string, to domain.RunState, reason string) (Run, error) {
	if !outcomes[to] {
		return Run{}, problem.Invalid(problem.FieldError{Pointer: "/outcome", Code: "invalid_enum"})
	}
	if len(reason) > ReasonMaxLen {
		return Run{}, problem.Invalid(problem.FieldError{Pointer: "/reason", Code: "too_long"})
	}
	if to == domain.RunFailed && reason == "" {
		reason = "runtime_error"
	}
	if to == domain.RunCancelled && reason == "" {
		reason = "cancelled"
	}
	return s.change(ctx, actor, authz.RunFinish, id, func(ctx context.Context, r Run, channelID string) (Run, []events.Event, error) {
		if !r.State.Active() {
			return Run{}, nil, errNotActive()
		}
		if to == domain.RunCancelled && r.TriggerLostAt != nil {
			// The adapter confirms the cancel that loss of trigger asked for.
			reason = ReasonTriggerRevoked
		}
		return s.end(ctx, r, to, reason, channelID)
	})
}

// Cancel cancels a run (run.cancel). A person with trigger cancels a queued
// run at once; a running or waiting run gets cancel_requested and
// run.cancel_requested in the agent's stream, and ends when the adapter
// confirms with finishRun(cancelled). The run's own agent cancels at once.
func (s *Service) Cancel(ctx context.Context, actor identity.Principal, id string) (Run, error) {
	return s.change(ctx, actor, authz.RunCancel, id, func(ctx context.Context, r Run, channelID string) (Run, []events.Event, error) {
		if !r.State.Active() {
			return Run{}, nil, errNotActive()
		}
		if r.State == domain.RunQueued || actor.ID == r.AgentID {
			return s.end(ctx, r, domain.RunCancelled, "cancelled", channelID)
		}
		if r.CancelRequested {
			return r, nil, nil
		}
		r.CancelRequested = true
		r, err := s.transition(ctx, r, r.State, "")
		if err != nil {
			return Run{}, nil, err
		}
		return r, []events.Event{s.stateChanged(r, channelID),
			{AgentID: r.AgentID, RunID: r.ID, Type: events.RunCancelRequested, Payload: map[string]any{"run_id": r.ID}}}, nil
	})
}

// Reasons recorded on runs and follow-ups by the runtime.
const (
	// ReasonTriggerRevoked ends a run, or drops a follow-up, whose person
	// lost trigger on the channel.
	ReasonTriggerRevoked = "trigger_revoked"
	// ReasonLeaseExpired fails a run whose lease lapsed run.max_attempts times.
	ReasonLeaseExpired = "lease_expired"
	// ReasonAddresseeChanged drops a follow-up that, decided again, would
	// address another agent than the run's.
	ReasonAddresseeChanged = "addressee_changed"
)

// followupEvent is the agent.followup that hands message to run.
func followupEvent(run Run, messageID string) events.Event {
	return events.Event{AgentID: run.AgentID, RunID: run.ID, MessageID: messageID, Type: events.AgentFollowup,
		Payload: map[string]any{"run_id": run.ID, "message_id": messageID}}
}
