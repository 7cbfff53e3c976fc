package domain

import "errors"

// AnswerRun is what the answer check reads of the run an agent names in
// run_id.
type AnswerRun struct {
	ID, ThreadID, AgentID string
	State                 RunState
	// Holder is the process that holds the run ("" for the anonymous
	// holder, and for a queued run).
	Holder string
}

// The verdicts of AnswerVerdict.
var (
	// ErrAnswerRunMismatch: unknown run, another thread or another agent;
	// all answer alike so that run_id cannot probe runs.
	ErrAnswerRunMismatch = errors.New("answer names a run that is not an own run of this thread")
	// ErrAnswerRunNotActive: the agent's own run of this thread has ended.
	ErrAnswerRunNotActive = errors.New("answer names an ended run")
	// ErrAnswerRunClaimed: the agent's own active run is held by another
	// process than the answer's holder.
	ErrAnswerRunClaimed = errors.New("answer names a run another process holds")
)

// AnswerVerdict decides whether an agent's message in thread threadID,
// sent by holder ("" for the anonymous holder), may name run (found is
// false for an unknown run): ownership first (thread and agent), state
// second (queued, running and waiting_input are active), the claim third
// (only the process that holds the run answers in it: docs/design/runs.md#fencing).
func AnswerVerdict(run AnswerRun, found bool, agentID, threadID, holder string) error {
	if !found || run.ThreadID != threadID || run.AgentID != agentID {
		return ErrAnswerRunMismatch
	}
	if !run.State.Active() {
		return ErrAnswerRunNotActive
	}
	if run.Holder != holder {
		return ErrAnswerRunClaimed
	}
	return nil
}
