package agent

import (
	"errors"
	"fmt"
)

// What model backends share (sdk/model/openai, sdk/model/anthropic, a
// backend of one's own): the tool gate, the note on a cut answer, and the
// errors ErrorKind tells apart.

// ToolsAllowed reports whether a consequential tool may run without asking
// in a run whose in-play trust is lowest (Task.InPlay: the context's
// lowest, lowered by every tool result the model read): only when all of
// it is trigger, authorized, self or system, never for a level this code
// does not know (RunTool asks the person then). Adapters written in other
// languages should apply the same gate.
func ToolsAllowed(lowest Trust) bool {
	switch lowest {
	case TrustTrigger, TrustAuthorized, TrustSelf, TrustSystem:
		return true
	}
	return false
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
