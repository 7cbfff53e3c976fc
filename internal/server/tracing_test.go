package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/tracing/tracingtest"
)

// testTracesOfRequests: with tracing.otlp_endpoint set, a GraphQL request
// and a REST request each export one trace to the collector: the request's
// span with its correlation id, the GraphQL operation's span as its child
// (the REST shim runs a stored operation), the door's decision and the
// statements below it. A request that brings a traceparent continues the
// caller's trace, over a WebSocket too. Stopping the server exports what
// is queued.
func testTracesOfRequests(t *testing.T) {
	t.Parallel()
	recv := tracingtest.NewReceiver(t)
	env := apitest.Start(t, apitest.Options{Config: map[string]string{config.TracingOTLPEndpoint: recv.URL},
		Tracer: db.StatementSpans{}})
	token := env.World.Token("alex")
	thread := env.Main("Support/Allgemein")

	traceGraphQLRequest(t, env, token, thread)
	// REST, with a proxy's request id as the correlation id.
	if r := env.RESTWith(http.MethodGet, "/api/v1/threads/"+thread+"/messages", token, nil,
		http.Header{"X-Request-Id": {"trace-rest-0001"}}); r.Status != http.StatusOK {
		t.Fatalf("rest: %d %s", r.Status, r.Body)
	}
	// A caller's trace, continued.
	const callerTrace, callerSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	if r := env.RESTWith(http.MethodGet, "/api/v1/threads/"+thread, token, nil, http.Header{
		"Traceparent": {"00-" + callerTrace + "-" + callerSpan + "-01"}, "Correlation-Id": {"trace-parent-0001"}}); r.Status != http.StatusOK {
		t.Fatalf("rest with traceparent: %d %s", r.Status, r.Body)
	}
	// A WebSocket connection with the caller's trace: the upgrade passes
	// the request layer, and the statements of its work (connection_init's
	// authentication, the subscription's events) are in that trace; they
	// ended before the event was sent, so they are exported below.
	const socketTrace = "5b8efff798038103d269b633813fc60c"
	w := dialRaw(t, env, http.Header{"Traceparent": {"00-" + socketTrace + "-eee19b7ec3c1b174-01"}})
	w.init(token)
	w.send(subscribeAfter("s", `subscription TraceEvents($a: String) { events(after: $a) { seq type } }`, logEnd(env)))
	env.MustPost("alex", thread, "trace-socket-1", "traced over the socket")
	w.created("s")
	// Closed by the client first: the server's own close at stop would wait
	// for an answer this test does not read.
	w.c.Close(websocket.StatusNormalClosure, "")
	env.Stop()

	if rej := recv.Rejected(); len(rej) > 0 {
		t.Fatalf("the collector rejected %v", rej)
	}
	spans := recv.Spans()
	wantSpansOfSocket(t, spans, token, socketTrace, env.World.ID("alex"))
	cases := []requestTraceCase{
		{"trace-graphql-0001", "POST /graphql", "/graphql", "TraceThread"},
		{"trace-rest-0001", "GET /api/v1/threads/{thread_id}/messages", "/api/v1/threads/{thread_id}/messages", "listThreadMessages"},
		{"trace-parent-0001", "GET /api/v1/threads/{thread_id}", "/api/v1/threads/{thread_id}", "getThread"},
	}
	for _, tc := range cases {
		t.Run(tc.operation, func(t *testing.T) { wantRequestTrace(t, spans, tc, callerTrace, callerSpan) })
	}
}

// traceGraphQLRequest sends a GraphQL request for thread with token,
// named by the client's operation name TraceThread, with the correlation
// id trace-graphql-0001.
func traceGraphQLRequest(t *testing.T, env *apitest.Env, token, thread string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": `query TraceThread($id: ID!) { thread(id: $id) { id } }`,
		"operationName": "TraceThread", "variables": map[string]any{"id": thread}})
	req, _ := http.NewRequest(http.MethodPost, env.URL+"/graphql", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Correlation-Id", "trace-graphql-0001")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(answer), thread) {
		t.Fatalf("graphql: %d %s", resp.StatusCode, answer)
	}
}

// wantSpansOfSocket checks the exported spans: none carries the bearer
// token, the WebSocket connection's statements and its events' fan-out are
// in the caller's trace socketTrace, and every request span names alex
// (alexID).
func wantSpansOfSocket(t *testing.T, spans []tracingtest.Span, token, socketTrace, alexID string) {
	t.Helper()
	wantNoBearerToken(t, spans, token)
	socketStatements := countSpans(spans, func(s tracingtest.Span) bool {
		return s.TraceID == socketTrace && s.Attributes["db.system.name"] == "postgresql"
	})
	if socketStatements == 0 {
		t.Errorf("no statement of the WebSocket connection in the caller's trace %s", socketTrace)
	}
	fanout := countSpans(spans, func(s tracingtest.Span) bool {
		return s.TraceID == socketTrace && s.Name == "feed.fanout" && s.Attributes["bothy.feed.events"] != "" && s.Attributes["bothy.feed.listeners"] != ""
	})
	if fanout == 0 {
		t.Errorf("no feed.fanout span of the subscription's events in the caller's trace %s", socketTrace)
	}
	for _, s := range spans {
		if s.Attributes["bothy.correlation_id"] != "" && s.Attributes["bothy.principal_id"] != alexID {
			t.Errorf("request span %q names principal %q, want Alex's", s.Name, s.Attributes["bothy.principal_id"])
		}
	}
}

