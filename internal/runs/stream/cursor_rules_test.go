package stream_test

import (
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/devtools/runtest"
	"bothy.example.com/bothy/internal/platform/problem"
)

// wantAckedAt acknowledges lotse's stream up to cursor and fails the test
// unless the ack succeeds with want as the stored position (an ack
// backwards keeps the position it had).
func wantAckedAt(t *testing.T, env *moduletest.Env, what, cursor, want string) {
	t.Helper()
	if pos, err := env.Runs.Ack(t.Context(), env.Principal("lotse"), cursor); err != nil || pos != want {
		t.Fatalf("%s: %q %v", what, pos, err)
	}
}

// wantInvalidCursor fails the test unless err is validation_failed with
// the one field error invalid_cursor.
func wantInvalidCursor(t *testing.T, what string, err error) {
	t.Helper()
	if p := problem.From("stream.TestCursorRules", err); p == nil || p.Code != problem.ValidationFailed || len(p.Fields) != 1 || p.Fields[0].Code != "invalid_cursor" {
		t.Fatalf("%s: %v", what, err)
	}
}

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
	wantAckedAt(t, env, "ack", first.NextAfter, first.NextAfter)
	env.Post("alex", esk, "cr-2", "@lotse two") // a follow-up of the run
	next, err := env.Runs.Poll(ctx, lotse, "", 0)
	if err != nil || len(next.Events) != 1 || next.Events[0].Type != "agent.followup" {
		t.Fatalf("poll after the ack %+v %v", next.Events, err)
	}
	wantAckedAt(t, env, "ack backwards", "0", first.NextAfter)
	_, err = env.Runs.Ack(ctx, lotse, "999999999")
	wantInvalidCursor(t, "ack beyond the end", err)
	if _, err := env.Runs.Poll(ctx, env.Principal("alex"), "", 0); problem.CodeOf(err) != problem.Forbidden {
		t.Fatalf("a person polls: %v", err)
	}
}
