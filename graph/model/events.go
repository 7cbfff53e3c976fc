package model

import (
	"strconv"
	"time"

	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/feed"
	"bothy.example.com/bothy/internal/runs/domain"
)

// clientEventIDPrefix starts the id of every client event; the seq follows.
// The seq alone is no id: agent events count seqs of their own, and a
// client cache keys objects by type and id, so the prefix keeps the two
// logs apart and clear of the UUIDs of Node objects.
const clientEventIDPrefix = "event:"

// clientEventID is the id of the client event with seq.
func clientEventID(seq string) string { return clientEventIDPrefix + seq }

// EventBase holds the members every client event has.
type EventBase struct {
	Seq       string         `json:"seq"`
	Type      string         `json:"type"`
	CreatedAt time.Time      `json:"createdAt"`
	ChannelID string         `json:"channelId"`
	Payload   map[string]any `json:"payload"`
}

// IsEvent marks the client event types.
func (EventBase) IsEvent() {}

// GetSeq returns the event's seq.
func (e EventBase) GetSeq() string { return e.Seq }

// GetType returns the event's type.
func (e EventBase) GetType() string { return e.Type }

// GetCreatedAt returns when the event was written.
func (e EventBase) GetCreatedAt() time.Time { return e.CreatedAt }

// GetChannelID returns the channel the event is listed in.
func (e EventBase) GetChannelID() string { return e.ChannelID }

// GetPayload returns the event's REST-shaped payload.
func (e EventBase) GetPayload() map[string]any { return e.Payload }

// ID is the event's id (the id field): the seq with the client prefix, so
// that it is the same wherever the event is read.
func (e EventBase) ID() string { return clientEventID(e.Seq) }

// Kind is the event's type as the EventKind enum (the kind field).
func (e EventBase) Kind() events.Type { return events.Type(e.Type) }

// MessageEvent is message.created or message.deleted.
type MessageEvent struct {
	EventBase
	MessageID string `json:"messageId"`
	ThreadID  string `json:"threadId"`
	// Delivery is set when the replica's fan-out delivers the event to a
	// subscription: its fields then read what every listener reads once
	// (feed.Delivery.Shared).
	Delivery *feed.Delivery `json:"-"`
}

// ThreadEvent is thread.created, thread.reopened or thread.closed.
type ThreadEvent struct {
	EventBase
	ThreadID string `json:"threadId"`
}

// ThreadMovedEvent is thread.moved.
type ThreadMovedEvent struct {
	EventBase
	ThreadID      string `json:"threadId"`
	FromChannelID string `json:"fromChannelId"`
	ToChannelID   string `json:"toChannelId"`
}

// RunStateChangedEvent is run.state_changed.
type RunStateChangedEvent struct {
	EventBase
	RunID     string          `json:"runId"`
	ThreadID  string          `json:"threadId"`
	State     domain.RunState `json:"state"`
	Version   int             `json:"version"`
	EndReason *string         `json:"endReason,omitempty"`
}

// AccessChangedEvent is access.changed.
type AccessChangedEvent struct {
	EventBase
	Change     string  `json:"change"`
	TargetKind string  `json:"targetKind"`
	TargetID   string  `json:"targetId"`
	SubjectID  *string `json:"subjectId,omitempty"`
}

// ChannelEvent is channel.created or channel.updated.
type ChannelEvent struct {
	EventBase
}

// SpaceEvent is space.created or space.updated: it belongs to a space, not
// to a channel, so it has no channel id.
type SpaceEvent struct {
	Seq       string         `json:"seq"`
	Type      string         `json:"type"`
	CreatedAt time.Time      `json:"createdAt"`
	ChannelID *string        `json:"channelId,omitempty"`
	Payload   map[string]any `json:"payload"`
	SpaceID   string         `json:"spaceId"`
}

// IsEvent marks SpaceEvent as a client event.
func (SpaceEvent) IsEvent() {}

// ID is the event's id, as for every client event (EventBase.ID).
func (e SpaceEvent) ID() string { return clientEventID(e.Seq) }

// Kind is the event's type as the EventKind enum.
func (e SpaceEvent) Kind() events.Type { return events.Type(e.Type) }

// RunLiveUpdatedEvent is run.live_updated: a change of a run's live box,
// delivered by the events subscription only (never a row of the log).
type RunLiveUpdatedEvent struct {
	EventBase
	RunID     string  `json:"runId"`
	MessageID string  `json:"messageId"`
	ThreadID  string  `json:"threadId"`
	Version   int     `json:"version"`
	Append    string  `json:"append"`
	Replace   *string `json:"replace"`
	Status    string  `json:"status"`
	Done      bool    `json:"done"`
}

// ID is the event's id: the run and the box's version, since the change
// has no seq of its own.
func (e RunLiveUpdatedEvent) ID() string {
	return "live:" + e.RunID + ":" + strconv.Itoa(e.Version)
}
