package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"bothy.example.com/bothy/internal/platform/answerbuf"
	"bothy.example.com/bothy/internal/platform/problem"
)

const renderSchema = `
scalar JSON
enum Color { DEEP_RED BLUE }
type Ref { id: ID! displayName: String! }
type Item { itemId: ID! color: Color! tags: [String] refs: [Ref] payload: JSON count: Int ratio: Float ok: Boolean }
type Wrap { item: Item replayed: Boolean! }
interface Event { type: String! }
type SpaceEvent implements Event { type: String! spaceId: ID! }
type Query { item: Item wrap: Wrap items: [Item!]! events: [Event!]! }
`

func renderShim(t *testing.T) *Shim {
	t.Helper()
	s, err := gqlparser.LoadSchema(&ast.Source{Name: "s", Input: renderSchema})
	if err != nil {
		t.Fatal(err)
	}
	return &Shim{schema: s, types: typeTable(s)}
}

func sameJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("invalid output %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestRenderJSON: the one-pass rendering follows the REST rules: snake_case
// members, null members and __ members left out, null list elements
// dropped, enums lowercased, strings, numbers and JSON scalars as they are.
func TestRenderJSON(t *testing.T) {
	sh := renderShim(t)
	item := &ast.Type{NamedType: "Item"}
	for _, tc := range []struct {
		name, in, want string
		typ            *ast.Type
		omit           []string
	}{
		{"members", `{"itemId":"1","color":"DEEP_RED","count":3,"ratio":-1.5e3,"ok":false}`,
			`{"item_id":"1","color":"deep_red","count":3,"ratio":-1.5e3,"ok":false}`, item, nil},
		{"nulls and typename left out", `{"__typename":"Item","itemId":"1","color":"BLUE","tags":null,"payload":null,"count":null}`,
			`{"item_id":"1","color":"blue"}`, item, nil},
		{"null list elements dropped", `{"itemId":"1","color":"BLUE","tags":["a",null,"b"],"refs":[null,{"id":"r","displayName":"Alex"}]}`,
			`{"item_id":"1","color":"blue","tags":["a","b"],"refs":[{"id":"r","display_name":"Alex"}]}`, item, nil},
		{"strings with JSON punctuation", `{"itemId":"a\"},{\\\"x\":[1]\u0000","color":"BLUE","tags":["\"]"]}`,
			`{"item_id":"a\"},{\\\"x\":[1]\u0000","color":"blue","tags":["\"]"]}`, item, nil},
		{"JSON scalar verbatim", `{"itemId":"1","color":"BLUE","payload":{"someKey":null,"n":[1,{"a":"b"}]}}`,
			`{"item_id":"1","color":"blue","payload":{"someKey":null,"n":[1,{"a":"b"}]}}`, item, nil},
		{"omit", `{"itemId":"1","color":"BLUE","count":2}`, `{"item_id":"1","color":"blue"}`, item, []string{"count"}},
		{"unknown member left out", `{"itemId":"1","color":"BLUE","nope":{"x":1}}`, `{"item_id":"1","color":"blue"}`, item, nil},
		{"empty containers", `[]`, `[]`, &ast.Type{Elem: item}, nil},
		{"whitespace", ` { "itemId" : "1" , "color" : "BLUE" , "tags" : [ "a" , null ] } `,
			`{"item_id":"1","color":"blue","tags":["a"]}`, item, nil},
		{"null value", `null`, `null`, item, nil},
		{"interface value as its object type", `[{"__typename":"SpaceEvent","type":"space.renamed","spaceId":"s1"},{"type":"x","spaceId":"s2","__typename":"SpaceEvent"}]`,
			`[{"type":"space.renamed","space_id":"s1"},{"type":"x","space_id":"s2"}]`, &ast.Type{Elem: &ast.Type{NamedType: "Event"}}, nil},
		{"interface value without __typename keeps interface members", `[{"type":"x","spaceId":"s1"}]`,
			`[{"type":"x"}]`, &ast.Type{Elem: &ast.Type{NamedType: "Event"}}, nil},
		{"interface value with an unknown __typename keeps interface members", `[{"__typename":"Nope","type":"x","spaceId":"s1"}]`,
			`[{"type":"x"}]`, &ast.Type{Elem: &ast.Type{NamedType: "Event"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := sh.renderJSON(nil, &scanner{in: []byte(tc.in)}, tc.typ, tc.omit)
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, out, tc.want)
		})
	}
	for _, bad := range []string{`{"itemId":"1"`, `{"itemId" "1"}`, `["a"`, `{"itemId":"1}`, `{"tags":[1 2]}`, ``} {
		if _, err := sh.renderJSON(nil, &scanner{in: []byte(bad)}, item, nil); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestRestBody: the envelope rules of a route: result member, null result
// is not_found, unwrap, replay flag, errors become the problem.
func TestRestBody(t *testing.T) {
	sh := renderShim(t)
	q := sh.schema.Query
	route := func(r Route, result string) *compiled {
		r.Result = result
		return &compiled{Route: r, resType: q.Fields.ForName(result).Type}
	}
	for _, tc := range []struct {
		name, in string
		c        *compiled
		status   int
		want     string
		replay   bool
		problem  string
	}{
		{"result", `{"data":{"item":{"itemId":"1","color":"BLUE"}}}`, route(Route{}, "item"), 200, `{"item_id":"1","color":"blue"}`, false, ""},
		{"created", `{"data":{"item":{"itemId":"1","color":"BLUE"}}}`, route(Route{Created: true}, "item"), 201, `{"item_id":"1","color":"blue"}`, false, ""},
		{"null result", `{"data":{"item":null}}`, route(Route{}, "item"), 0, "", false, "not_found"},
		{"unwrap and replay", `{"data":{"wrap":{"replayed":true,"item":{"itemId":"2","color":"DEEP_RED"}}}}`,
			route(Route{Created: true, Unwrap: "item", ReplayFlag: "replayed"}, "wrap"), 200, `{"item_id":"2","color":"deep_red"}`, true, ""},
		{"unwrap no replay", `{"data":{"wrap":{"item":{"itemId":"2","color":"BLUE"},"replayed":false}}}`,
			route(Route{Created: true, Unwrap: "item", ReplayFlag: "replayed"}, "wrap"), 201, `{"item_id":"2","color":"blue"}`, false, ""},
		{"list", `{"data":{"items":[{"itemId":"1","color":"BLUE"}]}}`, route(Route{}, "items"), 200, `[{"item_id":"1","color":"blue"}]`, false, ""},
		{"errors", `{"errors":[{"message":"Not found","extensions":{"code":"not_found","status":404}}],"data":null}`, route(Route{}, "item"), 0, "", false, "not_found"},
		{"garbage", `{"data":{"item":{"itemId":`, route(Route{}, "item"), 0, "", false, "internal_error"},
		{"no data", `{"data":null}`, route(Route{}, "item"), 0, "", false, "internal_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			// A buffer that held an earlier answer: the body starts anew.
			stale := append(make([]byte, 0, 64), `{"stale":true}`...)[:0]
			out, status, err := sh.restBody(w, []byte(tc.in), tc.c, stale)
			if tc.problem != "" {
				if err == nil || !containsCode(err, tc.problem) {
					t.Fatalf("got %v, want problem %s", err, tc.problem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if status != tc.status || (w.Header().Get("Idempotent-Replay") == "true") != tc.replay {
				t.Fatalf("status %d replay %q", status, w.Header().Get("Idempotent-Replay"))
			}
			sameJSON(t, out, tc.want)
		})
	}
}

func containsCode(err error, code string) bool {
	var p *problem.Error
	return errors.As(err, &p) && string(p.Code) == code
}

// TestTypeTable: every type of the schema is in the table, objects and
// interfaces with each field's type and REST name.
func TestTypeTable(t *testing.T) {
	sh := renderShim(t)
	for name, def := range sh.schema.Types {
		ti, ok := sh.types[name]
		if !ok || ti.def != def {
			t.Fatalf("type %s (%s) not in the table", name, def.Kind)
		}
		if def.Kind != ast.Object && def.Kind != ast.Interface {
			if ti.fields != nil {
				t.Fatalf("type %s (%s) has fields in the table", name, def.Kind)
			}
			continue
		}
		checkFieldTable(t, sh, name, ti)
	}
	if ti := sh.types["Ref"]; ti == nil || ti.fields["displayName"].snake != "display_name" {
		t.Fatalf("Ref.displayName not rendered as display_name")
	}
}

// checkFieldTable checks the fields of ti, the table's entry of the object
// or interface name: one per field of the schema, each with its name, type,
// REST name and the table's entry of its named type.
func checkFieldTable(t *testing.T, sh *Shim, name string, ti *typeInfo) {
	t.Helper()
	def := ti.def
	if len(ti.fields) != len(def.Fields) {
		t.Fatalf("type %s: %d fields, want %d", name, len(ti.fields), len(def.Fields))
	}
	for _, f := range def.Fields {
		got := ti.fields[f.Name]
		if got == nil || got.name != f.Name || got.typ != f.Type || got.snake != Snake(f.Name) || got.named != sh.types[f.Type.Name()] || got.named == nil {
			t.Fatalf("%s.%s: %+v", name, f.Name, got)
		}
	}
}

// TestRecorderGrowsOnce: the recorder takes a declared length as the
// answer's size, and records what is written whatever was declared.
func TestRecorderGrowsOnce(t *testing.T) {
	for _, tc := range []struct {
		name, length string
		minCap       int
	}{
		{"declared", "5000", 5000},
		{"undeclared", "", 0},
		{"declared too large to hold", "2000000", 0},
		{"not a number", "many", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{header: http.Header{}, body: &bytes.Buffer{}}
			if tc.length != "" {
				rec.header.Set("Content-Length", tc.length)
			}
			rec.Write([]byte(`{"data":`))
			if rec.body.Cap() < tc.minCap {
				t.Fatalf("capacity %d after the first write, want at least %d", rec.body.Cap(), tc.minCap)
			}
			if tc.minCap == 0 && rec.body.Cap() > 1024 {
				t.Fatalf("capacity %d without a usable declared length", rec.body.Cap())
			}
			rec.Write([]byte(`null}`))
			if got := rec.body.String(); got != `{"data":null}` || rec.status != http.StatusOK {
				t.Fatalf("recorded %q status %d", got, rec.status)
			}
		})
	}
}

// TestBufferPool: buffers come back empty, and a buffer grown past the
// limit is not kept.
func TestBufferPool(t *testing.T) {
	b := getBuffers()
	b.answer.WriteString("answer")
	b.out = append(b.out, "out"...)
	putBuffers(b)
	for i := 0; i < 10; i++ {
		got := getBuffers()
		if got.answer.Len() != 0 || len(got.out) != 0 {
			t.Fatalf("pooled buffers not empty: %q %q", got.answer.String(), got.out)
		}
	}
	big := &buffers{out: make([]byte, 0, answerbuf.MaxPooled+1)}
	putBuffers(big)
	for i := 0; i < 10; i++ {
		if got := getBuffers(); cap(got.out) > answerbuf.MaxPooled {
			t.Fatalf("a buffer over the limit came back from the pool")
		}
	}
}

// TestScannerStr: a string ends at the first quote after an even number
// of backslashes, wherever the quotes and backslashes fall.
func TestScannerStr(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want "" for a syntax error
	}{
		{`"plain",`, `"plain"`},
		{`""`, `""`},
		{`"a\"b"`, `"a\"b"`},
		{`"a\\"b"`, `"a\\"`},
		{`"a\\\"b"`, `"a\\\"b"`},
		{`"\\"`, `"\\"`},
		{`"\"`, ``},
		{`"no end`, ``},
		{`"` + strings.Repeat("x", 100) + `\"` + strings.Repeat("y", 50) + `"]`, `"` + strings.Repeat("x", 100) + `\"` + strings.Repeat("y", 50) + `"`},
	} {
		s := scanner{in: []byte(tc.in)}
		got, err := s.str()
		if tc.want == "" {
			if err == nil {
				t.Errorf("%s: %s, want a syntax error", tc.in, got)
			}
			continue
		}
		if err != nil || string(got) != tc.want || s.pos != len(tc.want) {
			t.Errorf("%s: %s (pos %d), %v; want %s", tc.in, got, s.pos, err, tc.want)
		}
	}
}

// TestMemberHints: the elements of a list whose members come in other
// orders, with other or unknown members, or as other object types, render
// as each one alone does.
func TestMemberHints(t *testing.T) {
	sh := renderShim(t)
	item := &ast.Type{NamedType: "Item"}
	elems := []string{
		`{"itemId":"1","color":"BLUE","count":1}`,
		`{"itemId":"2","color":"RED","count":2}`,
		`{"count":3,"itemId":"3","color":"BLUE"}`,
		`{"itemId":"4","nope":1,"color":"BLUE"}`,
		`{"itemId":"5"}`,
		`{"itemId":"6","color":"BLUE","count":6,"tags":["x"]}`,
		`{"itemId":"7","color":"BLUE","count":7}`,
	}
	var want []string
	for _, e := range elems {
		out, err := sh.renderJSON(nil, &scanner{in: []byte(e)}, item, nil)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, string(out))
	}
	out, err := sh.renderJSON(nil, &scanner{in: []byte("[" + strings.Join(elems, ",") + "]")}, &ast.Type{Elem: item}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, w := string(out), "["+strings.Join(want, ",")+"]"; got != w {
		t.Fatalf("list:\n got %s\nwant %s", got, w)
	}
	events := `[{"__typename":"SpaceEvent","type":"a","spaceId":"s1"},{"type":"b","spaceId":"s2"},{"__typename":"SpaceEvent","type":"c","spaceId":"s3"}]`
	out, err = sh.renderJSON(nil, &scanner{in: []byte(events)}, &ast.Type{Elem: &ast.Type{NamedType: "Event"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, out, `[{"type":"a","space_id":"s1"},{"type":"b"},{"type":"c","space_id":"s3"}]`)
}
