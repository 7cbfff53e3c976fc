package stream

import (
	"context"
	"strconv"
	"time"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/problem"
)

// Service hands out and acknowledges the agents' streams. Its errors name
// its operations stream.poll, stream.ack, ... (until the stream left
// package runs: runs.poll, runs.ack, ...); an error of Deliver keeps its
// own (runs.ack).
type Service struct {
	st      store
	db      *db.DB
	ident   *identity.Service
	authz   *authz.Service
	events  *events.Log
	hub     *Hub
	pollMax time.Duration
	deliver Deliver
}

// Deliver delivers, in the transaction of ctx and at now, the pending
// follow-ups whose agent.followup events of agent agentID lie after from up
// to to: the runs module's half of an acknowledgement, since follow-ups
// are its rows (docs/design/runs.md#fencing). Its errors are answered as
// they are.
type Deliver func(ctx context.Context, agentID string, from, to int64, now time.Time) error

// Deps are the collaborators of the stream service.
type Deps struct {
	Pool     db.Querier
	DB       *db.DB
	Clock    clock.Clock
	Identity *identity.Service
	Authz    *authz.Service
	Events   *events.Log
	Hub      *Hub
	// PollMaxWait is events.poll_max_wait.
	PollMaxWait time.Duration
	// Deliver is called by Ack for every position it moves forward.
	Deliver Deliver
}

// NewService returns the stream service (package runs makes it and hands
// its calls on).
func NewService(d Deps) *Service {
	return &Service{st: store{pool: d.Pool, clock: d.Clock}, db: d.DB, ident: d.Identity, authz: d.Authz, events: d.Events,
		hub: d.Hub, pollMax: d.PollMaxWait, deliver: d.Deliver}
}

// PollLimit bounds the events one poll hands out.
const PollLimit = 100

// CursorNow is the cursor that names the current end of the stream.
const CursorNow = "now"

// Page is a page of an agent's stream.
type Page struct {
	Events    []events.Event
	NextAfter string
	// More says whether more events of the caller's stream were waiting
	// behind this page when it was read.
	More bool
}

// streamEnd returns the highest committed agent event seq (0 for an empty
// stream): the end of every stream, since seqs are shared by all agents and
// commit in order. A cursor above it was never handed out.
func (s *Service) streamEnd(ctx context.Context) (int64, error) {
	return s.events.AgentEnd(ctx)
}

// resolveCursor turns the after argument into a position: empty continues
// after the acknowledged position, "now" is the end of the stream, "0" the
// start; a number beyond the end answers invalid_cursor.
func (s *Service) resolveCursor(ctx context.Context, agentID, after, pointer string) (int64, error) {
	invalid := problem.Invalid(problem.FieldError{Pointer: pointer, Code: "invalid_cursor"})
	switch after {
	case "":
		seq, err := s.st.ackedSeq(ctx, agentID)
		if err != nil {
			return 0, problem.Internal("stream.resolveCursor: read acked seq", err)
		}
		return seq, nil
	case CursorNow:
		end, err := s.streamEnd(ctx)
		if err != nil {
			return 0, problem.Internal("stream.resolveCursor: read stream end for now", err)
		}
		return end, nil
	}
	cursor, ok := events.ParseCursor(after)
	if !ok {
		return 0, invalid
	}
	end, err := s.streamEnd(ctx)
	if err != nil {
		return 0, problem.Internal("stream.resolveCursor: read stream end for cursor", err)
	}
	if cursor > end {
		return 0, invalid
	}
	return cursor, nil
}

// stillAuthorized checks, for a poll that waited, that the token it came
// with still authenticates the same active principal: a revoked token or a
// disabled agent gets 401 and nothing more.
func (s *Service) stillAuthorized(ctx context.Context, actor identity.Principal) error {
	tok, ok := identity.TokenFromContext(ctx)
	if !ok {
		// No HTTP request behind the call (in-process use): the principal's
		// status is all there is to check.
		p, err := s.ident.Get(ctx, actor.ID)
		if err != nil || !p.Active() {
			return problem.New(problem.Unauthorized, "")
		}
		return nil
	}
	p, err := s.ident.Authenticate(ctx, tok)
	if err != nil {
		if pe := problem.From("stream.stillAuthorized", err); pe.Code == problem.InternalError {
			return pe
		}
		return problem.New(problem.Unauthorized, "")
	}
	if p.ID != actor.ID {
		return problem.New(problem.Unauthorized, "")
	}
	return nil
}

// Poll returns the events of actor's own stream after the cursor after
// (agent.events.poll: agents only): without a cursor after the agent's
// acknowledged position, "now" from the end. When none is there it waits up
// to wait (at most events.poll_max_wait) for the first one: a commit on any
// replica wakes it through LISTEN/NOTIFY, and every wake-up re-checks the
// caller's token and status. Handing out events delivers nothing: a
// follow-up is delivered when the agent acknowledges its event (Ack).
func (s *Service) Poll(ctx context.Context, actor identity.Principal, after string, wait time.Duration) (Page, error) {
	return s.PollFirst(ctx, actor, after, wait, PollLimit)
}

