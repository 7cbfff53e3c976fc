package server

import (
	"context"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2"

	"bothy.example.com/bothy/graph/generated"
)

// TestComplexityLimit: fields count like gqlgen's own rule, list fields
// times their limit, and fragments on different object types of an
// abstract selection count as alternatives (the costliest), while
// fragments on the selection's own type or on an interface add up.
func TestComplexityLimit(t *testing.T) {
	t.Parallel()
	es := generated.NewExecutableSchema(generated.Config{Complexity: Complexity(ListBounds{
		EventsDefault: 100, EventsMax: 500, MessagesDefault: 50, MessagesMax: 200, ContextItems: contextItems, NestedItems: nestedItems})})
	for _, tc := range []struct {
		name  string
		query string
		want  int
	}{
		{"scalars", `{ viewer { id handle } }`, 3},
		{"list times its limit", `{ events(limit: 10) { events { type channelId } } }`, 1 + 10*(1+2)},
		{"object fragments are alternatives", `{ events(limit: 10) { events { type
			... on MessageEvent { messageId threadId message { id deleted } }
			... on ThreadEvent { threadId }
			... on AccessChangedEvent { change targetKind targetId subjectId } } } }`, 1 + 10*(1+1+5)},
		{"fragments of one type add up", `{ events(limit: 10) { events { type
			... on ThreadEvent { threadId } ... on ThreadEvent { thread { id } } } } }`, 1 + 10*(1+1+3)},
		{"fragment on the interface itself adds", `{ events(limit: 10) { events { ... on Event { type } ... F } } }
			fragment F on Event { channelId }`, 1 + 10*(1+2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, errs := gqlparser.LoadQueryWithRules(es.Schema(), tc.query, nil)
			if errs != nil {
				t.Fatal(errs)
			}
			for _, limit := range []int{tc.want, tc.want - 1} {
				c := &ComplexityLimit{Max: limit}
				if err := c.Validate(es); err != nil {
					t.Fatal(err)
				}
				err := c.MutateOperationContext(context.Background(), &graphql.OperationContext{RawQuery: tc.query, Doc: doc, Variables: map[string]any{}})
				if (err != nil) != (limit < tc.want) {
					t.Fatalf("limit %d, complexity should be %d: %v", limit, tc.want, err)
				}
				if err != nil && err.Extensions["code"] != complexityLimitCode {
					t.Fatalf("code %v", err.Extensions)
				}
			}
		})
	}
}