// wantNoBearerToken checks that no attribute of the spans carries the
// bearer token.
func wantNoBearerToken(t *testing.T, spans []tracingtest.Span, token string) {
	t.Helper()
	for _, s := range spans {
		for k, v := range s.Attributes {
			if strings.Contains(v, token) {
				t.Errorf("span %q carries the bearer token in %s", s.Name, k)
			}
		}
	}
}

// countSpans returns how many of the spans ok accepts.
func countSpans(spans []tracingtest.Span, ok func(tracingtest.Span) bool) int {
	n := 0
	for _, s := range spans {
		if ok(s) {
			n++
		}
	}
	return n
}

// requestTraceCase is a request of testTracesOfRequests: its correlation
// id, the name and route of its request span and its operation.
type requestTraceCase struct {
	correlationID, name, route, operation string
}

// wantRequestTrace checks the trace of the request tc: the request span,
// the GraphQL operation's span below it, the door's decision and a
// statement below that; the request with a traceparent is in the caller's
// trace callerTrace, under its span callerSpan.
func wantRequestTrace(t *testing.T, spans []tracingtest.Span, tc requestTraceCase, callerTrace, callerSpan string) {
	tree := traceOf(t, spans, tc.correlationID)
	root := tree.root
	wantRequestSpan(t, root, tc)
	op := tree.find(func(s tracingtest.Span) bool {
		return s.ParentSpanID == root.SpanID && s.Attributes["graphql.operation.name"] == tc.operation
	})
	if op == nil || op.Name != "query "+tc.operation || op.Attributes["graphql.operation.type"] != "query" {
		t.Fatalf("no GraphQL operation span %s below the request span; trace: %s", tc.operation, tree)
	}
	wantDoorAndStatementBelow(t, tree, op.SpanID)
	if tc.correlationID == "trace-parent-0001" && (root.TraceID != callerTrace || root.ParentSpanID != callerSpan) {
		t.Errorf("request span in trace %s under %s, want the caller's trace %s under %s", root.TraceID, root.ParentSpanID, callerTrace, callerSpan)
	}
}

// wantRequestSpan checks root, the request span of tc: a server span with
// tc's name and route, status 200, of the service bothy.
func wantRequestSpan(t *testing.T, root tracingtest.Span, tc requestTraceCase) {
	t.Helper()
	if root.Name != tc.name || root.Kind != tracepb.Span_SPAN_KIND_SERVER || root.Attributes["http.route"] != tc.route ||
		root.Attributes["http.response.status_code"] != "200" || root.Resource["service.name"] != "bothy" {
		t.Errorf("request span %q kind %v, attributes %v, resource %v", root.Name, root.Kind, root.Attributes, root.Resource)
	}
}

// wantDoorAndStatementBelow checks that below the operation's span op of
// tree are the door's span allowing thread.read and a statement span.
func wantDoorAndStatementBelow(t *testing.T, tree spanTree, op string) {
	t.Helper()
	door := tree.find(func(s tracingtest.Span) bool {
		return s.Name == "authz.authorize" && tree.below(s, op)
	})
	if door == nil || door.Attributes["bothy.authz.action"] != "thread.read" || door.Attributes["bothy.authz.decision"] != "allow" {
		t.Fatalf("no door's span allowing thread.read below the operation; trace: %s", tree)
	}
	stmt := tree.find(func(s tracingtest.Span) bool {
		return s.Kind == tracepb.Span_SPAN_KIND_CLIENT && s.Attributes["db.system.name"] == "postgresql" &&
			s.Attributes["db.query.text"] != "" && tree.below(s, op)
	})
	if stmt == nil {
		t.Fatalf("no statement span below the operation; trace: %s", tree)
	}
}

// spanTree is the spans of one trace with its request span.
type spanTree struct {
	root  tracingtest.Span
	spans map[string]tracingtest.Span
}

// traceOf returns the trace whose server span carries correlationID,
// failing the test unless there is exactly one such span.
func traceOf(t *testing.T, spans []tracingtest.Span, correlationID string) spanTree {
	t.Helper()
	var roots []tracingtest.Span
	for _, s := range spans {
		if s.Attributes["bothy.correlation_id"] == correlationID {
			roots = append(roots, s)
		}
	}
	if len(roots) != 1 {
		t.Fatalf("%d spans carry correlation id %s, want the request's one (of %d spans)", len(roots), correlationID, len(spans))
	}
	tree := spanTree{root: roots[0], spans: map[string]tracingtest.Span{}}
	for _, s := range spans {
		if s.TraceID == tree.root.TraceID {
			tree.spans[s.SpanID] = s
		}
	}
	return tree
}

