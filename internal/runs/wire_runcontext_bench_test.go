package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// benchConfig lifts the rate limits and the context budget so that the
// benchmarks measure the read, not the limits.
var benchConfig = map[string]string{
	"run.sweep_interval": "1h", "agent.context_max_bytes": "1000000",
	"ratelimit.rl.agent_runtime.burst": "100000000", "ratelimit.rl.agent_runtime.per_minute": "100000000",
	"ratelimit.rl.read.burst": "100000000", "ratelimit.rl.read.per_minute": "100000000",
	"ratelimit.rl.message.burst": "100000000", "ratelimit.rl.message.per_minute": "100000000",
}

// contextBench is a server with one run whose thread holds n earlier
// messages, and the three ways to read what its context holds.
type contextBench struct {
	env     *apitest.Env
	counter *apitest.StatementCounter
	run     string
	faces   []benchFace
}

type benchFace struct {
	name string
	read func(b *testing.B)
}

func newContextBench(b *testing.B, n int) *contextBench {
	counter := &apitest.StatementCounter{}
	env := apitest.Start(b, apitest.Options{Tracer: counter, Config: benchConfig})
	run := contextFixture(b, env, n, 20)
	token := env.World.Token("lotse")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	query, _ := json.Marshal(contextQuery)
	body := `{"query":` + string(query) + `,"variables":{"id":"` + run + `"}}`
	// The client reads each answer into a buffer of its own that holds
	// it whole, so that its reads are few and large: the client shares
	// the process (and the machine) with the server it measures. The pool
	// holds pointers: a slice put as it is would allocate its header.
	bufs := sync.Pool{New: func() any { buf := make([]byte, 512<<10); return &buf }}
	do := func(b *testing.B, req *http.Request) {
		resp, err := client.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		buf := bufs.Get().(*[]byte)
		for {
			if _, err := resp.Body.Read(*buf); err != nil {
				if err != io.EOF {
					b.Error(err)
				}
				break
			}
		}
		bufs.Put(buf)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Errorf("status %d", resp.StatusCode)
		}
	}
	var thread string
	var seq int64
	env.Pool.QueryRow(context.Background(), `SELECT thread_id::text, trigger_seq FROM runs WHERE id = $1`, run).Scan(&thread, &seq)
	cb := &contextBench{env: env, counter: counter, run: run}
	cb.faces = []benchFace{
		{"graphql", func(b *testing.B) {
			req, _ := http.NewRequest(http.MethodPost, env.URL+"/graphql", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			do(b, req)
		}},
		{"rest", func(b *testing.B) {
			req, _ := http.NewRequest(http.MethodGet, env.URL+"/api/v1/runs/"+run+"/context", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			do(b, req)
		}},
		{"raw_sql", func(b *testing.B) {
			// Every column of every row is decoded, as a server that
			// answers from these rows would have to.
			rows, err := env.Pool.Query(context.Background(), `SELECT id::text, thread_id::text, thread_seq, author_principal_id::text, origin, kind, content_md,
				reply_to_message_id::text, deleted_at, created_at FROM messages WHERE thread_id = $1 AND thread_seq < $2 AND deleted_at IS NULL
				ORDER BY thread_seq DESC LIMIT $3`, thread, seq, n)
			if err != nil {
				b.Error(err)
				return
			}
			got := 0
			for rows.Next() {
				var id, th, author, origin, kind, content string
				var reply *string
				var seq int64
				var deleted *time.Time
				var created time.Time
				if err := rows.Scan(&id, &th, &seq, &author, &origin, &kind, &content, &reply, &deleted, &created); err != nil {
					b.Error(err)
				}
				got++
			}
			rows.Close()
			if got != n {
				b.Errorf("%d rows", got)
			}
		}},
	}
	return cb
}

// measure reads face sequentially b.N times and reports median and p99
// latency, statements and allocations (the whole process: client and
// server) per read.
func (cb *contextBench) measure(b *testing.B, f benchFace) {
	f.read(b) // warm up
	lat := make([]time.Duration, 0, b.N)
	before := cb.counter.Count()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0 := processCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		f.read(b)
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	cpu := processCPU() - cpu0
	runtime.ReadMemStats(&ms1)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "median_ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
	b.ReportMetric(float64(cb.counter.Count()-before)/float64(b.N), "stmts/read")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(b.N), "allocs/read")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(b.N)/1024, "kB/read")
	// CPU time of the process (client and server, not PostgreSQL): on a
	// machine shared with other work it moves far less than latency.
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu_ms/read")
}

// processCPU returns the user and system CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRunContext reads the context of a run whose thread holds 200
// earlier messages of 400 bytes by 20 authors, over GraphQL and over REST,
// and, in the same run, the one raw SQL statement that fetches the same 200
// rows with every column decoded: each face alone (median and p99
// latency, statements, allocations and CPU per read), then the three
// interleaved, which reports the targets' ratios (GraphQL within 5x of the
// raw statement, REST within 1.1x of GraphQL; docs/performance.md).
func BenchmarkRunContext(b *testing.B) {
	cb := newContextBench(b, 200)
	for _, f := range cb.faces {
		b.Run(f.name, func(b *testing.B) { cb.measure(b, f) })
	}
	b.Run("interleaved", cb.interleave)
}

// interleave reads every face in turn, b.N times each in one loop, and
// reports each median and the two ratios of the targets (GraphQL / raw,
// REST / GraphQL). The faces run side by side, so a machine whose speed
// drifts from one sub-benchmark to the next (a shared VM) moves all of
// them alike, which the faces measured one after another cannot promise.
func (cb *contextBench) interleave(b *testing.B) {
	lat := make([][]time.Duration, len(cb.faces))
	for _, f := range cb.faces {
		f.read(b) // warm up
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, f := range cb.faces {
			start := time.Now()
			f.read(b)
			lat[j] = append(lat[j], time.Since(start))
		}
	}
	b.StopTimer()
	median := make(map[string]float64, len(cb.faces))
	for j, f := range cb.faces {
		l := lat[j]
		sort.Slice(l, func(x, y int) bool { return l[x] < l[y] })
		median[f.name] = float64(l[len(l)/2].Microseconds()) / 1000
		b.ReportMetric(median[f.name], f.name+"_median_ms")
	}
	b.ReportMetric(median["graphql"]/median["raw_sql"], "graphql/raw")
	b.ReportMetric(median["rest"]/median["graphql"], "rest/graphql")
}

// BenchmarkRunContextSize reads contexts of 10, 200 and 500 elements, to
// show how the cost of a read grows with its size.
func BenchmarkRunContextSize(b *testing.B) {
	for _, n := range []int{10, 200, 500} {
		cb := newContextBench(b, n)
		for _, f := range cb.faces {
			b.Run(fmt.Sprintf("%s/elements=%d", f.name, n), func(b *testing.B) { cb.measure(b, f) })
		}
	}
}

// BenchmarkRunContextClients reads the 200-element context with 1 and 2
// concurrent clients for a fixed time each and reports reads per second.
func BenchmarkRunContextClients(b *testing.B) {
	cb := newContextBench(b, 200)
	for _, f := range cb.faces[:2] {
		for _, clients := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/clients=%d", f.name, clients), func(b *testing.B) {
				f.read(b)
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				start := time.Now()
				for c := 0; c < clients; c++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for next.Add(1) <= int64(b.N) {
							f.read(b)
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "reads/s")
			})
		}
	}
}
