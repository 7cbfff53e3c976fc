package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/complexity"
	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"bothy.example.com/bothy/graph/generated"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/rest"
)

// testStoredOperationsFitLimits computes the complexity and selection count
// of every stored REST operation with its limits at their maxima: each must
// pass the default graphql.complexity_limit and graphql.max_selections, or
// a REST route would refuse its own largest page.
func testStoredOperationsFitLimits(t *testing.T) {
	t.Parallel()
	cfg := config.Defaults()
	es := generated.NewExecutableSchema(generated.Config{Complexity: Complexity(ListBounds{
		EventsDefault: cfg.Int(config.EventsListLimitDefault), EventsMax: cfg.Int(config.EventsListLimitMax),
		MessagesDefault: cfg.Int(config.MessageListLimitDefault), MessagesMax: cfg.Int(config.MessageListLimitMax),
		ContextItems: contextItems, NestedItems: nestedItems})})
	for _, rt := range rest.Table() {
		doc, errs := gqlparser.LoadQueryWithRules(es.Schema(), rt.Document, nil)
		if errs != nil {
			t.Fatalf("%s: %v", rt.OperationID, errs)
		}
		op := doc.Operations.ForName(rt.OperationID)
		vars := map[string]any{}
		for _, v := range op.VariableDefinitions {
			if v.Type.Name() == "Int" && strings.Contains(v.Variable, "limit") {
				vars[v.Variable] = 1 << 20 // clamped to the maximum
			}
		}
		c := complexity.Calculate(context.Background(), es, op, vars)
		n := CountSelections(rt.Document, cfg.Int(config.GraphQLParserTokenLimit))
		t.Logf("%-22s complexity %6d selections %4d", rt.OperationID, c, n)
		if c > cfg.Int(config.GraphQLComplexityLimit) {
			t.Errorf("%s: complexity %d exceeds graphql.complexity_limit %d", rt.OperationID, c, cfg.Int(config.GraphQLComplexityLimit))
		}
		if n > cfg.Int(config.GraphQLMaxSelections) {
			t.Errorf("%s: %d selections exceed graphql.max_selections", rt.OperationID, n)
		}
	}
}

// testSelectionLimitCounts: with a count cache the limit decides a
// document sent again exactly as the first time, without counting anew.
func testSelectionLimitCounts(t *testing.T) {
	t.Parallel()
	l := SelectionLimit{Max: 3, TokenLimit: 1000, Counts: NewSelectionCounts(1 << 20)}
	small, big := `{ a b }`, `{ a b c d }`
	for round := 0; round < 2; round++ {
		if err := l.MutateOperationParameters(t.Context(), &graphql.RawParams{Query: small}); err != nil {
			t.Fatalf("round %d: small document refused: %v", round, err)
		}
		if err := l.MutateOperationParameters(t.Context(), &graphql.RawParams{Query: big}); err == nil {
			t.Fatalf("round %d: big document accepted", round)
		}
	}
	if n, ok := l.Counts.Get(t.Context(), big); !ok || n != 4 {
		t.Fatalf("cached count %d %v, want 4", n, ok)
	}
}

// testSelectionCountsBoundedInBytes: the count cache keeps texts within a
// quarter of the parse cache's budget, however many distinct documents
// come (it kept the last 1,000 texts whatever their size); a document
// above a sixteenth of that is counted but never kept.
func testSelectionCountsBoundedInBytes(t *testing.T) {
	t.Parallel()
	const budget = 4 << 20 // the counts get 1 MiB, 64 KiB at most per text
	l := SelectionLimit{Max: 1 << 20, TokenLimit: 1 << 20, Counts: NewSelectionCounts(budget)}
	pad := strings.Repeat(" ", 40<<10)
	for i := 0; i < 300; i++ {
		q := fmt.Sprintf("{ a%d }%s", i, pad)
		if err := l.MutateOperationParameters(t.Context(), &graphql.RawParams{Query: q}); err != nil {
			t.Fatal(err)
		}
	}
	if used := l.Counts.Used(); used > budget/4 || l.Counts.Len() >= 300 || l.Counts.Len() == 0 {
		t.Fatalf("%d texts kept in %d bytes, want at most %d bytes", l.Counts.Len(), used, budget/4)
	}
	huge := "{ b }" + strings.Repeat(" ", 70<<10)
	if err := l.MutateOperationParameters(t.Context(), &graphql.RawParams{Query: huge}); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.Counts.Get(t.Context(), huge); ok {
		t.Fatal("a text above a sixteenth of the counts' budget was kept")
	}
}

