package model

import (
	"time"

	"bothy.example.com/bothy/internal/runs"
	"bothy.example.com/bothy/internal/runs/domain"
)

// Run is the GraphQL model of a run. It is written by hand (not generated)
// because its field resolvers need ids that the schema does not expose as
// fields: the agent and the person who triggered the run.
type Run struct {
	ID                  string             `json:"id"`
	ThreadID            string             `json:"threadId"`
	State               domain.RunState    `json:"state"`
	Version             int                `json:"version"`
	TriggerKind         domain.TriggerKind `json:"triggerKind"`
	TriggeringMessageID *string            `json:"triggeringMessageId,omitempty"`
	Session             *RunSession        `json:"session"`
	CancelRequested     *bool              `json:"cancelRequested,omitempty"`
	QueuedAt            time.Time          `json:"queuedAt"`
	StartedAt           *time.Time         `json:"startedAt,omitempty"`
	EndedAt             *time.Time         `json:"endedAt,omitempty"`
	EndReason           *string            `json:"endReason,omitempty"`
	Attempt             int                `json:"attempt"`
	Holder              *string            `json:"holder,omitempty"`
	LeaseExpiresAt      *time.Time         `json:"leaseExpiresAt,omitempty"`
	// AgentID is the run's agent (resolved by the agent field).
	AgentID string `json:"-"`
	// TriggeredByID is the triggering person, if any (triggeredBy field).
	TriggeredByID string `json:"-"`
	// Read is how the request read the run, when it did (the context field
	// reuses its decision).
	Read *runs.Read `json:"-"`
}
