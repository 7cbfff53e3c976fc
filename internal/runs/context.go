package runs

import (
	"context"
	"errors"
	"fmt"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs/domain"
)

// ContextLimits are agent.context_max_bytes and
// agent.context_message_max_bytes.
type ContextLimits struct {
	MaxBytes        int
	MessageMaxBytes int
}

// Read is a run as one request read it, with what later decisions of the
// same request reuse (the path and the grant level), so that reading a run
// and then its context costs no second authorization statement.
type Read struct {
	Run     Run
	Thread  chat.Thread
	Channel chat.Channel
	Path    authz.Path
	Grant   authz.Level
	// ForContext is set by ReadForContext: run.context.read was already
	// decided (and its token spent) on this read.
	ForContext bool
	// FollowUpsOnRecord is false when neither the run nor another run of
	// its session had a follow-up when it was read (RunContext has it).
	FollowUpsOnRecord bool
}

// Read returns run id for actor (run.read: read on the run's thread) in
// one statement: the run with its thread, channel and the actor's grants
// there, read while the door takes the token. Unknown and invisible runs
// give the same 404.
func (s *Service) Read(ctx context.Context, actor identity.Principal, id string) (Read, error) {
	return s.read(ctx, actor, id, authz.RunRead)
}

// ReadForContext reads run id only to build its context (getRunContext):
// it takes the rl.agent_runtime token of run.context.read instead of
// rl.read and decides and audits run.context.read, also for unknown and
// invisible runs.
func (s *Service) ReadForContext(ctx context.Context, actor identity.Principal, id string) (Read, error) {
	rd, err := s.read(ctx, actor, id, authz.RunContextRead)
	rd.ForContext = err == nil
	return rd, err
}

func (s *Service) read(ctx context.Context, actor identity.Principal, id string, action authz.Action) (Read, error) {
	// Every way out goes through the door once: it takes the token of
	// action's class and decides (and audits) also an unknown or invisible
	// run, both with the same 404. The run is read at the door (a Lookup),
	// while the token is taken.
	var rd Read
	d, _, err := s.authz.Authorize(ctx, actor, action, authz.Lookup(func(ctx context.Context) (authz.Facts, error) {
		missing := authz.Path{Kind: authz.KindRun, ID: id}
		if !validID(id) {
			// No statement can find it: the door reads the grants of a
			// missing resource, as for any other.
			return authz.Facts{Path: missing}, nil
		}
		// The run comes with its thread, channel and the actor's grants
		// there in one statement, the same one for a missing run as for a
		// hidden one.
		x, err := s.st.getRunInThread(ctx, id, actor.ID)
		if errors.Is(err, ErrNotFound) {
			return authz.Known(missing, authz.None), nil
		}
		if err != nil {
			return authz.Facts{}, fmt.Errorf("runs.read: %w", err)
		}
		path := chat.PathInThread(x.channel, x.thread, authz.KindRun, x.run.ID)
		path.OwnerID = x.run.AgentID
		rd = Read{Run: x.run, Thread: x.thread, Channel: x.channel, Path: path, FollowUpsOnRecord: x.followUps}
		return authz.Known(path, authz.GrantLevelOf(actor, x.levels)), nil
	}))
	if err != nil {
		return Read{}, err
	}
	rd.Grant = d.Grant
	return rd, nil
}

// ContextElement is one element of a run context before the GraphQL face
// adds author, role, trust and already_delivered (FinishContext).
type ContextElement struct {
	messaging.ContextItem
	ChannelID string
	Truncated bool
}

// RunContext is run_context.v1 (docs/design/trust.md#run-context) with the
// facts the field resolvers need.
type RunContext struct {
	RunID              string
	ContextFloorSeq    int64
	Trigger            ContextElement
	Thread             []ContextElement
	Channel            []ContextElement // nil when not built
	TruncatedBeforeSeq *int64
	// Parties classify the elements; ChannelPath is where trust is asked;
	// SessionID (or, for a guest run without session, RunID) decides
	// already_delivered.
	Parties     domain.RunParties
	ChannelPath authz.Path
	SessionID   string
	Mode        domain.Mode
	// ThreadPath and Grant let the follow-ups (ContextFollowUps) pass
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

// Context builds the run context of rd for actor (run.context.read: the
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
//   - finish (FinishContext, called by the face): role, trust and
//     already_delivered of every element.
//
// It opens no unit of work and takes no lock: every part, trust included,
// is computed anew on each request. Errors: the door's refusal when rd
// was not read for the context and run.context.read is denied; a 404
// (problem.NotFound) for an ended run, a run whose person lost trigger,
// a trigger that is gone or that the agent may not read; an internal
// error for any source error, which never turns into a context with less
// or weaker data (fail closed).
func (s *Service) Context(ctx context.Context, actor identity.Principal, rd Read, limits ContextLimits) (RunContext, error) {
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
	rd     Read
	limits ContextLimits
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
func (s *Service) planContext(ctx context.Context, actor identity.Principal, rd Read, limits ContextLimits) (*contextPlan, error) {
	if err := s.contextAllowed(ctx, actor, rd); err != nil {
		return nil, err
	}
	actor = contextReader(actor)
	r, t, c := rd.Run, rd.Thread, rd.Channel
	facts := domain.PlanFacts{Mode: r.SessionMode, ThreadID: t.ID}
	if r.SessionMode == domain.ModeResume {
		earlier, err := s.st.earlierRuns(ctx, r)
		if err != nil {
			return nil, problem.Internal("runs.context", err)
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
func (s *Service) contextAllowed(ctx context.Context, actor identity.Principal, rd Read) error {
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
		return problem.Internal("runs.context", fmt.Errorf("run %s has trigger kind %s", r.ID, r.TriggerKind))
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
