package heapbound_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// TestDistinctLargeDocumentsBoundTheHeap: 300 distinct GraphQL documents of
// 900 KB each (a valid query and a long comment, so that every cache keyed
// by a document's text sees it: the parsed-document cache, the selection
// counts and, for every third, the persisted-query cache) raise the heap
// kept after them by at most 64 MiB. Each cache is bounded by
// graphql.query_cache_bytes (or its own key) and charged the text's bytes.
// Each document has an operation name of its own: the name the parser
// returns is a substring of the text, and the request metrics' label set
// (metrics.max_operations, 200 names) kept it, and with it the whole
// document, for about 190 of them (175-190 MiB) until it kept copies.
func TestDistinctLargeDocumentsBoundTheHeap(t *testing.T) {
	// Not parallel: it measures the heap of the whole test process (the
	// server and its client), which the package's other tests would grow.
	env := apitest.Start(t, apitest.Options{Config: map[string]string{"ratelimit.rl.read.burst": "1000", "ratelimit.rl.read.per_minute": "100000"}})
	tok := env.World.Token("alex")
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	padding := strings.Repeat("x", 900<<10)
	before := heap()
	for i := range 300 {
		doc := fmt.Sprintf("query Distinct%d { viewer { id } }\n# %d %s\n", i, i, padding)
		req := map[string]any{"query": doc}
		if i%3 == 0 {
			sum := sha256.Sum256([]byte(doc))
			req["extensions"] = map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": hex.EncodeToString(sum[:])}}
		}
		var out struct {
			Viewer struct{ ID string } `json:"viewer"`
		}
		res, err := env.GraphQLRequestDo(tok, req, &out)
		if err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		if len(res.Errors) > 0 || out.Viewer.ID != env.World.ID("alex") {
			t.Fatalf("document %d: errors %+v, viewer %q", i, res.Errors, out.Viewer.ID)
		}
	}
	after := heap()
	grew := int64(after) - int64(before)
	t.Logf("heap before %d MiB, after 300 documents of 900 KB %d MiB", before>>20, after>>20)
	if grew > 64<<20 {
		t.Fatalf("the heap kept %d MiB more after 300 distinct documents of 900 KB, bound 64 MiB", grew>>20)
	}
}
