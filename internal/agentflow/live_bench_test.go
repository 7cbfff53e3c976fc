package agentflow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/sdk/agent"
)

// BenchmarkLiveBox streams an answer of 2,000 tokens over 10 s through the
// SDK (Config.Live, 100 ms between updates) while 100 readers are
// subscribed to the events on the same server, and reports per streamed
// answer: the latency from a token's emission by the model to a reader
// holding it (p50 and p99 over every token and reader, and for the first
// token alone), the updates sent and the box writes to the database
// (run.live_flush_interval 250 ms). Run it with -benchtime 1x: one
// iteration takes about 12 s (docs/performance.md#live-boxes-issue-30).
func BenchmarkLiveBox(b *testing.B) {
	const readers, tokens = 100, 2000
	const gap = 5 * time.Millisecond // 200 tokens a second
	env := apitest.Start(b, apitest.Options{Config: map[string]string{"websocket.max_connections_per_principal": "200",
		"ratelimit.rl.read.burst": "1000"}})
	thread := env.Main("Support/Eskalation")
	var all, first []time.Duration
	var updates, writes int
	for i := 0; i < b.N; i++ {
		// The readers subscribe before the question, from the end of the
		// log: the run's box is new to them.
		conns := make([]*websocket.Conn, readers)
		for r := range conns {
			conns[r] = benchSubscribe(b, env)
		}
		times := newLiveTimes(readers, tokens)
		var wg sync.WaitGroup
		for r, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				times.read(b, r, c)
			}()
		}
		env.MustPost("alex", thread, fmt.Sprintf("live-bench-%d", i), "@lotse tell me everything")
		writesBefore, _ := env.Runs.LiveWrites()
		var calls opCounter
		client, err := agent.NewClient(env.URL, env.World.Token("lotse"), agent.ClientOptions{HTTPClient: &http.Client{Transport: &calls}})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		b.StartTimer()
		err = agent.Run(ctx, agent.Config{Client: client, Once: true, Live: true}, func(ctx context.Context, t *agent.Task) error {
			var sb strings.Builder
			for k := 0; k < tokens; k++ {
				w := fmt.Sprintf("w%d ", k)
				sb.WriteString(w)
				times.emit(k)
				t.Stream(ctx, w)
				time.Sleep(gap)
			}
			// The answer waits until every reader holds every token.
			wg.Wait()
			return t.Answer(ctx, sb.String())
		})
		b.StopTimer()
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range conns {
			c.Close(websocket.StatusNormalClosure, "")
		}
		for _, l := range times.lat {
			all = append(all, l...)
		}
		first = append(first, times.firsts...)
		updates += int(calls.count("UpdateRunLive"))
		writes += finalLiveWrites(env, i) - writesBefore
	}
	b.ReportMetric(ms(pct(all, 50)), "p50-ms")
	b.ReportMetric(ms(pct(all, 99)), "p99-ms")
	b.ReportMetric(ms(pct(first, 50)), "first-p50-ms")
	b.ReportMetric(ms(pct(first, 99)), "first-p99-ms")
	b.ReportMetric(float64(updates)/float64(b.N), "updates/answer")
	b.ReportMetric(float64(writes)/float64(b.N), "writes/answer")
}

// liveTimes are the times of one streamed answer of BenchmarkLiveBox:
// when the model emitted each token, and how long each token took to
// reach each reader.
type liveTimes struct {
	mu      sync.Mutex
	emitted []time.Time
	// lat holds each reader's latencies, token by token; firsts the first
	// token's.
	lat    [][]time.Duration
	firsts []time.Duration
}

// newLiveTimes makes the liveTimes of an answer of tokens tokens for
// readers readers.
func newLiveTimes(readers, tokens int) *liveTimes {
	return &liveTimes{emitted: make([]time.Time, tokens), lat: make([][]time.Duration, readers), firsts: make([]time.Duration, readers)}
}

// emit records that the model emits token k now.
func (lt *liveTimes) emit(k int) {
	lt.mu.Lock()
	lt.emitted[k] = time.Now()
	lt.mu.Unlock()
}

// read reads reader r's subscription c until the live box holds every
// token, and records the latency of each token when it arrives (tokens are
// counted by the spaces that end them).
func (lt *liveTimes) read(b *testing.B, r int, c *websocket.Conn) {
	text := ""
	seen := 0
	for seen < len(lt.emitted) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var m struct {
			Type    string `json:"type"`
			Payload struct {
				Data struct {
					Events struct {
						Typename string  `json:"__typename"`
						Append   string  `json:"append"`
						Replace  *string `json:"replace"`
					} `json:"events"`
				} `json:"data"`
			} `json:"payload"`
		}
		err := wsjson.Read(ctx, c, &m)
		cancel()
		if err != nil {
			b.Errorf("reader %d: %v after %d tokens", r, err, seen)
			return
		}
		now := time.Now()
		ev := m.Payload.Data.Events
		if ev.Typename != "RunLiveUpdatedEvent" {
			continue
		}
		if ev.Replace != nil {
			text = *ev.Replace
		}
		text += ev.Append
		n := strings.Count(text, " ")
		lt.mu.Lock()
		for k := seen; k < n && k < len(lt.emitted); k++ {
			d := now.Sub(lt.emitted[k])
			lt.lat[r] = append(lt.lat[r], d)
			if k == 0 {
				lt.firsts[r] = d
			}
		}
		lt.mu.Unlock()
		seen = max(seen, n)
	}
}

// finalLiveWrites waits for the final box write of the answer of
// iteration i (it follows the answer at once) and returns the box writes
// to the database so far.
func finalLiveWrites(env *apitest.Env, i int) int {
	for {
		n, next := env.Runs.LiveWrites()
		if env.Count(`SELECT count(*) FROM run_live WHERE done AND text = '' AND version > 1`) > i {
			return n
		}
		<-next
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

// benchSubscribe opens an events subscription of Alex from the end of the
// log.
func benchSubscribe(b *testing.B, env *apitest.Env) *websocket.Conn {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, strings.Replace(env.URL, "http", "ws", 1)+"/graphql", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		b.Fatal(err)
	}
	c.SetReadLimit(1 << 20)
	end := env.Count(`SELECT coalesce(max(seq), 0)::int FROM event_log`)
	for _, m := range []any{
		map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + env.World.Token("alex")}},
		map[string]any{"id": "s", "type": "subscribe", "payload": map[string]any{"query": `subscription($a: String) { events(after: $a) { __typename ... on RunLiveUpdatedEvent { append replace } } }`,
			"variables": map[string]any{"a": fmt.Sprint(end)}}},
	} {
		if err := wsjson.Write(ctx, c, m); err != nil {
			b.Fatal(err)
		}
		if mm, ok := m.(map[string]any); ok && mm["type"] == "connection_init" {
			var ack map[string]any
			if err := wsjson.Read(ctx, c, &ack); err != nil || ack["type"] != "connection_ack" {
				b.Fatalf("no ack: %v %v", ack, err)
			}
		}
	}
	return c
}

// opCounter counts the GraphQL operations a client sends, by name.
type opCounter struct {
	mu  sync.Mutex
	ops map[string]int
}

func (c *opCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	var body struct {
		OperationName string `json:"operationName"`
	}
	if r.Body != nil {
		data, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(data))
		_ = json.Unmarshal(data, &body)
	}
	c.mu.Lock()
	if c.ops == nil {
		c.ops = map[string]int{}
	}
	c.ops[body.OperationName]++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (c *opCounter) count(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ops[op]
}
