package runs

import (
	"context"
	"fmt"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs/domain"
)

// TriggerScope narrows RecheckTriggers to the runs of one person, channel
// or space; the zero scope looks at every active run.
type TriggerScope struct {
	// PrincipalID: the runs this person triggered and their follow-ups.
	PrincipalID string
	// ChannelID: the runs in threads of this channel.
	ChannelID string
	// SpaceID: the runs in channels of this space.
	SpaceID string
}

// trigger facts of one active run or follow-up as RecheckTriggers reads them.
type heldBy struct {
	runID, messageID, threadID, person string
}

// RecheckTriggers applies loss of trigger
// (docs/design/runs.md#loss-of-trigger) to the active
// runs in scope: when the person who triggered a run no longer has trigger
// on its channel (grant revoked or expired, person disabled, channel or
// space archived), a queued run is cancelled at once (trigger_revoked) and a
// running or waiting run gets cancel_requested, loses its context, and ends
// cancelled after run.cancel_grace unless the adapter confirms earlier.
// Pending and delivered follow-ups of people who lost trigger are dropped.
// Call it after any change that can take trigger away (the admin module
// after revoking grants, disabling principals, archiving channels or
// spaces); the sweeper calls it with the zero scope on every sweep, which
// also catches grants that expired. It returns how many runs it changed.
func (s *Service) RecheckTriggers(ctx context.Context, scope TriggerScope) (int, error) {
	runList, err := s.st.heldRuns(ctx, scope)
	if err != nil {
		return 0, err
	}
	fList, err := s.st.heldFollowups(ctx, scope)
	if err != nil {
		return 0, err
	}
	if len(runList) == 0 && len(fList) == 0 {
		return 0, nil
	}
	lost, err := s.lostTrigger(ctx, append(append([]heldBy{}, runList...), fList...))
	if err != nil {
		return 0, err
	}
	changed := 0
	for _, h := range runList {
		if !lost[h] {
			continue
		}
		ok, err := s.revokeRun(ctx, h)
		if err != nil {
			return changed, err
		}
		if ok {
			changed++
		}
	}
	for _, h := range fList {
		if !lost[h] {
			continue
		}
		err := s.db.InTx(ctx, func(ctx context.Context) error {
			if _, err := s.chatW.LockThread(ctx, h.threadID); err != nil {
				return problem.Internal("runs.recheckTriggers", err)
			}
			return s.st.dropHeldFollowup(ctx, h, ReasonTriggerRevoked)
		})
		if err != nil {
			return changed, err
		}
	}
	return changed, nil
}

// lostTrigger answers, for each item, whether its person has no trigger on
// the channel of its thread now: one WithTrigger statement per channel.
func (s *Service) lostTrigger(ctx context.Context, items []heldBy) (map[heldBy]bool, error) {
	paths := map[string]authz.Path{}
	people := map[string]bool{}
	for _, h := range items {
		people[h.person] = true
		if _, ok := paths[h.threadID]; ok {
			continue
		}
		_, c, err := s.chat.ThreadInfo(ctx, h.threadID)
		if err != nil {
			return nil, fmt.Errorf("recheck thread: %w", err)
		}
		paths[h.threadID] = chat.ChannelPath(c)
	}
	ids := make([]string, 0, len(people))
	for id := range people {
		ids = append(ids, id)
	}
	found, err := s.ident.GetMany(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("recheck people: %w", err)
	}
	byChannel := map[string][]heldBy{}
	for _, h := range items {
		byChannel[paths[h.threadID].ChannelID] = append(byChannel[paths[h.threadID].ChannelID], h)
	}
	out := map[heldBy]bool{}
	for _, hs := range byChannel {
		path := paths[hs[0].threadID]
		var ask []identity.Principal
		seen := map[string]bool{}
		for _, h := range hs {
			if p, ok := found[h.person]; ok && !seen[h.person] {
				seen[h.person] = true
				ask = append(ask, p)
			}
		}
		holders, err := s.authz.WithTrigger(ctx, path, ask)
		if err != nil {
			return nil, fmt.Errorf("recheck trigger: %w", err)
		}
		for _, h := range hs {
			out[h] = !holders[h.person]
		}
	}
	return out, nil
}

