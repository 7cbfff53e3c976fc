package runs

import (
	"context"
	"errors"
	"fmt"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs/domain"
	"bothy.example.com/bothy/internal/runs/livebox"
	"bothy.example.com/bothy/internal/runs/livehub"
)

// errNotActive answers an agent-self action on an ended run: 409 conflict.
func errNotActive() error {
	return problem.Newf(problem.Conflict, "run_not_active", "the run has ended")
}

// change authorizes action on run id, then runs fn on the locked run in
// one unit of work (thread row first, then run row, the lock order of every
// unit that touches both) and appends fn's events. A call of the run's own
// agent on an active run first decides whether the run's person still
// holds trigger now; when not, the loss is applied and committed instead
// of fn (applyLoss), whoever holds the run: trigger_revoked wins over
// run_claimed.
func (s *Service) change(ctx context.Context, actor identity.Principal, action authz.Action, id string,
	fn func(ctx context.Context, r Run, channelID string) (Run, []events.Event, error)) (Run, error) {
	_, path, err := s.authz.Authorize(ctx, actor, action, authz.Resource{Kind: authz.KindRun, ID: id})
	if err != nil {
		return Run{}, err
	}
	var out Run
	var refusal error
	err = s.db.InTx(ctx, func(ctx context.Context) error {
		refusal = nil
		if _, err := s.chatW.LockThread(ctx, path.ThreadID); err != nil {
			return problem.Internal("runs.change: lock thread", err)
		}
		r, err := s.st.getRun(ctx, id, lockForUpdate)
		if err != nil {
			return problem.Internal("runs.change: lock run", err)
		}
		lost, err := s.agentCallLost(ctx, actor, r)
		if err != nil {
			return problem.Internal("runs.change: check agent call lost", err)
		}
		var evs []events.Event
		if lost {
			r, evs, refusal, err = s.applyLoss(ctx, r, action, path.ChannelID)
		} else {
			r, evs, err = fn(ctx, r, path.ChannelID)
		}
		if err != nil {
			return err
		}
		out = r
		return s.events.Append(ctx, evs...)
	})
	if err == nil && refusal != nil {
		return Run{}, refusal
	}
	return out, err
}

// agentCallLost reports whether a call of actor on run r meets a run whose
// person lost trigger: only calls of the run's own agent on an active run
// are decided (a person's cancel goes its own way).
func (s *Service) agentCallLost(ctx context.Context, actor identity.Principal, r Run) (bool, error) {
	if actor.ID != r.AgentID || !r.State.Active() {
		return false, nil
	}
	return s.triggerLostNow(ctx, r)
}

// errClaimed answers a call on a run that another holder claimed.
func errClaimed() error {
	return problem.Newf(problem.Conflict, "run_claimed", "another adapter process holds this run")
}

// fence refuses a call of holder on active run r unless holder holds it
// (docs/design/runs.md#fencing): a running or waiting run is held by the
// holder that started it (the anonymous holder "" when it started without
// one), a queued run by nobody but the anonymous holder. A process that
// lost its claim (its lease lapsed, another holder took the run over)
// changes nothing.
func fence(r Run, holder Holder) error {
	if r.State.Active() && r.Holder != string(holder) {
		return errClaimed()
	}
	return nil
}

// withdrawPending withdraws the approval run r waits for, if any (it ends
// or goes back to queued): a pending approval is one whose run has
// ApprovalUntil, so a run without one costs no statement.
func (s *Service) withdrawPending(ctx context.Context, r *Run) error {
	if r.ApprovalUntil == nil {
		return nil
	}
	if err := s.approvals.WithdrawOf(ctx, r.ID, s.st.clock.Now()); err != nil {
		return problem.Internal("runs.withdrawPending", err)
	}
	r.ApprovalUntil = nil
	return nil
}

