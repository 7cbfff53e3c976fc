package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures an Adapter. Client and Model are required.
type Config struct {
	// Server is the server's address (https://chat.example.com) and Token
	// the agent's token, from which New and Run make Client.
	Server, Token string
	// Client talks to the server with the agent's token; when it is nil,
	// New and Run make it from Server and Token (NewClient's defaults).
	Client *Client
	// Model answers the rendered contexts: New needs it. Run answers with
	// its Handler instead and refuses a Config that sets Model, so that
	// no field is ignored without a word.
	Model Model
	// Logger receives ids, event types, outcomes and error codes, never
	// content, handles, display names or tokens
	// (the privacy rules of the model design). nil
	// discards.
	Logger *slog.Logger
	// Transport is how the stream is read: TransportAuto (the default:
	// WebSocket, falling back to the long poll where there is none),
	// TransportPoll (the agentEvents long poll) or TransportWS (the
	// agentEvents subscription over WebSocket). All hand the loop the same
	// pages.
	Transport string
	// PollWait is the long-poll wait of agentEvents (default 25 s; the
	// server caps it at events.poll_max_wait and counts whole seconds).
	PollWait time.Duration
	// After is the cursor to start from; "" continues after the position
	// the agent acknowledged last (the server stores it), so a restarted
	// adapter gets again exactly what it had not handled; "0" reads the
	// stream from its beginning.
	After string
	// Holder names this adapter process in its claims on runs (startRun,
	// renewRun); default a random id per process. Several processes of one
	// agent token each need their own holder: the server lets one of them
	// hold a run at a time.
	Holder string
	// Once makes Run return after the first invocation it handled (started)
	// has ended; later invocations seen meanwhile are not handled.
	Once bool
	// MaxAttempts bounds the attempts of one idempotent call on temporary
	// errors (default 5).
	MaxAttempts int
	// RetryBackoff is the first pause between attempts (default 500 ms);
	// it doubles up to 10 s, or follows the server's Retry-After.
	RetryBackoff time.Duration
	// FollowUpRounds bounds how often, per run, the model is asked again
	// for follow-ups that arrived while it worked (default 3; negative:
	// never). After each answer of the model, before posting, the adapter
	// reads the run context again; with new follow-ups it asks again, with
	// all of them, until none came or the rounds are used up. Then it posts
	// what it has; follow-ups the model has not seen stay pending and the
	// server promotes them to the next run.
	FollowUpRounds int
	// DeliveryWait bounds the wait, before posting, for the
	// acknowledgement that delivers the follow-ups the answer covers
	// (default 2 min). The position waits for events of other runs (see
	// acks); when it does not get there in time the answer is posted
	// anyway and the log says which follow-ups the server may answer again
	// in a next run.
	DeliveryWait time.Duration
	// OnRunDone, when set, is called once per handled run after the
	// adapter is done with it (from the run's goroutine).
	OnRunDone func(RunReport)
	// MaxConcurrent bounds how many runs the model (or the handler of Run)
	// works on at once (0: no bound). Runs beyond it are claimed and
	// their leases kept while they wait for their turn, so the stream,
	// cancellations and acknowledgements go on meanwhile.
	MaxConcurrent int
	// Outbox, when set, is a folder where every answer is written before
	// it is sent and removed once the server has it (or refused it for
	// good); answers left there by a process that died while sending are
	// sent again, under the same key, when Run starts (OpenOutbox).
	Outbox string
	// Live writes what the model streams (Stream, Task.Stream) into the
	// run's live box, so every reader of the thread sees the answer grow;
	// the answer replaces it. A person's stop marks the box done with
	// StoppedStatus. Off by default; the reference adapter turns it on.
	Live bool
	// LiveInterval is the least time between two updates of a live box
	// (default 100 ms): streamed pieces are sent together.
	LiveInterval time.Duration
	// ReadFiles reads, before the model is asked, the text of every file
	// of the run's context whose text is READY (once per file and run) and
	// appends it to the prompt as DATA blocks with trust UNVERIFIED
	// (WithFileTexts); a text read lowers the run's in-play trust to
	// UNVERIFIED. Off by default: a Handler reads what it needs with
	// Task.FileText. The reference adapter turns it on.
	ReadFiles bool
}

// RunReport says how the adapter left one run.
type RunReport struct {
	RunID    string
	ThreadID string
	// Outcome is what the adapter's finishRun set; "" when the run had
	// already ended without it (for example by run.stall_timeout).
	Outcome Outcome
	// AnswerMessageID is the id of the posted answer; "" when none was
	// posted.
	AnswerMessageID string
	// AnswerKey is the clientMsgId of the answer (AnswerKey of the last
	// request it covers); "" when the model gave none.
	AnswerKey string
	// Rounds counts the model's answers for the run: 1, plus one per round
	// for follow-ups that arrived while it worked.
	Rounds int
	// Dropped says why a reply the model gave was not posted (the run's
	// end reason or state, such as trigger_revoked or cancelled, or
	// answered when the request had an answer already); "" otherwise.
	Dropped string
	// Err is why the run did not complete; nil on success.
	Err error
}

// Adapter is the reference agent adapter: it follows the agent's event
// stream and answers every invocation with its Model, using only the public
// GraphQL API. Per invocation it reads the run context, starts the run,
// renders the context (Render, with a fresh boundary), asks the model,
// posts the answer into the run's thread naming the run, and finishes the
// run. Runs are answered concurrently; the stream keeps being read
// meanwhile, so a cancel request reaches a run whose model is still
// working.
//
// Several adapter processes may serve one agent token: each reads the
// whole stream, but only the one whose startRun claims a run (its holder)
// answers it; the others skip it (run_claimed). While the model works the
// holder renews its lease; a process that dies stops renewing, the server
// puts the run back to queued with the next attempt, and another process
// takes it over. Every answer's clientMsgId names the run and the request
// it answers (AnswerKey), and a takeover reads the run's answers first, so
// no request gets a second answer.
//
// Follow-ups that arrive while the model works reach it: before posting,
// the adapter reads the context again and asks the model again with the
// new ones (Config.FollowUpRounds). The stream is acknowledged as it is
// handled, but never past a follow-up the model has not seen (see acks),
// so a follow-up is answered by its run or promoted to the next, never both
// and never neither. A restarted process continues behind the acknowledged
// position.
type Adapter struct {
	cfg    Config
	box    *Outbox // nil without Config.Outbox
	log    *slog.Logger
	mu     sync.Mutex
	cursor string
	active map[string]*activeRun
	wg     sync.WaitGroup
	acks   *acks
	// ackMu makes acknowledgements one at a time (the acknowledger and
	// the flush when Run ends).
	ackMu sync.Mutex
}

// activeRun is a run this process has started and not yet left.
type activeRun struct {
	cancelModel     context.CancelFunc
	cancelRequested atomic.Bool
	// lost is set when the server says this process no longer holds the
	// run (its lease lapsed and another process took it over).
	lost atomic.Bool
	// ended is set once the server said the run has ended.
	ended atomic.Bool
	// approver asks the run's person (Ask, RunTool) and receives the
	// decisions of the stream.
	approver *approver
}

