// Package apidoc embeds the OpenAPI document of the REST shim, the contract
// that the server serves at /api/openapi.yaml and that tests validate every
// REST response against.
package apidoc

import (
	_ "embed"
	"slices"
)

// OpenAPI is the content of docs/api/openapi.yaml.
//
//go:embed openapi.yaml
var openAPI []byte

// OpenAPI returns a copy of openAPI: an importer cannot change it
// (house rule: no exported mutable package variable).
func OpenAPI() []byte { return slices.Clone(openAPI) }
