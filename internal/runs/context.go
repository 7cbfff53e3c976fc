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
// adds author, role, trust and already_delivered through its loaders.
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
	// ThreadPath and Grant let the follow-ups (read through a loader) pass
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

// peopleAnswer is what the read of a context's people beside its window
// answers.
type peopleAnswer struct {
	people  map[string]identity.Principal
	holders map[string]bool
	err     error
}

// Context builds the run context of rd for actor (run.context.read: the
// run's own agent, active runs only; docs/design/trust.md#who-may-read-it).
// It opens no unit
// of work and takes no lock: every part, trust included, is computed anew
// on each request. Any source error fails the read; it never turns into a
// context with less or weaker data (fail closed).
func (s *Service) Context(ctx context.Context, actor identity.Principal, rd Read, limits ContextLimits) (RunContext, error) {
	if !rd.ForContext {
		if _, _, err := s.authz.Authorize(ctx, actor, authz.RunContextRead, authz.Known(rd.Path, rd.Grant)); err != nil {
			return RunContext{}, err
		}
	}
	r, t, c := rd.Run, rd.Thread, rd.Channel
	if !r.State.Active() || r.TriggeringMessageID == "" || r.TriggerLostAt != nil {
		// An ended run has no context: the same 404 as an unknown run. So
		// has a run whose person lost trigger: it only waits to end.
		return RunContext{}, problem.New(problem.NotFound, "")
	}
	if r.TriggerKind != domain.TriggerKindMessage {
		s.log.ErrorContext(ctx, "run context of a run without a message trigger", "run_id", r.ID, "trigger_kind", r.TriggerKind)
		return RunContext{}, problem.Internal("runs.context", fmt.Errorf("run %s has trigger kind %s", r.ID, r.TriggerKind))
	}
	facts := domain.PlanFacts{Mode: r.SessionMode, ThreadID: t.ID}
	if r.SessionMode == domain.ModeResume {
		earlier, err := s.st.earlierRuns(ctx, r)
		if err != nil {
			return RunContext{}, problem.Internal("runs.context", err)
		}
		facts.Earlier = earlier
	}
	plan := domain.PlanContext(facts)

	want := []string{r.TriggeringMessageID}
	if plan.WantChannel && t.ParentMessageID != "" && t.ParentMessageID != r.TriggeringMessageID {
		want = append(want, t.ParentMessageID)
	}
	limit := c.Switches.HistoryBackfillLimit
	exclude := ""
	if plan.ExcludeOwn {
		exclude = r.AgentID
	}
	// The run row names where its trigger lies (trigger_thread_id,
	// trigger_seq), so the thread window is read in the same statement as
	// the triggering message instead of one round trip later. It is only
	// used, like before, once the trigger is found in the run's thread at
	// that place and the agent may read it; otherwise it is dropped (and,
	// should the trigger lie elsewhere in the thread, read again).
	window := messaging.ContextQuery{ThreadID: t.ID, AfterSeq: plan.Floor, BeforeSeq: r.TriggerSeq, Limit: limit, ExcludeAuthorID: exclude}
	var msgs map[string]messaging.ContextItem
	var threadPage messaging.ContextPage
	var err error
	speculated := r.TriggerThreadID == t.ID
	// The first run of a session in a thread with a parent message also
	// reads the channel's main thread before that parent.
	wantChannel := plan.WantChannel && t.ParentMessageID != ""
	// Where the context's elements are the window and the trigger alone
	// (no channel context), their authors and trigger rights are read on
	// another connection while the window is read: one round trip instead
	// of two. The answer is awaited before Context returns, whatever it
	// returns, and used only when the window is used as read.
	var people chan peopleAnswer
	if speculated && !wantChannel {
		people = make(chan peopleAnswer, 1)
		go func() {
			var a peopleAnswer
			a.people, a.holders, a.err = s.authz.PeopleWithTriggerIn(ctx, chat.ChannelPath(c), func(first int) (string, []any) {
				return messaging.ContextAuthors(first, want, window)
			})
			people <- a
		}()
		defer func() {
			if people != nil {
				<-people
			}
		}()
	}
	if speculated {
		msgs, threadPage, err = s.messaging.ContextMessagesAndWindow(ctx, want, window)
	} else {
		msgs, err = s.messaging.ContextMessages(ctx, want)
	}
	if err != nil {
		return RunContext{}, problem.Internal("runs.context", err)
	}
	threadPath := chat.PathInThread(c, t, authz.KindMessage, "")
	mainPath := chat.PathInThread(c, chat.Thread{ID: c.MainThreadID}, authz.KindMessage, "")
	pathOf := func(threadID string) (authz.Path, bool) {
		switch threadID {
		case t.ID:
			return threadPath, true
		case c.MainThreadID:
			return mainPath, c.MainThreadID != ""
		}
		return authz.Path{}, false
	}
	m, ok := msgs[r.TriggeringMessageID]
	if !ok {
		return RunContext{}, problem.New(problem.NotFound, "")
	}
	triggerChannel := c.ID
	mPath, ok := pathOf(m.ThreadID)
	if ok {
		ok = s.readable(ctx, actor, []authz.Path{mPath}, rd.Grant)[0]
	} else {
		// The run's thread moved away from its trigger (an auto thread whose
		// parent stays in the source channel): the trigger is read where it
		// lies, with the agent's rights there, and the run keeps its context.
		mPath, triggerChannel, ok, err = s.triggerElsewhere(ctx, actor, m.ThreadID)
		if err != nil {
			return RunContext{}, problem.Internal("runs.context", err)
		}
	}
	if !ok {
		return RunContext{}, problem.New(problem.NotFound, "")
	}

	out := RunContext{RunID: r.ID, Parties: domain.RunParties{AgentID: r.AgentID, TriggeredBy: r.TriggeredBy},
		ChannelPath: chat.ChannelPath(c), SessionID: r.SessionID, Mode: plan.Mode,
		Trigger:    ContextElement{ContextItem: m, ChannelID: triggerChannel},
		ThreadPath: threadPath, Grant: rd.Grant, MessageMaxBytes: limits.MessageMaxBytes, FollowUpsOnRecord: rd.FollowUpsOnRecord}
	if people != nil && m.ThreadID == t.ID && m.ThreadSeq == r.TriggerSeq {
		a := <-people
		people = nil
		if a.err != nil {
			return RunContext{}, problem.Internal("runs.context", a.err)
		}
		out.People, out.Holders = a.people, a.holders
	}
	// The run has a context only while its person may still ask for it
	// now: a move into a channel where they have no trigger, an expired
	// grant, ... answer 404 at once, before any sweep marks the run.
	if r.TriggeredBy != "" {
		held, known := false, false
		if _, in := out.People[r.TriggeredBy]; in {
			held, known = out.Holders[r.TriggeredBy], true
		}
		if !known {
			if held, err = s.personHoldsTrigger(ctx, r.TriggeredBy, chat.ChannelPath(c)); err != nil {
				return RunContext{}, problem.Internal("runs.context", err)
			}
		}
		if !held {
			return RunContext{}, problem.New(problem.NotFound, "")
		}
	}
	if m.ThreadID == t.ID {
		out.ContextFloorSeq = plan.Floor
		if !speculated || m.ThreadSeq != r.TriggerSeq {
			window.BeforeSeq = m.ThreadSeq
			threadPage, err = s.messaging.ContextWindow(ctx, window)
			if err != nil {
				return RunContext{}, problem.Internal("runs.context", err)
			}
		}
	} else {
		threadPage = messaging.ContextPage{}
	}
	var channelPage *messaging.ContextPage
	if wantChannel {
		var p messaging.ContextItem
		if t.ParentMessageID == m.ID {
			p, ok = m, true
		} else {
			p, ok = msgs[t.ParentMessageID]
		}
		// Only a parent in the thread's current channel gives channel
		// context: after a move, content of the source channel must not
		// reach readers of the target.
		// The agent's read right on the main thread is decided before
		// its window is read: a window the agent may not read is never
		// loaded (the filter below stays as a second line).
		if ok && c.MainThreadID != "" && p.ThreadID == c.MainThreadID && s.mayRead(ctx, actor, mainPath, rd.Grant) {
			page, err := s.messaging.ContextWindow(ctx, messaging.ContextQuery{ThreadID: c.MainThreadID, BeforeSeq: p.ThreadSeq, Limit: limit})
			if err != nil {
				return RunContext{}, problem.Internal("runs.context", err)
			}
			channelPage = &page
		}
	}

	elems := func(items []messaging.ContextItem, path authz.Path) []ContextElement {
		keep := s.readableOn(ctx, actor, path, len(items), rd.Grant)
		out := make([]ContextElement, 0, len(items))
		for i, it := range items {
			if !keep[i] {
				continue
			}
			e := ContextElement{ContextItem: it, ChannelID: c.ID}
			e.ContentMD, e.Truncated = domain.CutContent(it.ContentMD, limits.MessageMaxBytes)
			out = append(out, e)
		}
		return out
	}
	threadElems := elems(threadPage.Items, threadPath)
	var channelElems []ContextElement
	if channelPage != nil {
		channelElems = elems(channelPage.Items, mainPath)
	}
	keptC, keptT := domain.FitBudget(budgetItems(channelElems), budgetItems(threadElems), limits.MaxBytes)
	out.Thread = threadElems[len(threadElems)-len(keptT):]
	if channelPage != nil {
		out.Channel = channelElems[len(channelElems)-len(keptC):]
	}
	if seq, ok := domain.TruncatedBeforeSeq(threadPage.HasOlder, len(keptT) < len(threadElems), keptT, m.ThreadSeq); ok && m.ThreadID == t.ID {
		out.TruncatedBeforeSeq = &seq
	}
	return out, nil
}

