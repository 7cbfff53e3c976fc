package domain

import "slices"

// RunState is the state of a run. The values are the stored ones; the
// GraphQL enums RunState and RunOutcome (the end states an adapter may ask
// for) bind to this type.
type RunState string

// The run states.
const (
	RunQueued       RunState = "queued"
	RunRunning      RunState = "running"
	RunWaitingInput RunState = "waiting_input"
	RunCompleted    RunState = "completed"
	RunFailed       RunState = "failed"
	RunCancelled    RunState = "cancelled"
)

// runStates are all run states, in the order of the state machine.
var runStates = []RunState{RunQueued, RunRunning, RunWaitingInput, RunCompleted, RunFailed, RunCancelled}

// activeRunStates are the states of a run that has not ended, in the order
// of the state machine: the one list every active check and every SQL
// filter on active runs is built from.
var activeRunStates = []RunState{RunQueued, RunRunning, RunWaitingInput}

// RunStates returns all run states, in the order of the state machine (a
// copy: the table itself is not the caller's to change).
func RunStates() []RunState { return slices.Clone(runStates) }

// ActiveRunStates returns the states of a run that has not ended, in the
// order of the state machine (a copy).
func ActiveRunStates() []RunState { return slices.Clone(activeRunStates) }

// Active reports whether a run in state s has not ended.
func (s RunState) Active() bool {
	for _, a := range activeRunStates {
		if s == a {
			return true
		}
	}
	return false
}

// TriggerKind is what started a run. Only messages trigger runs today; the
// other kinds are part of the stored and API vocabulary.
type TriggerKind string

// The trigger kinds.
const (
	TriggerKindMessage     TriggerKind = "message"
	TriggerKindCommand     TriggerKind = "command"
	TriggerKindInteraction TriggerKind = "interaction"
)

// FollowupState is the state of a follow-up: a message that joined a run
// while the run was active.
type FollowupState string

// The follow-up states.
const (
	// FollowupPending: stored, not yet acknowledged by the agent.
	FollowupPending FollowupState = "pending"
	// FollowupDelivered: the agent acknowledged the agent.followup that
	// carried it.
	FollowupDelivered FollowupState = "delivered"
	// FollowupAbsorbed: its run completed after delivery.
	FollowupAbsorbed FollowupState = "absorbed"
	// FollowupPromoted: it became the trigger of the next run.
	FollowupPromoted FollowupState = "promoted"
	// FollowupDropped: its run failed or was cancelled after delivery, or
	// it never reached a run.
	FollowupDropped FollowupState = "dropped"
)
