package querycache

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"bothy.example.com/bothy/graph/generated"
	"bothy.example.com/bothy/internal/rest"
)

// sized is a cache value that states its own cost, so that the tables below
// read in bytes.
type sized int

func sizedCost(_ string, v sized) int { return int(v) }

// TestLRU: the cache holds at most its budget in bytes, evicts the least
// recently used entries first (a Get counts as a use), never caches an entry
// above a sixteenth of the budget, and counts an entry added twice once.
func TestLRU(t *testing.T) {
	t.Parallel()
	type step struct {
		op   string // "add" or "get"
		key  string
		cost sized
	}
	for _, tc := range []struct {
		name   string
		budget int
		steps  []step
		want   []string // the keys cached at the end, any order
		used   int
	}{
		{"fits", 1600, []step{{"add", "a", 100}, {"add", "b", 100}}, []string{"a", "b"}, 200},
		{"evicts the oldest by bytes", 1600, []step{
			{"add", "a", 100}, {"add", "b", 100}, {"add", "c", 100}, {"add", "d", 100},
			{"add", "e", 100}, {"add", "f", 100}, {"add", "g", 100}, {"add", "h", 100},
			{"add", "i", 100}, {"add", "j", 100}, {"add", "k", 100}, {"add", "l", 100},
			{"add", "m", 100}, {"add", "n", 100}, {"add", "o", 100}, {"add", "p", 100},
			{"add", "q", 100},
		}, []string{"b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q"}, 1600},
		{"one entry evicts as many as it takes", 400, []step{
			{"add", "a", 10}, {"add", "b", 10}, {"add", "c", 10}, {"add", "d", 10},
			{"add", "e", 25}, {"add", "f", 25}, {"add", "g", 25}, {"add", "h", 25},
			{"add", "i", 25}, {"add", "j", 25}, {"add", "k", 25}, {"add", "l", 25},
			{"add", "m", 25}, {"add", "n", 25}, {"add", "o", 25}, {"add", "p", 25},
			{"add", "q", 25}, {"add", "r", 25}, {"add", "s", 25},
		}, []string{"c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s"}, 395},
		{"a get keeps an entry", 48, []step{
			{"add", "a", 3}, {"add", "b", 3}, {"get", "a", 0}, {"add", "c", 3},
			{"add", "d", 3}, {"add", "e", 3}, {"add", "f", 3}, {"add", "g", 3},
			{"add", "h", 3}, {"add", "i", 3}, {"add", "j", 3}, {"add", "k", 3},
			{"add", "l", 3}, {"add", "m", 3}, {"add", "n", 3}, {"add", "o", 3},
			{"add", "p", 3}, {"add", "q", 3},
		}, []string{"a", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q"}, 48},
		{"above a sixteenth is not cached", 1600, []step{{"add", "a", 100}, {"add", "big", 101}}, []string{"a"}, 100},
		{"a sixteenth is cached", 1600, []step{{"add", "a", 100}}, []string{"a"}, 100},
		{"added twice counts once", 1600, []step{{"add", "a", 100}, {"add", "a", 100}}, []string{"a"}, 100},
		{"a budget of 0 caches nothing", 0, []step{{"add", "a", 1}}, nil, 0},
		{"nothing costs nothing", 1600, []step{{"add", "a", 0}}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewLRU(tc.budget, sizedCost)
			ctx := context.Background()
			for _, s := range tc.steps {
				switch s.op {
				case "add":
					c.Add(ctx, s.key, s.cost)
				case "get":
					if _, ok := c.Get(ctx, s.key); !ok {
						t.Fatalf("get %s: not cached", s.key)
					}
				}
			}
			for _, k := range tc.want {
				if _, ok := c.Get(ctx, k); !ok {
					t.Errorf("%s not cached", k)
				}
			}
			if n := c.Len(); n != len(tc.want) {
				t.Errorf("%d entries cached, want %d (%v)", n, len(tc.want), tc.want)
			}
			if used := c.Used(); used != tc.used {
				t.Errorf("%d bytes used, want %d", used, tc.used)
			}
		})
	}
}

// TestLRUConcurrent: many goroutines getting and adding at once (run
// it with -race) leave the cache within its budget, with its count of bytes
// equal to the sum of the entries it holds.
func TestLRUConcurrent(t *testing.T) {
	t.Parallel()
	const budget = 16 * 1024
	c := NewLRU(budget, sizedCost)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for i := range 2000 {
				key := fmt.Sprintf("k%d", (i*7+g*13)%300)
				if v, ok := c.Get(ctx, key); ok && int(v) != len(key)*100 {
					t.Errorf("%s holds %d", key, v)
					return
				}
				c.Add(ctx, key, sized(len(key)*100))
			}
		}()
	}
	wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	sum := 0
	for _, k := range c.lru.Keys() {
		v, _ := c.lru.Peek(k)
		sum += v.cost
	}
	if sum != c.used || c.used > budget || c.used == 0 {
		t.Fatalf("used %d, entries sum to %d, budget %d", c.used, sum, budget)
	}
}

