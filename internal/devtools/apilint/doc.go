// Package apilint holds the pinned OpenAPI linters (@redocly/cli and
// @stoplight/spectral-cli, see package.json) and the test that runs both on
// docs/api/openapi.yaml: the document must pass redocly's recommended rules
// and spectral's spectral:oas ruleset with no error and no warning.
// TestEveryOpenAPIElementDescribed loads the document with kin-openapi and
// requires a description on every operation (and a summary), parameter,
// request body, response, component schema and schema property.
// install.sh (run by make test) installs the linters into node_modules.
package apilint
