package agent

import (
	"context"
	"slices"
	"strings"
	"sync"
)

// The in-play trust of a run (the trust design: approvals): the lowest
// trust of everything the model has read in the run so far. It starts at
// the context's lowest and only goes down: every tool result the model
// reads lowers it by the tool's OutputTrust, so that a consequential call
// made after untrusted text entered the conversation is put to the person
// who asked, and the answer declares what it was derived from (inputTrust).

// trustRank orders the levels from the least trusted up. A level this
// code does not know ranks with UNVERIFIED: trust may be weakened, never
// invented.
func trustRank(t Trust) int {
	switch t {
	case TrustSelf:
		return 1
	case TrustSystem:
		return 2
	case TrustAuthorized:
		return 3
	case TrustTrigger:
		return 4
	default:
		// UNVERIFIED, and any level this code does not know.
		return 0
	}
}

// knownTrust keeps a level this code knows and turns anything else into
// UNVERIFIED.
func knownTrust(t Trust) Trust {
	if trustRank(t) == 0 {
		return TrustUnverified
	}
	return t
}

// lowerTrust returns the less trusted of a and b, UNVERIFIED for a level
// this code does not know.
func lowerTrust(a, b Trust) Trust {
	if trustRank(b) < trustRank(a) {
		return knownTrust(b)
	}
	return knownTrust(a)
}

// The untrusted inputs an approval card names, beside the tools read.
const (
	inputContext = "with untrusted messages in the conversation"
	inputOthers  = "with requests of other people in the conversation"
	inputOther   = "after reading other untrusted input"
	inputFile    = "after reading an attached file"
	inputUnknown = "with untrusted input in play"
)

// inPlay is the in-play trust of one run, shared by every model call and
// handler call of the run. It remembers which untrusted inputs lowered it,
// so that an approval card can name them.
type inPlay struct {
	mu    sync.Mutex
	level Trust
	// context is the lowest level of the run's contexts when it is below
	// the gate (untrusted elements, or another person's request), "" when
	// every context was within it; tools are the tools whose untrusted
	// output the model read, in the order first read; other is set by
	// Task.Lower below the gate.
	context Trust
	tools   []string
	other   bool
	// file is set once the text of a file was read (Task.FileText).
	file bool
	// others is set once an element of another person who may instruct
	// the agent (AUTHORIZED) is in play: the level alone cannot tell, since
	// SYSTEM ranks below AUTHORIZED, so a context of both has the lowest
	// SYSTEM and would pass the gate.
	others bool
}

// noteElements records what the elements of a context put in play beside
// the level: an AUTHORIZED one sets others.
func (p *inPlay) noteElements(elems []RunContextMessage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range elems {
		if m.standing() == TrustAuthorized {
			p.others = true
		}
	}
}

// allowed reports whether a consequential call may run without asking:
// the level passes ToolsAllowed and no other person's request is in play.
func (p *inPlay) allowed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return ToolsAllowed(p.level) && !p.others
}

// newInPlay starts the in-play trust of a run at lowest, the context's
// lowest trust (Prompt.Lowest).
func newInPlay(lowest Trust) *inPlay {
	p := &inPlay{level: knownTrust(lowest)}
	p.noteContext(p.level)
	return p
}

// get returns the level.
func (p *inPlay) get() Trust {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.level
}

// lowerContext lowers the level by a context read again (a new round for
// follow-ups): a follow-up may bring untrusted text.
func (p *inPlay) lowerContext(lowest Trust) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.level = lowerTrust(p.level, lowest)
	p.noteContext(knownTrust(lowest))
}

// noteContext records a context's lowest level when it is below the gate;
// the caller holds p.mu (or owns p).
func (p *inPlay) noteContext(lowest Trust) {
	if ToolsAllowed(lowest) {
		return
	}
	if p.context == "" || trustRank(lowest) < trustRank(p.context) {
		p.context = lowest
	}
}

// lowerTool lowers the level by the output of tool name, of trust t.
func (p *inPlay) lowerTool(name string, t Trust) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.level = lowerTrust(p.level, t)
	if !ToolsAllowed(t) && !slices.Contains(p.tools, name) {
		p.tools = append(p.tools, name)
	}
}

// lowerOther lowers the level by input a handler reported (Task.Lower).
func (p *inPlay) lowerOther(t Trust) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.level = lowerTrust(p.level, t)
	if !ToolsAllowed(t) {
		p.other = true
	}
}

