package model

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"

	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/answerbuf"
	"bothy.example.com/bothy/internal/runs/domain"
)

// RunContext is the GraphQL model of run_context.v1. Its elements are
// finished: every value is computed before the executor sees them.
type RunContext struct {
	RunID              string             `json:"runId"`
	ContextFloorSeq    int                `json:"contextFloorSeq"`
	TriggerMessage     *RunContextMessage `json:"triggerMessage"`
	ThreadContext      RunContextMessages `json:"threadContext"`
	ChannelContext     RunContextMessages `json:"channelContext,omitempty"`
	TruncatedBeforeSeq *int               `json:"truncatedBeforeSeq,omitempty"`
	// LoadFollowUps reads and finishes the run's follow-ups; FollowUps
	// calls it at most once per context, and only when followUps or
	// trustSummary is selected.
	LoadFollowUps func(ctx context.Context) (RunContextMessages, error) `json:"-"`

	followUpsOnce sync.Once
	followUps     RunContextMessages
	followUpsErr  error
}

// FollowUps returns the run's follow-ups still in play, oldest first,
// finished like the other elements (the followUps field; trustSummary
// counts them too). gqlgen binds the field to this method, so its list is
// written by RunContextMessages in one pass. Both fields share one read.
func (rc *RunContext) FollowUps(ctx context.Context) (RunContextMessages, error) {
	rc.followUpsOnce.Do(func() {
		if rc.LoadFollowUps == nil {
			rc.followUps = RunContextMessages{}
			return
		}
		rc.followUps, rc.followUpsErr = rc.LoadFollowUps(ctx)
	})
	return rc.followUps, rc.followUpsErr
}

// RunContextMessage is one finished element of a run context: author,
// role, trust and alreadyDelivered are plain values, computed by the runs
// module's rule (runs.Service.FinishContext), so nothing is left for the
// executor to resolve. It marshals itself (MarshalGQLContext): gqlgen
// hands the whole element, and a RunContextMessages list, to one writer
// instead of running a field context per field and a goroutine per
// element. Every list of context elements (triggerMessage, threadContext,
// channelContext, follow-ups) shares this type and this writer.
type RunContextMessage struct {
	MessageID        string           `json:"messageId"`
	ThreadSeq        int              `json:"threadSeq"`
	CreatedAt        time.Time        `json:"createdAt"`
	ChannelID        string           `json:"channelId"`
	Author           *PrincipalRef    `json:"author"`
	Role             domain.Role      `json:"role"`
	Origin           messaging.Origin `json:"origin"`
	Kind             messaging.Kind   `json:"kind"`
	ContentMd        string           `json:"contentMd"`
	Truncated        *bool            `json:"truncated,omitempty"`
	Attachments      []*Attachment    `json:"attachments"`
	ReplyToMessageID *string          `json:"replyToMessageId,omitempty"`
	Trust            domain.Trust     `json:"trust"`
	Provenance       domain.Trust     `json:"provenance"`
	AlreadyDelivered *bool            `json:"alreadyDelivered,omitempty"`
}

// RunContextMessages is a list of finished context elements, marshalled
// in one pass.
type RunContextMessages []*RunContextMessage

// Elements returns the elements of the context built with it: the
// trigger, the thread context and the channel context. The follow-ups are
// read apart (FollowUps); fields over the whole context (trustSummary) add
// them, so that each element counts once.
func (rc *RunContext) Elements() []*RunContextMessage {
	out := make([]*RunContextMessage, 0, 1+len(rc.ThreadContext)+len(rc.ChannelContext))
	if rc.TriggerMessage != nil {
		out = append(out, rc.TriggerMessage)
	}
	out = append(out, rc.ThreadContext...)
	return append(out, rc.ChannelContext...)
}

// errOutputOnly refuses RunContextMessage as input: the type is output only
// in the schema, so gqlgen never calls the unmarshalers below.
var errOutputOnly = errors.New("RunContextMessage is an output type")

// UnmarshalGQLContext implements graphql.ContextUnmarshaler (required by
// gqlgen's model binding; never called for an output type).
func (m *RunContextMessage) UnmarshalGQLContext(context.Context, any) error { return errOutputOnly }

