// Package migrations holds the SQL migrations of Bothy, embedded into the
// binary so that every replica can bring the schema up to date at start.
package migrations

import "embed"

// FS holds every *.sql migration of this folder, in goose format.
//
//go:embed *.sql
var FS embed.FS
