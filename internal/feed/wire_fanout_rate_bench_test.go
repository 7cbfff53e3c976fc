package feed_test

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket/wsjson"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
)

// BenchmarkFanoutRate posts messages in Support/Allgemein at a fixed rate
// (1 and 10 per second) without waiting for their delivery, while N
// WebSocket connections listen to the events, each with one events
// subscription selecting the message's content; the connections belong to
// four people (alex, sam, robin and the writer), round robin. Unlike
// BenchmarkFanout, commits land while delivery is still running, as they
// do in a busy installation. It reports the statements per posted message
// (the post and its delivery to every listener) and the p50 and p99 of
// the time from the post's answer (its commit) to its arrival at the last
// listener (docs/performance.md "Fan-out"). Nothing is asserted.
func BenchmarkFanoutRate(b *testing.B) {
	for _, n := range fanoutListeners() {
		for _, rate := range []int{1, 10} {
			b.Run(fmt.Sprintf("listeners=%d/rate=%d", n, rate), func(b *testing.B) { benchFanoutRate(b, n, rate) })
		}
	}
}

// arrivals counts, per message id, the listeners it reached and when the
// last of them got it.
type arrivals struct {
	mu   sync.Mutex
	seen map[string]int
	last map[string]time.Time
	cond *sync.Cond
}

var messageIDField = regexp.MustCompile(`"messageId":"([^"]+)"`)

// read receives l's events until ctx ends, recording each message and
// answering the server's pings.
func (a *arrivals) read(ctx context.Context, l *listener) {
	for {
		var m wsMsg
		if err := wsjson.Read(ctx, l.c, &m); err != nil {
			return
		}
		if m.Type == "ping" {
			// A client answers the server's keep-alive, or the server
			// closes the connection: a run at one message a second
			// outlasts the ping interval.
			if err := wsjson.Write(ctx, l.c, wsMsg{Type: "pong"}); err != nil {
				return
			}
			continue
		}
		id := messageIDField.FindSubmatch(m.Payload)
		if id == nil {
			continue
		}
		now := time.Now()
		a.mu.Lock()
		a.seen[string(id[1])]++
		a.last[string(id[1])] = now
		a.cond.Broadcast()
		a.mu.Unlock()
	}
}

// wait blocks until message id reached n listeners, or a minute passed:
// it answers whether it did.
func (a *arrivals) wait(id string, n int) bool {
	deadline := time.Now().Add(time.Minute)
	stop := time.AfterFunc(time.Minute, func() { a.mu.Lock(); a.cond.Broadcast(); a.mu.Unlock() })
	defer stop.Stop()
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.seen[id] < n {
		if time.Now().After(deadline) {
			return false
		}
		a.cond.Wait()
	}
	return true
}

func benchFanoutRate(b *testing.B, n, rate int) {
	counter := &apitest.StatementCounter{}
	env := apitest.Start(b, apitest.Options{Tracer: counter, Config: map[string]string{
		config.WebsocketMaxConnections: "10000", config.RateMessagePerMinute: "100000", config.RateMessageBurst: "100000",
		config.RateReadPerMinute: "1000000", config.RateReadBurst: "100000"}})
	people := []string{"alex", "sam", "robin", "writer"}
	a := &arrivals{seen: map[string]int{}, last: map[string]time.Time{}}
	a.cond = sync.NewCond(&a.mu)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := 0; i < n; i++ {
		l := listen(b, env, env.World.Token(people[i%len(people)]))
		go a.read(ctx, l)
	}
	allgemein := env.Main("Support/Allgemein")
	warm := env.MustPost("writer", allgemein, "warm", "for everybody listening")
	if !a.wait(warm["id"].(string), n) {
		b.Fatal("the warm-up message did not reach every listener")
	}
	before := counter.Count()
	b.ResetTimer()
	committed := make(map[string]time.Time, b.N)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for i := 0; i < b.N; i++ {
		m := env.MustPost("writer", allgemein, fmt.Sprintf("bench-%d", i), "for everybody listening")
		committed[m["id"].(string)] = time.Now()
		if i < b.N-1 {
			<-tick.C
		}
	}
	var lat []time.Duration
	for id, at := range committed {
		if !a.wait(id, n) {
			b.Fatalf("message %s did not reach every listener", id)
		}
		a.mu.Lock()
		lat = append(lat, a.last[id].Sub(at))
		a.mu.Unlock()
	}
	b.StopTimer()
	b.ReportMetric(float64(counter.Count()-before)/float64(b.N), "statements/msg")
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99-ms")
}