// UnmarshalGQLContext implements graphql.ContextUnmarshaler (required by
// gqlgen's model binding; never called for an output type).
func (l *RunContextMessages) UnmarshalGQLContext(context.Context, any) error { return errOutputOnly }

// MarshalGQLContext writes the element with the fields selected at the
// current field (aliases, fragments, @skip and @include honoured by
// graphql.CollectFields).
func (m *RunContextMessage) MarshalGQLContext(ctx context.Context, w io.Writer) error {
	sel := selectionOf(ctx)
	buf := make([]byte, 0, 256+len(m.ContentMd))
	buf = sel.appendMessage(buf, m)
	_, err := w.Write(buf)
	return err
}

// MarshalGQLContext writes the whole list with the fields selected at the
// current field in one pass: no per-element goroutine or field context.
// The list is written straight into the executor's answer buffer, grown
// once to the list's size (estimated from the first element: every
// element has the same fields, only its content differs), so that the
// answer is not built twice. A large list takes that room from
// answerbuf's pool; the transport hands it back once the answer is
// written.
func (l RunContextMessages) MarshalGQLContext(ctx context.Context, w io.Writer) error {
	sel := selectionOf(ctx)
	if len(l) == 0 {
		_, err := io.WriteString(w, "[]")
		return err
	}
	first := sel.appendMessage(make([]byte, 0, 512+2*len(contentOf(l[0]))), l[0])
	perElement := len(first) - len(contentOf(l[0])) + 64
	size := 2 + len(first)
	for _, m := range l[1:] {
		size += perElement + len(contentOf(m))
	}
	var buf []byte
	bw, direct := w.(*bytes.Buffer)
	if direct {
		answerbuf.Grow(bw, size)
		buf = bw.AvailableBuffer()
	} else {
		buf = make([]byte, 0, size)
	}
	buf = append(buf, '[')
	buf = append(buf, first...)
	for _, m := range l[1:] {
		buf = append(buf, ',')
		buf = sel.appendMessage(buf, m)
	}
	buf = append(buf, ']')
	_, err := w.Write(buf)
	return err
}

// contentOf is the content of m, or none for a nil element.
func contentOf(m *RunContextMessage) string {
	if m == nil {
		return ""
	}
	return m.ContentMd
}

// selection is the collected selection of RunContextMessage at one field,
// with the nested selections of author and attachments collected once.
type selection struct {
	fields      []graphql.CollectedField
	author      []graphql.CollectedField
	attachments []graphql.CollectedField
	// file is the selection of Attachment.file.
	file []graphql.CollectedField
}

// selectionOf collects the selection of the field being marshalled.
func selectionOf(ctx context.Context) *selection {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || !graphql.HasOperationContext(ctx) {
		// Only the executor marshals these types, always inside a field.
		return &selection{}
	}
	oc := graphql.GetOperationContext(ctx)
	s := &selection{fields: graphql.CollectFields(oc, fc.Field.Selections, []string{"RunContextMessage"})}
	for _, f := range s.fields {
		switch f.Name {
		case "author":
			s.author = graphql.CollectFields(oc, f.Selections, []string{"PrincipalRef"})
		case "attachments":
			s.attachments = graphql.CollectFields(oc, f.Selections, []string{"Attachment"})
			for _, af := range s.attachments {
				if af.Name == "file" {
					s.file = graphql.CollectFields(oc, af.Selections, []string{"File"})
				}
			}
		}
	}
	return s
}

// appendMessage appends m as a JSON object with the selected fields in
// selection order, as gqlgen's own object executor would write them.
func (s *selection) appendMessage(buf []byte, m *RunContextMessage) []byte {
	if m == nil {
		return append(buf, "null"...)
	}
	buf = append(buf, '{')
	for i, f := range s.fields {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendString(buf, f.Alias)
		buf = append(buf, ':')
		buf = s.appendMessageField(buf, f.Name, m)
	}
	return append(buf, '}')
}

