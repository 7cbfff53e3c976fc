package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/apitest"
)

// BenchmarkRunContext reads the context of a run whose thread holds 200
// earlier messages of 400 bytes by 20 authors, over GraphQL and over REST,
// and, in the same run, the one raw SQL statement that fetches the same 200
// rows. It reports median and p99 latency per read and statements per read.
func BenchmarkRunContext(b *testing.B) {
	counter := &apitest.StatementCounter{}
	env := apitest.Start(b, apitest.Options{Tracer: counter, Config: map[string]string{
		"run.sweep_interval": "1h", "agent.context_max_bytes": "1000000",
		"ratelimit.rl.agent_runtime.burst": "100000000", "ratelimit.rl.agent_runtime.per_minute": "100000000",
		"ratelimit.rl.read.burst": "100000000", "ratelimit.rl.read.per_minute": "100000000",
	}})
	run := contextFixture(b, env, 200, 20)
	token := env.World.Token("lotse")
	client := &http.Client{}
	query, _ := json.Marshal(contextQuery)
	body := `{"query":` + string(query) + `,"variables":{"id":"` + run + `"}}`
	do := func(req *http.Request) {
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	var thread string
	var seq int64
	env.Pool.QueryRow(context.Background(), `SELECT thread_id::text, trigger_seq FROM runs WHERE id = $1`, run).Scan(&thread, &seq)
	faces := []struct {
		name string
		read func()
	}{
		{"graphql", func() {
			req, _ := http.NewRequest(http.MethodPost, env.URL+"/graphql", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			do(req)
		}},
		{"rest", func() {
			req, _ := http.NewRequest(http.MethodGet, env.URL+"/api/v1/runs/"+run+"/context", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			do(req)
		}},
		{"raw_sql", func() {
			rows, err := env.Pool.Query(context.Background(), `SELECT id, thread_id, thread_seq, author_principal_id, origin, kind, content_md,
				reply_to_message_id, deleted_at, created_at FROM messages WHERE thread_id = $1 AND thread_seq < $2 AND deleted_at IS NULL
				ORDER BY thread_seq DESC LIMIT 200`, thread, seq)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for rows.Next() {
				n++
			}
			rows.Close()
			if n != 200 {
				b.Fatalf("%d rows", n)
			}
		}},
	}
	for _, f := range faces {
		b.Run(f.name, func(b *testing.B) {
			f.read() // warm up
			lat := make([]time.Duration, 0, b.N)
			before := counter.Count()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				f.read()
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "median_ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
			b.ReportMetric(float64(counter.Count()-before)/float64(b.N), "stmts/read")
		})
	}
}
