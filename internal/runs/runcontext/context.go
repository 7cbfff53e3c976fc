package runcontext

import (
	"context"
	"fmt"
	"log/slog"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs/domain"
	"bothy.example.com/bothy/internal/runs/record"
)

// Limits are agent.context_max_bytes and
// agent.context_message_max_bytes.
type Limits struct {
	MaxBytes        int
	MessageMaxBytes int
}

// Element is one element of a run context before the GraphQL face adds
// author, role, trust and already_delivered (Service.Finish).
type Element struct {
	messaging.ContextItem
	ChannelID string
	Truncated bool
}

// RunContext is run_context.v1 (docs/design/trust.md#run-context) with the
// facts the field resolvers need.
type RunContext struct {
	RunID              string
	ContextFloorSeq    int64
	Trigger            Element
	Thread             []Element
	Channel            []Element // nil when not built
	TruncatedBeforeSeq *int64
	// Parties classify the elements; ChannelPath is where trust is asked;
	// SessionID (or, for a guest run without session, RunID) decides
	// already_delivered.
	Parties     domain.RunParties
	ChannelPath authz.Path
	SessionID   string
	Mode        domain.Mode
	// ThreadPath and Grant let the follow-ups (Service.FollowUpsOf) pass
	// the same filter as the other elements; MessageMaxBytes cuts them.
	ThreadPath      authz.Path
	Grant           authz.Level
	MessageMaxBytes int
	// FollowUpsOnRecord is false when neither the run nor another run of
	// its session had a follow-up when the run was read: then no element
	// is a delivered follow-up and the run has no follow-ups in play, and
	// the follow-up facts need no statement. A follow-up recorded after
	// that is a message after the trigger, outside every window, so the
	// answer is the one a read at that moment would give.
	FollowUpsOnRecord bool
	// People, when not nil, are the principals named by the elements'
	// authors, read beside the thread window (authz's PeopleWithTriggerIn
	// over messaging's ContextAuthors), and Holders which of them hold
	// trigger on ChannelPath: the answers of the context's people
	// questions, so that the face primes them instead of asking after the
	// window. An author missing from People (a message changed between
	// the two statements) is asked as before.
	People  map[string]identity.Principal
	Holders map[string]bool
}

// Runs are the facts of the run lifecycle a context read asks (package
// runs, which owns the runs and run_followups tables and their
// statements).
type Runs interface {
	// EarlierRuns returns the earlier runs of r's session, newest first,
	// with where their triggering messages lie (one statement).
	EarlierRuns(ctx context.Context, r record.Run) ([]domain.EarlierRun, error)
	// FollowUpFacts answers which of messageIDs and of run runID's own
	// follow-ups were delivered to the session (or the guest run), and
	// the ids of the run's follow-ups in play, oldest first (one
	// statement, on a connection of its own).
	FollowUpFacts(ctx context.Context, sessionID, runID string, messageIDs []string) (map[string]bool, []string, error)
	// Delivered returns which of messageIDs were delivered as follow-ups
	// to the session (or the guest run; one statement).
	Delivered(ctx context.Context, sessionID, runID string, messageIDs []string) (map[string]bool, error)
	// FollowUps returns the follow-up messages still in play of each run
	// of runIDs, oldest first.
	FollowUps(ctx context.Context, runIDs []string) (map[string][]messaging.ContextItem, error)
	// PersonHoldsTrigger reports whether principal id holds trigger on
	// the channel of path c now.
	PersonHoldsTrigger(ctx context.Context, id string, c authz.Path) (bool, error)
}

// Deps are the collaborators of the run context.
type Deps struct {
	Log       *slog.Logger
	Identity  *identity.Service
	Chat      *chat.Service
	Authz     *authz.Service
	Messaging *messaging.Service
	Runs      Runs
}

// Service reads run contexts.
type Service struct {
	log       *slog.Logger
	ident     *identity.Service
	chat      *chat.Service
	authz     *authz.Service
	messaging *messaging.Service
	runs      Runs
}

// NewService returns the run context's reader.
func NewService(d Deps) *Service {
	return &Service{log: d.Log, ident: d.Identity, chat: d.Chat, authz: d.Authz, messaging: d.Messaging, runs: d.Runs}
}

// Build builds the run context of rd for actor (run.context.read: the
// run's own agent, active runs only; docs/design/trust.md#who-may-read-it)
// in one pipeline of four steps:
//
//   - plan (planContext): the read is allowed and the run has a context;
//     the session's plan (domain.PlanContext) says which windows to read;
//   - fetch (fetchContext): the triggering message, the thread window, the
//     channel window and the authors with their trigger right, read with
//     as few round trips as the plan allows (the window beside the
//     trigger, the people beside both);
//   - filter, cut and budget (shapeContext): the elements the agent may
//     read, each cut to limits.MessageMaxBytes, the oldest dropped to fit
//     limits.MaxBytes;
//   - finish (Finish, called by the face): role, trust and
//     already_delivered of every element.
//
// It opens no unit of work and takes no lock: every part, trust included,
// is computed anew on each request. Errors: the door's refusal when rd
// was not read for the context and run.context.read is denied; a 404
// (problem.NotFound) for an ended run, a run whose person lost trigger,
// a trigger that is gone or that the agent may not read; an internal
// error for any source error, which never turns into a context with less
// or weaker data (fail closed).
func (s *Service) Build(ctx context.Context, actor identity.Principal, rd record.Read, limits Limits) (RunContext, error) {
	p, err := s.planContext(ctx, actor, rd, limits)
	if err != nil {
		return RunContext{}, err
	}
	f, err := s.fetchContext(ctx, p)
	if err != nil {
		return RunContext{}, err
	}
	return s.shapeContext(ctx, p, f), nil
}

