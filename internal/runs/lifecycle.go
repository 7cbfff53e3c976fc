package runs

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
)

// errNotActive answers an agent-self action on an ended run: 409 conflict.
func errNotActive() error {
	return problem.Newf(problem.Conflict, "run_not_active", "the run has ended")
}

// change authorizes action on run id, then runs fn on the locked run in
// one unit of work (thread row first, then run row, the lock order of every
// unit that touches both) and appends fn's events.
func (s *Service) change(ctx context.Context, actor identity.Principal, action authz.Action, id string,
	fn func(tx pgx.Tx, r Run, channelID string) (Run, []events.Event, error)) (Run, error) {
	_, path, err := s.authz.Authorize(ctx, actor, action, authz.Resource{Kind: authz.KindRun, ID: id})
	if err != nil {
		return Run{}, err
	}
	var out Run
	err = s.uow.Do(ctx, func(tx pgx.Tx) error {
		if _, err := s.chat.LockThread(ctx, tx, path.ThreadID); err != nil {
			return problem.Internal(err)
		}
		r, err := getRun(ctx, tx, id, "FOR UPDATE")
		if err != nil {
			return problem.Internal(err)
		}
		r, evs, err := fn(tx, r, path.ChannelID)
		if err != nil {
			return err
		}
		out = r
		return s.events.Append(ctx, tx, evs...)
	})
	return out, err
}

// Start moves the agent's own run to running (run.start): from queued, or
// back from waiting_input. The first start marks the session started.
func (s *Service) Start(ctx context.Context, actor identity.Principal, id string) (Run, error) {
	return s.change(ctx, actor, authz.RunStart, id, func(tx pgx.Tx, r Run, channelID string) (Run, []events.Event, error) {
		switch r.State {
		case Running:
			return r, nil, nil
		case Queued, WaitingInput:
		default:
			return Run{}, nil, errNotActive()
		}
		if r.SessionID != "" {
			if _, err := tx.Exec(ctx, `UPDATE agent_sessions SET started = true WHERE id = $1`, r.SessionID); err != nil {
				return Run{}, nil, problem.Internal(err)
			}
		}
		r, err := s.transition(ctx, tx, r, Running, "")
		if err != nil {
			return Run{}, nil, err
		}
		return r, []events.Event{s.stateChanged(r, channelID)}, nil
	})
}

// AwaitInput moves the agent's own running run to waiting_input
// (run.await_input).
func (s *Service) AwaitInput(ctx context.Context, actor identity.Principal, id string) (Run, error) {
	return s.change(ctx, actor, authz.RunAwaitInput, id, func(tx pgx.Tx, r Run, channelID string) (Run, []events.Event, error) {
		switch r.State {
		case WaitingInput:
			return r, nil, nil
		case Running:
		case Queued:
			return Run{}, nil, problem.Newf(problem.Conflict, "run_not_started", "start the run first")
		default:
			return Run{}, nil, errNotActive()
		}
		r, err := s.transition(ctx, tx, r, WaitingInput, "")
		if err != nil {
			return Run{}, nil, err
		}
		return r, []events.Event{s.stateChanged(r, channelID)}, nil
	})
}

// Outcomes of finishRun.
var outcomes = map[string]string{"completed": Completed, "failed": FailedState, "cancelled": Cancelled}

// ReasonMaxLen bounds the free end reason an adapter may give.
const ReasonMaxLen = 200

// Finish ends the agent's own active run with outcome completed, failed
// (with a reason) or cancelled (the adapter's confirmation of a cancel).
func (s *Service) Finish(ctx context.Context, actor identity.Principal, id, outcome, reason string) (Run, error) {
	to, ok := outcomes[outcome]
	if !ok {
		return Run{}, problem.Invalid(problem.FieldError{Pointer: "/outcome", Code: "invalid_enum"})
	}
	if len(reason) > ReasonMaxLen {
		return Run{}, problem.Invalid(problem.FieldError{Pointer: "/reason", Code: "too_long"})
	}
	if to == FailedState && reason == "" {
		reason = "runtime_error"
	}
	if to == Cancelled && reason == "" {
		reason = "cancelled"
	}
	return s.change(ctx, actor, authz.RunFinish, id, func(tx pgx.Tx, r Run, channelID string) (Run, []events.Event, error) {
		if !Active(r.State) {
			return Run{}, nil, errNotActive()
		}
		return s.end(ctx, tx, r, to, reason, channelID)
	})
}

