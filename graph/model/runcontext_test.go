package model

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/runs/domain"
)

func collected(names ...string) []graphql.CollectedField {
	out := make([]graphql.CollectedField, len(names))
	for i, n := range names {
		out[i] = graphql.CollectedField{Field: &ast.Field{Alias: "a_" + n, Name: n}}
	}
	return out
}

func loadSchema(t *testing.T) *ast.Schema {
	t.Helper()
	files, _ := filepath.Glob("../../schema/*.graphqls")
	var srcs []*ast.Source
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, &ast.Source{Name: f, Input: string(b)})
	}
	s, err := gqlparser.LoadSchema(srcs...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestContextMarshalerCoversSchema: every field the schema gives
// RunContextMessage, PrincipalRef and Attachment has a writer, so a field
// added to the schema cannot silently come out null.
func TestContextMarshalerCoversSchema(t *testing.T) {
	schema := loadSchema(t)
	names := func(typ string) []string {
		var out []string
		for _, f := range schema.Types[typ].Fields {
			out = append(out, f.Name)
		}
		return append(out, "__typename")
	}
	yes, reply, transcript := true, "m0", "hello"
	m := &RunContextMessage{MessageID: "m1", ThreadSeq: 7, CreatedAt: time.Date(2026, 11, 30, 12, 0, 0, 5e6, time.UTC), ChannelID: "c1",
		Author: &PrincipalRef{ID: "p1", Kind: identity.KindUser, Handle: "alex", DisplayName: "Alex"}, Role: domain.RoleUser, Origin: messaging.OriginHuman, Kind: messaging.KindText,
		ContentMd: "hello", Truncated: &yes, Attachments: []*Attachment{{FileID: "f1", Name: "a.txt", MimeType: "text/plain", Size: 3,
			ScanStatus: messaging.ScanPending, Transcript: &transcript, TextStatus: TextStatusReady,
			File: &File{ID: "f1", Name: "a.txt", MimeType: "text/plain", Size: 3, Sha256: "ab", ScanStatus: messaging.ScanPending,
				CreatedAt: time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC), TextStatus: TextStatusReady}}},
		ReplyToMessageID: &reply, Trust: domain.TrustTrigger, AlreadyDelivered: &yes}
	sel := &selection{fields: collected(names("RunContextMessage")...), author: collected(names("PrincipalRef")...),
		attachments: collected(names("Attachment")...), file: collected(names("File")...)}
	out := sel.appendMessage(nil, m)
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("invalid JSON %s: %v", out, err)
	}
	wantWriters(t, "RunContextMessage", names("RunContextMessage"), got, out)
	wantWriters(t, "PrincipalRef", names("PrincipalRef"), got["a_author"].(map[string]any), out)
	attachment := got["a_attachments"].([]any)[0].(map[string]any)
	wantWriters(t, "Attachment", names("Attachment"), attachment, out)
	// File.text is null in a context by design: read with Query.fileText.
	wantWriters(t, "File", names("File"), attachment["a_file"].(map[string]any), out, "text")
	if got["a_createdAt"] != "2026-11-30T12:00:00.005Z" || got["a___typename"] != "RunContextMessage" || got["a_threadSeq"] != 7.0 {
		t.Errorf("values: %s", out)
	}
	if got["a_role"] != "USER" || got["a_origin"] != "HUMAN" || got["a_kind"] != "TEXT" || got["a_trust"] != "TRIGGER" ||
		got["a_author"].(map[string]any)["a_kind"] != "USER" || got["a_attachments"].([]any)[0].(map[string]any)["a_scanStatus"] != "PENDING" {
		t.Errorf("enum values: %s", out)
	}
}

// wantWriters checks that obj, one object of the marshaler's output out,
// has a value for every field of the schema type typ (fields) but those in
// skip: a field without a writer would be missing from a run's context.
func wantWriters(t *testing.T, typ string, fields []string, obj map[string]any, out []byte, skip ...string) {
	t.Helper()
	for _, n := range fields {
		if !slices.Contains(skip, n) && obj["a_"+n] == nil {
			t.Errorf("%s.%s has no writer: %s", typ, n, out)
		}
	}
}

// TestAppendEnumNamesSchemaValues: the one-pass writer names every value of
// the enums it writes exactly as the schema does, and every schema value
// has its constant (the same pairs gqlgen.yml binds).
func TestAppendEnumNamesSchemaValues(t *testing.T) {
	schema := loadSchema(t)
	for _, tc := range []struct {
		enum   string
		values []string
	}{
		{"Role", []string{string(domain.RoleUser), string(domain.RoleAssistant), string(domain.RoleOther)}},
		{"Trust", []string{string(domain.TrustTrigger), string(domain.TrustAuthorized), string(domain.TrustSelf),
			string(domain.TrustUnverified), string(domain.TrustSystem)}},
		{"MessageOrigin", []string{string(messaging.OriginHuman), string(messaging.OriginAgent), string(messaging.OriginApp),
			string(messaging.OriginImport), string(messaging.OriginSystem)}},
		{"MessageKind", []string{string(messaging.KindText), string(messaging.KindVoice), string(messaging.KindCard),
			string(messaging.KindRun), string(messaging.KindSystem)}},
		{"PrincipalKind", []string{string(identity.KindUser), string(identity.KindAgent), string(identity.KindApp)}},
		{"ScanStatus", []string{string(messaging.ScanPending), string(messaging.ScanClean), string(messaging.ScanInfected),
			string(messaging.ScanFailed), string(messaging.ScanNotScanned)}},
		{"TextStatus", []string{string(TextStatusPending), string(TextStatusReady), string(TextStatusUnsupported),
			string(TextStatusTooLarge), string(TextStatusFailed)}},
	} {
		def := schema.Types[tc.enum]
		if len(def.EnumValues) != len(tc.values) {
			t.Errorf("%s: schema has %d values, the test %d", tc.enum, len(def.EnumValues), len(tc.values))
		}
		for _, v := range tc.values {
			var name string
			if err := json.Unmarshal(appendEnum(nil, v), &name); err != nil {
				t.Fatalf("%s %q: %v", tc.enum, v, err)
			}
			if def.EnumValues.ForName(name) == nil {
				t.Errorf("%s %q is written as %q, not a schema value", tc.enum, v, name)
			}
		}
	}
}

