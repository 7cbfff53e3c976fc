package agentflow_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/sdk/agent"
)

// countingTransport counts the calls a client makes.
type countingTransport struct{ n *atomic.Int64 }

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// BenchmarkSDKRuns measures what one SDK process sustains with an echo
// handler (no model time): b.N questions, each starting a run in an auto
// thread of Support/Allgemein, are posted at once, and the adapter answers
// them all. It reports runs per second, the server calls the SDK makes per
// run (stream, context, start, renewals, acknowledgements, answer, finish)
// and the wall time per run (docs/performance.md "The SDK").
func BenchmarkSDKRuns(b *testing.B) {
	env := apitest.Start(b, apitest.Options{Config: map[string]string{
		"ratelimit.rl.message.burst": "100000", "ratelimit.rl.message.per_minute": "100000",
		"ratelimit.rl.agent_runtime.burst": "100000", "ratelimit.rl.agent_runtime.per_minute": "100000",
		"ratelimit.rl.read.burst": "100000", "ratelimit.rl.read.per_minute": "100000"}})
	var calls atomic.Int64
	client, err := agent.NewClient(env.URL, env.World.Token("lotse"), agent.ClientOptions{HTTPClient: &http.Client{Transport: countingTransport{&calls}}})
	if err != nil {
		b.Fatal(err)
	}
	main := env.Main("Support/Allgemein")
	for i := 0; i < b.N; i++ {
		env.MustPost("alex", main, fmt.Sprintf("bench-%d", i), fmt.Sprintf("@lotse question %d", i))
	}
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	done := make(chan error, 1)
	b.ResetTimer()
	start := time.Now()
	go func() {
		done <- agent.Run(ctx, agent.Config{Client: client, PollWait: time.Second}, func(ctx context.Context, t *agent.Task) error {
			return t.Answer(ctx, "echo: "+t.Context().TriggerMessage.ContentMD)
		})
	}()
	for env.Count(`SELECT count(*) FROM runs WHERE state = 'completed'`) < b.N {
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	n := calls.Load()
	cancel()
	<-done
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "runs/s")
	b.ReportMetric(float64(n)/float64(b.N), "calls/run")
	b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N), "ms/run")
}
