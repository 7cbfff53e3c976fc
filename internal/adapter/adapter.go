package adapter

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
	// Client talks to the server with the agent's token.
	Client *Client
	// Model answers the rendered contexts.
	Model Model
	// Logger receives ids, event types, outcomes and error codes, never
	// content, handles, display names or tokens
	// (docs/design/model.md#privacy). nil
	// discards.
	Logger *slog.Logger
	// Transport is how the stream is read: TransportPoll (default, the
	// agentEvents long poll) or TransportWS (the agentEvents subscription
	// over WebSocket). Both hand the loop the same pages.
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
	// OnRunDone, when set, is called once per handled run after the
	// adapter is done with it (from the run's goroutine).
	OnRunDone func(RunReport)
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
// takes it over. The answer's clientMsgId is derived from the run, so a
// takeover never posts a second answer: an answer an earlier holder stored
// is recognised (replay or idempotency_key_reused) and the run is only
// finished. After handling a page the adapter acknowledges it, so a
// restarted process continues where it left off.
type Adapter struct {
	cfg    Config
	log    *slog.Logger
	mu     sync.Mutex
	cursor string
	active map[string]*activeRun
	wg     sync.WaitGroup
}

// activeRun is a run this process has started and not yet left.
type activeRun struct {
	cancelModel     context.CancelFunc
	cancelRequested atomic.Bool
	followups       atomic.Int32
	// lost is set when the server says this process no longer holds the
	// run (its lease lapsed and another process took it over).
	lost atomic.Bool
}

// NewHolder returns a fresh holder id for one adapter process.
func NewHolder() string { return "adapter-" + NewBoundary()[:16] }

// New checks cfg and returns an adapter.
//
// Errors: Client or Model is nil.
func New(cfg Config) (*Adapter, error) {
	if cfg.Client == nil || cfg.Model == nil {
		return nil, errors.New("adapter: Config needs a Client and a Model")
	}
	switch cfg.Transport {
	case "":
		cfg.Transport = TransportPoll
	case TransportPoll, TransportWS:
	default:
		return nil, fmt.Errorf("adapter: unknown transport %q (poll or ws)", cfg.Transport)
	}
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
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Adapter{cfg: cfg, log: log, cursor: cfg.After, active: map[string]*activeRun{}}, nil
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

	// The loop context ends the polls; runs use ctx, so that in Once mode
	// ending the loop does not end the run that ends it.
	loop, stopLoop := context.WithCancel(ctx)
	defer stopLoop()
	next := func(ctx context.Context, after string) (EventPage, error) {
		return a.cfg.Client.AgentEvents(ctx, after, a.cfg.PollWait)
	}
	if a.cfg.Transport == TransportWS {
		stream := a.cfg.Client.AgentStream()
		defer stream.Close()
		next = func(ctx context.Context, after string) (EventPage, error) {
			return stream.Next(ctx, after, a.cfg.PollWait)
		}
	}
	claimed, held := false, false
	backoff := a.cfg.RetryBackoff
	for loop.Err() == nil {
		began := time.Now()
		page, err := next(loop, a.Cursor())
		if err != nil {
			if loop.Err() != nil {
				break
			}
			switch ErrorCode(err) {
			case "unauthorized", "forbidden", "validation_failed":
				// Retrying cannot help: a revoked token, a token that is
				// not an agent's, or a cursor the server does not know.
				stopLoop()
				a.wg.Wait()
				return fmt.Errorf("adapter: poll the agent stream: %w", err)
			}
			pause := backoff
			var e *Error
			if errors.As(err, &e) && e.RetryAfter > pause {
				pause = e.RetryAfter
			}
			a.log.Warn("poll failed", append(errAttrs(err), "retry_in", pause.String())...)
			sleep(loop, pause)
			backoff = min(backoff*2, 30*time.Second)
			continue
		}
		backoff = a.cfg.RetryBackoff
		ackUpTo := ""
		for _, ev := range page.Events {
			if a.handle(loop, ctx, ev, &claimed, stopLoop) && !held {
				ackUpTo = ev.Seq
			} else {
				// An event left for a later process (--once has its run):
				// nothing from here on is acknowledged.
				held = true
			}
			a.setCursor(ev.Seq)
		}
		a.setCursor(page.NextAfter)
		if ackUpTo != "" {
			// Handled (every invocation claimed or skipped, every cancel
			// and follow-up noted): acknowledge, so a restart continues
			// behind it. A failed ack only means a restart sees the events
			// again, which every handler tolerates.
			if _, err := a.cfg.Client.AckAgentEvents(loop, ackUpTo); err != nil && loop.Err() == nil {
				a.log.Warn("ack failed", errAttrs(err)...)
			}
		}
		if len(page.Events) == 0 {
			sleep(loop, minPollInterval-time.Since(began))
		}
	}
	a.wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	return nil
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
		rc, ok := a.prepare(loop, log, inv)
		if !ok {
			return true
		}
		*claimed = true
		modelCtx, cancelModel := context.WithCancel(runCtx)
		run := &activeRun{cancelModel: cancelModel}
		a.mu.Lock()
		a.active[inv.RunID] = run
		a.mu.Unlock()
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			defer cancelModel()
			rep := a.answer(runCtx, modelCtx, log, run, inv, rc)
			a.mu.Lock()
			delete(a.active, inv.RunID)
			a.mu.Unlock()
			if a.cfg.OnRunDone != nil {
				a.cfg.OnRunDone(rep)
			}
			if a.cfg.Once {
				stopLoop()
			}
		}()
	case EventFollowup:
		var ref RunRef
		_ = json.Unmarshal(ev.Payload, &ref)
		// The echo model answers from the context read before the start;
		// a follow-up (content not in that context) is noted, not answered.
		if run := a.tracked(ref.RunID); run != nil {
			run.followups.Add(1)
		}
		log.Debug("follow-up noted", "run_id", ref.RunID, "message_id", ref.MessageID)
	case EventCancelRequested:
		var ref RunRef
		if err := json.Unmarshal(ev.Payload, &ref); err != nil || ref.RunID == "" {
			log.Error("cancel payload without run id")
			return true
		}
		log = log.With("run_id", ref.RunID)
		if run := a.tracked(ref.RunID); run != nil {
			run.cancelRequested.Store(true)
			run.cancelModel()
			log.Info("cancel requested for a run in progress")
			return true
		}
		a.confirmUntrackedCancel(loop, log, ref.RunID)
	default:
		log.Debug("event type not handled")
	}
	return true
}

