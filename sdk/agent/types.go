package agent

import (
	"encoding/json"
	"time"
)

// Trust says how far an element of a run context may instruct the agent.
// The server computes it from live rights on every context read
// (the trust design: live permissions); an adapter never derives it
// itself. Values are the GraphQL enum
// values of the GraphQL schema's RunContext.
type Trust string

// The trust levels of run_context.v1. A value not listed here (a newer
// server) must be handled like TrustUnverified, because an adapter may only
// ever weaken trust, never invent it.
const (
	TrustTrigger    Trust = "TRIGGER"    // the request of the person who triggered the run
	TrustAuthorized Trust = "AUTHORIZED" // another person who may instruct the agent
	TrustSelf       Trust = "SELF"       // the agent's own earlier message
	TrustUnverified Trust = "UNVERIFIED" // data: people without trigger, other agents, apps, imports
	TrustSystem     Trust = "SYSTEM"     // a system line of the chat
)

// Role is the conversational role of a context element.
type Role string

// The roles of run_context.v1.
const (
	RoleUser      Role = "USER"
	RoleAssistant Role = "ASSISTANT"
	RoleOther     Role = "OTHER"
)

// MessageOrigin is who produced a message, set by the server from the
// authenticated principal (never by a client).
type MessageOrigin string

// The origins of messages.
const (
	OriginHuman  MessageOrigin = "HUMAN"
	OriginAgent  MessageOrigin = "AGENT"
	OriginApp    MessageOrigin = "APP"
	OriginImport MessageOrigin = "IMPORT"
	OriginSystem MessageOrigin = "SYSTEM"
)

// MessageKind is the kind of a message.
type MessageKind string

// The kinds of messages.
const (
	MessageKindText   MessageKind = "TEXT"
	MessageKindVoice  MessageKind = "VOICE"
	MessageKindCard   MessageKind = "CARD"
	MessageKindRun    MessageKind = "RUN"
	MessageKindSystem MessageKind = "SYSTEM"
)

// PrincipalKind is the kind of a principal.
type PrincipalKind string

// The kinds of principals.
const (
	PrincipalKindUser  PrincipalKind = "USER"
	PrincipalKindAgent PrincipalKind = "AGENT"
	PrincipalKindApp   PrincipalKind = "APP"
)

// RunState is the state of a run.
type RunState string

// The states of a run; queued, running and waiting_input are active.
const (
	RunStateQueued       RunState = "QUEUED"
	RunStateRunning      RunState = "RUNNING"
	RunStateWaitingInput RunState = "WAITING_INPUT"
	RunStateCompleted    RunState = "COMPLETED"
	RunStateFailed       RunState = "FAILED"
	RunStateCancelled    RunState = "CANCELLED"
)

// Active reports whether a run in state s can still be started, answered
// or finished.
func (s RunState) Active() bool {
	return s == RunStateQueued || s == RunStateRunning || s == RunStateWaitingInput
}

// SessionMode is how a run relates to the agent's conversation in its
// thread (the runs design: sessions).
type SessionMode string

// The session modes of a run.
const (
	SessionModeGuest  SessionMode = "GUEST"
	SessionModeNew    SessionMode = "NEW"
	SessionModeBind   SessionMode = "BIND"
	SessionModeResume SessionMode = "RESUME"
)

// Outcome is how an adapter ends a run with finishRun.
type Outcome string

// The outcomes of finishRun.
const (
	OutcomeCompleted Outcome = "COMPLETED"
	OutcomeFailed    Outcome = "FAILED"
	OutcomeCancelled Outcome = "CANCELLED"
)

// Principal is the authenticated caller (Query.viewer).
type Principal struct {
	ID          string        `json:"id"`
	Kind        PrincipalKind `json:"kind"`
	Handle      string        `json:"handle"`
	DisplayName string        `json:"displayName"`
	Status      string        `json:"status"`
}

// PrincipalRef is how a principal is shown to others. Handle and
// DisplayName are user-controlled text: render them as data, never log
// them.
type PrincipalRef struct {
	ID          string        `json:"id"`
	Kind        PrincipalKind `json:"kind"`
	Handle      string        `json:"handle"`
	DisplayName string        `json:"displayName"`
}

// Attachment is a file attached to a context element. File contents are
// always data and are never part of the context.
type Attachment struct {
	FileID   string `json:"fileId"`
	Name     string `json:"name"`
	MimeType string `json:"mimeType"`
	Size     int64  `json:"size"`
	// ScanStatus is where the file's malware scan stands (PENDING, CLEAN,
	// INFECTED, FAILED); Transcript is a voice message's transcript, nil
	// when there is none. Both are data like the file.
	ScanStatus string  `json:"scanStatus"`
	Transcript *string `json:"transcript"`
	// TextStatus is whether the file's text can be read (Task.FileText):
	// PENDING, READY, UNSUPPORTED, TOO_LARGE or FAILED; empty from a
	// server without files.
	TextStatus string `json:"textStatus"`
}

