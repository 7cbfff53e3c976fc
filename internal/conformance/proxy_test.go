package conformance

import (
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
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
		if got := p.operations(r); !slices.Equal(got, c.want) {
			t.Errorf("%s %s %s: %v, want %v", c.method, c.path, c.body, got, c.want)
		}
	}
}