func (a *Adapter) tracked(runID string) *activeRun {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.active[runID]
}

// prepare reads the run's context and then starts the run: the adapter
// commits to a run only once it holds what it needs to answer (the context
// is read before run.start, docs/design/trust.md#who-may-read-it). ok is
// false when the run is skipped.
func (a *Adapter) prepare(ctx context.Context, log *slog.Logger, inv Invocation) (RunContext, bool) {
	var rc RunContext
	err := a.retry(ctx, "RunContext", func(ctx context.Context) (err error) {
		rc, err = a.cfg.Client.RunContext(ctx, inv.RunID)
		return err
	})
	if ErrorCode(err) == "not_found" {
		// An own run that is no longer active answers not_found, like an
		// unknown one: an old invocation, read again from the stream.
		log.Info("invocation skipped: the run is no longer active")
		return rc, false
	}
	if err != nil {
		log.Error("run context unreadable", errAttrs(err)...)
		a.finish(ctx, log, inv.RunID, OutcomeFailed, "context_unavailable")
		return rc, false
	}
	var started Run
	err = a.retry(ctx, "StartRun", func(ctx context.Context) (err error) {
		started, err = a.cfg.Client.StartRun(ctx, inv.RunID, a.cfg.Holder)
		return err
	})
	if ErrorReason(err) == "run_not_active" {
		log.Info("invocation skipped: the run ended before its start")
		return rc, false
	}
	if ErrorReason(err) == "run_claimed" {
		log.Info("invocation skipped: another adapter process holds the run")
		return rc, false
	}
	if err != nil {
		log.Error("run start refused", errAttrs(err)...)
		a.finish(ctx, log, inv.RunID, OutcomeFailed, "start_failed")
		return rc, false
	}
	if started.LeaseExpiresAt != nil {
		rc.leaseUntil = *started.LeaseExpiresAt
	}
	log.Info("run started", "session_mode", strings.ToLower(inv.Session.Mode), "elements", len(rc.Elements()), "attempt", inv.Attempt, trustAttr(rc.TrustSummary))
	return rc, true
}

// minRenewInterval keeps renewals of a very short lease from flooding the
// server.
const minRenewInterval = 200 * time.Millisecond

