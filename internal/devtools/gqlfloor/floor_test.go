package gqlfloor

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/executor"
)

// run executes Operation on exec and returns the answer's JSON as gqlgen's
// HTTP transport would write it.
func run(tb testing.TB, exec *executor.Executor) []byte {
	ctx := graphql.StartOperationTrace(context.Background())
	rc, errs := exec.CreateOperationContext(ctx, &graphql.RawParams{Query: Operation})
	if errs != nil {
		tb.Fatal(errs)
	}
	h, ctx := exec.DispatchOperation(ctx, rc)
	resp := h(ctx)
	if len(resp.Errors) > 0 {
		tb.Fatal(resp.Errors)
	}
	return resp.Data
}

func newExec(n int) *executor.Executor {
	return executor.New(NewExecutableSchema(Config{Resolvers: &Resolver{Items_: Fixture(n)}}))
}

// TestExecutorFloor: the floor query answers every item with every field.
func TestExecutorFloor(t *testing.T) {
	var out struct {
		Items []Item `json:"items"`
	}
	if err := json.Unmarshal(run(t, newExec(3)), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Items) != 3 || out.Items[2].Seq != 3 || len(out.Items[0].ContentMd) != 400 || out.Items[0].Trust != MarkHigh {
		t.Fatalf("%+v", out.Items)
	}
}

// BenchmarkExecutorFloor: gqlgen's executor on 200 objects of 16 scalar
// fields from memory (parse and validation cached, as in the server),
// next to encoding/json of the same objects.
func BenchmarkExecutorFloor(b *testing.B) {
	b.Run("gqlgen", func(b *testing.B) {
		exec := newExec(200)
		run(b, exec)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			run(b, exec)
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		items := Fixture(200)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := json.Marshal(items); err != nil {
				b.Fatal(err)
			}
		}
	})
}
