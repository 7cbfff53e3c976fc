package runs_test

import (
	"fmt"
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/devtools/runtest"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs"
	"bothy.example.com/bothy/internal/runs/domain"
)

// TestSessionModes: the first run of a thread starts a new session, the
// next resumes it; a reset makes the next run new in a fresh session, a
// bind makes it bind the given session, and the run after that resumes;
// a person without trigger may not reset; guest runs have no session.
// The REST routes' answers are TestSessionRoutesOnTheWire in
// internal/server.
func TestSessionModes(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	esk := env.Main("Support/Eskalation")
	alex := env.Principal("alex")
	asked := 0
	next := func(content string) runs.Run {
		t.Helper()
		asked++
		return runtest.ReadRun(t, env, "lotse", runtest.RunOf(t, env, env.Post("alex", esk, fmt.Sprintf("s%d", asked), "@lotse "+content)))
	}
	complete := func(r runs.Run) {
		t.Helper()
		runtest.StartAs(t, env, "lotse", r.ID)
		runtest.FinishAs(t, env, "lotse", r.ID, domain.RunCompleted)
	}
	r1 := next("one")
	if r1.SessionMode != domain.ModeNew || r1.SessionID == "" {
		t.Fatalf("first run %+v", r1)
	}
	complete(r1)
	r2 := next("two")
	if r2.SessionMode != domain.ModeResume || r2.SessionID != r1.SessionID {
		t.Fatalf("second run %+v", r2)
	}
	complete(r2)
	if _, err := env.Runs.ResetSession(ctx, alex, esk); err != nil {
		t.Fatalf("reset: %v", err)
	}
	r3 := next("three")
	if r3.SessionMode != domain.ModeNew || r3.SessionID == r1.SessionID {
		t.Fatalf("after reset %+v", r3)
	}
	complete(r3)
	b, err := env.Runs.BindSession(ctx, alex, esk, "conv-42")
	if err != nil || !b.Started || b.ExternalRef != "conv-42" {
		t.Fatalf("bind %+v %v", b, err)
	}
	r4 := next("four")
	if r4.SessionMode != domain.ModeBind || r4.SessionID != b.ID {
		t.Fatalf("after bind %+v", r4)
	}
	complete(r4)
	if r5 := next("five"); r5.SessionMode != domain.ModeResume {
		t.Fatalf("after a bound run %+v", r5)
	}
	checkSessionlessCases(t, env)
}

// checkSessionlessCases fails the test unless Writer, who has no trigger,
// is refused a reset of Allgemein's session (forbidden) and a guest run's
// invocation names the guest mode without a session id.
func checkSessionlessCases(t *testing.T, env *moduletest.Env) {
	t.Helper()
	ctx := t.Context()
	// Writer has no trigger: may not reset.
	_, err := env.Runs.ResetSession(ctx, env.Principal("writer"), env.Main("Support/Allgemein"))
	if p := problem.From("runs.testSessionModes", err); err == nil || p.Code != problem.Forbidden {
		t.Fatalf("writer resets: %v", err)
	}
	// Guest runs have no session.
	env.Post("alex", env.Main("Support/Allgemein"), "g", "@texter guest")
	page, err := env.Runs.Poll(ctx, env.Principal("texter"), "", 0)
	if err != nil || len(page.Events) == 0 {
		t.Fatalf("texter's stream %+v %v", page, err)
	}
	if s, _ := page.Events[0].Payload["session"].(map[string]any); s["mode"] != "guest" || s["id"] != nil {
		t.Fatalf("guest session %v", page.Events[0].Payload["session"])
	}
}
