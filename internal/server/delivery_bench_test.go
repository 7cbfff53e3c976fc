package server_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/events"
)

// deliveryEvents is how many agent events each delivery benchmark commits.
const deliveryEvents = 1000

// BenchmarkAgentEventDelivery measures the latency from the commit of an
// agent event to the return of the adapter's read that hands it out, for
// the long poll woken by LISTEN/NOTIFY and for a loop that polls once per
// second, in one run, over the real HTTP stack and PostgreSQL. Events are
// committed every 20 ms by a second server (a replica). Run with
// -benchtime=1x; it reports median and p99 in milliseconds.
func BenchmarkAgentEventDelivery(b *testing.B) {
	for _, mode := range []string{"listen_notify", "poll_1s"} {
		b.Run(mode, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				lat := measureDelivery(b, mode == "poll_1s")
				sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "median_ms")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
			}
		})
	}
}

func measureDelivery(b *testing.B, fixedPoll bool) []time.Duration {
	env := apitest.Start(b, apitest.Options{Config: map[string]string{"ratelimit.rl.agent_runtime.burst": "100000", "ratelimit.rl.agent_runtime.per_minute": "100000"}})
	peer := env.Peer()
	agent := env.World.ID("lotse")
	// Receive and commit times are matched by seq afterwards: a fast long
	// poll can hand an event out before the committer has noted its time.
	var mu sync.Mutex
	committed := map[int64]time.Time{}
	received := map[int64]time.Time{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		cursor := ""
		for ctx.Err() == nil {
			mu.Lock()
			n := len(received)
			mu.Unlock()
			if n >= deliveryEvents {
				return
			}
			wait := 10
			if fixedPoll {
				wait = 0
				time.Sleep(time.Second)
			}
			evs, next := env.Poll(b, "lotse", cursor, wait)
			now := time.Now()
			mu.Lock()
			for _, e := range evs {
				seq, _ := strconv.ParseInt(e.Seq, 10, 64)
				received[seq] = now
			}
			mu.Unlock()
			cursor = next
		}
	}()
	for i := 0; i < deliveryEvents; i++ {
		time.Sleep(20 * time.Millisecond)
		err := peer.Server.DB.InTx(ctx, func(ctx context.Context) error {
			return events.NewLog(peer.Pool, peer.Clock).Append(ctx, events.Event{AgentID: agent, Type: events.RunCancelRequested, Payload: map[string]any{"run_id": fmt.Sprintf("bench-%d", i)}})
		})
		at := time.Now()
		if err != nil {
			b.Fatal(err)
		}
		var seq int64
		peer.Pool.QueryRow(ctx, `SELECT max(seq) FROM agent_events`).Scan(&seq)
		mu.Lock()
		committed[seq] = at
		mu.Unlock()
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		b.Fatalf("only %d of %d events delivered", len(received), deliveryEvents)
	}
	mu.Lock()
	defer mu.Unlock()
	got := make([]time.Duration, 0, deliveryEvents)
	for seq, at := range committed {
		r, ok := received[seq]
		if !ok {
			b.Fatalf("event %d was never delivered", seq)
		}
		got = append(got, r.Sub(at))
	}
	return got
}
