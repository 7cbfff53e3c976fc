package server_test

import (
	"net/http"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// TestAPIIndex: the REST address that bothy prints, /api/v1, answers
// without a token with the contract's place and every operation.
func TestAPIIndex(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	r := env.REST(http.MethodGet, "/api/v1", "", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("GET /api/v1 = %d %s", r.Status, r.Body)
	}
	var idx struct {
		Name       string `json:"name"`
		OpenAPI    string `json:"openapi"`
		GraphQL    string `json:"graphql"`
		Operations []struct {
			OperationID string `json:"operation_id"`
			Method      string `json:"method"`
			Path        string `json:"path"`
		} `json:"operations"`
	}
	r.JSON(t, &idx)
	if idx.OpenAPI != "/api/openapi.yaml" || idx.GraphQL != "/graphql" || len(idx.Operations) != len(env.Server.Routes()) {
		t.Fatalf("index %+v", idx)
	}
	seen := map[string]bool{}
	for _, op := range idx.Operations {
		seen[op.OperationID+" "+op.Method+" "+op.Path] = true
	}
	if !seen["getViewer GET /api/v1/me"] || !seen["getRunContext GET /api/v1/runs/{run_id}/context"] {
		t.Fatalf("operations %+v", idx.Operations)
	}
	// Anything else under /api/v1/ stays 404.
	if r := env.REST(http.MethodGet, "/api/v1/nowhere/", "", nil); r.Status != http.StatusNotFound {
		t.Fatalf("unknown route: %d", r.Status)
	}
}
