package runs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/platform/tracing"
	"bothy.example.com/bothy/internal/runs/approvals"
	"bothy.example.com/bothy/internal/runs/domain"
	"bothy.example.com/bothy/internal/runs/livebox"
	"bothy.example.com/bothy/internal/runs/livehub"
	"bothy.example.com/bothy/internal/runs/runcontext"
	"bothy.example.com/bothy/internal/runs/stream"
)

// Timeouts are the run timeouts (run.start_timeout, run.stall_timeout,
// run.lease_timeout, run.cancel_grace) and run.max_attempts.
type Timeouts struct {
	Start, Stall time.Duration
	// Lease is how long a holder's claim lives after its last call.
	Lease time.Duration
	// MaxAttempts bounds the invocations of a run (expired leases).
	MaxAttempts int
	// CancelGrace is how long a run whose triggering person lost trigger
	// waits for the adapter's confirmation.
	CancelGrace time.Duration
}

// Service is the runs module.
type Service struct {
	st        store
	db        *db.DB
	log       *slog.Logger
	ident     *identity.Service
	chat      *chat.Service
	authz     *authz.Service
	messaging *messaging.Service
	// chatW, msgW and identW are the raw writers runs uses after its own
	// decision: thread locks, a run's anchor and card, trigger states and
	// run tokens.
	chatW    *chat.Writer
	msgW     *messaging.Writer
	identW   *identity.Writer
	events   *events.Log
	timeouts Timeouts
	// approvals is the approvals' table (internal/runs/approvals).
	approvals *approvals.Store
	// hub is the wake-up hub of this process (nil in tests without a
	// listener); stream hands out the agents' streams
	// (internal/runs/stream).
	hub    *Hub
	stream *stream.Service
	live   *livehub.Hub
	// runContext reads run contexts (internal/runs/runcontext), asking
	// runs' own facts through contextRuns.
	runContext *runcontext.Service
	// contextLimits build the context an answer's provenance is decided
	// on (AnswerProvenance), the same limits a context read has.
	contextLimits ContextLimits
	// fileTexts answers which context messages carry a file with text
	// (the files module; nil: none do).
	fileTexts FileTexts
}

// FileTexts answers which of a list of messages carry a file whose text
// an agent may read (the files module).
type FileTexts interface {
	MessagesWithText(ctx context.Context, messageIDs []string) (map[string]bool, error)
}

// ReadFileTextsWith sets the files module once it exists (it is made
// after runs): an answer's provenance counts a context message with file
// text as unverified (domain.InPlayWithFiles).
func (s *Service) ReadFileTextsWith(f FileTexts) { s.fileTexts = f }

// Deps are the collaborators of the runs module.
type Deps struct {
	Pool      db.Querier
	DB        *db.DB
	Clock     clock.Clock
	Log       *slog.Logger
	Identity  *identity.Service
	Chat      *chat.Service
	Authz     *authz.Service
	Messaging *messaging.Service
	// ChatWriter, MessagingWriter and IdentityWriter are the raw writes runs
	// makes once its own rules decided (internal/modules hands them over).
	ChatWriter      *chat.Writer
	MessagingWriter *messaging.Writer
	IdentityWriter  *identity.Writer
	Events          *events.Log
	Timeouts        Timeouts
	Hub             *Hub
	// PollMaxWait is events.poll_max_wait.
	PollMaxWait time.Duration
	// LiveMaxBytes is run.live_max_bytes and LiveFlushInterval
	// run.live_flush_interval.
	LiveMaxBytes      int
	LiveFlushInterval time.Duration
	// ContextLimits are agent.context_max_bytes and
	// agent.context_message_max_bytes (the context an answer's provenance
	// is decided on).
	ContextLimits ContextLimits
}