// NewHolder returns a fresh holder id for one adapter process.
func NewHolder() string { return "adapter-" + NewBoundary()[:16] }

// New checks cfg and returns an adapter that answers runs with cfg.Model.
// Every field of Config has the same meaning and default here and in Run.
//
// Errors: Model is nil; Client is nil and Server and Token make none; an
// unknown Transport; an Outbox folder that cannot be opened.
func New(cfg Config) (*Adapter, error) {
	if cfg.Model == nil {
		return nil, errors.New("agent: Config needs a Model (or use Run with a Handler)")
	}
	if err := cfg.connect(); err != nil {
		return nil, err
	}
	switch cfg.Transport {
	case "":
		cfg.Transport = TransportAuto
	case TransportPoll, TransportWS, TransportAuto:
	default:
		return nil, fmt.Errorf("adapter: unknown transport %q (poll, ws or auto)", cfg.Transport)
	}
	cfg.setDefaults()
	if cfg.MaxConcurrent > 0 {
		cfg.Model = limitedModel{inner: cfg.Model, slots: make(chan struct{}, cfg.MaxConcurrent)}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Adapter{cfg: cfg, log: log, cursor: cfg.After, active: map[string]*activeRun{}, acks: newAcks()}
	if cfg.Outbox != "" {
		box, err := OpenOutbox(cfg.Outbox)
		if err != nil {
			return nil, err
		}
		a.box = box
	}
	return a, nil
}

// connect makes cfg.Client from Server and Token when it is nil.
func (cfg *Config) connect() error {
	if cfg.Client != nil {
		return nil
	}
	if cfg.Token == "" {
		return errors.New("agent: Config needs a Token (or a Client)")
	}
	c, err := NewClient(cfg.Server, cfg.Token, ClientOptions{})
	if err != nil {
		return err
	}
	cfg.Client = c
	return nil
}

// setDefaults fills in the defaults Config documents for the timing,
// retry, holder and follow-up fields left unset.
func (cfg *Config) setDefaults() {
	if cfg.PollWait <= 0 {
		cfg.PollWait = 25 * time.Second
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 5
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 500 * time.Millisecond
	}
	if cfg.Holder == "" {
		cfg.Holder = NewHolder()
	}
	if cfg.FollowUpRounds == 0 {
		cfg.FollowUpRounds = 3
	}
	if cfg.DeliveryWait <= 0 {
		cfg.DeliveryWait = 2 * time.Minute
	}
}

// Cursor returns the cursor after the last event the adapter has read;
// persist it to resume a later adapter there (Config.After).
func (a *Adapter) Cursor() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cursor
}

func (a *Adapter) setCursor(c string) {
	if c == "" {
		return
	}
	a.mu.Lock()
	a.cursor = c
	a.mu.Unlock()
}

// minPollInterval keeps a loop whose polls come back empty at once (a
// server with a short events.poll_max_wait, or one shutting down) from
// spending its rate limit.
const minPollInterval = time.Second

// stopTimeout bounds the finishRun an adapter sends for its runs when it
// stops.
const stopTimeout = 10 * time.Second

// Run follows the stream until ctx ends (or, with Once, until the first
// handled run has ended). It first proves the token with viewer and
// refuses a principal that is not an agent. Poll failures are retried with
// backoff; runs in flight when ctx ends are finished as failed with reason
// adapter_stopped, so they do not wait for run.stall_timeout.
//
// Errors: the token is refused or not an agent's, the stream refuses the
// cursor; ctx.Err() when ctx ended. nil after a complete Once run.
func (a *Adapter) Run(ctx context.Context) error {
	if err := a.proveToken(ctx); err != nil {
		return err
	}
	if a.box != nil {
		// Answers a process before this one wrote and did not see
		// confirmed go first, before any run of this process.
		a.replayOutbox(ctx)
	}

	// The loop context ends the polls; runs use ctx, so that in Once mode
	// ending the loop does not end the run that ends it.
	loop, stopLoop := context.WithCancel(ctx)
	defer stopLoop()
	next, closeStream := a.pager()
	defer closeStream()
	ackerDone := make(chan struct{})
	go func() {
		defer close(ackerDone)
		a.ackLoop(loop)
	}()
	defer func() {
		// Runs that ended while the loop stopped released their
		// follow-ups: acknowledge what is dealt with, so that the next
		// process does not read it again.
		stopLoop()
		<-ackerDone
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		defer cancel()
		a.ackOnce(fctx, false)
	}()
	if err := a.follow(loop, ctx, next, stopLoop); err != nil {
		return err
	}
	a.wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	return nil
}