// extendLease renews r's lease by run.lease_timeout without a new version
// (a lease is not a state change).
func (s *Service) extendLease(ctx context.Context, r Run) (Run, error) {
	until := s.st.clock.Now().Add(s.timeouts.Lease)
	if err := s.st.setLease(ctx, r.ID, until); err != nil {
		return Run{}, problem.Internal("runs.extendLease", fmt.Errorf("extend lease: %w", err))
	}
	r.LeaseExpiresAt = &until
	return r, nil
}

// Start claims the agent's own run for holder and moves it to running
// (run.start): from queued, or back from waiting_input. While the claim of
// another holder lives the call answers 409 run_claimed; the same holder
// gets the run unchanged with its lease renewed. The first start marks the
// session started.
func (s *Service) Start(ctx context.Context, actor identity.Principal, id string, holder Holder) (Run, error) {
	if err := holder.check(); err != nil {
		return Run{}, err
	}
	return s.change(ctx, actor, authz.RunStart, id, func(ctx context.Context, r Run, channelID string) (Run, []events.Event, error) {
		switch r.State {
		case domain.RunRunning, domain.RunWaitingInput:
			if r.Holder != string(holder) {
				return Run{}, nil, errClaimed()
			}
			if r.State == domain.RunRunning {
				r, err := s.extendLease(ctx, r)
				return r, nil, err
			}
		case domain.RunQueued:
		default:
			return Run{}, nil, errNotActive()
		}
		if r.SessionID != "" {
			if err := s.st.markSessionStarted(ctx, r.SessionID); err != nil {
				return Run{}, nil, problem.Internal("runs.start: mark session started", err)
			}
		}
		if r.Attempt > 1 {
			// A takeover: the lost attempt's partial text leaves the box
			// in the claim's commit (docs/design/runs.md#live-box).
			if err := s.live.Publish(ctx, livehub.Msg{ID: ids.New(), Run: r.ID, Kind: string(livebox.Takeover), At: s.st.clock.Now().UnixMicro()}); err != nil {
				return Run{}, nil, problem.Internal("runs.start: publish takeover", err)
			}
		}
		until := s.st.clock.Now().Add(s.timeouts.Lease)
		r.Holder, r.LeaseExpiresAt = string(holder), &until
		r, err := s.transition(ctx, r, domain.RunRunning, "")
		if err != nil {
			return Run{}, nil, err
		}
		return r, []events.Event{s.stateChanged(r, channelID)}, nil
	})
}

// Renew extends holder's lease on the agent's own run (run.renew): 409
// run_claimed when holder does not hold the run (another holder claimed it,
// or it went back to queued after the lease lapsed), run_not_active once it
// ended.
func (s *Service) Renew(ctx context.Context, actor identity.Principal, id string, holder Holder) (Run, error) {
	// A queued run is run_claimed here: a holder that renews a run it no
	// longer holds lost it (its lease lapsed), whoever claims it next.
	return s.asHolder(ctx, actor, authz.RunRenew, id, holder, errClaimed, nil)
}

// asHolder decides action on the agent's own run for holder, the process
// that must hold its claim (run_claimed otherwise, run_not_active once it
// ended, validation_failed without a holder: the anonymous holder has no
// lease; queued's error for a run still queued), extends the lease and
// then runs also (when set) in the same unit of work. Renew and
// CreateRunToken are this step.
func (s *Service) asHolder(ctx context.Context, actor identity.Principal, action authz.Action, id string, holder Holder,
	queued func() error, also func(ctx context.Context) error) (Run, error) {
	if err := holder.named(); err != nil {
		return Run{}, err
	}
	return s.change(ctx, actor, action, id, func(ctx context.Context, r Run, channelID string) (Run, []events.Event, error) {
		if !r.State.Active() {
			return Run{}, nil, errNotActive()
		}
		if r.State == domain.RunQueued {
			return Run{}, nil, queued()
		}
		if r.Holder != string(holder) {
			return Run{}, nil, errClaimed()
		}
		r, err := s.extendLease(ctx, r)
		if err == nil && also != nil {
			err = also(ctx)
		}
		return r, nil, err
	})
}