// NewService returns the runs module. The wiring (modules.New) subscribes
// it to posted messages and makes it messaging's provenance decider.
func NewService(d Deps) *Service {
	s := &Service{st: store{pool: d.Pool, clock: d.Clock}, db: d.DB, log: d.Log, ident: d.Identity, chat: d.Chat, authz: d.Authz,
		messaging: d.Messaging, chatW: d.ChatWriter, msgW: d.MessagingWriter, identW: d.IdentityWriter, events: d.Events, timeouts: d.Timeouts, hub: d.Hub,
		contextLimits: d.ContextLimits, approvals: approvals.NewStore(d.Pool)}
	s.runContext = runcontext.NewService(runcontext.Deps{Log: d.Log, Identity: d.Identity, Chat: d.Chat, Authz: d.Authz, Messaging: d.Messaging,
		Runs: contextRuns{s}})
	s.live = livehub.New(liveStore{&s.st}, d.Log, d.LiveMaxBytes, d.LiveFlushInterval)
	if d.Hub != nil {
		d.Hub.SetSide(s.live)
	}
	s.stream = stream.NewService(stream.Deps{Pool: d.Pool, DB: d.DB, Clock: d.Clock, Identity: d.Identity, Authz: d.Authz,
		Events: d.Events, Hub: d.Hub, PollMaxWait: d.PollMaxWait, Deliver: s.deliverAcked})
	return s
}

// OnMessagePosted applies the trigger decision to a message inside the unit
// of work that stores it (docs/design/runs.md#trigger-decision): a message
// of any origin other than human does no trigger work at all.
func (s *Service) OnMessagePosted(ctx context.Context, p *messaging.Posted) ([]events.Event, error) {
	if p.RunID != "" {
		// The answer branch: only an agent's message can name a run
		// (messaging refuses it from anyone else); check it and stop.
		if p.Message.Origin != messaging.OriginAgent || p.Message.Kind == messaging.KindRun || p.Message.Kind == messaging.KindSystem {
			return nil, problem.Internal("runs.onMessagePosted: check answer origin", fmt.Errorf("message of origin %s and kind %s names a run", p.Message.Origin, p.Message.Kind))
		}
		return nil, s.checkAnswer(ctx, p)
	}
	if p.Message.Origin != messaging.OriginHuman {
		// Nothing an agent, app, import or the system writes ever sets an
		// agent in motion
		// (docs/design/replies.md#nothing-an-agent-writes-triggers).
		return nil, nil
	}
	facts, active, err := s.triggerFacts(ctx, p)
	if err != nil {
		return nil, problem.Internal("runs.onMessagePosted: read trigger facts", err)
	}
	d := domain.DecideTrigger(facts)
	switch d.Outcome {
	case messaging.TriggerNone:
		return nil, nil
	case messaging.TriggerFailed:
		return nil, s.setTrigger(ctx, p, messaging.TriggerFailed, d.Reason)
	case messaging.TriggerFollowup:
		if err := s.setTrigger(ctx, p, messaging.TriggerFollowup, ""); err != nil {
			return nil, err
		}
		return s.addFollowup(ctx, active, p.Message.ID, p.Channel.ID)
	default:
		// messaging.TriggerAccepted, the only other outcome.
		return s.acceptTrigger(ctx, p, d)
	}
}

// acceptTrigger records the accepted trigger on p's message and starts the
// run of d's addressee: in a new thread under the message when d says
// auto thread, else in the message's thread.
func (s *Service) acceptTrigger(ctx context.Context, p *messaging.Posted, d domain.TriggerDecision) ([]events.Event, error) {
	if err := s.setTrigger(ctx, p, messaging.TriggerAccepted, ""); err != nil {
		return nil, err
	}
	var evs []events.Event
	runThread := p.Thread
	if d.AutoThread {
		t, err := s.chatW.CreateThread(ctx, chat.NewThread{Channel: p.Channel, ParentMessageID: p.Message.ID,
			ByAgent: true, CreatedBy: p.Author.ID, TitleFrom: p.Message.ContentMD})
		if err != nil {
			return nil, problem.From("runs.onMessagePosted", err)
		}
		runThread = t
		evs = append(evs, events.Event{Type: events.ThreadCreated, ChannelID: p.Channel.ID, ThreadID: t.ID, Payload: chat.ThreadPayload(t)})
	}
	// The run continues the trace of the request that posted its message
	// (docs/operations.md#following-a-run-in-traces).
	more, err := s.startRunFor(ctx, d.Agent, d.Guest, runThread, p.Channel.ID,
		trigger{p.Message.ID, p.Thread.ID, p.Message.ThreadSeq, tracing.Traceparent(ctx)}, p.Author.ID)
	if err != nil {
		return nil, err
	}
	return append(evs, more...), nil
}