// find returns a span of the trace that ok accepts, or nil.
func (tr spanTree) find(ok func(tracingtest.Span) bool) *tracingtest.Span {
	for _, s := range tr.spans {
		if ok(s) {
			return &s
		}
	}
	return nil
}

// below reports whether ancestor is among the ancestors of s.
func (tr spanTree) below(s tracingtest.Span, ancestor string) bool {
	for hops := 0; s.ParentSpanID != "" && hops < len(tr.spans); hops++ {
		if s.ParentSpanID == ancestor {
			return true
		}
		parent, ok := tr.spans[s.ParentSpanID]
		if !ok {
			return false
		}
		s = parent
	}
	return false
}

// String lists the trace's spans for a failure message.
func (tr spanTree) String() string {
	var b strings.Builder
	for _, s := range tr.spans {
		b.WriteString("\n  " + s.SpanID + " < " + s.ParentSpanID + " " + s.Name)
	}
	return b.String()
}

// testTracesOfTheSweep: with tracing on, a sweep that settles a run is a
// trace of its own (runs.sweep, a root span), with one runs.sweep.run span
// per run naming the run, its thread and what the sweep did; the run's
// trace context stays the mention's. A sweep with nothing to settle
// exports nothing.
func testTracesOfTheSweep(t *testing.T) {
	t.Parallel()
	recv := tracingtest.NewReceiver(t)
	env := apitest.Start(t, apitest.Options{Config: map[string]string{config.TracingOTLPEndpoint: recv.URL,
		config.RunSweepInterval: "100ms"}})
	thread := env.Main("Support/Eskalation")
	env.MustPost("alex", thread, "sweep-1", "@lotse is the VPN of example.com down?")
	// Idle sweeps first: nothing is due.
	time.Sleep(400 * time.Millisecond)
	env.Clock.Advance(6 * time.Minute)
	runID, traceparent := timedOutRun(t, env, thread)
	env.Stop()

	spans := recv.Spans()
	byID := sweepSpans(t, spans)
	var settled *tracingtest.Span
	for i, s := range spans {
		if s.Name == "runs.sweep.run" && s.Attributes["bothy.runs.sweep_action"] == "timeout" {
			settled = &spans[i]
		}
	}
	if settled == nil {
		t.Fatalf("no runs.sweep.run span timed the run out (of %d spans)", len(spans))
	}
	if sweep, ok := byID[settled.ParentSpanID]; !ok || sweep.Name != "runs.sweep" || sweep.TraceID != settled.TraceID {
		t.Errorf("runs.sweep.run is not below a runs.sweep span")
	}
	if strings.Contains(traceparent, settled.TraceID) {
		t.Errorf("the sweep ran in the run's trace %s; it is a trace of its own", traceparent)
	}
	if settled.Attributes["bothy.run_id"] != runID || settled.Attributes["bothy.thread_id"] != thread ||
		traceparent == "" {
		t.Errorf("runs.sweep.run attributes %v, want run %s in thread %s; the run's traceparent %q", settled.Attributes, runID, thread, traceparent)
	}
}

// timedOutRun waits up to 10 s for the sweep to time out the run of
// thread and returns its id and traceparent.
func timedOutRun(t *testing.T, env *apitest.Env, thread string) (runID, traceparent string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runID == "" {
		if time.Now().After(deadline) {
			t.Fatal("the sweep did not time the run out")
		}
		time.Sleep(50 * time.Millisecond)
		env.Pool.QueryRow(t.Context(), `SELECT id::text, coalesce(traceparent, '') FROM runs WHERE thread_id = $1 AND end_reason = 'timeout'`,
			thread).Scan(&runID, &traceparent)
	}
	return runID, traceparent
}

// sweepSpans checks that the spans hold a runs.sweep span and that each
// is a root span with one run due, and returns the spans by id.
func sweepSpans(t *testing.T, spans []tracingtest.Span) map[string]tracingtest.Span {
	t.Helper()
	byID := map[string]tracingtest.Span{}
	sweeps := 0
	for _, s := range spans {
		byID[s.SpanID] = s
		if s.Name == "runs.sweep" {
			sweeps++
			// Every exported sweep had a run to settle: the idle ones
			// before the clock moved exported nothing.
			if s.ParentSpanID != "" || s.Attributes["bothy.runs.due"] != "1" {
				t.Errorf("runs.sweep under %q with attributes %v, want a root span with one run due", s.ParentSpanID, s.Attributes)
			}
		}
	}
	if sweeps == 0 {
		t.Fatal("no runs.sweep span")
	}
	return byID
}

// TestTraces runs the tests of the traces of requests and of the sweep as subtests: one
// top-level test per area keeps internal/server's list short enough to
// read (fewer than 80 top-level tests, issue 48).
func TestTraces(t *testing.T) {
	t.Run("TracesOfRequests", testTracesOfRequests)
	t.Run("TracesOfTheSweep", testTracesOfTheSweep)
}
