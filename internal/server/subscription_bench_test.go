package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/platform/db"
)

// BenchmarkSubscriptionDelivery measures, like BenchmarkAgentEventDelivery,
// the time from the commit of an agent event on one replica to its arrival
// at an agentEvents subscriber on another, over the real WebSocket stack:
// 1000 events, one every 20 ms. Run with -benchtime=1x; it reports median
// and p99 in milliseconds.
func BenchmarkSubscriptionDelivery(b *testing.B) {
	for i := 0; i < b.N; i++ {
		env := apitest.Start(b, apitest.Options{})
		peer := env.Peer()
		agent := env.World.ID("lotse")
		ctx, cancel := context.WithCancel(context.Background())
		c := dialBench(b, ctx, env, env.World.Token("lotse"))
		p, _ := json.Marshal(map[string]any{"query": `subscription { agentEvents(after: "now") { seq type } }`})
		if err := wsjson.Write(ctx, c, rawMsg{ID: "1", Type: "subscribe", Payload: p}); err != nil {
			b.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		var mu sync.Mutex
		committed := map[int64]time.Time{}
		received := map[int64]time.Time{}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for len(received) < deliveryEvents {
				var m rawMsg
				if err := wsjson.Read(ctx, c, &m); err != nil {
					return
				}
				if m.Type != "next" {
					continue
				}
				now := time.Now()
				var q struct {
					Data struct {
						AgentEvents struct {
							Seq string `json:"seq"`
						} `json:"agentEvents"`
					} `json:"data"`
				}
				_ = json.Unmarshal(m.Payload, &q)
				seq, _ := strconv.ParseInt(q.Data.AgentEvents.Seq, 10, 64)
				mu.Lock()
				received[seq] = now
				mu.Unlock()
			}
		}()
		for j := 0; j < deliveryEvents; j++ {
			time.Sleep(20 * time.Millisecond)
			var seq int64
			err := peer.Server.DB.InTx(ctx, func(ctx context.Context) error {
				if err := events.NewLog(peer.Pool, peer.Clock).Append(ctx, events.Event{AgentID: agent, Type: events.RunCancelRequested,
					Payload: map[string]any{"run_id": fmt.Sprintf("bench-%d", j)}}); err != nil {
					return err
				}
				return db.Q(ctx, peer.Pool).QueryRow(ctx, `SELECT max(seq) FROM agent_events`).Scan(&seq)
			})
			at := time.Now()
			if err != nil {
				b.Fatal(err)
			}
			mu.Lock()
			committed[seq] = at
			mu.Unlock()
		}
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			b.Fatalf("only %d of %d events delivered", len(received), deliveryEvents)
		}
		cancel()
		mu.Lock()
		lat := make([]time.Duration, 0, deliveryEvents)
		for seq, at := range committed {
			r, ok := received[seq]
			if !ok {
				b.Fatalf("event %d was never delivered", seq)
			}
			lat = append(lat, r.Sub(at))
		}
		mu.Unlock()
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "median_ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
	}
}

// BenchmarkIdleSubscriptions opens 1000 connections with one events
// subscription each and reports the heap and goroutines they add. Client
// and server share the process, so the figures include the client's side
// of each connection: an upper bound for the server.
func BenchmarkIdleSubscriptions(b *testing.B) {
	const n = 1000
	for i := 0; i < b.N; i++ {
		env := apitest.Start(b, apitest.Options{Config: map[string]string{"websocket.max_connections_per_principal": "2000",
			"ratelimit.rl.read.burst": "5000"}})
		ctx, cancel := context.WithCancel(context.Background())
		tok := env.World.Token("alex")
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		conns := make([]*websocket.Conn, 0, n)
		p, _ := json.Marshal(map[string]any{"query": `subscription { events { seq } }`})
		for j := 0; j < n; j++ {
			c := dialBench(b, ctx, env, tok)
			if err := wsjson.Write(ctx, c, rawMsg{ID: "1", Type: "subscribe", Payload: p}); err != nil {
				b.Fatal(err)
			}
			conns = append(conns, c)
		}
		// Every subscription is running once a commit reaches all of them.
		main := env.Main("Support/Allgemein")
		time.Sleep(time.Second)
		env.MustPost("alex", main, "idle-bench", "wake")
		for _, c := range conns {
			for {
				var m rawMsg
				if err := wsjson.Read(ctx, c, &m); err != nil {
					b.Fatal(err)
				}
				if m.Type == "next" {
					break
				}
			}
		}
		// Read what else the post committed, then measure idle.
		time.Sleep(time.Second)
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n/1024, "heap_KiB/sub")
		b.ReportMetric(float64(runtime.NumGoroutine()-g0)/n, "goroutines/sub")
		cancel()
		for _, c := range conns {
			c.CloseNow()
		}
	}
}

// dialBench opens an initialised graphql-transport-ws connection.
func dialBench(b *testing.B, ctx context.Context, env *apitest.Env, token string) *websocket.Conn {
	c, _, err := websocket.Dial(ctx, wsURL(env), &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"},
		HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		b.Fatal(err)
	}
	if err := wsjson.Write(ctx, c, rawMsg{Type: "connection_init"}); err != nil {
		b.Fatal(err)
	}
	var m rawMsg
	if err := wsjson.Read(ctx, c, &m); err != nil || m.Type != "connection_ack" {
		b.Fatalf("init: %+v %v", m, err)
	}
	return c
}