func (s *Service) setTrigger(ctx context.Context, p *messaging.Posted, state messaging.TriggerState, reason string) error {
	if err := s.msgW.SetTrigger(ctx, p.Message.ID, state, reason); err != nil {
		return problem.Internal("runs.setTrigger", err)
	}
	p.Message.TriggerState, p.Message.TriggerReason = state, reason
	return nil
}

// triggerFacts gathers what domain.DecideTrigger needs: the thread's operators and
// switches, the writer's trigger right, the first mentioned agent's state
// and read right, and the thread's active run, which it returns locked (the
// run a follow-up joins).
func (s *Service) triggerFacts(ctx context.Context, p *messaging.Posted) (domain.TriggerFacts, Run, error) {
	path := chat.PathInThread(p.Channel, p.Thread, authz.KindThread, p.Thread.ID)
	f := placeFacts(p.Thread, p.Channel)
	writer, err := s.authz.Allowed(ctx, authz.MessageTrigger, authz.Facts{Path: path}, p.Author)
	if err != nil {
		return f, Run{}, err
	}
	f.WriterTrigger = writer[p.Author.ID]
	// Only the first mentioned agent can be the addressee.
	mentioned := ""
	for _, m := range p.Message.Mentions {
		if m.Kind == identity.KindAgent {
			mentioned = m.ID
			break
		}
	}
	operator := f.Operator()
	agents, err := s.ident.GetMany(ctx, []string{mentioned, operator})
	if err != nil {
		return f, Run{}, err
	}
	if a, ok := agents[mentioned]; ok {
		reads, err := s.authz.Allowed(ctx, authz.ThreadRead, authz.Facts{Path: path}, a)
		if err != nil {
			return f, Run{}, err
		}
		f.Mentioned = []domain.Agent{{ID: a.ID, Active: a.Active(), ReadOnThread: reads[a.ID]}}
	}
	if op, ok := agents[operator]; ok {
		f.OperatorActive = op.Active()
	}
	active, err := s.st.activeRunOf(ctx, p.Thread.ID)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return f, Run{}, err
	}
	f.ActiveRunAgent = active.AgentID
	return f, active, nil
}

// placeFacts are the facts of a message's place, thread t of channel c:
// the thread's kind and operator, the channel's operator and switches.
func placeFacts(t chat.Thread, c chat.Channel) domain.TriggerFacts {
	return domain.TriggerFacts{Human: true, MainThread: t.Kind == chat.ThreadMain, ThreadOperator: t.OperatorAgentID,
		ChannelOperator: c.EffectiveOperator(), FreeResponse: c.Switches.FreeResponse,
		AllowMentionedAgents: c.Switches.AllowMentionedAgents, AutoThread: c.Switches.AutoThread}
}

// followupFacts reads the trigger facts of the pending follow-ups list of
// a run that ends in thread t of channel c, for all of them at once: their
// messages, their authors, the authors' trigger right, the mentioned agents
// and the operator, and the agents' read right, each one read for the
// whole list (docs/design/runs.md#follow-ups). ActiveRunAgent is left
// empty: the caller knows the next run it starts. A follow-up whose
// message or author is gone is missing from the answer.
func (s *Service) followupFacts(ctx context.Context, list []string, t chat.Thread, c chat.Channel) (map[string]domain.TriggerFacts, map[string]messaging.Message, error) {
	msgs, err := s.messaging.LoadMany(ctx, list, c.ID)
	if err != nil {
		return nil, nil, err
	}
	path := chat.PathInThread(c, t, authz.KindThread, t.ID)
	base := placeFacts(t, c)
	operator := base.Operator()
	idList, mentioned := followupPeople(msgs, operator)
	people, err := s.ident.GetMany(ctx, idList)
	if err != nil {
		return nil, nil, err
	}
	authors, agents := followupAsked(msgs, people, mentioned)
	writers, err := s.authz.Allowed(ctx, authz.MessageTrigger, authz.Facts{Path: path}, authors...)
	if err != nil {
		return nil, nil, err
	}
	reads, err := s.authz.Allowed(ctx, authz.ThreadRead, authz.Facts{Path: path}, agents...)
	if err != nil {
		return nil, nil, err
	}
	out := make(map[string]domain.TriggerFacts, len(msgs))
	for id, m := range msgs {
		if _, ok := people[m.Author.ID]; !ok {
			continue
		}
		f := base
		f.Human = m.Origin == messaging.OriginHuman
		f.WriterTrigger = writers[m.Author.ID]
		if a, ok := people[mentioned[id]]; ok {
			f.Mentioned = []domain.Agent{{ID: a.ID, Active: a.Active(), ReadOnThread: reads[a.ID]}}
		}
		if op, ok := people[operator]; ok {
			f.OperatorActive = op.Active()
		}
		out[id] = f
	}
	return out, msgs, nil
}