// proveToken asks the server who the token belongs to and refuses a
// principal that is not an agent.
func (a *Adapter) proveToken(ctx context.Context) error {
	var me Principal
	err := a.retry(ctx, "Viewer", func(ctx context.Context) (err error) {
		me, err = a.cfg.Client.Viewer(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("adapter: prove the token: %w", err)
	}
	if me.Kind != PrincipalKindAgent {
		return fmt.Errorf("adapter: the token belongs to a principal of kind %s, not to an agent", strings.ToLower(string(me.Kind)))
	}
	a.log.Info("adapter started", "agent_id", me.ID, "once", a.cfg.Once, "holder", a.cfg.Holder)
	return nil
}

// pageReader reads the page of the agent stream after a cursor.
type pageReader func(ctx context.Context, after string) (EventPage, error)

// pager returns how Run reads the stream, as Config.Transport says, and
// what closes it when Run ends. With TransportAuto it reads over
// WebSocket until the server turns out to have none, and by long poll
// from then on.
func (a *Adapter) pager() (next pageReader, closeStream func()) {
	poll := func(ctx context.Context, after string) (EventPage, error) {
		return a.cfg.Client.AgentEvents(ctx, after, a.cfg.PollWait)
	}
	if a.cfg.Transport != TransportWS && a.cfg.Transport != TransportAuto {
		return poll, func() {}
	}
	stream := a.cfg.Client.AgentStream()
	polling := false
	next = func(ctx context.Context, after string) (EventPage, error) {
		if polling {
			return poll(ctx, after)
		}
		page, err := stream.Next(ctx, after, a.cfg.PollWait)
		if a.cfg.Transport == TransportAuto && errors.Is(err, ErrNoWebSocket) {
			a.log.Warn("no WebSocket at the server: reading the stream by long poll from now on", errAttrs(err)...)
			polling = true
			return poll(ctx, after)
		}
		return page, err
	}
	return next, stream.Close
}

// follow reads the stream with next until loop ends and hands every event
// to handle (runs use runCtx). Poll failures are retried with backoff;
// it returns an error only for a failure that retrying cannot help, after
// the runs in flight have ended.
func (a *Adapter) follow(loop, runCtx context.Context, next pageReader, stopLoop context.CancelFunc) error {
	claimed := false
	backoff := a.cfg.RetryBackoff
	for loop.Err() == nil {
		began := time.Now()
		page, err := next(loop, a.Cursor())
		if err != nil {
			if loop.Err() != nil {
				break
			}
			if pollHopeless(err) {
				stopLoop()
				a.wg.Wait()
				return fmt.Errorf("adapter: poll the agent stream: %w", err)
			}
			backoff = a.pollPause(loop, err, backoff)
			continue
		}
		backoff = a.cfg.RetryBackoff
		a.takePage(loop, runCtx, page, &claimed, stopLoop)
		if len(page.Events) == 0 {
			sleep(loop, minPollInterval-time.Since(began))
		}
	}
	return nil
}

// pollHopeless reports whether a failed poll cannot succeed when
// repeated: a revoked token, a token that is not an agent's, or a cursor
// the server does not know.
func pollHopeless(err error) bool {
	switch ErrorCode(err) {
	case "unauthorized", "forbidden", "validation_failed":
		return true
	default:
		return false
	}
}

// pollPause waits after the failed poll err for backoff, or for the
// server's Retry-After when that is longer, and returns the backoff of the
// next failure.
func (a *Adapter) pollPause(loop context.Context, err error, backoff time.Duration) time.Duration {
	pause := backoff
	var e *Error
	if errors.As(err, &e) && e.RetryAfter > pause {
		pause = e.RetryAfter
	}
	a.log.Warn("poll failed", append(errAttrs(err), "retry_in", pause.String())...)
	sleep(loop, pause)
	return min(backoff*2, 30*time.Second)
}

// takePage handles the events of page in stream order, enters each into
// the acknowledgement ledger and moves the cursor past them.
func (a *Adapter) takePage(loop, runCtx context.Context, page EventPage, claimed *bool, stopLoop context.CancelFunc) {
	for _, ev := range page.Events {
		dealt := a.handle(loop, runCtx, ev, claimed, stopLoop)
		// The ledger decides how far the stream may be acknowledged:
		// up to the first event not dealt with (an invocation --once
		// leaves to a later process, a follow-up the model has not
		// seen).
		a.acks.add(ev, dealt, followupRef(ev), time.Now())
		a.setCursor(ev.Seq)
	}
	a.setCursor(page.NextAfter)
	a.acks.poke()
}

// followupRef returns the run and message of an agent.followup event (the
// zero RunRef for other events).
func followupRef(ev AgentEvent) RunRef {
	var ref RunRef
	if ev.Type == EventFollowup {
		_ = json.Unmarshal(ev.Payload, &ref)
	}
	return ref
}

// ackEvery is how often the acknowledger acts without being asked: it
// repeats a failed acknowledgement and checks the runs of other processes
// whose follow-ups hold the position.
const ackEvery = time.Second

// blockerCheckEvery is how often the run of a follow-up that holds the
// position, in a run this process does not hold, is read to see whether it
// ended.
const blockerCheckEvery = 3 * time.Second

// ackLoop acknowledges the stream as far as the ledger allows, whenever
// the ledger changes and every ackEvery, until ctx ends.
func (a *Adapter) ackLoop(ctx context.Context) {
	t := time.NewTicker(ackEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.acks.kick:
		case <-t.C:
		}
		a.ackOnce(ctx, true)
	}
}

// ackOnce sends one acknowledgement up to the ledger's target when it
// moved. With check, a follow-up of another process's run that holds the
// position has its run read when due: an ended run releases it, and a run
// still active makes the acknowledgement go out even unmoved, because its
// answer says whether the other process's acknowledgement has passed the
// follow-up meanwhile. A failed acknowledgement only means that it is
// repeated, or that a restart reads the events again, which every handler
// tolerates.
func (a *Adapter) ackOnce(ctx context.Context, check bool) {
	a.ackMu.Lock()
	defer a.ackMu.Unlock()
	learn := false
	head, report, due := a.acks.head(time.Now(), blockerCheckEvery)
	if report {
		a.log.Debug("acknowledgement held at a follow-up its run's model has not seen", "seq", head.seq, "run_id", head.runID, "message_id", head.message)
	}
	if check && due {
		state, err := a.cfg.Client.runState(ctx, head.runID)
		switch {
		case ErrorCode(err) == "not_found" || (err == nil && !state.Active()):
			a.acks.runEnded(head.runID)
		case err == nil:
			learn = true
		}
	}
	upTo, last := a.acks.target(), a.acks.last()
	if upTo == "" || upTo == last {
		if !learn {
			return
		}
		upTo = last
		if upTo == "" {
			// A process that never acknowledged learns the stored position
			// too: acknowledging the start of the stream changes nothing
			// and answers it. Without it a fresh process waited for a
			// follow-up another process had delivered long ago.
			upTo = "0"
		}
	}
	pos, err := a.cfg.Client.AckAgentEvents(ctx, upTo)
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("ack failed", errAttrs(err)...)
		}
		return
	}
	a.acks.acked(upTo, pos)
}

// handle acts on one event. Invocations are prepared here, in stream
// order (context read, then start), and answered in a goroutine of their
// own; cancel requests and follow-ups only touch the run's record. It
// reports whether the event is dealt with (false only for an invocation
// that --once leaves to a later process).
func (a *Adapter) handle(loop, runCtx context.Context, ev AgentEvent, claimed *bool, stopLoop context.CancelFunc) bool {
	log := a.log.With("seq", ev.Seq, "type", ev.Type)
	switch ev.Type {
	case EventInvocation:
		return a.handleInvocation(loop, runCtx, log, ev, claimed, stopLoop)
	case EventFollowup:
		// The run's goroutine reads the follow-up's content from the run
		// context after the model's answer; the ledger keeps the
		// acknowledgement in front of the event until the model has seen
		// it (acks).
		ref := followupRef(ev)
		log.Debug("follow-up noted", "run_id", ref.RunID, "message_id", ref.MessageID, "held_here", a.tracked(ref.RunID) != nil)
	case EventApprovalDecided:
		a.handleDecision(log, ev)
	case EventCancelRequested:
		a.handleCancel(loop, log, ev)
	default:
		log.Debug("event type not handled")
	}
	return true
}

// handleInvocation prepares the run of an invocation (context read, then
// start) and has it answered in a goroutine of its own (launch). It
// reports whether the event is dealt with: false only when --once has a
// run already and leaves this one to a later process. claimed says
// whether this loop has started a run.
func (a *Adapter) handleInvocation(loop, runCtx context.Context, log *slog.Logger, ev AgentEvent, claimed *bool, stopLoop context.CancelFunc) bool {
	var inv Invocation
	if err := json.Unmarshal(ev.Payload, &inv); err != nil || inv.RunID == "" || inv.ThreadID == "" {
		log.Error("invocation payload without run or thread id")
		return true
	}
	log = log.With("run_id", inv.RunID, "thread_id", inv.ThreadID)
	if a.cfg.Once && *claimed {
		log.Info("invocation not handled: --once has a run already")
		return false
	}
	if a.tracked(inv.RunID) != nil {
		return true
	}
	// Every call for the run continues the run's trace (the one of
	// the message that started it), from the context read on.
	rc, started, ok := a.prepare(WithTraceparent(loop, inv.Traceparent), log, inv)
	if !ok {
		return true
	}
	*claimed = true
	a.launch(runCtx, log, inv, rc, started, stopLoop)
	return true
}

