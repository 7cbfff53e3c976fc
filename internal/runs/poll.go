package runs

import (
	"context"
	"strconv"
	"time"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
)

// PollLimit bounds the events one poll hands out.
const PollLimit = 100

// Page is a page of an agent's stream.
type Page struct {
	Events    []events.Event
	NextAfter string
}

// Poll returns the events of actor's own stream after the cursor after
// (agent.events.poll: agents only). When none is there it waits up to wait
// (at most events.poll_max_wait) for the first one: a commit on any replica
// wakes it through LISTEN/NOTIFY. Handing out an agent.followup marks that
// follow-up delivered.
func (s *Service) Poll(ctx context.Context, actor identity.Principal, after string, wait time.Duration) (Page, error) {
	// An agent's own stream: only agents pass (the decision is audited on
	// denial like any other, and takes the rl.agent_runtime token).
	self := authz.Path{Exists: true, Kind: authz.KindAgent, ID: actor.ID, OwnerID: actor.ID}
	if _, err := s.authz.DecideFrom(ctx, actor, authz.AgentEventsPoll, self, authz.Read); err != nil {
		return Page{}, err
	}
	cursor, ok := events.ParseCursor(after)
	if !ok {
		return Page{}, problem.Invalid(problem.FieldError{Pointer: "after", Code: "invalid_cursor"})
	}
	if wait < 0 {
		return Page{}, problem.Invalid(problem.FieldError{Pointer: "wait", Code: "out_of_range", Detail: "must not be negative"})
	}
	if wait > s.pollMax {
		wait = s.pollMax
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		changed := s.hub.Changed()
		evs, err := s.events.AgentAfter(ctx, actor.ID, cursor, PollLimit)
		if err != nil {
			return Page{}, problem.Internal(err)
		}
		if len(evs) > 0 {
			if err := s.markDelivered(ctx, evs); err != nil {
				return Page{}, err
			}
			return Page{Events: evs, NextAfter: strconv.FormatInt(evs[len(evs)-1].Seq, 10)}, nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			return Page{Events: []events.Event{}, NextAfter: strconv.FormatInt(cursor, 10)}, nil
		case <-s.hub.Stopping():
			return Page{Events: []events.Event{}, NextAfter: strconv.FormatInt(cursor, 10)}, nil
		case <-ctx.Done():
			return Page{Events: []events.Event{}, NextAfter: strconv.FormatInt(cursor, 10)}, nil
		}
	}
}

// markDelivered marks the follow-ups of handed-out agent.followup events
// delivered.
func (s *Service) markDelivered(ctx context.Context, evs []events.Event) error {
	for _, e := range evs {
		if e.Type != events.AgentFollowup {
			continue
		}
		if _, err := s.pool.Exec(ctx, `UPDATE run_followups SET state = 'delivered' WHERE run_id = $1 AND message_id = $2 AND state = 'pending'`,
			e.RunID, e.MessageID); err != nil {
			return problem.Internal(err)
		}
	}
	return nil
}