// appendMessageField appends the value of m's field name. The enum and
// flag fields that classify the message, and any name without a writer,
// are appendMessageLabel's.
func (s *selection) appendMessageField(buf []byte, name string, m *RunContextMessage) []byte {
	switch name {
	case "__typename":
		return appendString(buf, "RunContextMessage")
	case "messageId":
		return appendString(buf, m.MessageID)
	case "threadSeq":
		return strconv.AppendInt(buf, int64(m.ThreadSeq), 10)
	case "createdAt":
		return appendTime(buf, m.CreatedAt)
	case "channelId":
		return appendString(buf, m.ChannelID)
	case "author":
		return appendRef(buf, s.author, m.Author)
	case "contentMd":
		return appendString(buf, m.ContentMd)
	case "truncated":
		return appendBool(buf, m.Truncated)
	case "attachments":
		return s.appendAttachments(buf, m.Attachments)
	case "replyToMessageId":
		return appendOptString(buf, m.ReplyToMessageID)
	default:
		return appendMessageLabel(buf, name, m)
	}
}

// appendMessageLabel appends the value of m's field name among the enum
// and flag fields that classify the message (role, origin, kind, trust,
// provenance, alreadyDelivered).
func appendMessageLabel(buf []byte, name string, m *RunContextMessage) []byte {
	switch name {
	case "role":
		return appendEnum(buf, string(m.Role))
	case "origin":
		return appendEnum(buf, string(m.Origin))
	case "kind":
		return appendEnum(buf, string(m.Kind))
	case "trust":
		return appendEnum(buf, string(m.Trust))
	case "provenance":
		return appendEnum(buf, string(m.Provenance))
	case "alreadyDelivered":
		return appendBool(buf, m.AlreadyDelivered)
	default:
		// Validation admits only the schema's fields;
		// TestContextMarshalerCoversSchema fails when the schema has a
		// field without a writer here.
		return append(buf, "null"...)
	}
}

// appendAttachments appends the attachments as a JSON list, each with the
// selected fields of Attachment and of its file.
func (s *selection) appendAttachments(buf []byte, as []*Attachment) []byte {
	buf = append(buf, '[')
	for j, a := range as {
		if j > 0 {
			buf = append(buf, ',')
		}
		buf = appendAttachment(buf, s.attachments, s.file, a)
	}
	return append(buf, ']')
}

// appendOptString appends *s, or null when s is nil.
func appendOptString(buf []byte, s *string) []byte {
	if s == nil {
		return append(buf, "null"...)
	}
	return appendString(buf, *s)
}

func appendRef(buf []byte, fields []graphql.CollectedField, r *PrincipalRef) []byte {
	if r == nil {
		return append(buf, "null"...)
	}
	buf = append(buf, '{')
	for i, f := range fields {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendString(buf, f.Alias)
		buf = append(buf, ':')
		switch f.Name {
		case "__typename":
			buf = appendString(buf, "PrincipalRef")
		case "id":
			buf = appendString(buf, r.ID)
		case "kind":
			buf = appendEnum(buf, string(r.Kind))
		case "handle":
			buf = appendString(buf, r.Handle)
		case "displayName":
			buf = appendString(buf, r.DisplayName)
		default:
			buf = append(buf, "null"...)
		}
	}
	return append(buf, '}')
}

func appendAttachment(buf []byte, fields, file []graphql.CollectedField, a *Attachment) []byte {
	buf = append(buf, '{')
	for i, f := range fields {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendString(buf, f.Alias)
		buf = append(buf, ':')
		switch f.Name {
		case "__typename":
			buf = appendString(buf, "Attachment")
		case "fileId":
			buf = appendString(buf, a.FileID)
		case "name":
			buf = appendString(buf, a.Name)
		case "mimeType":
			buf = appendString(buf, a.MimeType)
		case "size":
			buf = strconv.AppendInt(buf, int64(a.Size), 10)
		case "scanStatus":
			buf = appendEnum(buf, string(a.ScanStatus))
		case "transcript":
			buf = appendOptString(buf, a.Transcript)
		case "textStatus":
			buf = appendEnum(buf, string(a.TextStatus))
		case "file":
			buf = appendFile(buf, file, a.File)
		default:
			buf = append(buf, "null"...)
		}
	}
	return append(buf, '}')
}

