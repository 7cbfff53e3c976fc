// Package events owns the client event log: events are written in the unit
// of work of their change, numbered in commit order, and listed after a
// cursor.
package events

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/db"
)

// Type is the type of an event: a client event's or an agent event's.
type Type string

// The client event types (docs/design/model.md#events).
const (
	MessageCreated  Type = "message.created"
	MessageDeleted  Type = "message.deleted"
	ThreadCreated   Type = "thread.created"
	ThreadReopened  Type = "thread.reopened"
	ThreadClosed    Type = "thread.closed"
	ThreadMoved     Type = "thread.moved"
	RunStateChanged Type = "run.state_changed"
	AccessChanged   Type = "access.changed"
	// Administration: a space or channel was created or changed. Space
	// events belong to the space (no channel); channel events to the
	// channel.
	SpaceCreated   Type = "space.created"
	SpaceUpdated   Type = "space.updated"
	ChannelCreated Type = "channel.created"
	ChannelUpdated Type = "channel.updated"
	// RunLiveUpdated is a change of a run's live box: delivered to the
	// events subscriptions of the thread's readers at once, never a row
	// of the log (docs/design/runs.md#live-box).
	RunLiveUpdated Type = "run.live_updated"
)

// The agent event types (docs/design/model.md#events); they go to one agent's
// stream.
const (
	AgentInvocation    Type = "agent.invocation"
	AgentFollowup      Type = "agent.followup"
	RunCancelRequested Type = "run.cancel_requested"
	// AgentApprovalDecided: the person answered an approval of the run, or
	// it expired (docs/design/trust.md#approvals).
	AgentApprovalDecided Type = "agent.approval_decided"
)

// NotifyChannel is the PostgreSQL LISTEN/NOTIFY channel that wakes long
// polls and subscriptions on every replica. Its payload is the new agent
// stream cursor, or NotifyClientEvents when the client event log grew; it
// names no content.
const NotifyChannel = "bothy_agent_events"

// NotifyClientEvents is the payload of the notification sent when client
// events commit: the wake-up of events subscriptions.
const NotifyClientEvents = "events"

// Event is an event to write or as read. An event with AgentID goes to that
// agent's stream (agent_events) instead of the client event log.
type Event struct {
	AgentID   string
	RunID     string
	Seq       int64
	Type      Type
	ChannelID string
	// SpaceID is set instead of ChannelID for events about a space as a
	// whole (space.created, space.updated).
	SpaceID   string
	ThreadID  string
	MessageID string
	Payload   map[string]any
	CreatedAt time.Time
}

// Log is the event log.
type Log struct {
	st       store
	appended *prometheus.CounterVec // nil until Instrument
}

// NewLog returns the event log over pool.
func NewLog(pool db.Querier, c clock.Clock) *Log { return &Log{st: store{pool: pool, clock: c}} }

// appendLockKey is the advisory lock that orders event writers. Held from
// the first append until commit, it makes seq order equal commit order, so
// a reader that has seen seq n never later finds a smaller seq appear.
const appendLockKey = 0x626f746879_01

// Append writes evs in the transaction of ctx, in order: client events to the event log,
// agent events to their agent's stream. Call it at the end of a unit of
// work: it takes the transaction-scoped lock that serialises event writers
// until the commit, and schedules a NOTIFY (sent at commit, so a woken
// reader finds the events) for the client log and for agent streams.
func (l *Log) Append(ctx context.Context, evs ...Event) error {
	if len(evs) == 0 {
		return nil
	}
	nClient, nAgent, err := l.st.appendEvents(ctx, evs)
	if err != nil {
		return err
	}
	l.count(nClient, nAgent)
	return nil
}

// ParseCursor reads a cursor ("" is the start). ok is false for a cursor
// that is not plain decimal digits fitting an int64 (a sign, "+5" or
// "-0", is refused: strconv alone would take it).
func ParseCursor(s string) (int64, bool) {
	if s == "" {
		return 0, true
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
