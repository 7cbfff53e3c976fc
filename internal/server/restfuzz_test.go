package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	apidoc "bothy.example.com/bothy/docs/api"
	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/problem"
)

// restFuzzBudget bounds the schema-driven fuzz run inside `make test`.
const restFuzzBudget = 6 * time.Second

// TestRESTSchemaFuzz generates requests from docs/api/openapi.yaml for
// every REST operation and every kind of principal (owner, user, agent,
// app, no token, a wrong token): valid and broken bodies (missing and
// unknown members, nulls, wrong types, NUL characters, out-of-range
// numbers, bad dates, junk and trailing data), real and junk path and
// query parameters, and odd headers (body type, correlation id, Accept). No answer may be a 5xx; every answer must validate
// against the document (the harness checks each one) and every problem
// body must carry the status of its answer and a code of that status.
func TestRESTSchemaFuzz(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{
		"ratelimit.rl.message.burst": "100000", "ratelimit.rl.read.burst": "100000",
		"ratelimit.rl.agent_runtime.burst": "100000", "ratelimit.rl.admin.burst": "100000",
		"events.poll_max_wait": "0s"}})
	ops := restFuzzOps(t)
	w := env.World
	f := &restFuzzer{ids: restFuzzIDs(env)}
	tokens := []string{w.Token("robin"), w.Token("alex"), w.Token("lotse"), w.Token("feedbot"), w.Token("texter"), "", "not-a-token"}
	f.rnd = rand.New(rand.NewPCG(12, 30))

	n, fivexx := 0, 0
	perOp := map[string]int{}
	byStatus := map[int]int{}
	deadline := time.Now().Add(restFuzzBudget)
	for time.Now().Before(deadline) {
		for _, o := range ops {
			tok := tokens[f.rnd.IntN(len(tokens))]
			path := f.target(o)
			body := f.body(o)
			hdr := f.header()
			var r *apitest.Response
			if s, ok := body.(string); ok {
				if hdr.Get("Content-Type") == "" {
					hdr.Set("Content-Type", "application/json")
				}
				r = env.RESTWith(o.method, path, tok, []byte(s), hdr)
			} else {
				r = env.RESTWith(o.method, path, tok, body, hdr)
			}
			n++
			perOp[o.op.OperationID]++
			byStatus[r.Status]++
			if r.Status >= 500 {
				fivexx++
			}
			wantFuzzAnswer(t, o, path, r)
		}
	}
	t.Logf("REST fuzz: %d requests over %d operations and %d principal kinds in %v, %d answered 5xx; by status %v", n, len(ops), len(tokens), restFuzzBudget, fivexx, byStatus)
	if byStatus[http.StatusOK]+byStatus[http.StatusCreated] == 0 {
		t.Error("no request succeeded: the generator makes no valid requests")
	}
	for _, o := range ops {
		if perOp[o.op.OperationID] == 0 {
			t.Errorf("operation %s was not fuzzed", o.op.OperationID)
		}
	}
}

// wantFuzzAnswer checks the answer r to the fuzzed request of o at path:
// no 5xx, and a problem body with the status of its answer and a code of
// that status.
func wantFuzzAnswer(t *testing.T, o restFuzzOp, path string, r *apitest.Response) {
	t.Helper()
	if r.Status >= 500 {
		t.Errorf("%s %s: %d %s", o.method, path, r.Status, r.Body)
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/problem+json") {
		var p apitest.Problem
		if err := json.Unmarshal(r.Body, &p); err != nil || p.Status != r.Status || problem.Code(p.Code).Status() != r.Status {
			t.Errorf("%s %s: problem %s inconsistent with status %d", o.method, path, r.Body, r.Status)
		}
	}
}

// restFuzzOp is one operation of the REST document.
type restFuzzOp struct {
	method, path string
	op           *openapi3.Operation
	params       openapi3.Parameters // of the path and the operation
}

// restFuzzOps returns every operation of docs/api/openapi.yaml, sorted by
// path and method.
func restFuzzOps(t *testing.T) []restFuzzOp {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(apidoc.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	var ops []restFuzzOp
	for _, p := range doc.Paths.InMatchingOrder() {
		for m, o := range doc.Paths.Value(p).Operations() {
			ops = append(ops, restFuzzOp{m, p, o, append(append(openapi3.Parameters{}, doc.Paths.Value(p).Parameters...), o.Parameters...)})
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].path+ops[i].method < ops[j].path+ops[j].method })
	return ops
}