// launch records a started run as active and answers it in a goroutine of
// its own, which leaves the record, releases the run's follow-ups in the
// ledger, reports the run (Config.OnRunDone) and, with Once, stops the
// loop when the run is done.
func (a *Adapter) launch(runCtx context.Context, log *slog.Logger, inv Invocation, rc RunContext, started RunInfo, stopLoop context.CancelFunc) {
	tp := inv.Traceparent
	if started.Traceparent != nil {
		tp = *started.Traceparent
	}
	runCtx = WithTraceparent(runCtx, tp)
	modelCtx, cancelModel := context.WithCancel(runCtx)
	run := &activeRun{cancelModel: cancelModel, approver: newApprover(a.cfg.Client, inv.RunID, a.cfg.Holder)}
	a.mu.Lock()
	a.active[inv.RunID] = run
	a.mu.Unlock()
	// Tracked before the next event is handled: the run's follow-up
	// events, which come after its invocation, wait for its model.
	a.acks.track(inv.RunID)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer cancelModel()
		rep := a.answer(runCtx, modelCtx, log, run, inv, rc, started)
		a.mu.Lock()
		delete(a.active, inv.RunID)
		a.mu.Unlock()
		a.acks.release(inv.RunID, run.ended.Load())
		if a.cfg.OnRunDone != nil {
			a.cfg.OnRunDone(rep)
		}
		if a.cfg.Once {
			stopLoop()
		}
	}()
}

// handleDecision hands the decision of an approval to the approver of its
// run, when this process holds the run.
func (a *Adapter) handleDecision(log *slog.Logger, ev AgentEvent) {
	var d struct {
		RunID      string `json:"run_id"`
		ApprovalID string `json:"approval_id"`
		OptionID   string `json:"option_id"`
		State      string `json:"state"`
	}
	if err := json.Unmarshal(ev.Payload, &d); err != nil || d.RunID == "" {
		log.Error("approval payload without run id")
		return
	}
	if run := a.tracked(d.RunID); run != nil {
		ap := Approval{ID: d.ApprovalID, State: strings.ToUpper(d.State)}
		if d.OptionID != "" {
			ap.Option = &ApprovalOption{ID: d.OptionID}
		}
		run.approver.decided(d.ApprovalID, ap)
	}
}

// handleCancel stops the model of a run this process holds when a cancel
// is requested; the run's goroutine then confirms the cancel. The cancel
// of a run this process does not hold is confirmed here.
func (a *Adapter) handleCancel(loop context.Context, log *slog.Logger, ev AgentEvent) {
	var ref RunRef
	if err := json.Unmarshal(ev.Payload, &ref); err != nil || ref.RunID == "" {
		log.Error("cancel payload without run id")
		return
	}
	log = log.With("run_id", ref.RunID)
	if run := a.tracked(ref.RunID); run != nil {
		run.cancelRequested.Store(true)
		run.cancelModel()
		log.Info("cancel requested for a run in progress")
		return
	}
	a.confirmUntrackedCancel(loop, log, ref.RunID)
}

func (a *Adapter) tracked(runID string) *activeRun {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.active[runID]
}

// prepare reads the run's context and then starts the run: the adapter
// commits to a run only once it holds what it needs to answer (the context
// is read before run.start, the trust design: who may read it). It
// returns the context and the started run (with its answers); ok is false
// when the run is skipped.
func (a *Adapter) prepare(ctx context.Context, log *slog.Logger, inv Invocation) (rc RunContext, started RunInfo, ok bool) {
	err := a.retry(ctx, "RunContext", func(ctx context.Context) (err error) {
		rc, err = a.cfg.Client.RunContext(ctx, inv.RunID)
		return err
	})
	if ErrorCode(err) == "not_found" {
		// An own run that is no longer active answers not_found, like an
		// unknown one: an old invocation, read again from the stream.
		log.Info("invocation skipped: the run is no longer active")
		return rc, started, false
	}
	if err != nil {
		log.Error("run context unreadable", errAttrs(err)...)
		a.finish(ctx, log, nil, inv.RunID, OutcomeFailed, "context_unavailable")
		return rc, started, false
	}
	err = a.retry(ctx, "StartRun", func(ctx context.Context) (err error) {
		started, err = a.cfg.Client.StartRun(ctx, inv.RunID, a.cfg.Holder)
		return err
	})
	switch ErrorReason(err) {
	case "run_not_active":
		log.Info("invocation skipped: the run ended before its start")
		return rc, started, false
	case "run_claimed":
		log.Info("invocation skipped: another adapter process holds the run")
		return rc, started, false
	case endReasonRevoked:
		// The person who asked lost trigger; the server cancels the run.
		log.Info("invocation skipped: the run's person lost trigger")
		return rc, started, false
	}
	if err != nil {
		log.Error("run start refused", errAttrs(err)...)
		a.finish(ctx, log, nil, inv.RunID, OutcomeFailed, "start_failed")
		return rc, started, false
	}
	if started.LeaseExpiresAt != nil {
		rc.leaseUntil = *started.LeaseExpiresAt
	}
	log.Info("run started", "session_mode", strings.ToLower(inv.Session.Mode), "elements", len(rc.Elements()), "attempt", inv.Attempt,
		"answers", len(started.Answers), trustAttr(rc.TrustSummary))
	return rc, started, true
}

// minRenewInterval keeps renewals of a very short lease from flooding the
// server.
const minRenewInterval = 200 * time.Millisecond

// keepLease renews the claim on the run while the model works: every third
// of the lease the server granted. When the server says another process
// holds the run now (run_claimed), or the run ended in a way that took its
// request away (run_not_active, then a read of the run), it marks the run
// lost and stops the model; when it says the run's person lost trigger
// (trigger_revoked) it stops the model and has the cancel confirmed. It
// returns then, or when ctx ends.
func (a *Adapter) keepLease(ctx context.Context, log *slog.Logger, run *activeRun, runID string, until time.Time) {
	every := time.Until(until) / 3
	if every < minRenewInterval {
		every = minRenewInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := a.cfg.Client.RenewRun(ctx, runID, a.cfg.Holder)
		switch reason := ErrorReason(err); {
		case err == nil:
		case reason == endReasonRevoked:
			// The run's person lost trigger: the request is gone, and the
			// run waits for this holder to confirm its cancel.
			log.Info("the run's person lost trigger while the model worked")
			run.cancelRequested.Store(true)
			run.cancelModel()
			return
		case reason == "run_not_active":
			// The run ended without this holder. After an ending that left
			// the request standing (a timeout) the model goes on, and its
			// answer goes out without run id (afterEnd); after any other
			// the answer would be dropped, so the model stops now.
			r, rerr := a.cfg.Client.Run(ctx, runID)
			endReason := ""
			if rerr == nil && r.EndReason != nil {
				endReason = *r.EndReason
			}
			if rerr == nil && requestStands(r.State, endReason) {
				log.Info("the run ended while the model worked; its answer will go out without run id", "state", strings.ToLower(string(r.State)), "end_reason", endReason)
				return
			}
			log.Info("the run ended while the model worked; stopping the model", "state", strings.ToLower(string(r.State)), "end_reason", endReason)
			run.ended.Store(true)
			run.lost.Store(true)
			run.cancelModel()
			return
		case reason == "run_claimed":
			log.Warn("claim lost while the model worked", "reason", reason)
			run.lost.Store(true)
			run.cancelModel()
			return
		case ctx.Err() == nil:
			// A temporary failure: the next tick tries again within the lease.
			log.Warn("lease renewal failed", errAttrs(err)...)
		}
	}
}

