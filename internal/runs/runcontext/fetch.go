package runcontext

import (
	"context"
	"errors"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/problem"
)

// contextSources are what the fetch step of a context read found: the
// triggering message where it lies, the windows as read (not yet
// filtered) and, when read beside the window, the authors and which of
// them hold trigger on the channel.
type contextSources struct {
	trigger        messaging.ContextItem
	triggerChannel string
	// inThread says the trigger lies in the run's thread: only then is
	// there a thread context (and a floor and a truncation mark).
	inThread bool
	// asPlanned says the trigger lies where the run row said, so the
	// window read with it (and the people read beside it) are the ones
	// to use.
	asPlanned   bool
	threadPage  messaging.ContextPage
	channelPage *messaging.ContextPage // nil when not built
	people      map[string]identity.Principal
	holders     map[string]bool
}

// fetchContext is the fetch step: every statement of a context read but
// the plan's and the finish's. Each source error fails the read (fail
// closed); a trigger that is gone or unreadable, or a triggering person
// without trigger now, is a 404.
func (s *Service) fetchContext(ctx context.Context, p *contextPlan) (*contextSources, error) {
	people := s.peopleBeside(ctx, p)
	// The people's answer is awaited before the read returns, whatever it
	// returns.
	defer people.wait()
	f := &contextSources{}
	msgs, err := s.fetchTrigger(ctx, p, f)
	if err != nil {
		return nil, err
	}
	if f.asPlanned {
		if err := people.take(f); err != nil {
			return nil, err
		}
	}
	if err := s.checkTriggerPerson(ctx, p, f); err != nil {
		return nil, err
	}
	if err := s.fetchThreadWindow(ctx, p, f); err != nil {
		return nil, err
	}
	if err := s.fetchChannelWindow(ctx, p, f, msgs); err != nil {
		return nil, err
	}
	return f, nil
}

// peopleAnswer is what the read of a context's people beside its window
// answers.
type peopleAnswer struct {
	people  map[string]identity.Principal
	holders map[string]bool
	err     error
}

// besideRead is the read of a context's people running beside its
// window; a nil *besideRead is no such read.
type besideRead struct {
	answer chan peopleAnswer
	taken  bool
}

// peopleBeside starts, where the context's elements are the window and
// the trigger alone (no channel context), the read of their authors and
// trigger rights (authz's PeopleWithTriggerIn over messaging's
// ContextAuthors) on another connection while the window is read: one
// round trip instead of two. It answers nil when the plan has no such
// read.
func (s *Service) peopleBeside(ctx context.Context, p *contextPlan) *besideRead {
	if !p.speculate || p.wantChannel {
		return nil
	}
	b := &besideRead{answer: make(chan peopleAnswer, 1)}
	go func() {
		var a peopleAnswer
		a.people, a.holders, a.err = s.authz.PeopleWithTriggerIn(ctx, chat.ChannelPath(p.rd.Channel), messaging.ContextAuthors(p.want, p.window))
		b.answer <- a
	}()
	return b
}

// take awaits the people read beside the window and keeps its answer in
// f; its error fails the context.
func (b *besideRead) take(f *contextSources) error {
	if b == nil {
		return nil
	}
	a := <-b.answer
	b.taken = true
	if a.err != nil {
		return problem.Internal("runcontext.read", a.err)
	}
	f.people, f.holders = a.people, a.holders
	return nil
}

// wait awaits the people read beside the window when its answer was not
// taken, so that no statement outlives the context read.
func (b *besideRead) wait() {
	if b != nil && !b.taken {
		<-b.answer
	}
}

