// Package record holds the run as the runs module stores it and as one
// request read it: the values that the lifecycle (package runs) and the
// run context's read (internal/runs/runcontext) both take, in a package of
// their own so that neither imports the other for them.
package record

import (
	"time"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/runs/domain"
)

// Run is a stored run: the row of the runs table as the lifecycle
// keeps it.
type Run struct {
	ID                  string
	ThreadID            string
	AgentID             string
	SessionID           string
	SessionMode         domain.Mode
	TriggerKind         domain.TriggerKind
	TriggeringMessageID string
	// TriggerThreadID and TriggerSeq locate the triggering message.
	TriggerThreadID string
	TriggerSeq      int64
	TriggeredBy     string
	State           domain.RunState
	CancelRequested bool
	EndReason       string
	Version         int
	QueuedAt        time.Time
	StartedAt       *time.Time
	EndedAt         *time.Time
	LastActivityAt  time.Time
	// Holder is the adapter process that claimed the run and
	// LeaseExpiresAt when its claim lapses (both empty while queued or ended).
	Holder         string
	LeaseExpiresAt *time.Time
	// Attempt counts the run's invocations (1, then one more per expired lease).
	Attempt int
	// TriggerLostAt is when the triggering person lost trigger.
	TriggerLostAt *time.Time
	// ApprovalUntil is the expiry of the approval the run waits for (nil
	// when it waits for none): its stall timer is paused meanwhile.
	ApprovalUntil *time.Time
	// Traceparent is the W3C trace context of the request whose message
	// started the run (empty when tracing was off, the request was not
	// sampled, or no message's request started it): adapters send it on
	// every call of the run, so the run is one trace with its mention.
	Traceparent string
}

// Read is a run as one request read it, with what later decisions of the
// same request reuse (the path and the grant level), so that reading a run
// and then its context costs no second authorization statement.
type Read struct {
	Run     Run
	Thread  chat.Thread
	Channel chat.Channel
	Path    authz.Path
	Grant   authz.Level
	// ForContext is set by ReadForContext: run.context.read was already
	// decided (and its token spent) on this read.
	ForContext bool
	// FollowUpsOnRecord is false when neither the run nor another run of
	// its session had a follow-up when it was read (RunContext has it).
	FollowUpsOnRecord bool
}