// revokeRun ends or asks to cancel run h.runID because its person lost
// trigger; it reports whether it changed the run.
func (s *Service) revokeRun(ctx context.Context, h heldBy) (bool, error) {
	changed := false
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		changed = false
		t, err := s.chatW.LockThread(ctx, h.threadID)
		if err != nil {
			return problem.Internal("runs.revokeRun: lock thread", err)
		}
		r, err := s.st.getRun(ctx, h.runID, lockForUpdate)
		if err != nil {
			return problem.Internal("runs.revokeRun: lock run", err)
		}
		if !r.State.Active() || r.TriggerLostAt != nil || r.ThreadID != t.ID {
			return nil
		}
		var evs []events.Event
		if r.State == domain.RunQueued {
			_, evs, err = s.end(ctx, r, domain.RunCancelled, ReasonTriggerRevoked, t.ChannelID)
			if err != nil {
				return err
			}
		} else if _, evs, err = s.markLost(ctx, r, t.ChannelID); err != nil {
			return err
		}
		changed = true
		return s.events.Append(ctx, evs...)
	})
	return changed, err
}

// personHoldsTrigger reports whether principal id holds trigger on the
// channel of path c now (false for an unknown or inactive principal).
func (s *Service) personHoldsTrigger(ctx context.Context, id string, c authz.Path) (bool, error) {
	found, err := s.ident.GetMany(ctx, []string{id})
	if err != nil {
		return false, fmt.Errorf("trigger person: %w", err)
	}
	p, ok := found[id]
	if !ok {
		return false, nil
	}
	holders, err := s.authz.WithTrigger(ctx, c, []identity.Principal{p})
	if err != nil {
		return false, err
	}
	return holders[id], nil
}

// triggerLostNow reports whether the person who triggered active run r no
// longer holds trigger on the run's channel: the run's mark says so, or
// the rights of now do (a move, an expiry, a revoke not yet re-checked).
// A run no person triggered never loses it.
func (s *Service) triggerLostNow(ctx context.Context, r Run) (bool, error) {
	if r.TriggeredBy == "" {
		return false, nil
	}
	if r.TriggerLostAt != nil {
		return true, nil
	}
	_, c, err := s.chat.ThreadInfo(ctx, r.ThreadID)
	if err != nil {
		return false, fmt.Errorf("trigger channel: %w", err)
	}
	held, err := s.personHoldsTrigger(ctx, r.TriggeredBy, chat.ChannelPath(c))
	return !held, err
}

// errTriggerRevoked answers a call on a run whose person lost trigger.
func errTriggerRevoked() error {
	return problem.Newf(problem.Conflict, ReasonTriggerRevoked, "the person who asked for this run can no longer ask for it")
}

// applyLoss applies loss of trigger to active run r, locked with its
// thread, for a call of its agent with action (docs/design/runs.md#loss-of-trigger):
// a queued run ends cancelled and the call answers like any ended run
// (run_not_active); a running or waiting run is marked (cancel_requested,
// trigger lost now) and then ended cancelled by finishRun and the agent's
// cancelRun, whatever outcome was asked, while every other call answers
// trigger_revoked. refusal is the answer to give once the unit committed
// (nil when the call's answer is the ended run); err fails the unit.
func (s *Service) applyLoss(ctx context.Context, r Run, action authz.Action, channelID string) (out Run, evs []events.Event, refusal, err error) {
	if r.State == domain.RunQueued {
		ended, evs, err := s.end(ctx, r, domain.RunCancelled, ReasonTriggerRevoked, channelID)
		return ended, evs, errNotActive(), err
	}
	if r.TriggerLostAt == nil {
		if r, evs, err = s.markLost(ctx, r, channelID); err != nil {
			return Run{}, nil, nil, err
		}
	}
	if action == authz.RunFinish || action == authz.RunCancel {
		ended, more, err := s.end(ctx, r, domain.RunCancelled, ReasonTriggerRevoked, channelID)
		return ended, append(evs, more...), nil, err
	}
	return r, evs, errTriggerRevoked(), nil
}

// markLost marks running or waiting run r as one whose person lost
// trigger now (cancel requested, trigger lost at now) and returns it with
// its events: the state change, and run.cancel_requested unless a cancel
// was asked for already.
func (s *Service) markLost(ctx context.Context, r Run, channelID string) (Run, []events.Event, error) {
	now := s.st.clock.Now()
	asked := r.CancelRequested
	r.CancelRequested, r.TriggerLostAt = true, &now
	r, err := s.transition(ctx, r, r.State, "")
	if err != nil {
		return Run{}, nil, err
	}
	evs := []events.Event{s.stateChanged(r, channelID)}
	if !asked {
		evs = append(evs, events.Event{AgentID: r.AgentID, RunID: r.ID, Type: events.RunCancelRequested, Payload: map[string]any{"run_id": r.ID}})
	}
	return r, evs, nil
}