// testLiteralPointers: a string literal that cannot be stored is refused
// at the pointer of its argument, spelled from the operation (or the
// fragment) down by field alias or name, inline fragments adding nothing;
// a field after a nested one does not inherit the nested path.
func testLiteralPointers(t *testing.T) {
	t.Parallel()
	const bad = `"a\u0000b"`
	cases := []struct {
		name, query string
		want        []string
	}{
		{"root argument", `{ message(id: ` + bad + `) { id } }`, []string{"/message/id"}},
		{"nested argument by alias", `{ run(id: "x") { ctx: context { thread(q: ` + bad + `) { id } } } }`, []string{"/run/ctx/thread/q"}},
		{"sibling after a nested field", `{ a { b { c } } d(x: ` + bad + `) }`, []string{"/d/x"}},
		{"deep siblings", `{ a { b(x: ` + bad + `) { c } e(y: ` + bad + `) } f(z: ` + bad + `) }`, []string{"/a/b/x", "/a/e/y", "/f/z"}},
		{"inline fragment adds nothing", `{ a { ... on T { b(x: ` + bad + `) } } }`, []string{"/a/b/x"}},
		{"list literal", `{ a(xs: ["ok", ` + bad + `]) }`, []string{"/a/xs/1"}},
		{"fragment from its name", `query { ...F } fragment F on Query { a { b(x: ` + bad + `) } }`, []string{"/F/a/b/x"}},
		{"storable literals pass", `{ a(x: "fine") { b(y: "also fine") } }`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := parser.ParseQuery(&ast.Source{Input: tc.query})
			if err != nil {
				t.Fatal(err)
			}
			gerr := TextCheck{}.MutateOperationContext(context.Background(), &graphql.OperationContext{Doc: doc, Operation: doc.Operations[0]})
			var got []string
			if gerr != nil {
				var p *problem.Error
				if !errors.As(gerr, &p) {
					t.Fatalf("error %v is not a problem", gerr)
				}
				for _, f := range p.Fields {
					got = append(got, f.Pointer)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("pointers %q, want %q", got, tc.want)
			}
		})
	}
}

// TestGraphQLGuards runs the cases of the executor's guards.
func TestGraphQLGuards(t *testing.T) {
	t.Parallel()
	t.Run("stored operations fit the limits", testStoredOperationsFitLimits)
	t.Run("selection counts", testSelectionLimitCounts)
	t.Run("selection counts bounded in bytes", testSelectionCountsBoundedInBytes)
	t.Run("literal pointers", testLiteralPointers)
}

// BenchmarkCountSelections compares the selection limit's linear count of
// a document of 7,000 duplicate fields with gqlgen's validation of it,
// which compares overlapping fields pairwise: the reason the count runs
// first (docs/performance.md, "The selection limit").
func BenchmarkCountSelections(b *testing.B) {
	doc := "{ viewer {" + strings.Repeat(" id", 7000) + " } }"
	b.Run("count", func(b *testing.B) {
		for b.Loop() {
			if n := CountSelections(doc, 100000); n != 7001 {
				b.Fatalf("counted %d selections, want 7001", n)
			}
		}
	})
	b.Run("validate", func(b *testing.B) {
		schema := generated.NewExecutableSchema(generated.Config{}).Schema()
		for b.Loop() {
			if _, errs := gqlparser.LoadQueryWithRules(schema, doc, nil); len(errs) > 0 {
				b.Fatalf("validation: %v", errs)
			}
		}
	})
}