// PollFirst is Poll handing out at most first events (1 to PollLimit).
//
// Errors: those of Poll; first outside 1 to PollLimit answers
// validation_failed (pointer "first").
func (s *Service) PollFirst(ctx context.Context, actor identity.Principal, after string, wait time.Duration, first int) (Page, error) {
	// An agent's own stream: only agents pass (the decision is audited on
	// denial like any other, and takes the rl.agent_runtime token).
	if _, _, err := s.authz.Authorize(ctx, actor, authz.AgentEventsPoll, authz.Own(authz.KindAgent, actor.ID)); err != nil {
		return Page{}, err
	}
	if err := checkPollArgs(wait, first); err != nil {
		return Page{}, err
	}
	cursor, err := s.resolveCursor(ctx, actor.ID, after, "after")
	if err != nil {
		return Page{}, err
	}
	s.hub.markPlaced()
	if wait > s.pollMax {
		wait = s.pollMax
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	empty := func() (Page, error) {
		return Page{Events: []events.Event{}, NextAfter: strconv.FormatInt(cursor, 10)}, nil
	}
	for woken := false; ; woken = true {
		changed := s.hub.Changed()
		if woken {
			if err := s.stillAuthorized(ctx, actor); err != nil {
				return Page{}, err
			}
		}
		// One event more than the page tells whether more are waiting.
		evs, err := s.events.AgentAfter(ctx, actor.ID, cursor, first+1)
		if err != nil {
			return Page{}, problem.Internal("stream.poll", err)
		}
		if len(evs) > 0 {
			more := len(evs) > first
			if more {
				evs = evs[:first]
			}
			return Page{Events: evs, NextAfter: strconv.FormatInt(evs[len(evs)-1].Seq, 10), More: more}, nil
		}
		again, err := s.awaitCommit(ctx, actor, changed, deadline.C)
		if err != nil {
			return Page{}, err
		}
		if !again {
			return empty()
		}
	}
}

// checkPollArgs checks the arguments of a poll: wait not negative, first
// between 1 and PollLimit.
func checkPollArgs(wait time.Duration, first int) error {
	if wait < 0 {
		return problem.Invalid(problem.FieldError{Pointer: "wait", Code: "out_of_range", Detail: "must not be negative"})
	}
	if first < 1 || first > PollLimit {
		return problem.Invalid(problem.FieldError{Pointer: "first", Code: "out_of_range", Detail: "must lie between 1 and 100"})
	}
	return nil
}

// awaitCommit parks a poll that found nothing until a commit on any
// replica changes the hub (again true: read once more), or the deadline,
// the hub's stop or the end of ctx (again false: the poll answers an empty
// page). At the deadline it checks the caller's token and status again.
func (s *Service) awaitCommit(ctx context.Context, actor identity.Principal, changed <-chan struct{}, deadline <-chan time.Time) (again bool, err error) {
	unpark := s.hub.park()
	select {
	case <-changed:
		unpark()
		return true, nil
	case <-deadline:
		unpark()
		if err := s.stillAuthorized(ctx, actor); err != nil {
			return false, err
		}
		return false, nil
	case <-s.hub.Stopping():
		unpark()
		return false, nil
	case <-ctx.Done():
		unpark()
		return false, nil
	}
}

// Ack stores that actor processed its stream up to upTo
// (agent.events.ack) and returns the stored position. Acknowledging
// backwards changes nothing; a position beyond the end of the stream answers
// invalid_cursor. Every agent.followup event acknowledged now delivers its
// follow-up (pending -> delivered, with the time).
func (s *Service) Ack(ctx context.Context, actor identity.Principal, upTo string) (string, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.AgentEventsAck, authz.Own(authz.KindAgent, actor.ID)); err != nil {
		return "", err
	}
	if upTo == "" || upTo == CursorNow {
		return "", problem.Invalid(problem.FieldError{Pointer: "/up_to", Code: "invalid_cursor"})
	}
	to, err := s.resolveCursor(ctx, actor.ID, upTo, "/up_to")
	if err != nil {
		return "", err
	}
	var stored int64
	err = s.db.InTx(ctx, func(ctx context.Context) error {
		now := s.st.clock.Now()
		from, err := s.st.lockCursor(ctx, actor.ID, now)
		if err != nil {
			return problem.Internal("stream.ack: lock cursor", err)
		}
		stored = from
		if to <= from {
			return nil
		}
		if err := s.deliver(ctx, actor.ID, from, to, now); err != nil {
			return err
		}
		if err := s.st.setCursor(ctx, actor.ID, to, now); err != nil {
			return problem.Internal("stream.ack: set cursor", err)
		}
		stored = to
		return nil
	})
	if err != nil {
		return "", err
	}
	return strconv.FormatInt(stored, 10), nil
}

// Hub returns the wake-up hub of this process: subscriptions wait on it
// like long polls do.
func (s *Service) Hub() *Hub { return s.hub }

// StreamStart checks that actor may read its own stream (as Poll does, with
// the same rate token, once per subscription) and resolves the cursor of a
// subscription: "" after the acknowledged position, "now" the end, "0" the
// start.
func (s *Service) StreamStart(ctx context.Context, actor identity.Principal, after string) (int64, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.AgentEventsPoll, authz.Own(authz.KindAgent, actor.ID)); err != nil {
		return 0, err
	}
	cursor, err := s.resolveCursor(ctx, actor.ID, after, "after")
	if err != nil {
		return 0, err
	}
	// The subscription sees every event committed from now on.
	s.hub.markPlaced()
	return cursor, nil
}

// StreamNext returns up to limit events of actor's stream after cursor,
// without waiting: what a subscription delivers after a wake-up.
func (s *Service) StreamNext(ctx context.Context, actor identity.Principal, cursor int64, limit int) ([]events.Event, error) {
	evs, err := s.events.AgentAfter(ctx, actor.ID, cursor, limit)
	if err != nil {
		return nil, problem.Internal("stream.streamNext", err)
	}
	return evs, nil
}
