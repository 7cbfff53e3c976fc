package rest

import "net/http"

// Table is the route table of the REST shim: one stored GraphQL operation
// per OpenAPI operationId of docs/api/openapi.yaml.
var Table = []Route{
	{
		OperationID: "getViewer", Method: http.MethodGet, Path: "/api/v1/me", Result: "viewer",
		Document: `query getViewer { viewer { id kind handle displayName email status isOwner createdAt } }`,
	},
}
