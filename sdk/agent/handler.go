package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
)

// Handler answers one run of the agent. It reads what was asked from the
// Task (Prompt for a language model, Context for the typed elements) and
// calls Task.Answer with the reply, or Task.Fail. Everything else (the
// event stream, claims, renewals, fencing, acknowledgements, follow-ups,
// the answer's key, retries) is the SDK's.
//
// ctx ends when a person cancels the run, when the person who asked loses
// the right to ask, or when another process of the agent took the run
// over: stop then; nothing is posted. A handler is called again for the
// same run when follow-ups arrived while it worked (at most
// Config.FollowUpRounds more times): Task.FollowUps lists those it has not
// been shown, Prompt shows them all, and the answer of the last call is
// the one posted. Returning an error without an answer fails the run with
// reason model_error.
type Handler func(ctx context.Context, t *Task) error

// Task is one call of a Handler for a run.
type Task struct {
	prompt Prompt
	fresh  []RunContextMessage
	answer string
	failed string
	done   bool
	// play is the run's in-play trust, shared by every call of the run
	// (InPlay, Lower); nil for a Task the SDK did not make.
	play *inPlay
	// files is what the run's calls share about files (FileText,
	// AttachFile); nil for a Task the SDK did not make.
	files *runFiles
}

// RunID is the id of the run.
func (t *Task) RunID() string { return t.prompt.Context.RunID }

// Context is the run's context as the server read it, every element with
// the trust the server decided from live rights: the trigger, the thread
// and channel context, the follow-ups, the trust summary.
func (t *Task) Context() RunContext { return t.prompt.Context }

// Prompt is the context rendered for a language model: a system text and a
// user text that frame every element by its trust, with the request
// separated from data by a boundary unique to the run, and every line that
// could pass for a frame escaped (the model design). Send System as the
// system message and User as the user message.
func (t *Task) Prompt() Prompt { return t.prompt }

// FollowUps are the follow-ups of the run this handler has not been shown
// in an earlier call for the run, oldest first; Prompt includes them with
// the others. Each reaches a handler once.
func (t *Task) FollowUps() []RunContextMessage { return t.fresh }

// Answer sets the reply to post in the run's thread when the handler
// returns. A later call replaces it. ctx is the handler's: an answer set
// after it ended is not posted.
//
// Errors: the text is empty or white space (the server refuses blank
// messages); ctx has ended.
func (t *Task) Answer(ctx context.Context, text string) error {
	if strings.TrimSpace(text) == "" {
		return errors.New("agent: an answer needs text")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	t.answer, t.failed, t.done = text, "", true
	return nil
}

// Fail ends the run as failed with reason (a short code such as
// "tool_error"; "model_error" when empty) when the handler returns, instead
// of answering.
func (t *Task) Fail(reason string) {
	if reason == "" {
		reason = "model_error"
	}
	t.failed, t.answer, t.done = reason, "", true
}

// ErrAnswered is what a Handler (or a Model) returns when the run's answer
// was posted on the run's behalf by another process the adapter handed
// the run to (a runner's child answering through /mcp with a run token,
// [bothy.example.com/bothy/sdk/runner]): the adapter posts nothing and finishes the run completed
// (a child that finished the run itself leaves nothing to finish).
var ErrAnswered = errors.New("agent: the run was answered on its behalf")

// FailError is the error a Model returns to fail a run with a reason of its
// own (Task.Fail); other errors fail it with model_error.
type FailError struct {
	Reason string
}

// Error names the reason.
func (e *FailError) Error() string { return "agent: the handler failed the run: " + e.Reason }

// handlerModel is the Model that calls a Handler.
type handlerModel struct {
	h     Handler
	mu    sync.Mutex
	shown map[string]map[string]bool // follow-ups shown, by run
}

// Answer calls the handler with the prompt and the follow-ups not shown to
// it before in this run.
func (m *handlerModel) Answer(ctx context.Context, p Prompt) (string, error) {
	m.mu.Lock()
	seen := m.shown[p.Context.RunID]
	if seen == nil {
		seen = map[string]bool{}
		m.shown[p.Context.RunID] = seen
	}
	t := &Task{prompt: p, play: playOf(ctx, p), files: filesOf(ctx)}
	for _, f := range p.Context.FollowUps {
		if !seen[f.MessageID] {
			t.fresh = append(t.fresh, f)
		}
	}
	m.mu.Unlock()
	err := m.h(WithTask(ctx, t), t)
	m.mu.Lock()
	for _, f := range t.fresh {
		seen[f.MessageID] = true
	}
	m.mu.Unlock()
	switch {
	case t.failed != "":
		return "", &FailError{Reason: t.failed}
	case t.done && err == nil:
		return t.answer, nil
	case err != nil:
		return "", err
	default:
		return "", errors.New("agent: the handler returned without an answer")
	}
}

// playOf is the in-play trust a handler's Task shares: the run's, from
// the Task the adapter put on ctx, or, for a call outside a run, a new one
// starting at p.Lowest.
func playOf(ctx context.Context, p Prompt) *inPlay {
	if t := TaskFrom(ctx); t != nil && t.play != nil {
		return t.play
	}
	return promptInPlay(p)
}

// forget drops the follow-ups shown for a run that ended.
func (m *handlerModel) forget(runID string) {
	m.mu.Lock()
	delete(m.shown, runID)
	m.mu.Unlock()
}

// Run connects the agent of cfg.Token to cfg.Server and answers its runs
// with h until ctx ends (or, with cfg.Once, until the first run handled has
// ended). Every field of Config has the same meaning and default as in New;
// h takes the place of cfg.Model, which must be nil.
//
// Errors: cfg.Model is set; a Config that does not make a client (an
// invalid Server, no Token); a stream that cannot be read after the
// retries (an invalid token, a server gone); nil when ctx ended.
func Run(ctx context.Context, cfg Config, h Handler) error {
	if h == nil {
		return errors.New("agent: Run needs a Handler")
	}
	if cfg.Model != nil {
		return errors.New("agent: Run answers with its Handler: leave Config.Model nil (or use New with the Model)")
	}
	m := &handlerModel{h: h, shown: map[string]map[string]bool{}}
	cfg.Model = m
	done := cfg.OnRunDone
	cfg.OnRunDone = func(r RunReport) {
		m.forget(r.RunID)
		if done != nil {
			done(r)
		}
	}
	a, err := New(cfg)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}
