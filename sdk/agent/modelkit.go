package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// What model backends share ([bothy.example.com/bothy/sdk/model/openai], [bothy.example.com/bothy/sdk/model/anthropic], a
// backend of one's own): the tool gate, the note on a cut answer, and the
// errors ErrorKind tells apart.

// ToolsAllowed reports whether a consequential tool may run without asking
// in a run whose in-play trust is lowest (Task.InPlay: the context's
// lowest, lowered by every tool result the model read): only when all of
// it is the request of the person who triggered the run, the agent's own
// words or system lines (trigger, self, system). Not for authorized:
// another person with trigger may instruct the agent, but a consequential
// action in this run is taken for the person who triggered it, so a
// colleague's request (a follow-up in someone else's run, an earlier
// message of the thread) is put to that person first. Never for
// unverified or a level this code does not know (RunTool asks the person
// then). Adapters written in other languages should apply the same gate.
func ToolsAllowed(lowest Trust) bool {
	switch lowest {
	case TrustTrigger, TrustSelf, TrustSystem:
		return true
	default:
		// Authorized, unverified, and any level this code does not know.
		return false
	}
}

// LengthNote ends an answer the server cut at its token limit
// (finish_reason length), so the people in the thread know it is
// incomplete.
const LengthNote = "\n\n_(This answer was cut off at the model's length limit.)_"

// ErrModelReply is wrapped by the errors of a reply that holds no usable
// answer: no choices, empty content, or a body that is no chat completion.
var ErrModelReply = errors.New("adapter: the model server's reply holds no answer")

// ModelHTTPError is an error status of the model server after the last
// attempt. It holds the status only: the body may quote the prompt.
type ModelHTTPError struct {
	Status   int
	Attempts int
}

// Error names the status and the attempts.
func (e *ModelHTTPError) Error() string {
	return fmt.Sprintf("adapter: the model server answered status %d (after %d attempts)", e.Status, e.Attempts)
}

// ToolAnswer runs the model's call of tool t with args behind the gate
// (RunTool, which also lowers the run's in-play trust by the tool's
// output) and returns what the model reads back: the tool's answer, the
// note that the person did not approve, or a line that the tool failed (a
// failure is text for the model, never the end of the answer). log says
// what happened to the call: "tool ran", "tool denied" or "tool failed",
// with the in-play trust after it and never the arguments or the output.
// Both backends use it; a backend of one's own should too.
func ToolAnswer(ctx context.Context, log *slog.Logger, t Tool, args json.RawMessage) string {
	out, err := RunTool(ctx, t, args)
	inPlay := strings.ToLower(string(TaskFrom(ctx).InPlay()))
	switch {
	case errors.Is(err, ErrNotApproved):
		log.Info("tool denied", "tool", t.Name, "consequential", t.Consequential, "in_play", inPlay)
		return out
	case err != nil:
		log.Warn("tool failed", "tool", t.Name, "consequential", t.Consequential, "error_kind", ErrorKind(err), "in_play", inPlay)
		return "The tool " + t.Name + " failed."
	}
	log.Info("tool ran", "tool", t.Name, "consequential", t.Consequential, "in_play", inPlay)
	return out
}
