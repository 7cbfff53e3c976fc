package stream_test

import (
	"bothy.example.com/bothy/internal/devtools/runtest"
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/platform/problem"
)

// TestCursorRules pins the agent's stored position
// (docs/design/runs.md#invocations; runs.Service.Poll and Ack): a poll
// without a cursor continues after the acknowledged position; handing
// events out moves nothing; acknowledging backwards keeps the stored
// position; a position beyond the end is validation_failed
// invalid_cursor; a person has no stream (forbidden).
func TestCursorRules(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	lotse := env.Principal("lotse")
	esk := env.Main("Support/Eskalation")
	run := runtest.RunOf(t, env, env.Post("alex", esk, "cr-1", "@lotse one"))
	first, err := env.Runs.Poll(ctx, lotse, "", 0)
	if err != nil || len(first.Events) != 1 || first.Events[0].Type != "agent.invocation" || first.Events[0].Payload["run_id"] != run {
		t.Fatalf("first poll %+v %v", first.Events, err)
	}
	// Handed out, not acknowledged: the next poll without cursor hands it
	// out again.
	if again, err := env.Runs.Poll(ctx, lotse, "", 0); err != nil || len(again.Events) != 1 || again.NextAfter != first.NextAfter {
		t.Fatalf("unacknowledged poll %+v %v", again, err)
	}
	if pos, err := env.Runs.Ack(ctx, lotse, first.NextAfter); err != nil || pos != first.NextAfter {
		t.Fatalf("ack: %q %v", pos, err)
	}
	env.Post("alex", esk, "cr-2", "@lotse two") // a follow-up of the run
	next, err := env.Runs.Poll(ctx, lotse, "", 0)
	if err != nil || len(next.Events) != 1 || next.Events[0].Type != "agent.followup" {
		t.Fatalf("poll after the ack %+v %v", next.Events, err)
	}
	if pos, err := env.Runs.Ack(ctx, lotse, "0"); err != nil || pos != first.NextAfter {
		t.Fatalf("ack backwards: %q %v", pos, err)
	}
	_, err = env.Runs.Ack(ctx, lotse, "999999999")
	if p := problem.From("stream.TestCursorRules", err); p == nil || p.Code != problem.ValidationFailed || len(p.Fields) != 1 || p.Fields[0].Code != "invalid_cursor" {
		t.Fatalf("ack beyond the end: %v", err)
	}
	if _, err := env.Runs.Poll(ctx, env.Principal("alex"), "", 0); problem.CodeOf(err) != problem.Forbidden {
		t.Fatalf("a person polls: %v", err)
	}
}