func budgetItems(es []ContextElement) []domain.Item {
	out := make([]domain.Item, len(es))
	for i, e := range es {
		out[i] = domain.Item{Seq: e.ThreadSeq, Bytes: len(e.ContentMD)}
	}
	return out
}

// triggerElsewhere returns the path and channel of a triggering message
// that lies outside the run's thread and its channel's main thread, and
// whether actor may read it there.
func (s *Service) triggerElsewhere(ctx context.Context, actor identity.Principal, threadID string) (authz.Path, string, bool, error) {
	t, c, err := s.chat.ThreadInfo(ctx, threadID)
	if errors.Is(err, chat.ErrNotFound) {
		return authz.Path{}, "", false, nil
	}
	if err != nil {
		return authz.Path{}, "", false, err
	}
	p := chat.PathInThread(c, t, authz.KindMessage, "")
	may, err := s.authz.Allowed(ctx, authz.MessageRead, authz.Facts{Path: p}, actor)
	if err != nil {
		return authz.Path{}, "", false, err
	}
	return p, c.ID, may[actor.ID], nil
}

// FollowUps returns the follow-ups of each run in runIDs that are still
// in play (pending or delivered), oldest first, in two statements for all
// runs (a per-request loader batches the runs of one request).
func (s *Service) FollowUps(ctx context.Context, runIDs []string) (map[string][]messaging.ContextItem, error) {
	pairs, err := s.st.followUpPairs(ctx, runIDs)
	if err != nil {
		return nil, err
	}
	out := map[string][]messaging.ContextItem{}
	if len(pairs) == 0 {
		return out, nil
	}
	want := make([]string, len(pairs))
	for i, p := range pairs {
		want[i] = p.message
	}
	msgs, err := s.messaging.ContextMessages(ctx, want)
	if err != nil {
		return nil, err
	}
	for _, p := range pairs {
		if m, ok := msgs[p.message]; ok {
			out[p.run] = append(out[p.run], m)
		}
	}
	return out, nil
}

