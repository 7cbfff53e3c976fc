package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/executor"

	"bothy.example.com/bothy/graph/generated"
	"bothy.example.com/bothy/graph/scalars"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/platform/text"
)

// FuzzGraphQLInputCoercion runs arbitrary documents and variables through
// the request phase of the executor (selection count, parse, validation,
// variable coercion, complexity, depth and text checks) and the Time
// scalar: nothing panics, every refusal is a request error of the closed
// vocabulary (never internal_error), and an accepted operation holds only
// storable strings.
func FuzzGraphQLInputCoercion(f *testing.F) {
	cfg := config.Defaults()
	es := generated.NewExecutableSchema(generated.Config{Complexity: Complexity(ListBounds{
		EventsDefault: 100, EventsMax: 500, MessagesDefault: 50, MessagesMax: 200, ContextItems: contextItems, NestedItems: nestedItems})})
	exec := executor.New(es)
	exec.SetParserTokenLimit(cfg.Int(config.GraphQLParserTokenLimit))
	exec.Use(SelectionLimit{Max: cfg.Int(config.GraphQLMaxSelections), TokenLimit: cfg.Int(config.GraphQLParserTokenLimit)})
	exec.Use(&ComplexityLimit{Max: cfg.Int(config.GraphQLComplexityLimit)})
	exec.Use(DepthLimit{Max: cfg.Int(config.GraphQLDepthLimit)})
	exec.Use(TextCheck{})
	present := presenter(slog.New(slog.NewTextHandler(io.Discard, nil)), es.Schema(), nil)

	f.Add(`{ viewer { id } }`, `{}`)
	f.Add(`mutation($in: MessageCreate!) { createMessage(threadId: "t", input: $in) { replayed } }`, `{"in":{"clientMsgId":"a","contentMd":"a\u0000"}}`)
	f.Add(`mutation { createGrant(input: {subjectId: "s", subjectKind: PRINCIPAL, targetKind: CHANNEL, targetId: "c", level: READ, expiresAt: "yesterday"}) { id } }`, `{}`)
	f.Add(`query($l: Int) { events(limit: $l) { events { seq } } }`, `{"l": 99999999999}`)
	f.Add(`{ a: events(limit: 500) { events { seq } } b: events(limit: 500) { events { seq } } c: events(limit: 500) { events { seq } } }`, `{}`)
	f.Add(`{ thread(id: "x\u0000") { id } }`, `null`)
	f.Add(`query($t: ID!) { thread(id: $t) { messages(limit: -1) { messages { id } } } }`, `{"t": ["x"]}`)
	f.Add(`{ viewer { ...F } } fragment F on Principal { id ...F }`, `{}`)
	f.Fuzz(func(t *testing.T, query, vars string) {
		var v map[string]any
		_ = json.Unmarshal([]byte(vars), &v)
		ctx := graphql.StartOperationTrace(context.Background())
		oc, errs := exec.CreateOperationContext(ctx, &graphql.RawParams{Query: query, Variables: v})
		ctx = graphql.WithOperationContext(ctx, oc)
		ctx = graphql.WithResponseContext(ctx, present, nil)
		for _, e := range errs {
			g := present(ctx, e)
			code, _ := g.Extensions["code"].(string)
			if !problem.Code(code).Known() || code == string(problem.InternalError) {
				t.Fatalf("refusal %q: %v", code, e)
			}
		}
		if len(errs) > 0 {
			return
		}
		var walk func(v any)
		walk = func(v any) {
			switch x := v.(type) {
			case string:
				if !text.Storable(x) {
					t.Fatal("accepted an unstorable variable")
				}
			case map[string]any:
				for _, e := range x {
					walk(e)
				}
			case []any:
				for _, e := range x {
					walk(e)
				}
			}
		}
		walk(oc.Variables)
		// Every string variable may reach the Time scalar: it refuses
		// with a problem, never a plain error.
		for _, val := range oc.Variables {
			if _, err := scalars.UnmarshalTime(val); err != nil && !problem.Is(err, problem.ValidationFailed) {
				t.Fatalf("Time scalar error %v", err)
			}
		}
	})
}
