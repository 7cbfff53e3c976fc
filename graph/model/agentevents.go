package model

import "time"

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