// FollowUpElements turns the follow-up messages of rc's run into context
// elements: each passes the same read filter as the thread elements and is
// cut like them.
func (s *Service) FollowUpElements(ctx context.Context, actor identity.Principal, rc *RunContext, items []messaging.ContextItem) []ContextElement {
	keep := s.readableOn(ctx, actor, rc.ThreadPath, len(items), rc.Grant)
	out := make([]ContextElement, 0, len(items))
	for i, it := range items {
		if !keep[i] {
			continue
		}
		e := ContextElement{ContextItem: it, ChannelID: rc.ChannelPath.ChannelID}
		e.ContentMD, e.Truncated = domain.CutContent(it.ContentMD, rc.MessageMaxBytes)
		out = append(out, e)
	}
	return out
}

// mayRead decides message.read on path p for actor with the grant level
// the request already read on the run's channel, without a statement and
// without the mismatch log of filter mode: it is asked before a read, not
// after. It never fails with a known grant; were it to, it answers no.
func (s *Service) mayRead(ctx context.Context, actor identity.Principal, p authz.Path, grant authz.Level) bool {
	may, err := s.authz.Allowed(ctx, authz.MessageRead, authz.Known(p, grant), actor)
	return err == nil && may[actor.ID]
}

// readable is filter mode (message.read) over items on paths of the run's
// channel, with the grant level the request already read there: no
// statement runs, so it cannot fail; were it to, nothing is kept (fail
// closed).
func (s *Service) readable(ctx context.Context, actor identity.Principal, paths []authz.Path, grant authz.Level) []bool {
	targets := make([]authz.Facts, len(paths))
	for i, p := range paths {
		targets[i] = authz.Known(p, grant)
	}
	keep, err := s.authz.Filter(ctx, actor, authz.MessageRead, targets)
	if err != nil {
		return make([]bool, len(paths))
	}
	return keep
}

// readableOn is readable for n items that all lie on path p: the answer
// is the same for each, so one decision answers all of them. Should it
// deny, the items go through the filter one by one, so that each is
// logged and counted as a mismatch as before.
func (s *Service) readableOn(ctx context.Context, actor identity.Principal, p authz.Path, n int, grant authz.Level) []bool {
	keep := make([]bool, n)
	if n == 0 {
		return keep
	}
	if !s.readable(ctx, actor, []authz.Path{p}, grant)[0] {
		paths := make([]authz.Path, n)
		for i := range paths {
			paths[i] = p
		}
		return s.readable(ctx, actor, paths, grant)
	}
	for i := range keep {
		keep[i] = true
	}
	return keep
}
