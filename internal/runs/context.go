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
}

// Read returns run id for actor (run.read: read on the run's thread) in
// three statements: the run, its thread with channel, the actor's grants.
// Unknown and invisible runs give the same 404.
func (s *Service) Read(ctx context.Context, actor identity.Principal, id string) (Read, error) {
	if err := s.authz.Spend(actor, authz.RunRead); err != nil {
		return Read{}, err
	}
	notFound := func() (Read, error) {
		if _, err := s.authz.DecideAt(ctx, actor, authz.RunRead, authz.Path{Kind: authz.KindRun, ID: id}); err != nil {
			return Read{}, err
		}
		return Read{}, problem.New(problem.NotFound, "")
	}
	if !validID(id) {
		return notFound()
	}
	r, err := getRun(ctx, s.pool, id, "")
	if errors.Is(err, ErrNotFound) {
		// The thread lookup of a visible run runs for a missing one too
		// (on the nil UUID): a hidden and a missing run take the same
		// statements.
		if _, _, err := s.chat.ThreadInfo(ctx, nil, "00000000-0000-0000-0000-000000000000"); err != nil && !errors.Is(err, chat.ErrNotFound) {
			return Read{}, problem.Internal(err)
		}
		return notFound()
	}
	if err != nil {
		return Read{}, problem.Internal(err)
	}
	t, c, err := s.chat.ThreadInfo(ctx, nil, r.ThreadID)
	if err != nil {
		return Read{}, problem.Internal(err)
	}
	path := chat.PathInThread(c, t, authz.KindRun, r.ID)
	path.OwnerID = r.AgentID
	d, err := s.authz.DecideAt(ctx, actor, authz.RunRead, path)
	if err != nil {
		return Read{}, err
	}
	if err := d.Err(); err != nil {
		return Read{}, err
	}
	return Read{Run: r, Thread: t, Channel: c, Path: path, Grant: d.Grant}, nil
}

// ContextElement is one element of a run context before the GraphQL face
// adds author, role, trust and already_delivered through its loaders.
type ContextElement struct {
	messaging.ContextItem
	ChannelID string
	Truncated bool
	// Path is the authorization path of the element's thread.
	Path authz.Path
}

// RunContext is run_context.v1 (seed M2-13 note 10) with the facts the
// field resolvers need.
type RunContext struct {
	RunID              string
	ContextFloorSeq    int64
	Trigger            ContextElement
	Thread             []ContextElement
	Channel            []ContextElement // nil when not built
	TruncatedBeforeSeq *int64
	// Parties classify the elements; ChannelPath is where trust is asked;
	// SessionID and Mode decide already_delivered (mode resume only).
	Parties     domain.RunParties
	ChannelPath authz.Path
	SessionID   string
	Mode        string
}

