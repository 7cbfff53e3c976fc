package server_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
)

// TestQueryCacheBudgetOnTheWire: with a small graphql.query_cache_bytes (a
// sixteenth is 4 KiB; the wide document is estimated at 30 KiB), a
// document within a sixteenth of it and one far above it both answer, the
// first time (parsed) and again (the small one from the cache, the large
// one parsed anew); with 0 nothing is cached and every document still
// answers.
func TestQueryCacheBudgetOnTheWire(t *testing.T) {
	t.Parallel()
	var wide strings.Builder
	wide.WriteString("query Wide {")
	for i := range 40 {
		fmt.Fprintf(&wide, " v%d: viewer { id handle }", i)
	}
	wide.WriteString(" }")
	for _, budget := range []string{"65536", "0"} {
		t.Run("budget "+budget, func(t *testing.T) {
			t.Parallel()
			env := apitest.Start(t, apitest.Options{Config: map[string]string{config.GraphQLQueryCacheBytes: budget}})
			alex := env.World.Token("alex")
			for round := range 2 {
				var small struct {
					Viewer struct {
						Handle string `json:"handle"`
					} `json:"viewer"`
				}
				if res := env.GraphQL(alex, `query Small { viewer { handle } }`, nil, &small); len(res.Errors) > 0 || small.Viewer.Handle != "alex" {
					t.Fatalf("round %d, small document: %+v %s", round, res.Errors, res.Data)
				}
				res := env.GraphQL(alex, wide.String(), nil, nil)
				var data map[string]struct {
					ID     string `json:"id"`
					Handle string `json:"handle"`
				}
				if len(res.Errors) > 0 || json.Unmarshal(res.Data, &data) != nil || len(data) != 40 || data["v39"].Handle != "alex" {
					t.Fatalf("round %d, wide document: %+v %.200s", round, res.Errors, res.Data)
				}
			}
		})
	}
}
