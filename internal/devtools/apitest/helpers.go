package apitest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// WantProblem fails the test unless r is a problem with status, code and
// reason (what names the request in the message); it returns the problem.
func WantProblem(t testing.TB, what string, r *Response, status int, code, reason string) Problem {
	t.Helper()
	if r.Status != status {
		t.Fatalf("%s: %d %s, want %d", what, r.Status, r.Body, status)
	}
	p := r.Problem(t)
	if p.Status != status || p.Code != code || p.Reason != reason {
		t.Fatalf("%s: problem %+v, want status %d code %q reason %q", what, p, status, code, reason)
	}
	return p
}

// ComparableHeader returns h without the headers that differ per request
// (Correlation-Id, Date, Content-Length) and without the remaining count of
// the RateLimit header (its r parameter), which goes down with every
// request; the rate-limit class and policy stay and must be equal.
func ComparableHeader(h http.Header) http.Header {
	out := h.Clone()
	for _, k := range []string{"Correlation-Id", "Date", "Content-Length"} {
		out.Del(k)
	}
	if v := out.Values("RateLimit"); len(v) > 0 {
		kept := make([]string, len(v))
		for i, f := range v {
			kept[i] = withoutRemaining(f)
		}
		out[http.CanonicalHeaderKey("RateLimit")] = kept
	}
	return out
}

// withoutRemaining returns a RateLimit field value without its r
// parameters ("rl.read";r=4;t=1 becomes "rl.read";t=1).
func withoutRemaining(field string) string {
	var kept []string
	for _, p := range strings.Split(field, ";") {
		if !strings.HasPrefix(strings.TrimSpace(p), "r=") {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, ";")
}

// ComparableProblem returns the decoded body without correlation_id and
// instance, which differ per request and path; a body that is not a JSON
// object fails the test.
func ComparableProblem(t testing.TB, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, body)
	}
	delete(m, "correlation_id")
	delete(m, "instance")
	return m
}

// SameAnswer reports whether two REST answers are equal but for what
// differs per request: the status, the body without correlation_id and
// instance, and the headers without Correlation-Id, Date and Content-Length.
func SameAnswer(t testing.TB, a, b *Response) bool {
	t.Helper()
	return a.Status == b.Status && reflect.DeepEqual(ComparableProblem(t, a.Body), ComparableProblem(t, b.Body)) &&
		reflect.DeepEqual(ComparableHeader(a.Header), ComparableHeader(b.Header))
}

// CreateGrant creates a grant as robin (the owner of the world) through
// REST and returns it; any status but 201 fails the test.
func (e *Env) CreateGrant(t testing.TB, body map[string]any) map[string]any {
	t.Helper()
	return e.MustREST(t, http.MethodPost, "/api/v1/grants", e.World.Token("robin"), body, http.StatusCreated)
}

// AwaitPolls blocks until n long polls of the server wait for a change, so
// that a test knows a poll is parked instead of sleeping until it probably
// is; after 15 s it fails the test.
func (e *Env) AwaitPolls(t testing.TB, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := e.Server.LongPolls().AwaitWaiting(ctx, n); err != nil {
		t.Fatal(err)
	}
}

// AgentEvent is one event of the agentEvents query.
type AgentEvent struct {
	Seq       string         `json:"seq"`
	Type      string         `json:"type"`
	CreatedAt string         `json:"createdAt"`
	Payload   map[string]any `json:"payload"`
}

// Poll reads the events of the agent with handle agent after the cursor
// after ("" from the beginning) over GraphQL, waiting up to wait seconds
// for one, and returns them with the next cursor. It fails the test on any
// error.
func (e *Env) Poll(t testing.TB, agent, after string, wait int) ([]AgentEvent, string) {
	t.Helper()
	evs, next, err := e.PollDo(agent, after, wait)
	if err != nil {
		t.Fatal(err)
	}
	return evs, next
}

// PollDo is Poll for a goroutine other than the test's: a failure is
// returned, never a Fatal.
func (e *Env) PollDo(agent, after string, wait int) ([]AgentEvent, string, error) {
	var out struct {
		AgentEvents struct {
			Events    []AgentEvent `json:"events"`
			NextAfter string       `json:"nextAfter"`
		} `json:"agentEvents"`
	}
	// An empty cursor is sent as null: an empty string is refused like
	// every empty optional input.
	var cursor any
	if after != "" {
		cursor = after
	}
	res, err := e.GraphQLDo(e.World.Token(agent), `query($a: String, $w: Int) { agentEvents(after: $a, waitSeconds: $w) { events { seq type createdAt payload } nextAfter } }`,
		map[string]any{"a": cursor, "w": wait}, &out)
	if err != nil {
		return nil, "", err
	}
	if len(res.Errors) > 0 {
		return nil, "", fmt.Errorf("poll: %+v", res.Errors)
	}
	return out.AgentEvents.Events, out.AgentEvents.NextAfter, nil
}