// restFuzzIDs returns real ids of the world by the name of the parameter
// or member that takes them, after posting a message that starts a run.
func restFuzzIDs(env *apitest.Env) map[string][]string {
	w := env.World
	msg := env.MustPost("alex", env.Main("Support/Allgemein"), "fuzz-seed", "hello @lotse")
	ids := map[string][]string{
		"channel_id": {w.Channel("Support/Allgemein").ID, w.Channel("Support/Eskalation").ID, w.Channel("Marketing/Ideas").ID},
		"thread_id":  {env.Main("Support/Allgemein"), env.Main("Support/Eskalation")},
		"message_id": {msg["id"].(string)},
		"space_id":   {w.Spaces["Support"], w.Spaces["Marketing"]},
		"grant_id":   {},
		"run_id":     {},
		"subject_id": {w.ID("writer"), w.ID("sam"), w.ID("texter")},
		"agent_id":   {w.ID("lotse"), w.ID("texter")},
	}
	var grants, runs []string
	env.Pool.QueryRow(context.Background(), `SELECT coalesce(array_agg(id::text), '{}') FROM grants`).Scan(&grants)
	env.Pool.QueryRow(context.Background(), `SELECT coalesce(array_agg(id::text), '{}') FROM runs`).Scan(&runs)
	ids["grant_id"], ids["run_id"] = grants, runs
	ids["reply_to_message_id"] = ids["message_id"]
	ids["target_id"] = append(append([]string{}, ids["channel_id"]...), ids["space_id"]...)
	return ids
}

// restFuzzJunk are the values that stand in for an id or a parameter now
// and then: empty, short, ids of nothing, bad bytes, long, path tricks.
var restFuzzJunk = []string{"", "x", "00000000-0000-0000-0000-000000000000", "01a22d00-0000-7000-8000-000000000000", "\x00", "\xff", strings.Repeat("a", 300), "../..", "%", " "}

// restFuzzer makes the parts of fuzzed requests, all from one random
// source.
type restFuzzer struct {
	rnd *rand.Rand
	// ids are real ids by the name of the parameter or member that takes
	// them (restFuzzIDs).
	ids map[string][]string
}

// pick returns one of xs, or of restFuzzJunk when xs is empty.
func (f *restFuzzer) pick(xs []string) string {
	if len(xs) == 0 {
		return restFuzzJunk[f.rnd.IntN(len(restFuzzJunk))]
	}
	return xs[f.rnd.IntN(len(xs))]
}

// gen generates a valid value of schema s for the member name, nesting at
// most six deep.
func (f *restFuzzer) gen(s *openapi3.Schema, name string, depth int) any {
	if s == nil || depth > 6 {
		return "x"
	}
	if len(s.Enum) > 0 {
		return s.Enum[f.rnd.IntN(len(s.Enum))]
	}
	for _, sub := range [][]*openapi3.SchemaRef{s.OneOf, s.AnyOf, s.AllOf} {
		if len(sub) > 0 {
			return f.gen(sub[f.rnd.IntN(len(sub))].Value, name, depth+1)
		}
	}
	switch {
	case s.Type.Is("object"):
		return f.genObject(s, depth)
	case s.Type.Is("array"):
		var out []any
		for range f.rnd.IntN(3) {
			out = append(out, f.gen(s.Items.Value, name, depth+1))
		}
		return out
	case s.Type.Is("integer"):
		return f.genInteger(s)
	case s.Type.Is("boolean"):
		return f.rnd.IntN(2) == 0
	case s.Type.Is("number"):
		return f.rnd.Float64()
	default:
		return f.genString(s, name)
	}
}

// genObject generates an object of schema s, nested depth deep: its
// required members and now and then each other one.
func (f *restFuzzer) genObject(s *openapi3.Schema, depth int) map[string]any {
	obj := map[string]any{}
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	for k, p := range s.Properties {
		if req[k] || f.rnd.IntN(4) == 0 {
			obj[k] = f.gen(p.Value, k, depth+1)
		}
	}
	return obj
}

