package domain

import "errors"

// AnswerRun is what the answer check reads of the run an agent names in
// run_id.
type AnswerRun struct {
	ID, ThreadID, AgentID string
	State                 RunState
}

// The verdicts of AnswerVerdict.
var (
	// ErrAnswerRunMismatch: unknown run, another thread or another agent;
	// all answer alike so that run_id cannot probe runs.
	ErrAnswerRunMismatch = errors.New("answer names a run that is not an own run of this thread")
	// ErrAnswerRunNotActive: the agent's own run of this thread has ended.
	ErrAnswerRunNotActive = errors.New("answer names an ended run")
)

// AnswerVerdict decides whether an agent's message in thread threadID may
// name run (found is false for an unknown run): ownership first (thread and
// agent), state second (queued, running and waiting_input are active).
func AnswerVerdict(run AnswerRun, found bool, agentID, threadID string) error {
	if !found || run.ThreadID != threadID || run.AgentID != agentID {
		return ErrAnswerRunMismatch
	}
	if run.State.Active() {
		return nil
	}
	return ErrAnswerRunNotActive
}
