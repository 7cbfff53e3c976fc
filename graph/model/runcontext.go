package model

import (
	"time"

	"bothy.example.com/bothy/internal/runs"
)

// RunContext is the GraphQL model of run_context.v1. It keeps the module's
// context so that the field resolvers can classify and batch.
type RunContext struct {
	RunID              string               `json:"runId"`
	ContextFloorSeq    int                  `json:"contextFloorSeq"`
	TriggerMessage     *RunContextMessage   `json:"triggerMessage"`
	ThreadContext      []*RunContextMessage `json:"threadContext"`
	ChannelContext     []*RunContextMessage `json:"channelContext,omitempty"`
	TruncatedBeforeSeq *int                 `json:"truncatedBeforeSeq,omitempty"`
	// Module is the module's context (followUps reads it).
	Module *runs.RunContext `json:"-"`
}

// RunContextMessage is one element of a run context. Author, role, trust
// and alreadyDelivered are field resolvers that read the hidden facts.
type RunContextMessage struct {
	MessageID        string        `json:"messageId"`
	ThreadSeq        int           `json:"threadSeq"`
	CreatedAt        time.Time     `json:"createdAt"`
	ChannelID        string        `json:"channelId"`
	Origin           MessageOrigin `json:"origin"`
	Kind             MessageKind   `json:"kind"`
	ContentMd        string        `json:"contentMd"`
	Truncated        *bool         `json:"truncated,omitempty"`
	Attachments      []*Attachment `json:"attachments"`
	ReplyToMessageID *string       `json:"replyToMessageId,omitempty"`
	// Element and Context are the module facts behind the element.
	Element runs.ContextElement `json:"-"`
	Context *runs.RunContext    `json:"-"`
}

// Elements returns every element of the context: the trigger, the thread
// context and the channel context. Every element list of RunContext
// belongs here, so that fields over the whole context (trustSummary) see
// each element once.
func (rc *RunContext) Elements() []*RunContextMessage {
	out := make([]*RunContextMessage, 0, 1+len(rc.ThreadContext)+len(rc.ChannelContext))
	if rc.TriggerMessage != nil {
		out = append(out, rc.TriggerMessage)
	}
	out = append(out, rc.ThreadContext...)
	return append(out, rc.ChannelContext...)
}