// TestAppendString: every string comes out as the JSON string of the same
// text (control characters, quotes, backslashes, multi-byte runes), and
// invalid UTF-8 as U+FFFD.
func TestAppendString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{`quote " and \ backslash`, `quote " and \ backslash`},
		{"line\nfeed\rreturn\ttab\x00nul\x1fus", "line\nfeed\rreturn\ttab\x00nul\x1fus"},
		{"Grüße 👋 </script> & \u2028", "Grüße 👋 </script> & \u2028"},
		{"bad \xff byte", "bad \ufffd byte"},
		{"cut \xe2\x82", "cut \ufffd\ufffd"},
	} {
		raw := appendString(nil, tc.in)
		if !json.Valid(raw) {
			t.Fatalf("%q: invalid JSON %s", tc.in, raw)
		}
		var got string
		if err := json.Unmarshal(raw, &got); err != nil || got != tc.want {
			t.Fatalf("%q: got %q (%v), want %q", tc.in, got, err, tc.want)
		}
	}
}

// TestAppendStringEveryOffset: each byte that needs escaping (and each
// multi-byte rune) is found at every offset of a long plain text, where
// the writer steps eight bytes at a time, and at its very end.
func TestAppendStringEveryOffset(t *testing.T) {
	specials := []string{"\x00", "\x1f", "\n", `"`, `\\`, "\x7f", "ü", "👋", "\xff", " ", "~"}
	plain := strings.Repeat("Alex asked Sam and Robin. ", 3)
	for _, sp := range specials {
		for at := 0; at <= len(plain); at++ {
			in := plain[:at] + sp + plain[at:]
			want := strings.ToValidUTF8(in, "\ufffd")
			var got string
			raw := appendString(nil, in)
			if err := json.Unmarshal(raw, &got); err != nil || got != want {
				t.Fatalf("%q at %d: got %q (%v), want %q", sp, at, got, err, want)
			}
		}
	}
}

// TestPlainWord: a word is plain only when all eight bytes are printable
// ASCII other than a quote and a backslash.
func TestPlainWord(t *testing.T) {
	word := func(s string) uint64 {
		var w uint64
		for i := 7; i >= 0; i-- {
			w = w<<8 | uint64(s[i])
		}
		return w
	}
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"abcdefgh", true},
		{"  ~~!#$%", true},
		{"abc\"defg", false},
		{"abcdefg\\", false},
		{"\x00bcdefgh"[:8], false},
		{"abcdefg\x1f", false},
		{"abcdefg\x80", false},
		{"\xffbcdefgh", false},
		{"abc\ndefg", false},
		{"abcdef\x7f ", true},
	} {
		if got := plainWord(word(tc.in)); got != tc.want {
			t.Errorf("plainWord(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestRunContextMessagesList: a list is one JSON array of the elements
// with the selected fields in selection order; nil elements are null.
func TestRunContextMessagesList(t *testing.T) {
	sel := &selection{fields: []graphql.CollectedField{{Field: &ast.Field{Alias: "seq", Name: "threadSeq"}}, {Field: &ast.Field{Alias: "id", Name: "messageId"}}}}
	var buf []byte
	for i, m := range []*RunContextMessage{{MessageID: "a", ThreadSeq: 1}, {MessageID: "b", ThreadSeq: 2}} {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = sel.appendMessage(buf, m)
	}
	if string(buf) != `{"seq":1,"id":"a"},{"seq":2,"id":"b"}` {
		t.Fatalf("got %s", buf)
	}
	if string(sel.appendMessage(nil, nil)) != "null" {
		t.Fatal("nil element is not null")
	}
}

// TestMarshalOutsideExecutor: outside a field of the executor the writers
// select nothing rather than fail.
func TestMarshalOutsideExecutor(t *testing.T) {
	var buf bytes.Buffer
	if err := (RunContextMessages{{MessageID: "a"}, {MessageID: "b"}}).MarshalGQLContext(context.Background(), &buf); err != nil || buf.String() != "[{},{}]" {
		t.Fatalf("%q %v", buf.String(), err)
	}
}

// TestListWriters: the list writes the same bytes straight into a
// bytes.Buffer that already holds part of the answer as into any other
// writer, nil elements and the empty list included.
func TestListWriters(t *testing.T) {
	for _, l := range []RunContextMessages{{}, {{MessageID: "a", ContentMd: "x"}, nil, {MessageID: "b", ContentMd: strings.Repeat("y", 5000)}}} {
		buf := bytes.NewBufferString(`{"data":`)
		if err := l.MarshalGQLContext(context.Background(), buf); err != nil {
			t.Fatal(err)
		}
		var other strings.Builder
		if err := l.MarshalGQLContext(context.Background(), &other); err != nil {
			t.Fatal(err)
		}
		if buf.String() != `{"data":`+other.String() {
			t.Fatalf("buffer %q, writer %q", buf.String(), other.String())
		}
		if want := map[int]string{0: "[]", 3: "[{},null,{}]"}[len(l)]; other.String() != want {
			t.Fatalf("got %q, want %q", other.String(), want)
		}
	}
}