// fetchTrigger reads the messages of p.want (with the thread window in
// the same statement when the plan speculates) and finds the trigger
// where it lies: in the run's thread or its channel's main thread, read
// with the grant the request already holds, or elsewhere (triggerElsewhere).
// It returns the messages read by id.
func (s *Service) fetchTrigger(ctx context.Context, p *contextPlan, f *contextSources) (map[string]messaging.ContextItem, error) {
	var msgs map[string]messaging.ContextItem
	var err error
	if p.speculate {
		msgs, f.threadPage, err = s.messaging.ContextMessagesAndWindow(ctx, p.want, p.window)
	} else {
		msgs, err = s.messaging.ContextMessages(ctx, p.want)
	}
	if err != nil {
		return nil, problem.Internal("runcontext.read: read context messages", err)
	}
	r, t := p.rd.Run, p.rd.Thread
	m, ok := msgs[r.TriggeringMessageID]
	if !ok {
		return nil, problem.New(problem.NotFound, "")
	}
	f.trigger, f.triggerChannel = m, p.rd.Channel.ID
	f.inThread = m.ThreadID == t.ID
	f.asPlanned = p.speculate && f.inThread && m.ThreadSeq == r.TriggerSeq
	mPath, ok := p.pathOf(m.ThreadID)
	if ok {
		ok = s.readable(ctx, p.actor, []authz.Path{mPath}, p.rd.Grant)[0]
	} else {
		// The run's thread moved away from its trigger (an auto thread whose
		// parent stays in the source channel): the trigger is read where it
		// lies, with the agent's rights there, and the run keeps its context.
		_, f.triggerChannel, ok, err = s.triggerElsewhere(ctx, p.actor, m.ThreadID)
		if err != nil {
			return nil, problem.Internal("runcontext.read: read trigger elsewhere", err)
		}
	}
	if !ok {
		return nil, problem.New(problem.NotFound, "")
	}
	return msgs, nil
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

// checkTriggerPerson answers 404 unless the run's person (if any) holds
// trigger on the run's channel now: the run has a context only while its
// person may still ask for it, so a move into a channel where they have
// no trigger, an expired grant, ... answer 404 at once, before any sweep
// marks the run. The people read beside the window answer it when they
// name the person; otherwise one statement does.
func (s *Service) checkTriggerPerson(ctx context.Context, p *contextPlan, f *contextSources) error {
	person := p.rd.Run.TriggeredBy
	if person == "" {
		return nil
	}
	held, known := false, false
	if _, in := f.people[person]; in {
		held, known = f.holders[person], true
	}
	if !known {
		var err error
		if held, err = s.runs.PersonHoldsTrigger(ctx, person, chat.ChannelPath(p.rd.Channel)); err != nil {
			return problem.Internal("runcontext.read", err)
		}
	}
	if !held {
		return problem.New(problem.NotFound, "")
	}
	return nil
}

// fetchThreadWindow leaves in f the thread window before the trigger:
// the one read with the trigger when the trigger lies where planned, else
// read now before the trigger's actual place; none when the trigger lies
// outside the run's thread.
func (s *Service) fetchThreadWindow(ctx context.Context, p *contextPlan, f *contextSources) error {
	if !f.inThread {
		f.threadPage = messaging.ContextPage{}
		return nil
	}
	if f.asPlanned {
		return nil
	}
	q := p.window
	q.BeforeSeq = f.trigger.ThreadSeq
	page, err := s.messaging.ContextWindow(ctx, q)
	if err != nil {
		return problem.Internal("runcontext.read", err)
	}
	f.threadPage = page
	return nil
}

// fetchChannelWindow leaves in f, when the plan wants channel context,
// the window of the channel's main thread before the thread's parent
// message. Only a parent in the thread's current channel gives channel
// context: after a move, content of the source channel must not reach
// readers of the target. The agent's read right on the main thread is
// decided before its window is read: a window the agent may not read is
// never loaded (the filter of shapeContext stays as a second line).
func (s *Service) fetchChannelWindow(ctx context.Context, p *contextPlan, f *contextSources, msgs map[string]messaging.ContextItem) error {
	if !p.wantChannel {
		return nil
	}
	c := p.rd.Channel
	parent, ok := f.trigger, true
	if p.rd.Thread.ParentMessageID != f.trigger.ID {
		parent, ok = msgs[p.rd.Thread.ParentMessageID]
	}
	if !ok || c.MainThreadID == "" || parent.ThreadID != c.MainThreadID || !s.mayRead(ctx, p.actor, p.mainPath, p.rd.Grant) {
		return nil
	}
	page, err := s.messaging.ContextWindow(ctx, messaging.ContextQuery{ThreadID: c.MainThreadID, BeforeSeq: parent.ThreadSeq, Limit: p.window.Limit})
	if err != nil {
		return problem.Internal("runcontext.read", err)
	}
	f.channelPage = &page
	return nil
}