// followupPeople returns the ids of the principals the trigger facts of the
// follow-ups' messages msgs need, each once: the place's operator, the
// messages' authors and the first agent each message mentions; mentioned
// maps a message id to that agent.
func followupPeople(msgs map[string]messaging.Message, operator string) (idList []string, mentioned map[string]string) {
	ask := map[string]bool{operator: true}
	mentioned = map[string]string{}
	for _, m := range msgs {
		ask[m.Author.ID] = true
		for _, r := range m.Mentions {
			if r.Kind == identity.KindAgent {
				mentioned[m.ID] = r.ID
				ask[r.ID] = true
				break
			}
		}
	}
	idList = make([]string, 0, len(ask))
	for id := range ask {
		if id != "" {
			idList = append(idList, id)
		}
	}
	return idList, mentioned
}

// followupAsked returns, each once and among the principals people still
// holds, the authors of msgs (whose trigger right is asked) and the agents
// they mention first (whose read right is asked).
func followupAsked(msgs map[string]messaging.Message, people map[string]identity.Principal, mentioned map[string]string) (authors, agents []identity.Principal) {
	seenAuthor, seenAgent := map[string]bool{}, map[string]bool{}
	for _, m := range msgs {
		if p, ok := people[m.Author.ID]; ok && !seenAuthor[p.ID] {
			seenAuthor[p.ID] = true
			authors = append(authors, p)
		}
		if a, ok := people[mentioned[m.ID]]; ok && !seenAgent[a.ID] {
			seenAgent[a.ID] = true
			agents = append(agents, a)
		}
	}
	return authors, agents
}

// trigger locates a triggering message.
type trigger struct {
	messageID, threadID string
	seq                 int64
	// traceparent is the trace context of the request that posted the
	// message; empty for a follow-up promoted later, whose posting
	// request is over (the finishing run's trace is not the follow-up's).
	traceparent string
}

// startRunFor creates a queued run of agent in thread t (whose row lock the
// unit holds, or which it created), joining the current session of an
// operator run, with its anchor and the events that announce it.
func (s *Service) startRunFor(ctx context.Context, agentID string, guest bool, t chat.Thread, channelID string, m trigger, by string) ([]events.Event, error) {
	now := s.st.clock.Now()
	messageID := m.messageID
	r := Run{ID: ids.New(), ThreadID: t.ID, AgentID: agentID, TriggerKind: domain.TriggerKindMessage, TriggeringMessageID: messageID,
		TriggerThreadID: m.threadID, TriggerSeq: m.seq, Traceparent: m.traceparent,
		TriggeredBy: by, State: domain.RunQueued, Version: 1, QueuedAt: now, LastActivityAt: now, SessionMode: domain.SessionMode(nil)}
	if !guest {
		sess, err := s.st.currentSession(ctx, t.ID, agentID)
		if errors.Is(err, ErrNotFound) {
			sess = Session{ID: ids.New(), ThreadID: t.ID, AgentID: agentID, IsCurrent: true, CreatedAt: now}
			if err := s.st.insertSession(ctx, sess); err != nil {
				return nil, problem.Internal("runs.startRunFor: insert session", fmt.Errorf("create session: %w", err))
			}
		} else if err != nil {
			return nil, problem.Internal("runs.startRunFor: read current session", err)
		}
		n, err := s.st.sessionRuns(ctx, sess.ID)
		if err != nil {
			return nil, problem.Internal("runs.startRunFor: count session runs", err)
		}
		r.SessionID = sess.ID
		r.SessionMode = domain.SessionMode(&domain.SessionFacts{Started: sess.Started, Bound: sess.ExternalRef != "", Runs: n})
	}
	if err := s.st.insertRun(ctx, r); err != nil {
		return nil, problem.Internal("runs.startRunFor: insert run", err)
	}
	agents, err := s.ident.GetMany(ctx, []string{agentID})
	if err != nil {
		return nil, problem.Internal("runs.startRunFor: read agent", err)
	}
	anchor, anchorEv, err := s.msgW.AppendAnchor(ctx, t, channelID, agents[agentID].Ref(), r.ID)
	if err != nil {
		return nil, problem.Internal("runs.startRunFor: append anchor", err)
	}
	if err := s.st.insertLive(ctx, r.ID, anchor.ID); err != nil {
		return nil, problem.Internal("runs.startRunFor: insert live box", err)
	}
	r.Attempt = 1
	return []events.Event{s.stateChanged(r, channelID), anchorEv, invocationEvent(r, channelID)}, nil
}

