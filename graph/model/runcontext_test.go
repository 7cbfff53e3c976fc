package model

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
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
		Author: &PrincipalRef{ID: "p1", Kind: "USER", Handle: "alex", DisplayName: "Alex"}, Role: "USER", Origin: "HUMAN", Kind: "TEXT",
		ContentMd: "hello", Truncated: &yes, Attachments: []*Attachment{{FileID: "f1", Name: "a.txt", MimeType: "text/plain", Size: 3,
			ScanStatus: ScanStatusPending, Transcript: &transcript}},
		ReplyToMessageID: &reply, Trust: "TRIGGER", AlreadyDelivered: &yes}
	sel := &selection{fields: collected(names("RunContextMessage")...), author: collected(names("PrincipalRef")...),
		attachments: collected(names("Attachment")...)}
	out := sel.appendMessage(nil, m)
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("invalid JSON %s: %v", out, err)
	}
	for _, n := range names("RunContextMessage") {
		if got["a_"+n] == nil {
			t.Errorf("RunContextMessage.%s has no writer: %s", n, out)
		}
	}
	for _, n := range names("PrincipalRef") {
		if got["a_author"].(map[string]any)["a_"+n] == nil {
			t.Errorf("PrincipalRef.%s has no writer: %s", n, out)
		}
	}
	for _, n := range names("Attachment") {
		if got["a_attachments"].([]any)[0].(map[string]any)["a_"+n] == nil {
			t.Errorf("Attachment.%s has no writer: %s", n, out)
		}
	}
	if got["a_createdAt"] != "2026-11-30T12:00:00.005Z" || got["a___typename"] != "RunContextMessage" || got["a_threadSeq"] != 7.0 {
		t.Errorf("values: %s", out)
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
