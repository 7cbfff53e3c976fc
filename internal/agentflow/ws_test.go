package agentflow_test

import (
	"fmt"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/sdk/agent"
)

// TestAdapterOverWebSocket: with --transport ws the adapter reads its
// stream through the agentEvents subscription and behaves as with the long
// poll: every run answered once and completed, and the stream acknowledged
// up to its end; after the adapter restarts (a reconnect), runs triggered
// meanwhile are handled without a duplicate answer.
func TestAdapterOverWebSocket(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{
		"ratelimit.rl.message.burst": "200", "ratelimit.rl.agent_runtime.burst": "2000"}})
	stop := runAdapterOver(t, env, "lotse", agent.EchoModel{}, agent.TransportWS)
	main := env.Main("Support/Allgemein")
	for i := 0; i < 5; i++ {
		env.MustPost("alex", main, fmt.Sprintf("ws-%d", i), fmt.Sprintf("@lotse question %d", i))
	}
	waitFor(t, "5 completed runs", 60*time.Second, func() bool {
		return env.Count(`SELECT count(*) FROM runs WHERE state = 'completed'`) == 5
	})
	stop()
	for i := 5; i < 8; i++ {
		env.MustPost("alex", main, fmt.Sprintf("ws-%d", i), fmt.Sprintf("@lotse question %d", i))
	}
	runAdapterOver(t, env, "lotse", agent.EchoModel{}, agent.TransportWS)
	waitFor(t, "8 completed runs", 60*time.Second, func() bool {
		return env.Count(`SELECT count(*) FROM runs WHERE state = 'completed'`) == 8
	})
	for run, n := range answersPerRun(t, env, "lotse") {
		if n != 1 {
			t.Fatalf("run %s has %d answers", run, n)
		}
	}
	waitFor(t, "the stream acknowledged to its end", 10*time.Second, func() bool {
		return env.Count(`SELECT count(*) FROM agent_cursors c WHERE c.acked_seq = (SELECT max(seq) FROM agent_events)`) == 1
	})
}

// TestAdaptersOverBothTransports: one adapter on the long poll and one on
// the subscription share an agent's 20 runs: exactly one answer each.
func TestAdaptersOverBothTransports(t *testing.T) {
	t.Parallel()
	shareTwentyRuns(t, "both", agent.TransportPoll, agent.TransportWS)
}

// TestAdapterOverWebSocketRefusedToken: a revoked token stops the ws
// adapter with unauthorized, as the long poll does.
func TestAdapterOverWebSocketRefusedToken(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	c, err := agent.NewClient(env.URL, "bothy_a_not_a_token", agent.ClientOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s := c.AgentStream()
	defer s.Close()
	_, err = s.Next(t.Context(), "", time.Second)
	if agent.ErrorCode(err) != "unauthorized" {
		t.Fatalf("Next with a bad token: %v", err)
	}
}
