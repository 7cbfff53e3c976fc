package runs

import (
	"context"
	"errors"
	"time"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs/approvals"
	"bothy.example.com/bothy/internal/runs/domain"
)

// The approval itself (its request and its checks, its states, who sees
// its private part, when it can be answered, its table) lives in
// internal/runs/approvals; how a run waits for one stays here. These names
// keep runs' API as it was.

// ApprovalRequest is what a run's holder asks its person
// (requestApproval; approvals.Request).
type ApprovalRequest = approvals.Request

// ApprovalOption is one answer a person may give to an approval
// (approvals.Option).
type ApprovalOption = approvals.Option

// Approval is a stored approval (docs/design/trust.md#approvals;
// approvals.Approval).
type Approval = approvals.Approval

// Bounds of an approval request (approvals.TitleMaxChars, ...).
const (
	ApprovalTitleMaxChars  = approvals.TitleMaxChars
	ApprovalDetailMaxBytes = approvals.DetailMaxBytes
	ApprovalOptionsMax     = approvals.OptionsMax
	ApprovalLabelMaxChars  = approvals.LabelMaxChars
	ApprovalOptionIDMax    = approvals.OptionIDMax
	ApprovalDefaultExpiry  = approvals.DefaultExpiry
	ApprovalMaxExpiry      = approvals.MaxExpiry
)

// The states of an approval (approvals.Pending, ...).
const (
	ApprovalPending   = approvals.Pending
	ApprovalDecided   = approvals.Decided
	ApprovalExpired   = approvals.Expired
	ApprovalWithdrawn = approvals.Withdrawn
)

// RequestApproval has the holder of the agent's own running run ask the
// run's triggering person (run.approval.request): it posts a card in the
// run's thread (kind card, naming the run, the title as its content),
// stores the approval restricted to that person, and moves the run to
// waiting_input with its stall timer paused until the approval expires.
// Refusals as for every call on a run (run_claimed, run_not_started,
// run_not_active, trigger_revoked), and conflict approval_pending while
// the run waits for another approval.
func (s *Service) RequestApproval(ctx context.Context, actor identity.Principal, runID string, holder Holder, req ApprovalRequest) (Approval, error) {
	if err := holder.check(); err != nil {
		return Approval{}, err
	}
	if err := approvals.Check(req); err != nil {
		return Approval{}, err
	}
	if req.ExpiresIn == 0 {
		req.ExpiresIn = ApprovalDefaultExpiry
	}
	// The card's title comes from the agent: its provenance is decided
	// like an answer's, before the unit of work (it reads the context).
	provenance, err := s.AnswerProvenance(ctx, actor, runID, "")
	if err != nil {
		return Approval{}, err
	}
	var out Approval
	_, err = s.change(ctx, actor, authz.RunApprovalRequest, runID, func(ctx context.Context, r Run, channelID string) (Run, []events.Event, error) {
		switch {
		case !r.State.Active():
			return Run{}, nil, errNotActive()
		case r.State == domain.RunQueued:
			return Run{}, nil, problem.Newf(problem.Conflict, "run_not_started", "start the run first")
		}
		if err := fence(r, holder); err != nil {
			return Run{}, nil, err
		}
		if r.ApprovalUntil != nil {
			return Run{}, nil, problem.Newf(problem.Conflict, "approval_pending", "the run waits for an answer to another approval")
		}
		if r.TriggeredBy == "" {
			return Run{}, nil, problem.Newf(problem.Conflict, "no_trigger_person", "no person started this run")
		}
		agents, err := s.ident.GetMany(ctx, []string{r.AgentID})
		if err != nil {
			return Run{}, nil, problem.Internal("runs.RequestApproval: read agent", err)
		}
		card, cardEv, err := s.msgW.AppendCard(ctx, chat.Thread{ID: r.ThreadID}, channelID, agents[r.AgentID].Ref(), req.Title, provenance)
		if err != nil {
			return Run{}, nil, problem.Internal("runs.RequestApproval: append card", err)
		}
		now := s.st.clock.Now()
		a := Approval{ID: ids.New(), RunID: r.ID, MessageID: card.ID, RestrictedTo: r.TriggeredBy, Title: req.Title, Detail: req.Detail,
			Options: req.Options, State: ApprovalPending, ExpiresAt: now.Add(time.Duration(req.ExpiresIn) * time.Second).Truncate(time.Microsecond),
			CreatedAt: now}
		if err := s.approvals.Insert(ctx, a); err != nil {
			return Run{}, nil, problem.Internal("runs.RequestApproval: insert approval", err)
		}
		// A call of the holder renews its lease; the SDK keeps renewing
		// while it waits.
		until := now.Add(s.timeouts.Lease)
		r.ApprovalUntil, r.LeaseExpiresAt = &a.ExpiresAt, &until
		r, err = s.transition(ctx, r, domain.RunWaitingInput, "")
		if err != nil {
			return Run{}, nil, err
		}
		out = a
		return r, []events.Event{s.stateChanged(r, channelID), cardEv}, nil
	})
	return out, err
}

