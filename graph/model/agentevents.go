package model

import (
	"time"

	"bothy.example.com/bothy/internal/events"
)

// agentEventIDPrefix starts the id of every agent event; the seq follows.
// Agent seqs are shared by the streams of all agents (one sequence), so the
// id is unique across agents; the prefix keeps it apart from the ids of
// client events, which count their own seqs.
const agentEventIDPrefix = "agent-event:"

// AgentEventBase holds the members every agent event has.
type AgentEventBase struct {
	Seq       string         `json:"seq"`
	Type      string         `json:"type"`
	CreatedAt time.Time      `json:"createdAt"`
	Payload   map[string]any `json:"payload"`
	// RunID is the event's run (resolved by the run field).
	RunID string `json:"runId"`
}

// AgentInvocationEvent is agent.invocation.
type AgentInvocationEvent struct {
	AgentEventBase
	Attempt   int         `json:"attempt"`
	Session   *RunSession `json:"session"`
	ThreadID  string      `json:"threadId"`
	ChannelID string      `json:"channelId"`
	MessageID string      `json:"messageId"`
}

// AgentFollowupEvent is agent.followup.
type AgentFollowupEvent struct {
	AgentEventBase
	MessageID string `json:"messageId"`
}

// RunCancelRequestedEvent is run.cancel_requested.
type RunCancelRequestedEvent struct {
	AgentEventBase
}

// AgentApprovalDecidedEvent is agent.approval_decided.
type AgentApprovalDecidedEvent struct {
	AgentEventBase
	ApprovalID string  `json:"approvalId"`
	OptionID   *string `json:"optionId"`
	State      string  `json:"state"`
}

// IsAgentEvent marks the agent event types.
func (AgentApprovalDecidedEvent) IsAgentEvent() {}

// IsAgentEvent marks the agent event types.
func (AgentInvocationEvent) IsAgentEvent() {}

// IsAgentEvent marks the agent event types.
func (AgentFollowupEvent) IsAgentEvent() {}

// IsAgentEvent marks the agent event types.
func (RunCancelRequestedEvent) IsAgentEvent() {}

// GetSeq returns the event's seq.
func (e AgentEventBase) GetSeq() string { return e.Seq }

// GetType returns the event's type.
func (e AgentEventBase) GetType() string { return e.Type }

// GetCreatedAt returns when the event was written.
func (e AgentEventBase) GetCreatedAt() time.Time { return e.CreatedAt }

// GetPayload returns the event's REST-shaped payload.
func (e AgentEventBase) GetPayload() map[string]any { return e.Payload }

// ID is the event's id (the id field): the seq with the agent prefix, so
// that it is the same in the long poll and the subscription.
func (e AgentEventBase) ID() string { return agentEventIDPrefix + e.Seq }

// Kind is the event's type as the AgentEventKind enum (the kind field).
func (e AgentEventBase) Kind() events.Type { return events.Type(e.Type) }
