package conformance

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestProxyNamesOperations: the kit's proxy names a call by its GraphQL
// root fields, or by the root field of the REST route it matches.
func TestProxyNamesOperations(t *testing.T) {
	t.Parallel()
	p, err := newProxy("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method, path, body string
		want               []string
	}{
		{"POST", "/graphql", `{"query":"mutation M($id: ID!) { finishRun(id: $id, input: {}) { id } }"}`, []string{"finishRun"}},
		{"POST", "/graphql", `{"query":"query { agentEvents(wait: 10) { nodes { seq } } viewer { id } }"}`, []string{"agentEvents", "viewer"}},
		{"POST", "/graphql", `{"query":"query {"}`, nil},
		{"POST", "/graphql", `not json`, nil},
		{"GET", "/graphql?query=%7B%20viewer%20%7B%20id%20%7D%20%7D", "", []string{"viewer"}},
		{"GET", "/api/v1/agent/events?wait=10", "", []string{"agentEvents"}},
		{"POST", "/api/v1/threads/0b0b/messages", `{}`, []string{"createMessage"}},
		{"GET", "/api/v1/nowhere", "", nil},
		{"POST", "/mcp", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"wait_for_run","arguments":{"wait_seconds":25}}}`, []string{"wait_for_run"}},
		{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, nil},
	} {
		r := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
		if got, _ := p.operations(r); !slices.Equal(got, c.want) {
			t.Errorf("%s %s %s: %v, want %v", c.method, c.path, c.body, got, c.want)
		}
	}
	// The holder of a call: GraphQL's variable, REST's header, or the
	// body of REST's start and renew.
	for _, c := range []struct {
		method, path, header, body, want string
	}{
		{"POST", "/graphql", "", `{"query":"mutation($h: String!) { renewRun(id: \"r\", holder: $h) { id } }","variables":{"h":"x","holder":"adapter-1"}}`, "adapter-1"},
		{"POST", "/graphql", "", `{"query":"mutation { finishRun(id: \"r\", input: {outcome: COMPLETED}) { id } }"}`, ""},
		{"POST", "/api/v1/threads/0b0b/messages", "adapter-2", `{}`, "adapter-2"},
		{"POST", "/api/v1/runs/0b0b/renew", "", `{"holder":"adapter-3"}`, "adapter-3"},
	} {
		r := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
		if c.header != "" {
			r.Header.Set("Bothy-Run-Holder", c.header)
		}
		if _, got := p.operations(r); got != c.want {
			t.Errorf("%s %s %s: holder %q, want %q", c.method, c.path, c.body, got, c.want)
		}
	}
	// A refusal's reason, in either face's shape.
	for _, c := range []struct {
		c      call
		reason string
		ref    bool
	}{
		{call{status: 200, body: []byte(`{"errors":[{"message":"no","extensions":{"code":"conflict","reason":"run_claimed"}}]}`)}, "run_claimed", true},
		{call{status: 409, body: []byte(`{"code":"conflict","reason":"trigger_revoked"}`)}, "trigger_revoked", true},
		{call{status: 200, body: []byte(`{"data":{"finishRun":{"id":"r"}}}`)}, "", false},
	} {
		if c.c.reason() != c.reason || c.c.refused() != c.ref {
			t.Errorf("%s: reason %q refused %v, want %q %v", c.c.body, c.c.reason(), c.c.refused(), c.reason, c.ref)
		}
	}
}

// TestProxyCountsSubscriptions: the adapter's subscribe messages over
// WebSocket count as calls of their root fields; the server's messages
// do not, whatever they look like.
func TestProxyCountsSubscriptions(t *testing.T) {
	t.Parallel()
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"graphql-transport-ws"}})
		if err != nil {
			return
		}
		defer c.CloseNow()
		// A message shaped like a subscribe, going down: no call.
		if err := c.Write(r.Context(), websocket.MessageText, []byte(`{"type":"subscribe","payload":{"query":"subscription { events { seq } }"}}`)); err != nil {
			return
		}
		for {
			if _, _, err := c.Read(r.Context()); err != nil {
				return
			}
		}
	}))
	defer server.Close()
	p, err := newProxy(server.URL)
	if err != nil {
		t.Fatal(err)
	}
	ps := httptest.NewServer(p)
	defer ps.Close()
	c, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(ps.URL, "http")+"/graphql", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if _, _, err := c.Read(t.Context()); err != nil {
		t.Fatal(err)
	}
	sub := `{"id":"1","type":"subscribe","payload":{"query":"subscription AgentEvents($after: String) { agentEvents(after: $after) { seq } }"}}`
	if err := c.Write(t.Context(), websocket.MessageText, []byte(sub)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := p.waitCalls(ctx, agentEventsOp, 0); err != nil {
		t.Fatalf("the subscription was not counted: %v", err)
	}
	if n := p.calls("events"); n != 0 {
		t.Fatalf("the server's message counted %d times", n)
	}
}