// answer asks the model, posts the answer and finishes the run. ctx is the
// adapter's; modelCtx also ends when a person cancels the run. started is
// the run as startRun gave it, with the answers earlier holders posted.
//
// After every answer of the model, and before posting, it reads the run
// context again: follow-ups that came meanwhile go to the model in a new
// round (with everything else, so that its answer covers them all), up to
// Config.FollowUpRounds rounds. The final answer covers the trigger and the
// follow-ups of its prompt and is posted under the key of the last of
// them, once those follow-ups are delivered.
func (a *Adapter) answer(ctx, modelCtx context.Context, log *slog.Logger, run *activeRun, inv Invocation, rc RunContext, started RunInfo) RunReport {
	ra := &runAnswer{inv: inv, log: log, run: run, began: time.Now(), rep: RunReport{RunID: inv.RunID, ThreadID: inv.ThreadID}}
	leaseCtx, stopLease := context.WithCancel(modelCtx)
	defer stopLease()
	go a.keepLease(leaseCtx, log, run, inv.RunID, rc.leaseUntil)

	trigger := triggerOf(inv, rc, started)
	if reqs := requestsOf(trigger, rc.FollowUps); answeredUpTo(inv.RunID, reqs, started.Answers) == len(reqs) {
		// A takeover of a run whose earlier holder answered every request
		// and died before finishing: nothing is answered twice.
		log.Info("every request of the run has an answer of an earlier holder; finishing it", "answers", len(started.Answers))
		a.completeAnswered(ctx, modelCtx, ra, rc)
		return ra.rep
	}

	mctx := modelCtx
	if run.approver != nil {
		mctx = run.approver.with(mctx)
	}
	if a.cfg.Live {
		ra.lw = newLiveWriter(a.cfg.Client, inv.RunID, a.cfg.Holder, a.cfg.LiveInterval, log)
		go ra.lw.run(modelCtx)
		defer ra.lw.close()
		mctx = ra.lw.with(mctx)
	}
	ra.boundary, ra.files, ra.texts, ra.latest = NewBoundary(), newRunFiles(a.cfg.Client), map[string]FileText{}, rc
	if a.rounds(ctx, modelCtx, mctx, ra, rc) {
		return ra.rep
	}

	if ra.lw != nil {
		// The answer holds the text now; what the box still gathers is
		// dropped.
		ra.lw.close()
	}
	// One answer covers the trigger and every follow-up of its prompt; its
	// key is that of the last of them (AnswerKey, answeredUpTo).
	reqs := requestsOf(trigger, ra.shown)
	ra.rep.AnswerKey = AnswerKey(inv.RunID, reqs[len(reqs)-1])
	if ra.gone {
		return a.afterEnd(ctx, log, run, inv, ra.rep, reqs, answerOf(ra.text, ra.play.get(), ra.files.ids()))
	}
	// Delivered before posting: a follow-up still pending when the run
	// completes would start the next run and be answered twice.
	if r, stop := a.deliver(ctx, modelCtx, log, run, ra.rep, ra.shown, ra.latest); stop {
		return r
	}
	return a.postAnswer(ctx, ra, reqs)
}

// runAnswer is one run's answer in the making: what the steps of answer
// share, from the first round of the model to the posted answer.
type runAnswer struct {
	inv   Invocation
	log   *slog.Logger
	run   *activeRun
	began time.Time
	// rep is the run's report so far; the final one once a step said the
	// run is done with.
	rep RunReport
	// lw is the run's live box; nil without Config.Live.
	lw       *liveWriter
	boundary string
	play     *inPlay             // the run's in-play trust, made by the first round
	files    *runFiles           // the files of the run's context
	texts    map[string]FileText // the file texts read in the run
	text     string              // the model's latest answer
	shown    []RunContextMessage // the follow-ups of the prompt text answers
	latest   RunContext          // the latest context read
	gone     bool                // the context read after an answer found no active run
}

// rounds asks the model about rc, and again with the follow-ups that
// arrived while it worked (followUps), until a round brings none or the
// rounds are used up. mctx is the model's context: modelCtx with the
// run's approver and live box. It reports whether the run is done with
// (ra.rep is then its report: it was interrupted, failed, or answered on
// its behalf); otherwise ra holds the answer to post.
func (a *Adapter) rounds(ctx, modelCtx, mctx context.Context, ra *runAnswer, rc RunContext) (done bool) {
	for {
		t, err := a.askModel(ctx, mctx, ra, rc)
		if r, stop := a.interrupted(ctx, ra.log, ra.run, ra.rep); stop {
			ra.rep = r
			return true
		}
		if errors.Is(err, ErrAnswered) {
			// Answered through the run's own operations by the process the
			// handler gave the run to: the follow-ups it read are covered.
			if a.completeAnswered(ctx, modelCtx, ra, rc) {
				ra.log.Info("run answered on its behalf", "rounds", ra.rep.Rounds, "ms", time.Since(ra.began).Milliseconds())
			}
			return true
		}
		if err == nil && strings.TrimSpace(t) == "" {
			err = &BadAnswerError{Detail: "empty answer"}
		}
		if err != nil {
			a.modelFailed(ctx, ra, err)
			return true
		}
		ra.text, ra.shown = t, rc.FollowUps
		// The model has seen these follow-ups: their events may be
		// acknowledged (delivered) now.
		a.acks.cover(ra.inv.RunID, messageIDs(ra.shown))
		next, again, stop := a.followUps(ctx, ra)
		if stop || !again {
			return stop
		}
		rc = next
	}
}

// askModel asks the model one round about rc and returns its answer. The
// round's Task carries the run's in-play trust, lowered by rc, and, with
// Config.ReadFiles, the texts of rc's files.
func (a *Adapter) askModel(ctx, mctx context.Context, ra *runAnswer, rc RunContext) (string, error) {
	ra.rep.Rounds++
	if ra.lw != nil && ra.rep.Rounds > 1 {
		ra.lw.restart()
	}
	task := roundTask(rc, ra.boundary, &ra.play, ra.files)
	if a.cfg.ReadFiles {
		a.readFiles(mctx, ra.log, task, ra.texts)
	}
	t, err := a.cfg.Model.Answer(WithTask(mctx, task), task.prompt)
	if ra.lw != nil && ra.run.cancelRequested.Load() && !ra.run.lost.Load() {
		// Stopped by a person: the box says so before the cancel is
		// confirmed.
		ra.lw.stopped(ctx)
	}
	return t, err
}