// AwaitInput moves the agent's own running run to waiting_input
// (run.await_input) for holder, the process that holds it (fence).
func (s *Service) AwaitInput(ctx context.Context, actor identity.Principal, id string, holder Holder) (Run, error) {
	if err := holder.check(); err != nil {
		return Run{}, err
	}
	return s.change(ctx, actor, authz.RunAwaitInput, id, func(ctx context.Context, r Run, channelID string) (Run, []events.Event, error) {
		if r.State == domain.RunRunning || r.State == domain.RunWaitingInput {
			if err := fence(r, holder); err != nil {
				return Run{}, nil, err
			}
		}
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
		until := s.st.clock.Now().Add(s.timeouts.Lease)
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
// (with a reason) or cancelled (the adapter's confirmation of a cancel),
// for holder, the process that holds it (fence).
func (s *Service) Finish(ctx context.Context, actor identity.Principal, id string, holder Holder, to domain.RunState, reason string) (Run, error) {
	if err := holder.check(); err != nil {
		return Run{}, err
	}
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
		if err := fence(r, holder); err != nil {
			return Run{}, nil, err
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
// confirms with finishRun(cancelled). The run's own agent cancels at once,
// as holder, the process that holds it (fence); a person's holder is
// ignored.
func (s *Service) Cancel(ctx context.Context, actor identity.Principal, id string, holder Holder) (Run, error) {
	if err := holder.check(); err != nil {
		return Run{}, err
	}
	return s.change(ctx, actor, authz.RunCancel, id, func(ctx context.Context, r Run, channelID string) (Run, []events.Event, error) {
		if !r.State.Active() {
			return Run{}, nil, errNotActive()
		}
		if actor.ID == r.AgentID {
			if err := fence(r, holder); err != nil {
				return Run{}, nil, err
			}
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

// end moves r to an ending state and settles its follow-ups: on completion
// the delivered ones are absorbed, otherwise dropped (delivered_at keeps
// the fact that the session got them). The pending ones, oldest first, go
// through the whole trigger decision again now: the first that would start
// a run of r's agent starts the next run of the thread, the later ones that
// would be its follow-ups become them, and every other one is dropped with
// the decision's reason. The caller holds the thread's and the run's row
// locks.
func (s *Service) end(ctx context.Context, r Run, to domain.RunState, reason, channelID string) (Run, []events.Event, error) {
	if err := s.withdrawPending(ctx, &r); err != nil {
		return Run{}, nil, err
	}
	r, err := s.transition(ctx, r, to, reason)
	if err != nil {
		return Run{}, nil, err
	}
	// The box ends with the run, in the same commit (docs/design/runs.md#live-box).
	if err := s.st.endLive(ctx, r.ID); err != nil {
		return Run{}, nil, problem.Internal("runs.end: end live box", err)
	}
	if err := s.live.Publish(ctx, livehub.Msg{ID: ids.New(), Run: r.ID, Kind: string(livebox.Ended), At: s.st.clock.Now().UnixMicro()}); err != nil {
		return Run{}, nil, problem.Internal("runs.end: publish live end", err)
	}
	evs := []events.Event{s.stateChanged(r, channelID)}
	settled := domain.FollowupDropped
	if to == domain.RunCompleted {
		settled = domain.FollowupAbsorbed
	}
	if err := s.st.settleDelivered(ctx, r.ID, settled); err != nil {
		return Run{}, nil, problem.Internal("runs.end: settle delivered follow-ups", err)
	}
	more, err := s.promoteFollowups(ctx, r)
	if err != nil {
		return Run{}, nil, err
	}
	return r, append(evs, more...), nil
}

// promoteFollowups decides the pending follow-ups of the ended run r again,
// oldest first (see end), and returns the events of the next run and of
// the follow-ups moved to it.
func (s *Service) promoteFollowups(ctx context.Context, r Run) ([]events.Event, error) {
	list, err := s.st.pendingFollowups(ctx, r.ID)
	if err != nil {
		return nil, problem.Internal("runs.end: list pending follow-ups", err)
	}
	if len(list) == 0 {
		return nil, nil
	}
	thread, channel, err := s.chat.ThreadInfo(ctx, r.ThreadID)
	if err != nil {
		return nil, problem.Internal("runs.end: read thread", err)
	}
	// The facts of every pending follow-up are read once, for all of them,
	// inside this locked unit (not five statements per follow-up).
	allFacts, msgs, err := s.followupFacts(ctx, list, thread, channel)
	if err != nil {
		return nil, problem.Internal("runs.end: read follow-up facts", err)
	}
	var next Run
	var evs []events.Event
	for _, id := range list {
		m, known := msgs[id]
		facts, decided := allFacts[id]
		if !known || !decided {
			if err := s.st.dropFollowup(ctx, r.ID, id, ReasonAddresseeChanged); err != nil {
				return nil, problem.Internal("runs.end: drop vanished follow-up", err)
			}
			continue
		}
		// The thread has no active run until the first promotion starts
		// the next one.
		facts.ActiveRunAgent = next.AgentID
		more, err := s.settleFollowup(ctx, r, &next, m, domain.DecideTrigger(facts), thread, channel.ID)
		if err != nil {
			return nil, err
		}
		evs = append(evs, more...)
	}
	return evs, nil
}

// settleFollowup applies decision d to the pending follow-up m of the ended
// run r: the first accepted one starts the next run (stored in *next), the
// later ones that are its follow-ups move to it, every other one is dropped
// with the decision's reason.
func (s *Service) settleFollowup(ctx context.Context, r Run, next *Run, m messaging.Message, d domain.TriggerDecision, thread chat.Thread, channelID string) ([]events.Event, error) {
	want := messaging.TriggerAccepted
	if next.ID != "" {
		want = messaging.TriggerFollowup
	}
	if d.Outcome != want || d.Agent != r.AgentID {
		why := d.Reason
		if why == "" {
			why = ReasonAddresseeChanged
		}
		if err := s.st.dropFollowup(ctx, r.ID, m.ID, why); err != nil {
			return nil, problem.Internal("runs.end: drop follow-up", err)
		}
		return nil, nil
	}
	if next.ID != "" {
		if err := s.st.moveFollowup(ctx, r.ID, m.ID, next.ID); err != nil {
			return nil, problem.Internal("runs.end: move follow-up to next run", err)
		}
		return []events.Event{followupEvent(*next, m.ID)}, nil
	}
	if err := s.st.promoteFollowup(ctx, r.ID, m.ID); err != nil {
		return nil, problem.Internal("runs.end: promote follow-up", err)
	}
	// The next run stays in r's thread even where auto_thread is on
	// now: the follow-up belongs to the conversation it was written in.
	evs, err := s.startRunFor(ctx, r.AgentID, d.Guest, thread, channelID, trigger{messageID: m.ID, threadID: m.ThreadID, seq: m.ThreadSeq}, m.Author.ID)
	if err != nil {
		return nil, err
	}
	if *next, err = s.st.activeRunOf(ctx, r.ThreadID); err != nil {
		return nil, problem.Internal("runs.end: read next run", err)
	}
	return evs, nil
}

// followupEvent is the agent.followup that hands message to run.
func followupEvent(run Run, messageID string) events.Event {
	return events.Event{AgentID: run.AgentID, RunID: run.ID, MessageID: messageID, Type: events.AgentFollowup,
		Payload: map[string]any{"run_id": run.ID, "message_id": messageID}}
}

// Path implements authz.Source for runs: the run's thread, reserved to the
// run's agent for agent-self actions.
func (s *Service) Path(ctx context.Context, kind authz.ResourceKind, id string) (authz.Path, error) {
	threadID, agentID, err := s.st.runPlace(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return authz.Path{Kind: kind, ID: id}, nil
	}
	if err != nil {
		return authz.Path{}, err
	}
	p, err := s.chat.ThreadPath(ctx, threadID)
	if err != nil {
		return authz.Path{}, err
	}
	p.OwnerID = agentID
	return p, nil
}
