package trusteddocs

import (
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"bothy.example.com/bothy/graph"
)

// hashOf parses src and hashes its operation named name.
func hashOf(t *testing.T, src, name string) string {
	t.Helper()
	doc, err := parser.ParseQuery(&ast.Source{Input: src})
	if err != nil {
		t.Fatal(err)
	}
	op := doc.Operations.ForName(name)
	if op == nil {
		t.Fatalf("no operation %q in %s", name, src)
	}
	return Hash(doc, op)
}

// TestHashIsOfTheOperation: the hash names the operation a request runs,
// whatever the layout, comments, order of fragments or other operations
// of the document it came in; anything that changes what runs changes it.
func TestHashIsOfTheOperation(t *testing.T) {
	t.Parallel()
	base := hashOf(t, `query Me { viewer { ...P } } fragment P on Principal { handle ...Q } fragment Q on Principal { id }`, "Me")
	cases := []struct {
		name, src string
		same      bool
	}{
		{"layout and comments", "# mine\nquery Me {\n  viewer {\n    ...P # who\n  }\n}\n\nfragment P on Principal {\n  handle\n  ...Q\n}\nfragment Q on Principal { id }\n", true},
		{"fragments in another order", `fragment Q on Principal { id } fragment P on Principal { handle ...Q } query Me { viewer { ...P } }`, true},
		{"other operations and fragments beside it", `query Other { viewer { ...R } } fragment R on Principal { kind } query Me { viewer { ...P } } fragment P on Principal { handle ...Q } fragment Q on Principal { id }`, true},
		{"another field", `query Me { viewer { ...P } } fragment P on Principal { handle ...Q } fragment Q on Principal { kind }`, false},
		{"another name", `query You { viewer { ...P } } fragment P on Principal { handle ...Q } fragment Q on Principal { id }`, false},
		{"an argument", `query Me { viewer { ...P } } fragment P on Principal { handle(x: 1) ...Q } fragment Q on Principal { id }`, false},
		{"an alias", `query Me { me: viewer { ...P } } fragment P on Principal { handle ...Q } fragment Q on Principal { id }`, false},
	}
	for _, c := range cases {
		name := "Me"
		if strings.Contains(c.src, "query You") {
			name = "You"
		}
		if got := hashOf(t, c.src, name); (got == base) != c.same {
			t.Errorf("%s: same hash %v, want %v", c.name, got == base, c.same)
		}
	}
}

// TestParse reads hashes with names and comments and refuses anything
// else with its line.
func TestParse(t *testing.T) {
	t.Parallel()
	h := strings.Repeat("ab", 32)
	set, err := Parse(strings.NewReader("# trusted\n\n" + h + "  Me  ops.graphql\n" + strings.Repeat("0", 64) + "\n"))
	if err != nil || len(set) != 2 || !set.Has(h) || set.Has(strings.Repeat("cd", 32)) {
		t.Fatalf("set %v, err %v", set, err)
	}
	for _, bad := range []string{strings.ToUpper(h), h[:63], h + "0", "Me " + h, "not a hash"} {
		if _, err := Parse(strings.NewReader("# x\n" + bad + "\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%q: err %v, want one naming line 2", bad, err)
		}
	}
}

// TestExtract: operations across files, each validated against the schema
// with the fragments it uses, whatever file holds them.
func TestExtract(t *testing.T) {
	t.Parallel()
	schema := graph.Schema()
	ops, err := Extract(schema, []*ast.Source{
		{Name: "a.graphql", Input: `query Me { viewer { ...Who } } mutation Ack($p: String!) { ackAgentEvents(upTo: $p) { position } }`},
		{Name: "b.graphql", Input: `fragment Who on Principal { handle }`},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 2 || ops[0].Name != "Me" || ops[1].Name != "Ack" || ops[0].Source != "a.graphql" {
		t.Fatalf("operations %+v", ops)
	}
	if want := hashOf(t, `query Me { viewer { ...Who } } fragment Who on Principal { handle }`, "Me"); ops[0].Hash != want {
		t.Fatalf("hash %s, want %s", ops[0].Hash, want)
	}
	for name, srcs := range map[string][]string{
		"unknown field":       {`query Me { viewer { shoeSize } }`},
		"missing fragment":    {`query Me { viewer { ...Who } }`},
		"fragment twice":      {`query Me { viewer { ...Who } } fragment Who on Principal { id }`, `fragment Who on Principal { handle }`},
		"syntax":              {`query Me { viewer { `},
		"undeclared variable": {`query Me { run(id: $id) { id } }`},
	} {
		var sources []*ast.Source
		for i, s := range srcs {
			sources = append(sources, &ast.Source{Name: string(rune('a'+i)) + ".graphql", Input: s})
		}
		if ops, err := Extract(schema, sources); err == nil {
			t.Errorf("%s: extracted %+v, want an error", name, ops)
		}
	}
}