// completeAnswered completes a run whose requests have an answer already
// (an earlier holder's, or one posted on the run's behalf): the
// follow-ups of rc count as seen, and the run is finished once they are
// delivered. It reports whether it finished the run; ra.rep is the run's
// report either way.
func (a *Adapter) completeAnswered(ctx, modelCtx context.Context, ra *runAnswer, rc RunContext) bool {
	a.acks.cover(ra.inv.RunID, messageIDs(rc.FollowUps))
	if r, stop := a.deliver(ctx, modelCtx, ra.log, ra.run, ra.rep, rc.FollowUps, rc); stop {
		ra.rep = r
		return false
	}
	ra.rep.Outcome = a.finish(ctx, ra.log, ra.run, ra.inv.RunID, OutcomeCompleted, "")
	return true
}

// modelFailed fails the run after the model's error err. The error's text
// may quote the prompt: only its kind and type are logged.
func (a *Adapter) modelFailed(ctx context.Context, ra *runAnswer, err error) {
	reason := "model_error"
	var fe *FailError
	if errors.As(err, &fe) {
		reason = fe.Reason
	}
	ra.log.Warn("model failed", "error_kind", ErrorKind(err), "error_type", fmt.Sprintf("%T", err), "reason", reason,
		"round", ra.rep.Rounds, "model_ms", time.Since(ra.began).Milliseconds())
	ra.rep.Outcome = a.finish(ctx, ra.log, ra.run, ra.inv.RunID, OutcomeFailed, reason)
	ra.rep.Err = fmt.Errorf("adapter: model: %w", err)
}

// followUps reads the run's context after an answer of the model and
// reports whether to ask the model again, with next: when follow-ups it
// has not seen arrived and rounds are left. A context that is gone (the
// run ended, or its person lost trigger, while the model worked) sets
// ra.gone, so that afterEnd reads which before anything is posted; an
// unreadable one leaves the answer as it is. stop is true when the run is
// done with (interrupted); ra.rep is then its report.
func (a *Adapter) followUps(ctx context.Context, ra *runAnswer) (next RunContext, again, stop bool) {
	next, err := a.readContext(ctx, ra.inv.RunID)
	if r, quit := a.interrupted(ctx, ra.log, ra.run, ra.rep); quit {
		ra.rep = r
		return next, false, true
	}
	if ErrorCode(err) == "not_found" {
		ra.gone = true
		return next, false, false
	}
	if err != nil {
		ra.log.Warn("run context unreadable after the model's answer; posting the answer without looking for follow-ups", errAttrs(err)...)
		return next, false, false
	}
	ra.latest = next
	fresh := newFollowUps(next.FollowUps, ra.shown)
	if len(fresh) == 0 {
		return next, false, false
	}
	if ra.rep.Rounds > a.cfg.FollowUpRounds {
		// What the model has is answered; the server promotes the
		// follow-ups it has not seen to the next run.
		ra.log.Info("follow-ups left to the next run: the rounds for follow-ups are used up", "rounds", ra.rep.Rounds, "left", len(fresh), "message_ids", fresh)
		return next, false, false
	}
	ra.log.Info("follow-ups arrived while the model worked; asking it again", "round", ra.rep.Rounds+1, "message_ids", fresh)
	return next, true, false
}

// postAnswer posts the run's answer, which covers the requests reqs, into
// its thread naming the run, and finishes the run as the server's answer
// says: completed when the answer is stored or the request had one
// already, cancelled when the run's person lost trigger or a cancel came,
// failed when the answer was refused; a run another process holds now is
// left to it.
func (a *Adapter) postAnswer(ctx context.Context, ra *runAnswer, reqs []string) RunReport {
	log, run, inv, rep := ra.log, ra.run, ra.inv, ra.rep
	// The answer declares what it was derived from: everything the model
	// read in the run, tool results included (the trust design).
	input := ra.play.get()
	ans := answerOf(ra.text, input, ra.files.ids())
	msg, err := a.post(ctx, inv.ThreadID, rep.AnswerKey, inv.RunID, ans)
	switch reason := ErrorReason(err); {
	case err == nil:
	case reason == "idempotency_key_reused":
		// The key holds another text: an earlier holder answered this
		// request (an adapter's runless repeat is not among Run.answers).
		log.Info("the request has an answer under its key already; finishing the run")
		rep.Dropped = droppedAnswered
		rep.Outcome = a.finish(ctx, log, run, inv.RunID, OutcomeCompleted, "")
		return rep
	case reason == "run_not_active":
		return a.afterEnd(ctx, log, run, inv, rep, reqs, ans)
	case reason == endReasonRevoked:
		// The person who asked lost trigger: nothing was stored, and the
		// run waits for this holder to confirm its cancel.
		log.Info("reply dropped: the run's person lost trigger", "reason", reason)
		rep.Dropped = endReasonRevoked
		rep.Outcome = a.finish(ctx, log, run, inv.RunID, OutcomeCancelled, "")
		rep.Err = errors.New("adapter: the run's person lost trigger; the reply was dropped")
		return rep
	case reason == "run_claimed":
		log.Warn("answer refused: another adapter process holds the run now")
		run.lost.Store(true)
		rep.Err = errors.New("adapter: the claim on the run was lost")
		return rep
	default:
		return a.answerRefused(ctx, log, run, rep, err)
	}
	rep.AnswerMessageID = msg.Message.ID
	// A cancel that arrived while the answer was being posted is answered
	// by completing: the answer is visible, the work is done.
	rep.Outcome = a.finish(ctx, log, run, inv.RunID, OutcomeCompleted, "")
	log.Info("run answered", "message_id", msg.Message.ID, "client_msg_id", rep.AnswerKey, "replayed", msg.Replayed, "rounds", rep.Rounds,
		"followups", len(ra.shown), "input_trust", strings.ToLower(string(input)), "outcome", strings.ToLower(string(rep.Outcome)), "ms", time.Since(ra.began).Milliseconds())
	return rep
}

// answerRefused ends a run whose answer the server refused with err for a
// reason postAnswer has no case of its own for: a stopping adapter
// finishes it as stopped says, a run whose cancel was requested meanwhile
// is cancelled, any other fails (answer_rejected).
func (a *Adapter) answerRefused(ctx context.Context, log *slog.Logger, run *activeRun, rep RunReport, err error) RunReport {
	if ctx.Err() != nil {
		return a.stopped(ctx, log, run, rep)
	}
	log.Error("answer refused", errAttrs(err)...)
	if run.cancelRequested.Load() {
		rep.Outcome = a.finish(ctx, log, run, rep.RunID, OutcomeCancelled, "")
	} else {
		rep.Outcome = a.finish(ctx, log, run, rep.RunID, OutcomeFailed, "answer_rejected")
	}
	rep.Err = err
	return rep
}