// errNoApproval answers an approval that is missing or not the caller's:
// the same 404 for both.
func errNoApproval() error { return problem.New(problem.NotFound, "") }

// RespondToApproval records the answer of actor to approval id with
// optionID (approval.respond): only the approval's person (anyone else
// gets the 404 of a missing approval), only while they hold trigger on the
// run's channel now (403 otherwise; the door audits the answer), only once
// (conflict already_decided), before its expiry (approval_expired) and
// while the run is active (run_not_active). The run goes back to running
// and its agent gets agent.approval_decided.
func (s *Service) RespondToApproval(ctx context.Context, actor identity.Principal, id, optionID string) (Approval, error) {
	if !ids.Valid(id) {
		return Approval{}, errNoApproval()
	}
	a, err := s.approvals.Get(ctx, id, false)
	if errors.Is(err, approvals.ErrNotFound) || (err == nil && a.RestrictedTo != actor.ID) {
		return Approval{}, errNoApproval()
	}
	if err != nil {
		return Approval{}, problem.Internal("runs.RespondToApproval: read approval", err)
	}
	if !a.HasOption(optionID) {
		return Approval{}, problem.Invalid(problem.FieldError{Pointer: "/option_id", Code: "unknown_option", Detail: "one of the approval's options"})
	}
	_, path, err := s.authz.Authorize(ctx, actor, authz.ApprovalRespond, authz.Resource{Kind: authz.KindRun, ID: a.RunID})
	if err != nil {
		return Approval{}, err
	}
	var out Approval
	err = s.db.InTx(ctx, func(ctx context.Context) error {
		if _, err := s.chatW.LockThread(ctx, path.ThreadID); err != nil {
			return problem.Internal("runs.RespondToApproval: lock thread", err)
		}
		r, err := s.st.getRun(ctx, a.RunID, lockForUpdate)
		if err != nil {
			return problem.Internal("runs.RespondToApproval: lock run", err)
		}
		cur, err := s.approvals.Get(ctx, id, true)
		if err != nil {
			return problem.Internal("runs.RespondToApproval: lock approval", err)
		}
		now := s.st.clock.Now()
		if err := answerable(cur, r, now); err != nil {
			return err
		}
		if err := s.approvals.Decide(ctx, id, ApprovalDecided, optionID, actor.ID, now); err != nil {
			return problem.Internal("runs.RespondToApproval: decide approval", err)
		}
		cur.State, cur.OptionID, cur.DecidedBy, cur.DecidedAt = ApprovalDecided, optionID, actor.ID, &now
		out = cur
		_, evs, err := s.resumeAfterApproval(ctx, r, cur, path.ChannelID)
		if err != nil {
			return err
		}
		return s.events.Append(ctx, evs...)
	})
	return out, err
}

// answerable says why approval a of run r cannot be answered at now
// (approvals.Answerable), with the run's own run_not_active refusal when
// it was withdrawn or r is no longer active; nil when it can.
func answerable(a Approval, r Run, now time.Time) error {
	err := approvals.Answerable(a, r.State.Active(), now)
	if errors.Is(err, approvals.ErrRunNotActive) {
		return errNotActive()
	}
	return err
}