// genInteger generates an integer within the bounds of schema s (0 to 100
// where it has none).
func (f *restFuzzer) genInteger(s *openapi3.Schema) int {
	lo, hi := 0.0, 100.0
	if s.Min != nil {
		lo = *s.Min
	}
	if s.Max != nil {
		hi = *s.Max
	}
	return int(lo) + f.rnd.IntN(int(hi-lo)+1)
}

// genString generates a string of schema s for the member name: a time
// for a date-time, a real id (or junk) for a member that takes ids, else
// text.
func (f *restFuzzer) genString(s *openapi3.Schema, name string) string {
	if s.Format == "date-time" {
		return time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)
	}
	if v, ok := f.ids[name]; ok {
		return f.pick(v)
	}
	return fmt.Sprintf("fuzz %d", f.rnd.IntN(1000000))
}

// breakBody turns a valid body into one of the kinds of broken ones.
func (f *restFuzzer) breakBody(body any) any {
	obj, _ := body.(map[string]any)
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	some := func() string {
		if len(keys) == 0 {
			return "x"
		}
		return keys[f.rnd.IntN(len(keys))]
	}
	switch f.rnd.IntN(12) {
	case 0:
		delete(obj, some())
	case 1:
		obj["unknown_member"] = 1
	case 2:
		obj[some()] = nil
	case 3:
		obj[some()] = 12345678901234567890.0
	case 4:
		obj[some()] = "bad\x00value"
	case 5:
		obj[some()] = []any{map[string]any{}}
	case 6:
		obj[some()] = "yesterday"
	case 7:
		return f.pick([]string{"", "{", "[]", "null", "42", `{"a":1} trailing`, "\xff\xfe", `{"a":"\ud800"}`})
	case 8:
		obj[some()] = -1
	case 9:
		obj[some()] = strings.Repeat("long ", 20000)
	default:
		return body
	}
	return obj
}

// target returns the path of a request to o with its path parameters
// filled in and some of its query parameters: real ids, generated values,
// out-of-range numbers and junk.
func (f *restFuzzer) target(o restFuzzOp) string {
	path := o.path
	q := url.Values{}
	for _, pr := range o.params {
		p := pr.Value
		var val string
		switch {
		case f.rnd.IntN(5) == 0:
			val = f.pick(nil)
		case p.Schema != nil && p.Schema.Value.Type.Is("integer"):
			val = fmt.Sprint(f.gen(p.Schema.Value, p.Name, 0))
			if f.rnd.IntN(4) == 0 {
				val = f.pick([]string{"-1", "0", "99999999999", "1.5", "abc"})
			}
		default:
			val = f.pick(f.ids[p.Name])
		}
		if p.In == "path" {
			path = strings.ReplaceAll(path, "{"+p.Name+"}", url.PathEscape(val))
		} else if f.rnd.IntN(2) == 0 {
			q.Set(p.Name, val)
		}
	}
	if enc := q.Encode(); enc != "" {
		path += "?" + enc
	}
	return path
}

// body returns a JSON body for o, valid or broken (breakBody), or nil for
// an operation without one; a string is sent as it is.
func (f *restFuzzer) body(o restFuzzOp) any {
	if o.op.RequestBody == nil {
		return nil
	}
	mt := o.op.RequestBody.Value.Content.Get("application/json")
	if mt == nil {
		return nil
	}
	return f.breakBody(f.gen(mt.Schema.Value, "", 0))
}

// header returns the extra headers of a request: mostly none, sometimes a
// wrong body type, a junk correlation id or an odd Accept.
func (f *restFuzzer) header() http.Header {
	hdr := http.Header{}
	switch f.rnd.IntN(8) {
	case 0:
		hdr.Set("Content-Type", f.pick([]string{"text/plain", "application/x-www-form-urlencoded", "application/json; charset=utf-8", "bogus/"}))
	case 1:
		hdr.Set("Correlation-Id", f.pick([]string{"x", strings.Repeat("c", 200), "ok-correlation-1"}))
	case 2:
		hdr.Set("Accept", f.pick([]string{"application/xml", "*/*", "text/html"}))
	}
	return hdr
}