// contextPlan is the first step of a context read: what the read is for
// and what it must fetch.
type contextPlan struct {
	actor  identity.Principal
	rd     record.Read
	limits Limits
	plan   domain.ContextPlan
	// want are the messages read by id: the trigger and, for channel
	// context, the thread's parent.
	want []string
	// window is the thread window before the run's recorded trigger place.
	window messaging.ContextQuery
	// speculate reads the window in the trigger's statement: the run row
	// names where its trigger lies (trigger_thread_id, trigger_seq).
	speculate bool
	// wantChannel asks for the channel's main thread before the parent
	// (the first run of a session in a thread with a parent message).
	wantChannel bool
	// threadPath and mainPath are where the run's thread and its channel's
	// main thread are decided.
	threadPath, mainPath authz.Path
}

// planContext decides the read (run.context.read, unless rd was read for
// the context), refuses runs without a context, and plans the windows.
func (s *Service) planContext(ctx context.Context, actor identity.Principal, rd record.Read, limits Limits) (*contextPlan, error) {
	if err := s.contextAllowed(ctx, actor, rd); err != nil {
		return nil, err
	}
	actor = contextReader(actor)
	r, t, c := rd.Run, rd.Thread, rd.Channel
	facts := domain.PlanFacts{Mode: r.SessionMode, ThreadID: t.ID}
	if r.SessionMode == domain.ModeResume {
		earlier, err := s.runs.EarlierRuns(ctx, r)
		if err != nil {
			return nil, problem.Internal("runcontext.read", err)
		}
		facts.Earlier = earlier
	}
	p := &contextPlan{actor: actor, rd: rd, limits: limits, plan: domain.PlanContext(facts), want: []string{r.TriggeringMessageID},
		threadPath: chat.PathInThread(c, t, authz.KindMessage, ""),
		mainPath:   chat.PathInThread(c, chat.Thread{ID: c.MainThreadID}, authz.KindMessage, "")}
	if p.plan.WantChannel && t.ParentMessageID != "" && t.ParentMessageID != r.TriggeringMessageID {
		p.want = append(p.want, t.ParentMessageID)
	}
	exclude := ""
	if p.plan.ExcludeOwn {
		exclude = r.AgentID
	}
	p.window = messaging.ContextQuery{ThreadID: t.ID, AfterSeq: p.plan.Floor, BeforeSeq: r.TriggerSeq,
		Limit: c.Switches.HistoryBackfillLimit, ExcludeAuthorID: exclude}
	p.speculate = r.TriggerThreadID == t.ID
	p.wantChannel = p.plan.WantChannel && t.ParentMessageID != ""
	return p, nil
}

// contextAllowed decides run.context.read when rd was not read for the
// context, and answers 404 for a run that has no context: an ended run
// (the same 404 as an unknown run) and a run whose person lost trigger
// (it only waits to end). A run without a message trigger is a bug.
func (s *Service) contextAllowed(ctx context.Context, actor identity.Principal, rd record.Read) error {
	if !rd.ForContext {
		if _, _, err := s.authz.Authorize(ctx, actor, authz.RunContextRead, authz.Known(rd.Path, rd.Grant)); err != nil {
			return err
		}
	}
	r := rd.Run
	if !r.State.Active() || r.TriggeringMessageID == "" || r.TriggerLostAt != nil {
		return problem.New(problem.NotFound, "")
	}
	if r.TriggerKind != domain.TriggerKindMessage {
		s.log.ErrorContext(ctx, "run context of a run without a message trigger", "run_id", r.ID, "trigger_kind", r.TriggerKind)
		return problem.Internal("runcontext.read", fmt.Errorf("run %s has trigger kind %s", r.ID, r.TriggerKind))
	}
	return nil
}

// contextReader is who the elements of a run context are read as, once
// run.context.read was decided for actor: the actor itself, or, for a run
// token, its agent without the token's narrowing to the run's thread. The
// token may read its own run's context (the door decided that on the
// run), and that context lies wherever the run's trigger and channel
// context lie: in the main thread of an auto thread's channel, in a thread
// the run was moved from (issue 45 item 4). Its elements pass the agent's
// own read right, as they would for the agent's token.
func contextReader(actor identity.Principal) identity.Principal {
	actor.RunID, actor.RunThreadID, actor.RunHolder = "", "", ""
	return actor
}

// pathOf returns where a message of thread threadID is decided, when that
// thread is the run's thread or its channel's main thread.
func (p *contextPlan) pathOf(threadID string) (authz.Path, bool) {
	switch threadID {
	case p.rd.Thread.ID:
		return p.threadPath, true
	case p.rd.Channel.MainThreadID:
		return p.mainPath, p.rd.Channel.MainThreadID != ""
	}
	return authz.Path{}, false
}
