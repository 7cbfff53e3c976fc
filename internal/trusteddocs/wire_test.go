package trusteddocs_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"

	"bothy.example.com/bothy/graph"
	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/trusteddocs"
)

// viewer is the data of the operations these tests send.
type viewer struct {
	Viewer struct {
		Handle string `json:"handle"`
	} `json:"viewer"`
}

// apq is the persistedQuery extension of Apollo's link for query.
func apq(query string) map[string]any {
	sum := sha256.Sum256([]byte(query))
	return map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": hex.EncodeToString(sum[:])}}
}

// wantRefused fails unless res is a request error (no data) with code
// validation_failed, reason and, when given, message.
func wantRefused(t *testing.T, what string, res *apitest.GQLResult, reason, message string) {
	t.Helper()
	if len(res.Data) != 0 || len(res.Errors) != 1 || res.Errors[0].Extensions.Code != "validation_failed" ||
		res.Errors[0].Extensions.Reason != reason || (message != "" && res.Errors[0].Message != message) {
		t.Fatalf("%s: status %d data %s errors %+v, want validation_failed %s %q", what, res.Status, res.Data, res.Errors, reason, message)
	}
}

// TestAutomaticPersistedQueries follows Apollo's persisted-query link: a
// hash the server does not know answers PersistedQueryNotFound (the message
// and reason the link retries on), the retry with the text runs and
// registers it, and from then on the hash alone runs it. A text that does
// not match its hash is refused; with graphql.apq_cache_bytes 0 a hash
// alone answers PersistedQueryNotSupported, which makes the link stop
// sending hashes, and a text with a hash still runs.
func TestAutomaticPersistedQueries(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	alex := env.World.Token("alex")
	const q = `query Me { viewer { handle } }`
	wantRefused(t, "unknown hash", env.GraphQLRequest(alex, map[string]any{"extensions": apq(q)}, nil), "persisted_query_not_found", "PersistedQueryNotFound")
	var v viewer
	if res := env.GraphQLRequest(alex, map[string]any{"query": q, "extensions": apq(q)}, &v); len(res.Errors) != 0 || v.Viewer.Handle != "alex" {
		t.Fatalf("registration: %+v %+v", res.Errors, v)
	}
	v = viewer{}
	if res := env.GraphQLRequest(alex, map[string]any{"extensions": apq(q)}, &v); len(res.Errors) != 0 || v.Viewer.Handle != "alex" {
		t.Fatalf("hash alone: %+v %+v", res.Errors, v)
	}
	// The cache holds texts, not answers: another principal's hash-only
	// request runs with its own rights.
	v = viewer{}
	if res := env.GraphQLRequest(env.World.Token("sam"), map[string]any{"extensions": apq(q)}, &v); len(res.Errors) != 0 || v.Viewer.Handle != "sam" {
		t.Fatalf("hash alone as sam: %+v %+v", res.Errors, v)
	}
	wantRefused(t, "mismatched hash", env.GraphQLRequest(alex, map[string]any{"query": `{ viewer { id } }`, "extensions": apq(q)}, nil), "persisted_query_invalid", "")

	off := apitest.Start(t, apitest.Options{Config: map[string]string{"graphql.apq_cache_bytes": "0"}})
	wantRefused(t, "apq off", off.GraphQLRequest(off.World.Token("alex"), map[string]any{"extensions": apq(q)}, nil), "persisted_query_not_supported", "PersistedQueryNotSupported")
	v = viewer{}
	if res := off.GraphQLRequest(off.World.Token("alex"), map[string]any{"query": q, "extensions": apq(q)}, &v); len(res.Errors) != 0 || v.Viewer.Handle != "alex" {
		t.Fatalf("apq off, text with hash: %+v %+v", res.Errors, v)
	}
}

// TestTrustedDocuments: with graphql.trusted_documents the server runs the
// listed operations however they are laid out, persisted or not, and the
// REST shim's own; every other operation, introspection included, is
// refused before it runs.
func TestTrustedDocuments(t *testing.T) {
	t.Parallel()
	ops, err := trusteddocs.Extract(graph.Schema(), []*ast.Source{{Name: "client.graphql", Input: `query Me { viewer { ...Who } } fragment Who on Principal { handle }`}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "trusted.txt")
	if err := os.WriteFile(file, []byte("# the client's operations\n"+ops[0].Hash+"  Me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := apitest.Start(t, apitest.Options{Config: map[string]string{"graphql.trusted_documents": file}})
	alex := env.World.Token("alex")
	sent := "# as the client sends it\nfragment Who on Principal {\n  handle\n}\n\nquery Me {\n  viewer { ...Who }\n}\n"
	var v viewer
	if res := env.GraphQL(alex, sent, nil, &v); len(res.Errors) != 0 || v.Viewer.Handle != "alex" {
		t.Fatalf("trusted operation: %+v %+v", res.Errors, v)
	}
	v = viewer{}
	if res := env.GraphQLRequest(alex, map[string]any{"query": sent, "extensions": apq(sent)}, &v); len(res.Errors) != 0 || v.Viewer.Handle != "alex" {
		t.Fatalf("trusted operation registered as persisted: %+v %+v", res.Errors, v)
	}
	if res := env.GraphQLRequest(alex, map[string]any{"extensions": apq(sent)}, &v); len(res.Errors) != 0 {
		t.Fatalf("trusted operation by its persisted hash: %+v", res.Errors)
	}
	for name, q := range map[string]string{
		"another selection": `query Me { viewer { ...Who id } } fragment Who on Principal { handle }`,
		"anonymous":         `{ viewer { handle } }`,
		"introspection":     `{ __schema { queryType { name } } }`,
		"mutation":          `mutation { ackAgentEvents(upTo: "0") { position } }`,
	} {
		wantRefused(t, name, env.GraphQL(alex, q, nil, nil), "untrusted_document", "")
	}
	// A persisted untrusted text is refused by hash too.
	const other = `{ viewer { id } }`
	wantRefused(t, "untrusted persisted", env.GraphQLRequest(alex, map[string]any{"query": other, "extensions": apq(other)}, nil), "untrusted_document", "")
	wantRefused(t, "untrusted by hash", env.GraphQLRequest(alex, map[string]any{"extensions": apq(other)}, nil), "untrusted_document", "")
	// The REST shim's operations are the server's own.
	me := env.MustREST(t, http.MethodGet, "/api/v1/me", alex, nil, http.StatusOK)
	if me["handle"] != "alex" {
		t.Fatalf("REST /me: %v", me)
	}
	// Nothing ran for the refusals: no message, no ack.
	if n := env.Count(`SELECT count(*) FROM agent_cursors`); n != 0 {
		t.Fatalf("a refused mutation acknowledged: %d cursors", n)
	}
}
