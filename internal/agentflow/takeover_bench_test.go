package agentflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/sdk/agent"
)

// takeoverRounds is how many lapsed leases the benchmark measures.
const takeoverRounds = 30

// BenchmarkLeaseTakeover measures the time from the sweep that finds a
// lapsed lease (the run goes back to queued with a new invocation) to the
// moment a live reference adapter holds the run again, over the real HTTP
// stack and PostgreSQL. In a deployment add up to run.sweep_interval
// between the lapse and the sweep. Run with -benchtime=1x; it reports
// median and p99 in milliseconds.
func BenchmarkLeaseTakeover(b *testing.B) {
	for i := 0; i < b.N; i++ {
		lat := measureTakeover(b)
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "median_ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
	}
}

func measureTakeover(b *testing.B) []time.Duration {
	env := apitest.Start(b, apitest.Options{Config: map[string]string{"run.lease_timeout": "2s",
		"ratelimit.rl.message.burst": "1000", "ratelimit.rl.agent_runtime.burst": "100000", "ratelimit.rl.read.burst": "100000"}})
	dead, err := agent.NewClient(env.URL, env.World.Token("lotse"), agent.ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	main := env.Main("Support/Allgemein")
	out := make([]time.Duration, 0, takeoverRounds)
	for i := 0; i < takeoverRounds; i++ {
		// A process claims the new run and dies.
		env.MustPost("alex", main, fmt.Sprintf("bench-%d", i), fmt.Sprintf("@lotse round %d", i))
		page, err := dead.AgentEvents(b.Context(), "", 0)
		if err != nil || len(page.Events) == 0 {
			b.Fatalf("events %+v %v", page, err)
		}
		var inv agent.Invocation
		if err := json.Unmarshal(page.Events[len(page.Events)-1].Payload, &inv); err != nil {
			b.Fatal(err)
		}
		if _, err := dead.StartRun(b.Context(), inv.RunID, "dead-process"); err != nil {
			b.Fatal(err)
		}
		// A live process that skips the claimed run and waits in its poll.
		c, _ := agent.NewClient(env.URL, env.World.Token("lotse"), agent.ClientOptions{})
		a, _ := agent.New(agent.Config{Client: c, Model: agent.EchoModel{}, PollWait: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		ctx, cancel := context.WithCancel(b.Context())
		done := make(chan struct{})
		go func() { defer close(done); _ = a.Run(ctx) }()
		time.Sleep(300 * time.Millisecond)
		env.Clock.Advance(3 * time.Second)
		began := time.Now()
		if _, err := env.Server.Runs.SweepOnce(b.Context()); err != nil {
			b.Fatal(err)
		}
		for env.Count(`SELECT count(*) FROM runs WHERE id = $1 AND attempt = 2 AND state IN ('running', 'completed')`, inv.RunID) == 0 {
			if time.Since(began) > 30*time.Second {
				b.Fatal("no takeover")
			}
			time.Sleep(time.Millisecond)
		}
		out = append(out, time.Since(began))
		for env.Count(`SELECT count(*) FROM runs WHERE id = $1 AND state = 'completed'`, inv.RunID) == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		<-done
	}
	return out
}