// appendFile appends f (Attachment.file) with the selected fields.
func appendFile(buf []byte, fields []graphql.CollectedField, f *File) []byte {
	if f == nil {
		return append(buf, "null"...)
	}
	buf = append(buf, '{')
	for i, fl := range fields {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendString(buf, fl.Alias)
		buf = append(buf, ':')
		switch fl.Name {
		case "__typename":
			buf = appendString(buf, "File")
		case "id":
			buf = appendString(buf, f.ID)
		case "name":
			buf = appendString(buf, f.Name)
		case "mimeType":
			buf = appendString(buf, f.MimeType)
		case "size":
			buf = strconv.AppendInt(buf, int64(f.Size), 10)
		case "sha256":
			buf = appendString(buf, f.Sha256)
		case "scanStatus":
			buf = appendEnum(buf, string(f.ScanStatus))
		case "createdAt":
			buf = appendTime(buf, f.CreatedAt)
		case "textStatus":
			buf = appendEnum(buf, string(f.TextStatus))
		default:
			// File.text among them: a run context carries files as
			// metadata only, and their text is read with Query.fileText
			// (docs/design/trust.md#files), so that no file's text
			// enters the context's budget unasked.
			buf = append(buf, "null"...)
		}
	}
	return append(buf, '}')
}

func appendBool(buf []byte, b *bool) []byte {
	switch {
	case b == nil:
		return append(buf, "null"...)
	case *b:
		return append(buf, "true"...)
	default:
		return append(buf, "false"...)
	}
}

// appendTime writes t as the Time scalar does (scalars.Layout, UTC).
func appendTime(buf []byte, t time.Time) []byte {
	buf = append(buf, '"')
	buf = t.UTC().AppendFormat(buf, "2006-01-02T15:04:05.000Z07:00")
	return append(buf, '"')
}

const hexDigits = "0123456789abcdef"

// appendEnum writes the GraphQL name of an enum value bound to a module
// type: the stored value upper-cased (the names gqlgen.yml maps, and the
// rule the REST face converts by; TestAppendEnumNamesSchemaValues holds
// them together). The values are ASCII, so no escaping is needed.
func appendEnum(buf []byte, v string) []byte {
	buf = append(buf, '"')
	for i := 0; i < len(v); i++ {
		c := v[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		buf = append(buf, c)
	}
	return append(buf, '"')
}

// plainWord reports whether none of the eight bytes of w needs a closer
// look: none below 0x20, none a quote or a backslash, none with its high
// bit set (part of a multi-byte rune). A false answer may be wrong (a
// borrow can flag a plain byte), which only costs the byte-wise path; a
// true answer never is.
func plainWord(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	below := (w - ones*0x20) &^ w
	q := w ^ (ones * '"')
	quote := (q - ones) &^ q
	b := w ^ (ones * '\\')
	backslash := (b - ones) &^ b
	return (below|quote|backslash|w)&highs == 0
}

// appendString appends s as a JSON string: quote, backslash and control
// characters escaped, invalid UTF-8 replaced by U+FFFD, everything else
// as is.
func appendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight plain bytes at a time: context content is mostly text
		// that needs no escaping, and this loop writes 80 kB per read.
		if i+8 <= len(s) && plainWord(uint64(s[i])|uint64(s[i+1])<<8|uint64(s[i+2])<<16|uint64(s[i+3])<<24|
			uint64(s[i+4])<<32|uint64(s[i+5])<<40|uint64(s[i+6])<<48|uint64(s[i+7])<<56) {
			i += 8
			continue
		}
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				buf = append(buf, s[start:i]...)
				buf = append(buf, `\ufffd`...)
				i += size
				start = i
				continue
			}
			i += size
			continue
		}
		buf = append(buf, s[start:i]...)
		buf = appendEscaped(buf, c)
		i++
		start = i
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

// appendEscaped appends the JSON escape of the ASCII byte c, a quote, a
// backslash or a control character: the short form where JSON has one,
// \u00XX otherwise.
func appendEscaped(buf []byte, c byte) []byte {
	switch c {
	case '"':
		return append(buf, '\\', '"')
	case '\\':
		return append(buf, '\\', '\\')
	case '\n':
		return append(buf, '\\', 'n')
	case '\r':
		return append(buf, '\\', 'r')
	case '\t':
		return append(buf, '\\', 't')
	default:
		return append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
	}
}