// invocationEvent is the agent.invocation of r's current attempt.
func invocationEvent(r Run, channelID string) events.Event {
	session := map[string]any{"mode": string(r.SessionMode)}
	if r.SessionID != "" {
		session["id"] = r.SessionID
	}
	payload := map[string]any{"run_id": r.ID, "thread_id": r.ThreadID, "channel_id": channelID, "message_id": r.TriggeringMessageID,
		"session": session, "attempt": r.Attempt}
	if r.Traceparent != "" {
		// The adapter's first call of the run (its context read) comes
		// before it reads the run itself: the invocation carries the
		// run's trace context for it.
		payload["traceparent"] = r.Traceparent
	}
	return events.Event{AgentID: r.AgentID, RunID: r.ID, MessageID: r.TriggeringMessageID, Type: events.AgentInvocation, Payload: payload}
}

// stateChanged is the run.state_changed client event of r.
func (s *Service) stateChanged(r Run, channelID string) events.Event {
	return events.Event{Type: events.RunStateChanged, ChannelID: channelID, ThreadID: r.ThreadID, Payload: RunPayload(r)}
}

// RunPayload renders r in the REST shape for events (ids only, no content).
func RunPayload(r Run) map[string]any {
	p := map[string]any{"id": r.ID, "thread_id": r.ThreadID, "agent_id": r.AgentID, "state": string(r.State), "version": r.Version,
		"trigger_kind": string(r.TriggerKind), "queued_at": r.QueuedAt.UTC().Format("2006-01-02T15:04:05.000Z07:00")}
	if r.TriggeringMessageID != "" {
		p["triggering_message_id"] = r.TriggeringMessageID
	}
	if r.EndReason != "" {
		p["end_reason"] = r.EndReason
	}
	if r.CancelRequested {
		p["cancel_requested"] = true
	}
	return p
}

// addFollowup makes message a pending follow-up of run, tells the agent, and
// brings a waiting run back to running.
func (s *Service) addFollowup(ctx context.Context, run Run, messageID, channelID string) ([]events.Event, error) {
	if err := s.st.insertFollowup(ctx, run.ID, messageID, s.st.clock.Now()); err != nil {
		return nil, problem.Internal("runs.addFollowup", fmt.Errorf("add follow-up: %w", err))
	}
	evs := []events.Event{{AgentID: run.AgentID, RunID: run.ID, MessageID: messageID, Type: events.AgentFollowup,
		Payload: map[string]any{"run_id": run.ID, "message_id": messageID}}}
	if run.State == domain.RunWaitingInput {
		r, err := s.transition(ctx, run, domain.RunRunning, "")
		if err != nil {
			return nil, err
		}
		evs = append(evs, s.stateChanged(r, channelID))
	}
	return evs, nil
}