// Cancel cancels a run (run.cancel). A person with trigger cancels a queued
// run at once; a running or waiting run gets cancel_requested and
// run.cancel_requested in the agent's stream, and ends when the adapter
// confirms with finishRun(cancelled). The run's own agent cancels at once.
func (s *Service) Cancel(ctx context.Context, actor identity.Principal, id string) (Run, error) {
	return s.change(ctx, actor, authz.RunCancel, id, func(tx pgx.Tx, r Run, channelID string) (Run, []events.Event, error) {
		if !Active(r.State) {
			return Run{}, nil, errNotActive()
		}
		if r.State == Queued || actor.ID == r.AgentID {
			return s.end(ctx, tx, r, Cancelled, "cancelled", channelID)
		}
		if r.CancelRequested {
			return r, nil, nil
		}
		r.CancelRequested = true
		r, err := s.transition(ctx, tx, r, r.State, "")
		if err != nil {
			return Run{}, nil, err
		}
		return r, []events.Event{s.stateChanged(r, channelID),
			{AgentID: r.AgentID, RunID: r.ID, Type: events.RunCancelRequested, Payload: map[string]any{"run_id": r.ID}}}, nil
	})
}

// end moves r to an ending state and settles its follow-ups: on completion
// the delivered ones are absorbed, otherwise dropped; the oldest pending one
// starts the next run of the thread and the other pending ones become its
// follow-ups. The caller holds the thread's and the run's row locks.
func (s *Service) end(ctx context.Context, tx pgx.Tx, r Run, to, reason, channelID string) (Run, []events.Event, error) {
	r, err := s.transition(ctx, tx, r, to, reason)
	if err != nil {
		return Run{}, nil, err
	}
	evs := []events.Event{s.stateChanged(r, channelID)}
	settled := "dropped"
	if to == Completed {
		settled = "absorbed"
	}
	if _, err := tx.Exec(ctx, `UPDATE run_followups SET state = $2 WHERE run_id = $1 AND state = 'delivered'`, r.ID, settled); err != nil {
		return Run{}, nil, problem.Internal(err)
	}
	rows, err := tx.Query(ctx, `SELECT f.message_id::text, m.author_principal_id::text, m.thread_seq FROM run_followups f JOIN messages m ON m.id = f.message_id
		WHERE f.run_id = $1 AND f.state = 'pending' ORDER BY m.thread_seq`, r.ID)
	if err != nil {
		return Run{}, nil, problem.Internal(err)
	}
	type pending struct {
		message, author string
		seq             int64
	}
	var list []pending
	for rows.Next() {
		var p pending
		if err := rows.Scan(&p.message, &p.author, &p.seq); err != nil {
			rows.Close()
			return Run{}, nil, problem.Internal(err)
		}
		list = append(list, p)
	}
	rows.Close()
	if len(list) == 0 {
		return r, evs, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE run_followups SET state = 'absorbed' WHERE run_id = $1 AND message_id = $2`, r.ID, list[0].message); err != nil {
		return Run{}, nil, problem.Internal(err)
	}
	thread, err := s.chat.GetThread(ctx, tx, r.ThreadID)
	if err != nil {
		return Run{}, nil, problem.Internal(err)
	}
	guest := r.SessionID == ""
	more, err := s.startRunFor(ctx, tx, r.AgentID, guest, thread, channelID, trigger{list[0].message, r.ThreadID, list[0].seq}, list[0].author)
	if err != nil {
		return Run{}, nil, err
	}
	evs = append(evs, more...)
	next, err := activeRunOf(ctx, tx, r.ThreadID)
	if err != nil {
		return Run{}, nil, problem.Internal(fmt.Errorf("next run: %w", err))
	}
	for _, p := range list[1:] {
		if _, err := tx.Exec(ctx, `UPDATE run_followups SET run_id = $3 WHERE run_id = $1 AND message_id = $2`, r.ID, p.message, next.ID); err != nil {
			return Run{}, nil, problem.Internal(err)
		}
		evs = append(evs, events.Event{AgentID: next.AgentID, RunID: next.ID, MessageID: p.message, Type: events.AgentFollowup,
			Payload: map[string]any{"run_id": next.ID, "message_id": p.message}})
	}
	return r, evs, nil
}

// Path implements authz.Source for runs: the run's thread, reserved to the
// run's agent for agent-self actions.
func (s *Service) Path(ctx context.Context, kind authz.ResourceKind, id string) (authz.Path, error) {
	var threadID, agentID string
	err := s.pool.QueryRow(ctx, `SELECT thread_id::text, agent_id::text FROM runs WHERE id = $1`, id).Scan(&threadID, &agentID)
	if errors.Is(err, pgx.ErrNoRows) {
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