// TestQueryCacheHoldsDocuments: the GraphQL executor's cache holds parsed
// documents, charges each its estimated memory, and leaves a document above
// a sixteenth of the budget out.
func TestQueryCacheHoldsDocuments(t *testing.T) {
	t.Parallel()
	schema := generated.NewExecutableSchema(generated.Config{}).Schema()
	small := `{ viewer { id handle } }`
	var b strings.Builder
	b.WriteString("{")
	for i := range 200 {
		fmt.Fprintf(&b, " a%d: viewer { id handle displayName }", i)
	}
	b.WriteString("}")
	big := b.String()
	parse := func(src string) *ast.QueryDocument {
		doc, errs := gqlparser.LoadQueryWithRules(schema, src, nil)
		if errs != nil {
			t.Fatal(errs)
		}
		return doc
	}
	smallDoc, bigDoc := parse(small), parse(big)
	smallCost, bigCost := DocumentCost(small, smallDoc), DocumentCost(big, bigDoc)
	if smallCost <= len(small) || bigCost <= len(big) {
		t.Fatalf("costs %d and %d do not exceed the source text", smallCost, bigCost)
	}
	budget := 16 * (bigCost - 1) // the big document is just above a sixteenth
	c := New(budget)
	ctx := context.Background()
	c.Add(ctx, small, smallDoc)
	c.Add(ctx, big, bigDoc)
	if got, ok := c.Get(ctx, small); !ok || got != smallDoc {
		t.Fatal("the small document is not cached")
	}
	if _, ok := c.Get(ctx, big); ok {
		t.Fatal("a document above a sixteenth of the budget is cached")
	}
	if c.Used() != smallCost {
		t.Fatalf("%d bytes used, want the small document's %d", c.Used(), smallCost)
	}
}

// TestDocumentCostEstimatesMemory: DocumentCost stays within a factor of
// the heap a parsed and validated document really keeps, for documents of
// very different shapes (the REST routes' stored operations, a compact and
// a whitespace-padded wide selection, a long string literal, comments,
// fragments), so that graphql.query_cache_bytes bounds memory, not text.
func TestDocumentCostEstimatesMemory(t *testing.T) {
	// Not parallel: it measures the heap of the whole test process, which
	// the other tests of the package would grow while it runs.
	schema := generated.NewExecutableSchema(generated.Config{}).Schema()
	type doc struct{ name, src string }
	var docs []doc
	for _, r := range rest.Table() {
		if r.OperationID == "getViewer" || r.OperationID == "listThreadMessages" || r.OperationID == "createMessage" || r.OperationID == "getRunContext" {
			docs = append(docs, doc{r.OperationID, r.Document})
		}
	}
	var wide strings.Builder
	wide.WriteString("{")
	for i := range 200 {
		fmt.Fprintf(&wide, "a%d:viewer{id handle}", i)
	}
	wide.WriteString("}")
	var commented strings.Builder
	commented.WriteString("{")
	for i := range 100 {
		fmt.Fprintf(&commented, "# field %d\n a%d: viewer { id }\n", i, i)
	}
	commented.WriteString("}")
	docs = append(docs,
		doc{"tiny", `{ viewer { id } }`},
		doc{"compact", wide.String()},
		doc{"padded", strings.ReplaceAll(wide.String(), "{", "{"+strings.Repeat(" ", 200))},
		doc{"long string", `query { message(id: "` + strings.Repeat("x", 20000) + `") { id } }`},
		doc{"commented", commented.String()},
		doc{"fragments", `query { viewer { ...A ...B } } fragment A on Principal { id handle } fragment B on Principal { displayName id }`},
	)
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for _, d := range docs {
		const n = 100
		kept := make([]*ast.QueryDocument, 0, n)
		before := heap()
		for range n {
			parsed, errs := gqlparser.LoadQueryWithRules(schema, strings.Clone(d.src), nil)
			if errs != nil {
				t.Fatalf("%s: %v", d.name, errs)
			}
			kept = append(kept, parsed)
		}
		measured := float64(heap()-before) / n
		estimate := float64(DocumentCost(d.src, kept[0]))
		runtime.KeepAlive(kept)
		t.Logf("%-20s source %6d B, kept %8.0f B, estimate %8.0f B (%.2f)", d.name, len(d.src), measured, estimate, estimate/measured)
		if estimate < 0.7*measured || estimate > 1.5*measured {
			t.Errorf("%s: estimate %.0f B, measured %.0f B per document", d.name, estimate, measured)
		}
	}
}
