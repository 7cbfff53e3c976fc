package agentflow_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/sdk/agent"
)

// TestMaxConcurrent: with Config.MaxConcurrent 1, four runs started at
// once are answered one after the other (the handler never runs twice at
// once), and all four complete.
func TestMaxConcurrent(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	main := env.Main("Support/Allgemein")
	for i := range 4 {
		env.MustPost("alex", main, fmt.Sprintf("cc-%d", i), fmt.Sprintf("@lotse question %d", i))
	}
	var mu sync.Mutex
	now, most := 0, 0
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(ctx, agent.Config{Server: env.URL, Token: env.World.Token("lotse"), MaxConcurrent: 1, PollWait: time.Second},
			func(ctx context.Context, task *agent.Task) error {
				mu.Lock()
				now++
				most = max(most, now)
				mu.Unlock()
				// Long enough for the other runs to be claimed meanwhile.
				select {
				case <-time.After(100 * time.Millisecond):
				case <-ctx.Done():
				}
				mu.Lock()
				now--
				mu.Unlock()
				return task.Answer(ctx, "one at a time")
			})
	}()
	waitFor(t, "four completed runs", 30*time.Second, func() bool {
		return env.Count(`SELECT count(*) FROM runs WHERE state = 'completed'`) == 4
	})
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if most != 1 {
		t.Fatalf("the handler ran %d times at once", most)
	}
}