// RunContextMessage is one element of a run context. Truncated and
// AlreadyDelivered are false when the server omits them; ReplyToMessageID
// is empty when absent.
type RunContextMessage struct {
	MessageID        string        `json:"messageId"`
	ThreadSeq        int           `json:"threadSeq"`
	CreatedAt        time.Time     `json:"createdAt"`
	ChannelID        string        `json:"channelId"`
	Author           PrincipalRef  `json:"author"`
	Role             Role          `json:"role"`
	Origin           MessageOrigin `json:"origin"`
	Kind             MessageKind   `json:"kind"`
	ContentMD        string        `json:"contentMd"`
	Truncated        bool          `json:"truncated"`
	Attachments      []Attachment  `json:"attachments"`
	ReplyToMessageID string        `json:"replyToMessageId"`
	Trust            Trust         `json:"trust"`
	// Provenance is what the element was derived from: for the run's own
	// agent's messages the provenance the server stored with them (an
	// answer written after reading untrusted text is UNVERIFIED however
	// trusted its author), for every other element its trust. Empty (an
	// older server) counts as Trust; Render fences an element whose
	// provenance is below SELF as data.
	Provenance       Trust `json:"provenance"`
	AlreadyDelivered bool  `json:"alreadyDelivered"`
}

// standing is the trust an element is rendered and gated by: the lower of
// its trust and its provenance (its trust when the server sent no
// provenance), UNVERIFIED for a level this code does not know.
func (m RunContextMessage) standing() Trust {
	if m.Provenance == "" {
		return knownTrust(m.Trust)
	}
	return lowerTrust(m.Trust, m.Provenance)
}

// RunContext is run_context.v1, what the server hands an adapter for one
// run (the GraphQL schema's RunContext). ChannelContext is nil when the server
// did not build it (it is built only on the first run of a session in a
// thread with a parent message); TruncatedBeforeSeq is nil when nothing
// older was left out.
type RunContext struct {
	RunID              string               `json:"runId"`
	ContextFloorSeq    int                  `json:"contextFloorSeq"`
	TriggerMessage     RunContextMessage    `json:"triggerMessage"`
	ThreadContext      []RunContextMessage  `json:"threadContext"`
	ChannelContext     *[]RunContextMessage `json:"channelContext"`
	TruncatedBeforeSeq *int                 `json:"truncatedBeforeSeq"`
	// FollowUps are the run's follow-ups still in play, oldest first, each
	// with its live trust like every other element.
	FollowUps []RunContextMessage `json:"followUps"`
	// TrustSummary is the server's least-trust summary over every element;
	// its zero value (a server without it) has Lowest "", which
	// ToolsAllowed and Render treat as unverified.
	TrustSummary TrustSummary `json:"trustSummary"`
	// leaseUntil is when the claim startRun gave this process lapses.
	leaseUntil time.Time
}

// TrustSummary is RunContext.trustSummary: the lowest trust of any element
// and the count per level, computed by the server.
type TrustSummary struct {
	Lowest Trust        `json:"lowest"`
	Counts []TrustCount `json:"counts"`
}

// TrustCount is how many elements carry one trust level.
type TrustCount struct {
	Trust Trust `json:"trust"`
	Count int   `json:"count"`
}

// Elements returns every element in chronological order: the channel
// context (it lies before the thread), the thread context, then the
// trigger.
func (rc RunContext) Elements() []RunContextMessage {
	var out []RunContextMessage
	if rc.ChannelContext != nil {
		out = append(out, *rc.ChannelContext...)
	}
	out = append(out, rc.ThreadContext...)
	out = append(out, rc.TriggerMessage)
	return append(out, rc.FollowUps...)
}

// RunSession is a run's session as the run sees it; ID is nil for a guest
// run.
type RunSession struct {
	ID   *string     `json:"id"`
	Mode SessionMode `json:"mode"`
}