// keepLease renews the claim on the run while the model works: every third
// of the lease the server granted. When the server says this process no
// longer holds the run (run_claimed, run_not_active) it marks the run lost
// and stops the model. It returns when ctx ends.
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
		case reason == "run_claimed" || reason == "run_not_active":
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
// adapter's; modelCtx also ends when a person cancels the run.
func (a *Adapter) answer(ctx, modelCtx context.Context, log *slog.Logger, run *activeRun, inv Invocation, rc RunContext) RunReport {
	rep := RunReport{RunID: inv.RunID, ThreadID: inv.ThreadID}
	began := time.Now()
	leaseCtx, stopLease := context.WithCancel(modelCtx)
	defer stopLease()
	go a.keepLease(leaseCtx, log, run, inv.RunID, rc.leaseUntil)
	text, err := a.cfg.Model.Answer(modelCtx, WithFollowUps(Render(rc, NewBoundary()), rc.FollowUps))
	switch {
	case run.lost.Load():
		// Another process holds the run now and answers it.
		rep.Err = errors.New("adapter: the claim on the run was lost")
		return rep
	case run.cancelRequested.Load():
		rep.Outcome = a.finish(ctx, log, inv.RunID, OutcomeCancelled, "")
		rep.Err = errors.New("adapter: the run was cancelled")
		return rep
	case ctx.Err() != nil:
		return a.stopped(ctx, log, rep)
	case err == nil && strings.TrimSpace(text) == "":
		err = errors.New("adapter: the model gave an empty answer")
	}
	if err != nil {
		// The model's error text may quote the prompt: log only its kind.
		log.Warn("model failed", "error_type", fmt.Sprintf("%T", err), "model_ms", time.Since(began).Milliseconds())
		rep.Outcome = a.finish(ctx, log, inv.RunID, OutcomeFailed, "model_error")
		rep.Err = fmt.Errorf("adapter: model: %w", err)
		return rep
	}

	msg, ended, err := a.post(ctx, log, inv, text)
	if ErrorReason(err) == "idempotency_key_reused" {
		// An earlier holder stored this run's answer before it died; the
		// model's new reply differs, so the key answers "used": the run
		// has its answer and is only finished.
		log.Info("the run was answered by an earlier holder; finishing it")
		rep.Outcome = a.finish(ctx, log, inv.RunID, OutcomeCompleted, "")
		return rep
	}
	if err != nil {
		if ctx.Err() != nil {
			return a.stopped(ctx, log, rep)
		}
		log.Error("answer refused", errAttrs(err)...)
		if run.cancelRequested.Load() {
			rep.Outcome = a.finish(ctx, log, inv.RunID, OutcomeCancelled, "")
		} else {
			rep.Outcome = a.finish(ctx, log, inv.RunID, OutcomeFailed, "answer_rejected")
		}
		rep.Err = err
		return rep
	}
	rep.AnswerMessageID = msg.Message.ID
	if ended {
		// The run ended without this adapter; finishRun would only be
		// refused with run_not_active again.
		log.Info("answer posted after the run ended", "message_id", msg.Message.ID)
		return rep
	}
	// A cancel that arrived while the answer was being posted is answered
	// by completing: the answer is visible, the work is done.
	rep.Outcome = a.finish(ctx, log, inv.RunID, OutcomeCompleted, "")
	log.Info("run answered", "message_id", msg.Message.ID, "replayed", msg.Replayed, "followups", run.followups.Load(),
		"outcome", strings.ToLower(string(rep.Outcome)), "ms", time.Since(began).Milliseconds())
	return rep
}

// stopped finishes a run whose adapter is stopping, with a context of its
// own because the adapter's has ended.
func (a *Adapter) stopped(ctx context.Context, log *slog.Logger, rep RunReport) RunReport {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	rep.Outcome = a.finish(fctx, log, rep.RunID, OutcomeFailed, "adapter_stopped")
	rep.Err = ctx.Err()
	return rep
}

// post sends the answer into the invocation's thread, naming the run. The
// clientMsgId is derived from the run id, so every retry and a restarted
// adapter send the same request and the server stores the answer once.
// When the run has ended meanwhile (conflict run_not_active), nothing was
// stored and the same clientMsgId goes again without runId
// (docs/design/replies.md#answers-survive-lost-connections): the answer
// still reaches the people, as a plain agent message;
// ended is then true.
func (a *Adapter) post(ctx context.Context, log *slog.Logger, inv Invocation, text string) (res MessageResult, ended bool, err error) {
	in := MessageCreate{ClientMsgID: "answer-" + inv.RunID, ContentMD: text, RunID: inv.RunID}
	send := func(ctx context.Context) (err error) {
		res, err = a.cfg.Client.CreateMessage(ctx, inv.ThreadID, in)
		return err
	}
	err = a.retry(ctx, "CreateMessage", send)
	if ErrorCode(err) == "conflict" && ErrorReason(err) == "run_not_active" {
		log.Info("run ended before the answer; sending it without run id")
		in.RunID = ""
		ended = true
		err = a.retry(ctx, "CreateMessage", send)
	}
	return res, ended, err
}

// finish ends a run with outcome and returns the outcome set, or "" when
// the run had ended already or the call failed.
func (a *Adapter) finish(ctx context.Context, log *slog.Logger, runID string, outcome Outcome, reason string) Outcome {
	err := a.retry(ctx, "FinishRun", func(ctx context.Context) error {
		_, err := a.cfg.Client.FinishRun(ctx, runID, RunFinish{Outcome: outcome, Reason: reason})
		return err
	})
	switch {
	case err == nil:
		log.Info("run finished", "outcome", strings.ToLower(string(outcome)), "reason", reason)
		return outcome
	case ErrorReason(err) == "run_not_active":
		log.Info("run had ended already", "wanted", strings.ToLower(string(outcome)))
	default:
		log.Error("finish refused", append(errAttrs(err), "wanted", strings.ToLower(string(outcome)))...)
	}
	return ""
}

// confirmUntrackedCancel confirms the cancel of a run this process does
// not hold: one an earlier adapter process started. Nobody works on it, so
// it is confirmed when it is still in progress with a pending cancel.
func (a *Adapter) confirmUntrackedCancel(ctx context.Context, log *slog.Logger, runID string) {
	var run Run
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
	a.finish(ctx, log, runID, OutcomeCancelled, "")
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