// transition moves run to state to in the transaction of ctx, raising its version and its
// activity time. Ending states set ended_at and end_reason.
func (s *Service) transition(ctx context.Context, run Run, to domain.RunState, reason string) (Run, error) {
	now := s.st.clock.Now()
	run.State, run.Version, run.LastActivityAt = to, run.Version+1, now
	switch to {
	case domain.RunRunning:
		if run.StartedAt == nil {
			run.StartedAt = &now
		}
	case domain.RunCompleted, domain.RunFailed, domain.RunCancelled:
		run.EndedAt, run.EndReason = &now, reason
	case domain.RunQueued, domain.RunWaitingInput:
		// Neither starts nor ends the run.
	}
	if !to.Active() || to == domain.RunQueued {
		// A claim never survives the run's end, nor a return to queued.
		run.Holder, run.LeaseExpiresAt = "", nil
	}
	if err := s.st.writeRun(ctx, run); err != nil {
		return Run{}, problem.Internal("runs.transition", fmt.Errorf("run transition: %w", err))
	}
	return run, nil
}

// checkAnswer checks the run an agent's message names
// (docs/design/replies.md#answer-check).
// The run row is taken FOR SHARE while messaging holds the thread row: an
// end of the run (which locks the thread, then the run) waits for this
// answer's commit or the answer sees the end state, so every answer stored
// with a run_id commits before its run's end event. The run is not changed.
func (s *Service) checkAnswer(ctx context.Context, p *messaging.Posted) error {
	// A holder that is no holder name is bad input, whichever face sent
	// it, before any run is looked at.
	if err := Holder(p.Holder).check(); err != nil {
		return err
	}
	var run domain.AnswerRun
	var full Run
	found := true
	if !ids.Valid(p.RunID) {
		found = false
	} else {
		var err error
		run, full, err = s.st.answerRun(ctx, p.RunID)
		if errors.Is(err, ErrNotFound) {
			found = false
		} else if err != nil {
			return problem.Internal("runs.checkAnswer: read answer run", err)
		}
	}
	verdict := domain.AnswerVerdict(run, found, p.Author.ID, p.Thread.ID, p.Holder)
	if verdict == nil || errors.Is(verdict, domain.ErrAnswerRunClaimed) {
		// An own active run: before the claim, whether its person may still
		// ask for it now (trigger_revoked wins over run_claimed). Nothing
		// is stored either way.
		lost, err := s.triggerLostNow(ctx, full)
		if err != nil {
			return problem.Internal("runs.checkAnswer: check trigger lost", err)
		}
		if lost {
			return errTriggerRevoked()
		}
	}
	switch err := verdict; {
	case err == nil:
		return s.acceptAnswer(ctx, p, run.ID)
	case errors.Is(err, domain.ErrAnswerRunNotActive):
		return problem.Newf(problem.Conflict, "run_not_active", "the run has ended; send the message again without run_id")
	case errors.Is(err, domain.ErrAnswerRunClaimed):
		return errClaimed()
	default:
		return problem.Invalid(problem.FieldError{Pointer: "/run_id", Code: "run_mismatch", Detail: messaging.RunMismatchDetail})
	}
}

// acceptAnswer records p's message as an answer in run runID, which the
// answer check accepted: it renews the run's lease, stores the answer and
// empties the live box of a text answer.
func (s *Service) acceptAnswer(ctx context.Context, p *messaging.Posted, runID string) error {
	// An answer is a call of the holder on the run: it renews the lease
	// (the run row is locked FOR SHARE; this unit holds the thread row,
	// so no other unit waits on it for the upgrade).
	if err := s.st.renewClaimedLease(ctx, runID, s.st.clock.Now().Add(s.timeouts.Lease)); err != nil {
		return problem.Internal("runs.checkAnswer: renew lease", err)
	}
	if err := s.st.recordAnswer(ctx, runID, p.Message.ID, p.ClientMsgID, s.st.clock.Now()); err != nil {
		return problem.Internal("runs.checkAnswer: record answer", err)
	}
	// The answer holds the text now: the box drops it in the answer's
	// commit, so no reader shows it twice.
	if p.Message.Kind == messaging.KindText {
		if err := s.live.Publish(ctx, livehub.Msg{ID: ids.New(), Run: runID, Kind: string(livebox.Answered), At: s.st.clock.Now().UnixMicro()}); err != nil {
			return problem.Internal("runs.checkAnswer: publish answered", err)
		}
	}
	return nil
}
