// Package messaging owns messages: creation with origin from the principal,
// mentions, idempotency by client_msg_id, tombstones, history reads and the
// one representation function of a message.
package messaging

import (
	"crypto/sha256"
	"regexp"
	"strings"
	"time"

	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/trust"
)

// Message is the one representation of a message, used by every response,
// event and history read (docs/design/model.md#messages).
type Message struct {
	ID               string
	ThreadID         string
	ChannelID        string
	ThreadSeq        int64
	Author           identity.Ref
	Origin           Origin
	Kind             Kind
	ContentMD        string
	ContentTruncated bool
	ReplyToMessageID string
	Mentions         []identity.Ref
	Attachments      []Attachment
	TriggerState     TriggerState
	TriggerReason    string
	SystemCode       string
	RunID            string
	// Provenance is the least trust of what an agent's message was derived
	// from (docs/design/trust.md#provenance): set for every message of
	// origin agent, empty for every other.
	Provenance trust.Level
	Deleted    bool
	CreatedAt  time.Time
}

// Attachment is a file attached to a message (the files module fills it
// in: Attacher on create, the loaders on reads).
type Attachment struct {
	FileID   string
	Name     string
	MIMEType string
	Size     int64
	// ScanStatus is pending, clean, infected, failed or not_scanned.
	ScanStatus ScanStatus
	// Transcript is the transcript of a voice message, when there is one.
	Transcript string
	// TextStatus is where the extraction of the file's text stands
	// (pending, ready, unsupported, too_large or failed).
	TextStatus string
	// SHA256 (lower-case hex) and UploadedAt describe the file itself
	// (Attachment.file).
	SHA256     string
	UploadedAt time.Time
}

// Origin says who wrote a message: set only by the server from the
// principal (the GraphQL enum MessageOrigin binds to it).
type Origin string

// The origins.
const (
	OriginHuman  Origin = "human"
	OriginAgent  Origin = "agent"
	OriginApp    Origin = "app"
	OriginImport Origin = "import"
	OriginSystem Origin = "system"
)

// Kind is the kind of a message (the GraphQL enums MessageKind and, for the
// kinds a client may send, MessageCreateKind bind to it).
type Kind string

// The message kinds; system and run messages are written only by the
// server.
const (
	KindText   Kind = "text"
	KindVoice  Kind = "voice"
	KindCard   Kind = "card"
	KindRun    Kind = "run"
	KindSystem Kind = "system"
)

// TriggerState is what the trigger decision recorded on a human message
// (empty: the message triggered nothing; stored as NULL). The GraphQL enum
// TriggerState binds to it.
type TriggerState string

// The trigger states.
const (
	// TriggerNone: no addressee, or not a human message.
	TriggerNone TriggerState = ""
	// TriggerAccepted: the message started a run.
	TriggerAccepted TriggerState = "accepted"
	// TriggerFollowup: the message joined the active run of its addressee.
	TriggerFollowup TriggerState = "followup"
	// TriggerFailed: the message addressed an agent that may not answer it;
	// the trigger reason says why.
	TriggerFailed TriggerState = "failed"
)

// ScanStatus is the malware scan state of an attachment (the GraphQL enum
// ScanStatus binds to it).
type ScanStatus string

// The scan states.
const (
	ScanPending  ScanStatus = "pending"
	ScanClean    ScanStatus = "clean"
	ScanInfected ScanStatus = "infected"
	ScanFailed   ScanStatus = "failed"
	// ScanNotScanned: no scanner is configured; files.require_scan
	// decides whether such a file is served.
	ScanNotScanned ScanStatus = "not_scanned"
)

// OriginOf returns the origin of a message written with p's token.
func OriginOf(p identity.Principal) Origin {
	switch p.Kind {
	case identity.KindAgent:
		return OriginAgent
	case identity.KindApp:
		return OriginApp
	default:
		return OriginHuman
	}
}

// timeLayout renders timestamps: RFC 3339 with milliseconds, UTC.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

func refPayload(r identity.Ref) map[string]any {
	return map[string]any{"id": r.ID, "kind": string(r.Kind), "handle": r.Handle, "display_name": r.DisplayName}
}

// Payload renders m in the REST shape (snake_case, optional members
// omitted, no null) for event payloads.
func Payload(m Message) map[string]any {
	mentions := make([]any, len(m.Mentions))
	for i, r := range m.Mentions {
		mentions[i] = refPayload(r)
	}
	p := map[string]any{
		"id": m.ID, "thread_id": m.ThreadID, "channel_id": m.ChannelID, "thread_seq": m.ThreadSeq,
		"author": refPayload(m.Author), "origin": string(m.Origin), "kind": string(m.Kind), "content_md": m.ContentMD,
		"mentions": mentions, "attachments": attachmentsPayload(m.Attachments), "created_at": m.CreatedAt.UTC().Format(timeLayout),
	}
	opt := map[string]string{"reply_to_message_id": m.ReplyToMessageID, "trigger_state": string(m.TriggerState),
		"trigger_reason": m.TriggerReason, "system_code": m.SystemCode, "run_id": m.RunID, "provenance": string(m.Provenance)}
	for k, v := range opt {
		if v != "" {
			p[k] = v
		}
	}
	if m.ContentTruncated {
		p["content_truncated"] = true
	}
	if m.Deleted {
		p["deleted"] = true
	}
	return p
}

// attachmentsPayload renders attachments in the REST shape.
func attachmentsPayload(as []Attachment) []any {
	out := make([]any, len(as))
	for i, a := range as {
		// The states at the message's creation, as the GraphQL face
		// shows them then; a later scan or extraction is read from the
		// message, not from its event.
		text := a.TextStatus
		if text == "" {
			text = "pending"
		}
		p := map[string]any{"file_id": a.FileID, "name": a.Name, "mime_type": a.MIMEType, "size": a.Size, "scan_status": string(a.ScanStatus),
			"text_status": text}
		if a.Transcript != "" {
			p["transcript"] = a.Transcript
		}
		out[i] = p
	}
	return out
}

var mentionRE = regexp.MustCompile(`(?:^|[^A-Za-z0-9_@.-])@([A-Za-z0-9][A-Za-z0-9_-]{1,31})`)

// MentionedHandles returns the handles of @handle tokens in content, in
// order of first appearance, lowercased, without duplicates. Whether a
// handle names a principal is decided by the caller.
func MentionedHandles(content string) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range mentionRE.FindAllStringSubmatch(content, -1) {
		h := strings.ToLower(m[1])
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}

// RequestHash is the idempotency hash of a create: a version prefix, then
// the scope (the thread, or for a thread's first message the channel, title
// and parent), the content, the reply and the attachments. run_id is never
// part of it, so a repeat after the run ended is still a replay.
func RequestHash(scope []string, content, replyTo string, attachments []string) []byte {
	h := sha256.New()
	h.Write([]byte("bothy.message.v1\x00"))
	for _, s := range scope {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	h.Write([]byte(content))
	h.Write([]byte{0})
	h.Write([]byte(replyTo))
	h.Write([]byte{0})
	for _, a := range attachments {
		h.Write([]byte(a))
		h.Write([]byte{0})
	}
	return h.Sum(nil)
}