// lowerFile lowers the level to UNVERIFIED: a file's text was read, which
// is data whoever uploaded the file.
func (p *inPlay) lowerFile() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.level = TrustUnverified
	p.file = true
}

// inputs names the untrusted inputs in play, for an approval card.
func (p *inPlay) inputs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	switch {
	case p.context != "" && p.context != TrustAuthorized:
		out = append(out, inputContext)
	case p.context == TrustAuthorized || p.others:
		out = append(out, inputOthers)
	}
	if len(p.tools) > 0 {
		out = append(out, "after reading the output of "+joinAnd(p.tools))
	}
	if p.file {
		out = append(out, inputFile)
	}
	if p.other {
		out = append(out, inputOther)
	}
	return out
}

// joinAnd joins names (one at least) as "a", "a and b", "a, b and c".
func joinAnd(names []string) string {
	last := len(names) - 1
	if last == 0 {
		return names[0]
	}
	return strings.Join(names[:last], ", ") + " and " + names[last]
}

// InPlay is the run's in-play trust: the lowest trust of everything the
// model has read in this run, the context and every tool result included.
// It starts at the context's lowest (Prompt.Lowest) and only goes down
// (Lower, RunTool). A consequential tool runs without asking only while
// ToolsAllowed(InPlay()), and the answer is posted declaring it
// (MessageCreate.InputTrust). A Task the SDK did not make, and a nil Task,
// answer UNVERIFIED: without a record of what was read, nothing is
// trusted. Safe for concurrent use.
func (t *Task) InPlay() Trust {
	if t == nil || t.play == nil {
		return TrustUnverified
	}
	return t.play.get()
}

// Lower lowers the run's in-play trust to l when l is less trusted; it
// never raises it, and a level this code does not know lowers it to
// UNVERIFIED. Call it when the model read something RunTool did not run
// (a search a handler made itself, a file it opened) with the trust of
// that input. Safe for concurrent use; a no-op on a nil Task.
func (t *Task) Lower(l Trust) {
	if t == nil || t.play == nil {
		return
	}
	t.play.lowerOther(l)
}

// lowerFile lowers the in-play trust to UNVERIFIED for a file's text the
// model reads next.
func (t *Task) lowerFile() {
	if t == nil || t.play == nil {
		return
	}
	t.play.lowerFile()
}

// lowerTool lowers the in-play trust by the output of tool, which the
// model reads next.
func (t *Task) lowerTool(tool Tool) {
	if t == nil || t.play == nil {
		return
	}
	t.play.lowerTool(tool.Name, tool.OutputTrust)
}

// toolsAllowed reports whether a consequential tool may run without
// asking (inPlay.allowed); never for a Task the SDK did not make.
func (t *Task) toolsAllowed() bool {
	if t == nil || t.play == nil {
		return false
	}
	return t.play.allowed()
}

// untrustedInputs names the untrusted inputs in play, for an approval
// card; empty when nothing is on record (a Task the SDK did not make).
func (t *Task) untrustedInputs() []string {
	if t == nil || t.play == nil {
		return nil
	}
	return t.play.inputs()
}

// NewTask returns a Task for prompt p outside a run the SDK drives: a
// model backend called on its own, a test. Its in-play trust starts at
// p.Lowest. Put it on the context of the model call with WithTask, so that
// RunTool and the model backends keep the in-play rule for the call (the
// backends do so themselves when ctx has no Task). Answer and Fail of
// such a Task post nothing.
func NewTask(p Prompt) *Task {
	return &Task{prompt: p, play: promptInPlay(p)}
}

// promptInPlay starts the in-play trust of a run at prompt p: its lowest,
// and the requests of other people among its elements.
func promptInPlay(p Prompt) *inPlay {
	play := newInPlay(p.Lowest)
	play.noteElements(p.Context.Elements())
	return play
}

type taskKey struct{}

// WithTask returns a context carrying t, where TaskFrom finds it.
func WithTask(ctx context.Context, t *Task) context.Context {
	return context.WithValue(ctx, taskKey{}, t)
}

// TaskFrom returns the Task of ctx: the one the SDK gives every model call
// and handler call of a run, or one WithTask put there; nil when ctx has
// none (its InPlay is then UNVERIFIED).
func TaskFrom(ctx context.Context) *Task {
	t, _ := ctx.Value(taskKey{}).(*Task)
	return t
}