// Context builds the run context of rd for actor (run.context.read: the
// run's own agent, active runs only; seed M2-13 note 1). It opens no unit
// of work and takes no lock: every part, trust included, is computed anew
// on each request. Any source error fails the read; it never turns into a
// context with less or weaker data (fail closed).
func (s *Service) Context(ctx context.Context, actor identity.Principal, rd Read, limits ContextLimits) (RunContext, error) {
	if _, err := s.authz.DecideFrom(ctx, actor, authz.RunContextRead, rd.Path, rd.Grant); err != nil {
		return RunContext{}, err
	}
	r, t, c := rd.Run, rd.Thread, rd.Channel
	if !Active(r.State) || r.TriggeringMessageID == "" {
		// An ended run has no context: the same 404 as an unknown run.
		return RunContext{}, problem.New(problem.NotFound, "")
	}
	if r.TriggerKind != "message" {
		s.log.ErrorContext(ctx, "run context of a run without a message trigger", "run_id", r.ID, "trigger_kind", r.TriggerKind)
		return RunContext{}, problem.Internal(fmt.Errorf("run %s has trigger kind %s", r.ID, r.TriggerKind))
	}
	facts := domain.PlanFacts{Mode: r.SessionMode, ThreadID: t.ID}
	if r.SessionMode == domain.ModeResume {
		earlier, err := s.earlierRuns(ctx, r)
		if err != nil {
			return RunContext{}, problem.Internal(err)
		}
		facts.Earlier = earlier
	}
	plan := domain.PlanContext(facts)

	want := []string{r.TriggeringMessageID}
	if plan.WantChannel && t.ParentMessageID != "" && t.ParentMessageID != r.TriggeringMessageID {
		want = append(want, t.ParentMessageID)
	}
	msgs, err := s.messaging.ContextMessages(ctx, want)
	if err != nil {
		return RunContext{}, problem.Internal(err)
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
	mPath, ok := pathOf(m.ThreadID)
	if !ok || !s.authz.FilterAt(ctx, actor, authz.MessageRead, []authz.Path{mPath}, rd.Grant)[0] {
		return RunContext{}, problem.New(problem.NotFound, "")
	}

	out := RunContext{RunID: r.ID, Parties: domain.RunParties{AgentID: r.AgentID, TriggeredBy: r.TriggeredBy},
		ChannelPath: chat.ChannelPath(c), SessionID: r.SessionID, Mode: plan.Mode,
		Trigger: ContextElement{ContextItem: m, ChannelID: c.ID, Path: mPath}}
	limit := c.Switches.HistoryBackfillLimit
	exclude := ""
	if plan.ExcludeOwn {
		exclude = r.AgentID
	}
	var threadPage messaging.ContextPage
	if m.ThreadID == t.ID {
		out.ContextFloorSeq = plan.Floor
		threadPage, err = s.messaging.ContextWindow(ctx, messaging.ContextQuery{ThreadID: t.ID, AfterSeq: plan.Floor,
			BeforeSeq: m.ThreadSeq, Limit: limit, ExcludeAuthorID: exclude})
		if err != nil {
			return RunContext{}, problem.Internal(err)
		}
	}
	var channelPage *messaging.ContextPage
	if plan.WantChannel && t.ParentMessageID != "" {
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
		if ok && c.MainThreadID != "" && p.ThreadID == c.MainThreadID && s.mayRead(actor, mainPath, rd.Grant) {
			page, err := s.messaging.ContextWindow(ctx, messaging.ContextQuery{ThreadID: c.MainThreadID, BeforeSeq: p.ThreadSeq, Limit: limit})
			if err != nil {
				return RunContext{}, problem.Internal(err)
			}
			channelPage = &page
		}
	}

	elems := func(items []messaging.ContextItem, path authz.Path) []ContextElement {
		paths := make([]authz.Path, len(items))
		for i := range items {
			paths[i] = path
		}
		keep := s.authz.FilterAt(ctx, actor, authz.MessageRead, paths, rd.Grant)
		out := make([]ContextElement, 0, len(items))
		for i, it := range items {
			if !keep[i] {
				continue
			}
			e := ContextElement{ContextItem: it, ChannelID: c.ID, Path: path}
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

// earlierRuns returns the earlier runs of r's session, newest first, with
// where their triggering messages lie (one statement).
func (s *Service) earlierRuns(ctx context.Context, r Run) ([]domain.EarlierRun, error) {
	rows, err := s.pool.Query(ctx, `SELECT triggering_message_id IS NOT NULL, coalesce(trigger_thread_id::text, ''), coalesce(trigger_seq, 0)
		FROM runs WHERE agent_session_id = $1 AND (queued_at, id) < ($3, $2) ORDER BY queued_at DESC, id DESC`,
		r.SessionID, r.ID, r.QueuedAt)
	if err != nil {
		return nil, fmt.Errorf("earlier runs: %w", err)
	}
	defer rows.Close()
	var out []domain.EarlierRun
	for rows.Next() {
		var e domain.EarlierRun
		if err := rows.Scan(&e.HasTrigger, &e.TriggerThreadID, &e.TriggerSeq); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// Delivered returns which of messageIDs were handed to session sessionID as
// follow-ups (delivered or absorbed), in one statement.
func (s *Service) Delivered(ctx context.Context, sessionID string, messageIDs []string) (map[string]bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT f.message_id::text FROM run_followups f JOIN runs r ON r.id = f.run_id
		WHERE r.agent_session_id = $1 AND f.message_id = ANY($2::uuid[]) AND f.state IN ('delivered', 'absorbed')`, sessionID, messageIDs)
	if err != nil {
		return nil, fmt.Errorf("delivered follow-ups: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out[id] = true
	}
	return out, rows.Err()
}

// mayRead decides read on path p for actor with the grant level the request
// already read on the run's channel, without a statement and without the
// mismatch log of filter mode: it is asked before a read, not after.
func (s *Service) mayRead(actor identity.Principal, p authz.Path, grant authz.Level) bool {
	return p.Exists && authz.Capped(authz.EffectiveLevel(authz.ActorOf(actor), grant, p), p) >= authz.Read
}
