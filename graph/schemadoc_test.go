package graph_test

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
)

// schemaDir is the folder of the schema files, relative to this package.
const schemaDir = "../schema"

// TestEverySchemaElementDescribed fails for each type, field, field
// argument, input field and enum value of schema/*.graphqls that has no
// description: client authors read the schema through introspection and the
// playground, so every element says what it is.
func TestEverySchemaElementDescribed(t *testing.T) {
	t.Run("schema", func(t *testing.T) {
		schema := loadSchemaDir(t, schemaDir)
		missing := undescribed(schema)
		for _, m := range missing {
			t.Errorf("no description: %s", m)
		}
		if len(missing) > 0 {
			t.Errorf("%d schema elements have no description; add a \"...\" description before each", len(missing))
		}
	})

	// The walker must be able to fail: each case is a schema with known
	// undescribed elements, and the walker must report exactly those.
	cases := []struct {
		name   string
		schema string
		want   []string
	}{
		{
			name: "all described",
			schema: `"Root." type Query { "A." a(
				"X." x: Int): String }`,
			want: nil,
		},
		{
			name:   "field",
			schema: `"Root." type Query { "A." a: String b: Int }`,
			want:   []string{"Query.b"},
		},
		{
			name: "type and argument",
			schema: `"Root." type Query { "Runs." run(id: ID!): Run }
				type Run { "State." state: String }`,
			want: []string{"Query.run(id)", "Run"},
		},
		{
			name: "input field and enum value",
			schema: `"Root." type Query { "A." a(
				"In." in: In): E }
				"In." input In { "X." x: Int y: Int }
				"E." enum E { "One." ONE TWO }`,
			want: []string{"E.TWO", "In.y"},
		},
		{
			name: "extension, interface and scalar",
			schema: `"Root." type Query { "A." a: T }
				extend type Query { b: S }
				"T." interface T { c: Int }
				scalar S`,
			want: []string{"Query.b", "S", "T.c"},
		},
	}
	for _, c := range cases {
		t.Run("walker/"+c.name, func(t *testing.T) {
			schema, err := gqlparser.LoadSchema(&ast.Source{Name: "case.graphqls", Input: c.schema})
			if err != nil {
				t.Fatalf("load schema: %v", err)
			}
			if got := undescribed(schema); !slices.Equal(got, c.want) {
				t.Errorf("undescribed = %q, want %q", got, c.want)
			}
		})
	}
}

// loadSchemaDir parses every *.graphqls file of dir into one schema, as
// gqlgen does, and fails the test when the folder or the schema is broken.
func loadSchemaDir(t *testing.T, dir string) *ast.Schema {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.graphqls"))
	if err != nil {
		t.Fatalf("list schema files: %v", err)
	}
	if len(paths) == 0 {
		t.Fatalf("no *.graphqls files in %s", dir)
	}
	var sources []*ast.Source
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("read %s: %v", p, err)
		}
		sources = append(sources, &ast.Source{Name: p, Input: string(b)})
	}
	schema, err := gqlparser.LoadSchema(sources...)
	if err != nil {
		t.Fatalf("load schema: %v", err)
	}
	return schema
}

// undescribed returns the path of every element of the schema's own types
// that has no description, sorted: a type ("Run"), a field or input field
// ("Run.state"), a field argument ("Mutation.startRun(holder)") or an enum
// value ("RunState.QUEUED"). Built-in types and the introspection types
// (names starting with __) are skipped.
func undescribed(schema *ast.Schema) []string {
	var missing []string
	add := func(desc, path string) {
		if strings.TrimSpace(desc) == "" {
			missing = append(missing, path)
		}
	}
	for name, def := range schema.Types {
		if isBuiltIn(def) {
			continue
		}
		add(def.Description, name)
		for _, f := range def.Fields {
			if strings.HasPrefix(f.Name, "__") {
				continue
			}
			add(f.Description, name+"."+f.Name)
			for _, a := range f.Arguments {
				add(a.Description, name+"."+f.Name+"("+a.Name+")")
			}
		}
		for _, v := range def.EnumValues {
			add(v.Description, name+"."+v.Name)
		}
	}
	sort.Strings(missing)
	return missing
}

// isBuiltIn reports whether def comes with GraphQL itself rather than from
// the schema files: the built-in scalars and the introspection (__) types.
func isBuiltIn(def *ast.Definition) bool {
	if strings.HasPrefix(def.Name, "__") {
		return true
	}
	return def.BuiltIn || (def.Position != nil && def.Position.Src != nil && def.Position.Src.BuiltIn)
}