// resumeAfterApproval takes run r, which waited for approval a (decided or
// expired now), back to running and tells its agent.
func (s *Service) resumeAfterApproval(ctx context.Context, r Run, a Approval, channelID string) (Run, []events.Event, error) {
	payload := map[string]any{"run_id": r.ID, "approval_id": a.ID, "state": a.State}
	if a.OptionID != "" {
		payload["option_id"] = a.OptionID
	}
	evs := []events.Event{{AgentID: r.AgentID, RunID: r.ID, Type: events.AgentApprovalDecided, Payload: payload}}
	if r.ApprovalUntil == nil {
		return r, evs, nil
	}
	r.ApprovalUntil = nil
	to := r.State
	if to == domain.RunWaitingInput {
		to = domain.RunRunning
	}
	r, err := s.transition(ctx, r, to, "")
	if err != nil {
		return Run{}, nil, err
	}
	return r, append([]events.Event{s.stateChanged(r, channelID)}, evs...), nil
}

// expireApproval decides the approval run r waits for expired (the
// sweeper, at its expiry) and takes the run back to running. The caller
// holds the thread's and the run's locks.
func (s *Service) expireApproval(ctx context.Context, r Run, channelID string) (Run, []events.Event, error) {
	a, err := s.approvals.PendingOf(ctx, r.ID)
	if errors.Is(err, approvals.ErrNotFound) {
		// Nothing to decide: the run only stops waiting.
		r.ApprovalUntil = nil
		r, err := s.transition(ctx, r, domain.RunRunning, "")
		if err != nil {
			return Run{}, nil, err
		}
		return r, []events.Event{s.stateChanged(r, channelID)}, nil
	}
	if err != nil {
		return Run{}, nil, problem.Internal("runs.expireApproval: read pending approval", err)
	}
	if err := s.approvals.Decide(ctx, a.ID, ApprovalExpired, "", "", s.st.clock.Now()); err != nil {
		return Run{}, nil, problem.Internal("runs.expireApproval: decide expired", err)
	}
	a.State = ApprovalExpired
	return s.resumeAfterApproval(ctx, r, a, channelID)
}

// ReadApproval returns approval id as actor may read it: anyone who may
// read the run reads its title and state; the detail, the options and the
// option chosen only the approval's person and the run's agent (Private).
// A missing approval and one actor may not read answer the same 404 after
// the same way through the door: a missing one reads a run no approval
// names (noRun), so that both spend the same token, carry the same rate
// limit headers and run the same statements.
func (s *Service) ReadApproval(ctx context.Context, actor identity.Principal, id string) (Approval, bool, error) {
	var a Approval
	runID := noRun
	if ids.Valid(id) {
		var err error
		a, err = s.approvals.Get(ctx, id, false)
		switch {
		case errors.Is(err, approvals.ErrNotFound):
		case err != nil:
			return Approval{}, false, problem.Internal("runs.ReadApproval", err)
		default:
			runID = a.RunID
		}
	}
	r, err := s.Read(ctx, actor, runID)
	if err != nil {
		if problem.CodeOf(err) == problem.NotFound {
			return Approval{}, false, errNoApproval()
		}
		return Approval{}, false, err
	}
	if runID == noRun {
		// No run has the nil id; were one to answer, the approval is
		// still missing.
		return Approval{}, false, errNoApproval()
	}
	return a, a.RestrictedTo == actor.ID || r.Run.AgentID == actor.ID, nil
}

// noRun is a run id no run has (ids are random, never nil): what a read
// of a missing approval asks the door for.
const noRun = "00000000-0000-0000-0000-000000000000"

// ApprovalsOfCards returns the approvals whose cards are the messages
// messageIDs, keyed by message. It decides nothing: the caller read the
// messages with the reader's rights (who sees what of them: Private).
func (s *Service) ApprovalsOfCards(ctx context.Context, messageIDs []string) (map[string]Approval, error) {
	out, err := s.approvals.OfCards(ctx, messageIDs)
	if err != nil {
		return nil, problem.Internal("runs.ApprovalsOfCards", err)
	}
	return out, nil
}
