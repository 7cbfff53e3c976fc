package apicompat_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"bothy.example.com/bothy/internal/devtools/apicompat"
)

// root is the repository root, seen from this package's folder.
const root = "../../.."

// TestNoUnlistedBreakingChanges is the compatibility gate: the schema and
// the OpenAPI document may change only compatibly from the newest release
// in CHANGELOG.md (its snapshots in schema/released and docs/api/released),
// unless CHANGELOG.md lists the break under the next version with a
// migration note. Every release has both snapshots, every snapshot a
// release.
func TestNoUnlistedBreakingChanges(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	log, err := apicompat.ParseChangelog(string(text))
	if err != nil {
		t.Fatalf("CHANGELOG.md: %v", err)
	}
	latest := log.Latest()
	if latest == "" {
		t.Fatal("CHANGELOG.md names no released version")
	}
	for _, dir := range []struct{ path, ext string }{{"schema/released", ".graphql"}, {"docs/api/released", ".yaml"}} {
		files, err := filepath.Glob(filepath.Join(root, dir.path, "*"+dir.ext))
		if err != nil {
			t.Fatal(err)
		}
		snap := map[string]bool{}
		for _, f := range files {
			snap[strings.TrimSuffix(filepath.Base(f), dir.ext)] = true
		}
		for _, v := range log.Released {
			if !snap[v] {
				t.Errorf("release %s has no snapshot %s/%s%s", v, dir.path, v, dir.ext)
			}
			delete(snap, v)
		}
		for v := range snap {
			t.Errorf("snapshot %s/%s%s has no release in CHANGELOG.md", dir.path, v, dir.ext)
		}
	}

	released := loadSchema(t, filepath.Join(root, "schema/released", latest+".graphql"))
	current := loadSchema(t, filepath.Join(root, "schema", "*.graphqls"))
	breaks := apicompat.GraphQLBreaks(released, current)

	oldDoc, err := os.ReadFile(filepath.Join(root, "docs/api/released", latest+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	curDoc, err := os.ReadFile(filepath.Join(root, "docs/api/openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	restBreaks, warnings, err := apicompat.OpenAPIBreaks(oldDoc, curDoc)
	if err != nil {
		t.Fatal(err)
	}
	breaks = append(breaks, restBreaks...)
	for _, w := range warnings {
		t.Logf("may break a client (list it in CHANGELOG.md if it does): %s", w)
	}
	for _, b := range log.Unlisted(breaks) {
		t.Errorf("breaking change since %s not listed in CHANGELOG.md under the next version (name `%s` and give a \"Migration:\" note): %s",
			latest, b.Subject, b)
	}
}

// loadSchema loads the GraphQL schema of the files matching pattern.
func loadSchema(t *testing.T, pattern string) *ast.Schema {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no schema files %s (%v)", pattern, err)
	}
	var sources []*ast.Source
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, &ast.Source{Name: f, Input: string(b)})
	}
	s, err := gqlparser.LoadSchema(sources...)
	if err != nil {
		t.Fatalf("schema %s: %v", pattern, err)
	}
	return s
}

// TestGateNamesASchemaOnce removes properties from schemas of the
// document that several operations answer (Run; AgentInvocationEvent, a
// member of the AgentEvent union, reached through oneOf): each removal is
// one break, named by its schema, which the gate prints once.
func TestGateNamesASchemaOnce(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join(root, "docs/api/openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ schema, property string }{
		{"Run", "        started_at:\n          $ref: \"#/components/schemas/Timestamp\"\n"},
		{"AgentInvocationEvent", "        payload:\n          $ref: \"#/components/schemas/AgentInvocationPayload\"\n"},
	} {
		t.Run(tc.schema, func(t *testing.T) {
			t.Parallel()
			head, body, ok := strings.Cut(string(doc), "\n    "+tc.schema+":\n")
			if !ok || !strings.Contains(body, tc.property) {
				t.Fatalf("docs/api/openapi.yaml has no schema %s with %q", tc.schema, tc.property)
			}
			cur := head + "\n    " + tc.schema + ":\n" + strings.Replace(body, tc.property, "", 1)
			breaks, _, err := apicompat.OpenAPIBreaks(doc, []byte(cur))
			if err != nil {
				t.Fatal(err)
			}
			if len(breaks) != 1 || breaks[0].Subject != "#/components/schemas/"+tc.schema {
				t.Fatalf("breaks %v, want one of #/components/schemas/%s", breaks, tc.schema)
			}
			t.Log(breaks[0])
		})
	}
}
