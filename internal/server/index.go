package server

import (
	"net/http"

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
