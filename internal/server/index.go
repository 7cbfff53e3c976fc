package server

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/formatter"

	"bothy.example.com/bothy/internal/platform/httpx"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/rest"
)

// apiIndex answers GET /api/v1/ (the REST address that bothy prints) with
// where the contract is and the list of the shim's routes. It needs no token:
// it tells nothing that GET /api/openapi.yaml does not.
func apiIndex(routes []rest.Route) http.Handler {
	type op struct {
		OperationID string `json:"operation_id"`
		Method      string `json:"method"`
		Path        string `json:"path"`
	}
	body := struct {
		Name       string `json:"name"`
		OpenAPI    string `json:"openapi"`
		GraphQL    string `json:"graphql"`
		Operations []op   `json:"operations"`
	}{Name: "Bothy REST API v1", OpenAPI: "/api/openapi.yaml", GraphQL: "/graphql", Operations: make([]op, len(routes))}
	for i, r := range routes {
		body.Operations[i] = op{OperationID: r.OperationID, Method: r.Method, Path: r.Path}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, body)
	})
}

// allowProbes are the methods unmatched asks the mux about, in the order
// Allow lists them. HEAD is not among them: net/http serves it wherever GET
// is served, and Allow names the methods a client chooses between.
var allowProbes = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// unmatched answers the requests that no route of mux takes (it is mux's
// catch-all, registered as "/"): 405 method_not_allowed with Allow when the
// path is served with other methods, else 404 not_found, both as
// problem+json and before authentication. ServeMux would answer 405 itself
// only without a catch-all, and then in plain text; asking mux which
// pattern each method would reach keeps the route table the one source of
// Allow.
func unmatched(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range allowProbes {
			probe := new(http.Request)
			*probe = *r
			probe.Method = m
			if _, pattern := mux.Handler(probe); pattern != "/" && pattern != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) == 0 {
			httpx.WriteProblem(w, r, problem.New(problem.NotFound, ""))
			return
		}
		list := strings.Join(allow, ", ")
		w.Header().Set("Allow", list)
		httpx.WriteProblem(w, r, problem.Newf(problem.MethodNotAllowed, "", "this path answers %s", list))
	})
}

// schemaSDL prints the schema Bothy serves (graph.Schema: without the
// directives it does not honour) as SDL, without the built-in types and
// directives a GraphQL tool knows already.
func schemaSDL(schema *ast.Schema) []byte {
	var b bytes.Buffer
	formatter.NewFormatter(&b).FormatSchema(schema)
	return b.Bytes()
}
