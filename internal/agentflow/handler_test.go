package agentflow_test

import (
	"context"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/sdk/agent"
)

// TestRunWithHandler drives agent.Run, the SDK's entry point, against a
// server: a handler's answer is posted in the run's thread and completes
// the run; Task.Fail ends the run failed with the handler's reason and
// posts nothing; a handler that returns without either fails the run with
// model_error. Each with Config.Once, so Run returns when the run ended.
func TestRunWithHandler(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name          string
		handle        func(ctx context.Context, t *agent.Task) error
		state, reason string
		answers       int
	}{
		{"answer", func(ctx context.Context, t *agent.Task) error {
			return t.Answer(ctx, "handled: "+t.Context().TriggerMessage.ContentMD)
		}, "completed", "", 1},
		{"fail with a reason", func(ctx context.Context, t *agent.Task) error {
			t.Fail("tool_error")
			return nil
		}, "failed", "tool_error", 0},
		{"no answer", func(ctx context.Context, t *agent.Task) error { return nil }, "failed", "model_error", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := apitest.Start(t, apitest.Options{})
			thread := env.Main("Support/Eskalation")
			lotseMessages := func() int {
				return env.Count(`SELECT count(*) FROM messages m JOIN principals p ON p.id = m.author_principal_id WHERE m.thread_id = $1 AND p.handle = 'lotse' AND m.kind = 'text'`, thread)
			}
			before := lotseMessages()
			env.MustPost("alex", thread, "h-1", "@lotse please check the printer")
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			var seen *agent.Task
			err := agent.Run(ctx, agent.Config{Server: env.URL, Token: env.World.Token("lotse"), Once: true},
				func(ctx context.Context, task *agent.Task) error {
					seen = task
					return c.handle(ctx, task)
				})
			if err != nil {
				t.Fatal(err)
			}
			if seen == nil || seen.RunID() == "" || seen.Prompt().User == "" || seen.Context().TriggerMessage.Trust != agent.TrustTrigger {
				t.Fatalf("the handler saw %+v", seen)
			}
			if n := env.Count(`SELECT count(*) FROM runs WHERE id = $1 AND state = $2 AND coalesce(end_reason, '') = $3`, seen.RunID(), c.state, c.reason); n != 1 {
				t.Fatalf("run %s is not %s with reason %q", seen.RunID(), c.state, c.reason)
			}
			if n := lotseMessages() - before; n != c.answers {
				t.Fatalf("%d answers, want %d", n, c.answers)
			}
		})
	}
}