// RunInfo is the part of a run an adapter reads. Optional fields are nil when
// absent.
type RunInfo struct {
	ID                  string       `json:"id"`
	ThreadID            string       `json:"threadId"`
	State               RunState     `json:"state"`
	Version             int          `json:"version"`
	TriggerKind         string       `json:"triggerKind"`
	TriggeringMessageID *string      `json:"triggeringMessageId"`
	CancelRequested     *bool        `json:"cancelRequested"`
	QueuedAt            time.Time    `json:"queuedAt"`
	StartedAt           *time.Time   `json:"startedAt"`
	EndedAt             *time.Time   `json:"endedAt"`
	EndReason           *string      `json:"endReason"`
	Session             RunSession   `json:"session"`
	Agent               PrincipalRef `json:"agent"`
	// Attempt counts the run's invocations; Holder is the adapter process
	// holding it (nil when unclaimed) until LeaseExpiresAt.
	Attempt        int        `json:"attempt"`
	Holder         *string    `json:"holder"`
	LeaseExpiresAt *time.Time `json:"leaseExpiresAt"`
	// Traceparent is the W3C trace context of the request whose message
	// started the run (nil when the server recorded none); WithTraceparent
	// makes the run's calls continue it.
	Traceparent *string `json:"traceparent"`
	// Answers are the text messages the agent posted naming the run,
	// oldest first; only Client.StartRun and Client.Run select them (nil
	// from the other calls).
	Answers []RunAnswer `json:"answers"`
}

// RunAnswer is one answer of a run (Run.answers): a message the run's
// agent posted naming the run, with the clientMsgId it was sent with. The
// reference adapter's clientMsgId is AnswerKey of the request answered.
type RunAnswer struct {
	MessageID   string `json:"messageId"`
	ClientMsgID string `json:"clientMsgId"`
}

// AgentEvent is one event of the agent's stream. Payload is the JSON object
// of the events of the model design; it carries ids, never content.
type AgentEvent struct {
	Seq       string          `json:"seq"`
	Type      string          `json:"type"`
	CreatedAt time.Time       `json:"createdAt"`
	Payload   json.RawMessage `json:"payload"`
}

// The agent event types an adapter acts on.
const (
	EventInvocation      = "agent.invocation"
	EventFollowup        = "agent.followup"
	EventCancelRequested = "run.cancel_requested"
	// EventApprovalDecided: the person answered an approval of the run,
	// or it expired (Ask receives it).
	EventApprovalDecided = "agent.approval_decided"
)

// EventPage is one answer of agentEvents; NextAfter is the cursor for the
// next call (the last seq handed out, or the given cursor when nothing
// came).
type EventPage struct {
	Events    []AgentEvent `json:"events"`
	NextAfter string       `json:"nextAfter"`
}

// Invocation is the payload of agent.invocation.
type Invocation struct {
	RunID     string `json:"run_id"`
	ThreadID  string `json:"thread_id"`
	ChannelID string `json:"channel_id"`
	MessageID string `json:"message_id"`
	Session   struct {
		ID   string `json:"id"`
		Mode string `json:"mode"`
	} `json:"session"`
	// Attempt is 1 for the first invocation of the run and one more for
	// each invocation after an expired lease (a takeover).
	Attempt int `json:"attempt"`
	// Traceparent is the run's trace context (Run.traceparent), empty when
	// the server recorded none. It comes with the invocation because the
	// adapter's first call of the run, the context read, precedes any read
	// of the run itself.
	Traceparent string `json:"traceparent"`
}

// RunRef is the payload of agent.followup and run.cancel_requested (the
// follow-up also names its message).
type RunRef struct {
	RunID     string `json:"run_id"`
	MessageID string `json:"message_id"`
}

// MessageCreate is the input of createMessage. RunID names the run this
// answer belongs to (agents only); empty sends none.
type MessageCreate struct {
	ClientMsgID string `json:"clientMsgId"`
	ContentMD   string `json:"contentMd"`
	RunID       string `json:"runId,omitempty"`
	// InputTrust declares the lowest trust of what the message was derived
	// from (agents only; empty declares nothing). The server stores the
	// message's provenance as the lowest of the run context's lowest, SELF
	// and this, so a declaration can only lower it. The SDK sends the
	// run's in-play trust (Task.InPlay) with every answer. It is not part
	// of the clientMsgId's idempotency.
	InputTrust Trust `json:"inputTrust,omitempty"`
	// AttachmentFileIDs are the files the message carries (uploaded by the
	// agent, which needs the capability filesOut). They are part of the
	// clientMsgId's request: every retry and replay sends the same ids.
	AttachmentFileIDs []string `json:"attachmentFileIds,omitempty"`
}

// Message is the part of a created message the adapter reads.
type Message struct {
	ID        string `json:"id"`
	ThreadID  string `json:"threadId"`
	ThreadSeq int    `json:"threadSeq"`
}

// MessageResult is the answer of createMessage; Replayed is true when the
// server answered an earlier create with the same clientMsgId.
type MessageResult struct {
	Message  Message `json:"message"`
	Replayed bool    `json:"replayed"`
}

// RunFinish is the input of finishRun. Reason is free text without content
// (at most 200 bytes); empty sends none.
type RunFinish struct {
	Outcome Outcome `json:"outcome"`
	Reason  string  `json:"reason,omitempty"`
}