// roundTask renders rc for one round of the model and returns the round's
// Task. Its in-play trust is the run's (*play, made by the first round),
// lowered by the context as read now: a follow-up may bring untrusted
// text, and nothing a round read is forgotten by the next.
func roundTask(rc RunContext, boundary string, play **inPlay, files *runFiles) *Task {
	p := WithFollowUps(Render(rc, boundary), rc.FollowUps)
	files.newRound()
	if *play == nil {
		*play = promptInPlay(p)
	} else {
		(*play).lowerContext(p.Lowest)
		(*play).noteElements(p.Context.Elements())
	}
	return &Task{prompt: p, play: *play, files: files}
}

// droppedAnswered is RunReport.Dropped for a reply whose request had an
// answer already.
const droppedAnswered = "answered"

// interrupted checks, after a step that may have taken long, whether the
// run is still this process's to answer: a lost claim leaves it to its new
// holder, a cancel request is confirmed, a stopping adapter fails it.
// stop is true when the run is done with; r is then its report.
func (a *Adapter) interrupted(ctx context.Context, log *slog.Logger, run *activeRun, rep RunReport) (r RunReport, stop bool) {
	switch {
	case run.lost.Load() && run.ended.Load():
		rep.Err = errors.New("adapter: the run ended while the model worked")
		return rep, true
	case run.lost.Load():
		// Another process holds the run now and answers it.
		rep.Err = errors.New("adapter: the claim on the run was lost")
		return rep, true
	case run.cancelRequested.Load():
		// Whatever the model has is dropped: the person cancelled, or lost
		// trigger and with it the request.
		log.Info("run cancelled before its answer; nothing is posted")
		rep.Outcome = a.finish(ctx, log, run, rep.RunID, OutcomeCancelled, "")
		rep.Err = errors.New("adapter: the run was cancelled")
		return rep, true
	case ctx.Err() != nil:
		return a.stopped(ctx, log, run, rep), true
	}
	return rep, false
}

// deliver waits until the follow-ups an answer covers (covered) are
// delivered, so that the run's end absorbs them instead of promoting them
// to a next run. latest is the latest context read: a follow-up it shows
// delivered already (by an earlier holder) or no longer lists (dropped by
// the server) is not waited for. After Config.DeliveryWait it goes on and
// says so in the log. stop and r as for interrupted.
func (a *Adapter) deliver(ctx, modelCtx context.Context, log *slog.Logger, run *activeRun, rep RunReport, covered []RunContextMessage, latest RunContext) (r RunReport, stop bool) {
	state := make(map[string]bool, len(latest.FollowUps))
	for _, f := range latest.FollowUps {
		state[f.MessageID] = f.AlreadyDelivered
	}
	var wait []string
	for _, f := range covered {
		if delivered, listed := state[f.MessageID]; listed && !delivered {
			wait = append(wait, f.MessageID)
		}
	}
	if len(wait) > 0 {
		wctx, cancel := context.WithTimeout(modelCtx, a.cfg.DeliveryWait)
		err := a.acks.awaitDelivered(wctx, rep.RunID, wait)
		cancel()
		if err != nil && modelCtx.Err() == nil {
			log.Warn("follow-ups not delivered in time; answering anyway, the server may answer them again in a next run", "message_ids", wait,
				"waited", a.cfg.DeliveryWait.String())
		}
	}
	return a.interrupted(ctx, log, run, rep)
}

// afterEnd decides about a reply whose run was found ended, or its context
// gone, before the reply was posted with the run's id. It reads the run:
// a run still active whose context is gone lost its person's trigger; an
// ending that took the request away drops the reply; after one that left
// it standing (requestStands) the reply goes out without runId under the
// same key, declaring input (the run's in-play trust), unless an answer of
// the run covers its requests already. Logs carry ids, states and reasons,
// never content.
func (a *Adapter) afterEnd(ctx context.Context, log *slog.Logger, run *activeRun, inv Invocation, rep RunReport, reqs []string, ans answerBody) RunReport {
	var r RunInfo
	err := a.retry(ctx, "Run", func(ctx context.Context) (err error) {
		r, err = a.cfg.Client.Run(ctx, inv.RunID)
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return a.stopped(ctx, log, run, rep)
		}
		log.Warn("reply dropped: the run is unreadable, so how it ended is unknown", errAttrs(err)...)
		rep.Dropped = "run_unreadable"
		rep.Err = err
		return rep
	}
	if r.State.Active() {
		// The context of an active run is gone only when its person lost
		// trigger; the run waits for this holder to confirm the cancel.
		log.Info("reply dropped: the run's person lost trigger")
		rep.Dropped = endReasonRevoked
		rep.Outcome = a.finish(ctx, log, run, inv.RunID, OutcomeCancelled, "")
		rep.Err = errors.New("adapter: the run's person lost trigger; the reply was dropped")
		return rep
	}
	run.ended.Store(true)
	state, reason := strings.ToLower(string(r.State)), ""
	if r.EndReason != nil {
		reason = *r.EndReason
	}
	if !requestStands(r.State, reason) {
		log.Info("reply dropped: the run ended and took the request away", "state", state, "end_reason", reason)
		rep.Dropped = reason
		if rep.Dropped == "" {
			rep.Dropped = state
		}
		rep.Err = fmt.Errorf("adapter: the run ended %s (%s) before its answer; the reply was dropped", state, reason)
		return rep
	}
	if answeredUpTo(inv.RunID, reqs, r.Answers) == len(reqs) || answeredBeyond(inv.RunID, reqs, r.Answers) {
		log.Info("reply dropped: the run ended and its requests have answers", "state", state, "end_reason", reason)
		rep.Dropped = droppedAnswered
		return rep
	}
	// Nothing was stored with the run's id, so the key is free: the reply
	// reaches the people as a plain agent message
	// (the replies design: answers survive lost connections).
	log.Info("run ended before the answer; sending it without run id", "state", state, "end_reason", reason)
	msg, err := a.post(ctx, inv.ThreadID, rep.AnswerKey, "", ans)
	if err != nil {
		log.Error("answer without run id refused", errAttrs(err)...)
		rep.Err = err
		return rep
	}
	rep.AnswerMessageID = msg.Message.ID
	log.Info("answer posted after the run ended", "message_id", msg.Message.ID, "client_msg_id", rep.AnswerKey, "replayed", msg.Replayed)
	return rep
}

// stopped finishes a run whose adapter is stopping, with a context of its
// own because the adapter's has ended.
func (a *Adapter) stopped(ctx context.Context, log *slog.Logger, run *activeRun, rep RunReport) RunReport {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	rep.Outcome = a.finish(fctx, log, run, rep.RunID, OutcomeFailed, "adapter_stopped")
	rep.Err = ctx.Err()
	return rep
}

// readContext reads the run's context again (with retries).
func (a *Adapter) readContext(ctx context.Context, runID string) (rc RunContext, err error) {
	err = a.retry(ctx, "RunContext", func(ctx context.Context) (err error) {
		rc, err = a.cfg.Client.RunContext(ctx, runID)
		return err
	})
	return rc, err
}

// triggerOf returns the run's triggering message: the run's
// triggeringMessageId, else the invocation's, else the context's trigger.
func triggerOf(inv Invocation, rc RunContext, started RunInfo) string {
	switch {
	case started.TriggeringMessageID != nil && *started.TriggeringMessageID != "":
		return *started.TriggeringMessageID
	case inv.MessageID != "":
		return inv.MessageID
	}
	return rc.TriggerMessage.MessageID
}

// messageIDs returns the ids of msgs.
func messageIDs(msgs []RunContextMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.MessageID
	}
	return out
}

// newFollowUps returns the ids of the follow-ups in now that are not in
// shown.
func newFollowUps(now, shown []RunContextMessage) []string {
	seen := make(map[string]bool, len(shown))
	for _, m := range shown {
		seen[m.MessageID] = true
	}
	var out []string
	for _, m := range now {
		if !seen[m.MessageID] {
			out = append(out, m.MessageID)
		}
	}
	return out
}

// answerBody is what an answer posts: its text, the in-play trust it
// declares and the files it attaches.
type answerBody struct {
	text  string
	input Trust
	files []string
}

// answerOf is the answer body of text, declaring input, attaching files.
func answerOf(text string, input Trust, files []string) answerBody {
	return answerBody{text: text, input: input, files: files}
}

// post sends ans into thread threadID under the clientMsgId key, naming
// run runID ("" names none), declaring ans.input as its inputTrust and
// attaching ans.files. Every retry sends the identical request, files
// included, so the server stores the message once and a repeat answers
// replayed.
func (a *Adapter) post(ctx context.Context, threadID, key, runID string, ans answerBody) (res MessageResult, err error) {
	in := MessageCreate{ClientMsgID: key, ContentMD: ans.text, RunID: runID, InputTrust: ans.input, AttachmentFileIDs: ans.files}
	if a.box != nil {
		// On disk before it leaves: a process that dies now sends it at
		// its next start.
		e := OutboxEntry{Key: key, ThreadID: threadID, RunID: runID, Holder: a.cfg.Holder, Text: ans.text, InputTrust: ans.input,
			AttachmentFileIDs: ans.files, Written: time.Now().UTC()}
		if err := a.box.Put(e); err != nil {
			return MessageResult{}, err
		}
	}
	err = a.retry(ctx, "CreateMessage", func(ctx context.Context) (err error) {
		res, err = a.cfg.Client.CreateMessage(ctx, threadID, a.cfg.Holder, in)
		return err
	})
	if a.box != nil && settled(ctx, err) {
		if rerr := a.box.Remove(key); rerr != nil {
			a.log.Error("outbox: entry not removed", errAttrs(rerr)...)
		}
	}
	return res, err
}

// finish ends a run with outcome and returns the end state the server
// set (it may differ: finishing a run whose person lost trigger ends it
// cancelled), or "" when the run had ended already or the call failed.
// run (nil for a run this process does not hold) learns that the run
// ended.
func (a *Adapter) finish(ctx context.Context, log *slog.Logger, run *activeRun, runID string, outcome Outcome, reason string) Outcome {
	var ended RunInfo
	err := a.retry(ctx, "FinishRun", func(ctx context.Context) (err error) {
		ended, err = a.cfg.Client.FinishRun(ctx, runID, a.cfg.Holder, RunFinish{Outcome: outcome, Reason: reason})
		return err
	})
	switch {
	case err == nil:
		if run != nil {
			run.ended.Store(true)
		}
		got := endOutcome(ended.State, outcome)
		endReason := ""
		if ended.EndReason != nil {
			endReason = *ended.EndReason
		}
		log.Info("run finished", "outcome", strings.ToLower(string(got)), "wanted", strings.ToLower(string(outcome)), "reason", endReason)
		return got
	case ErrorReason(err) == "run_not_active":
		if run != nil {
			run.ended.Store(true)
		}
		log.Info("run had ended already", "wanted", strings.ToLower(string(outcome)))
	default:
		log.Error("finish refused", append(errAttrs(err), "wanted", strings.ToLower(string(outcome)))...)
	}
	return ""
}

// endOutcome returns the outcome a finished run's end state stands for, or
// wanted when state is no end state this code knows.
func endOutcome(state RunState, wanted Outcome) Outcome {
	switch state {
	case RunStateCompleted, RunStateFailed, RunStateCancelled:
		return Outcome(state)
	default:
		// Still active, or a state this code does not know.
		return wanted
	}
}

// confirmUntrackedCancel confirms the cancel of a run this process does
// not hold: one an earlier adapter process started. Nobody works on it, so
// it is confirmed when it is still in progress with a pending cancel.
func (a *Adapter) confirmUntrackedCancel(ctx context.Context, log *slog.Logger, runID string) {
	var run RunInfo
	err := a.retry(ctx, "Run", func(ctx context.Context) (err error) {
		run, err = a.cfg.Client.Run(ctx, runID)
		return err
	})
	if err != nil {
		if ErrorCode(err) != "not_found" {
			log.Warn("cancelled run unreadable", errAttrs(err)...)
		}
		return
	}
	if !run.State.Active() || run.CancelRequested == nil || !*run.CancelRequested {
		log.Debug("cancel request needs nothing", "state", strings.ToLower(string(run.State)))
		return
	}
	a.finish(ctx, log, nil, runID, OutcomeCancelled, "")
}

// retry runs fn until it succeeds, fails with an error that is not
// temporary, MaxAttempts is reached or ctx ends. Only idempotent calls go
// through it.
func (a *Adapter) retry(ctx context.Context, op string, fn func(context.Context) error) error {
	delay := a.cfg.RetryBackoff
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil || !IsTemporary(err) || attempt >= a.cfg.MaxAttempts || ctx.Err() != nil {
			return err
		}
		pause := delay
		var e *Error
		if errors.As(err, &e) && e.RetryAfter > pause {
			pause = e.RetryAfter
		}
		a.log.Warn("call failed, retrying", append(errAttrs(err), "op", op, "attempt", attempt, "retry_in", pause.String())...)
		if !sleep(ctx, pause) {
			return err
		}
		delay = min(delay*2, 10*time.Second)
	}
}

// sleep waits for d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// errAttrs describes err for the log: code, reason and status of a
// refusal; the text of a transport error (it names the endpoint, never the
// token or content).
func errAttrs(err error) []any {
	var e *Error
	if errors.As(err, &e) {
		return []any{"code", e.Code(), "reason", e.Reason(), "status", e.Status()}
	}
	return []any{"error", err.Error()}
}

// limitedModel lets at most cap(slots) answers of inner run at once
// (Config.MaxConcurrent); a run waiting for a slot gives up when its
// context ends (a cancel, a lost claim, the adapter stopping).
type limitedModel struct {
	inner Model
	slots chan struct{}
}

// Answer waits for a slot, then asks inner.
func (m limitedModel) Answer(ctx context.Context, p Prompt) (string, error) {
	select {
	case m.slots <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-m.slots }()
	return m.inner.Answer(ctx, p)
}
