package runs_test

import (
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/devtools/runtest"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs"
	"bothy.example.com/bothy/internal/runs/domain"
)

// wantConflict fails the test unless err is conflict reason.
func wantConflict(t *testing.T, what string, err error, reason string) {
	t.Helper()
	if p := problem.From("runs.wantConflict", err); p == nil || p.Code != problem.Conflict || p.Reason != reason {
		t.Fatalf("%s: %v, want conflict %s", what, err, reason)
	}
}

// heldAnswer posts an answer of lotse into thread as part of run, held by
// holder: the write the fence lets through or refuses.
func heldAnswer(t *testing.T, env *moduletest.Env, thread, run, holder, clientMsgID string) error {
	t.Helper()
	_, _, err := env.Messaging.Create(t.Context(), env.Principal("lotse"), thread, messaging.Input{ClientMsgID: clientMsgID, ContentMD: "an answer", RunID: run, Holder: holder})
	return err
}

// storedMessages returns how many messages with clientMsgID are stored:
// a refused answer must leave none.
func storedMessages(env *moduletest.Env, clientMsgID string) int {
	return env.Count(`SELECT count(*) FROM messages WHERE client_msg_id = $1`, clientMsgID)
}

// checkFencedOut fails the test unless, on run that proc-a holds, another
// holder and no holder are refused run_claimed for answer, wait, finish
// and cancel (no answer stored), renew without a holder is
// validation_failed required, a malformed holder is validation_failed, and
// none of these changed the run.
func checkFencedOut(t *testing.T, env *moduletest.Env, thread, run string) {
	t.Helper()
	ctx := t.Context()
	lotse := env.Principal("lotse")
	for _, h := range []string{"proc-b", ""} {
		runtest.WantClaimed(t, "answer by "+h, heldAnswer(t, env, thread, run, h, "ans-"+h))
		if n := storedMessages(env, "ans-"+h); n != 0 {
			t.Fatalf("a refused answer by %q is stored", h)
		}
		_, err := env.Runs.AwaitInput(ctx, lotse, run, runs.Holder(h))
		runtest.WantClaimed(t, "await by "+h, err)
		_, err = env.Runs.Finish(ctx, lotse, run, runs.Holder(h), domain.RunCompleted, "")
		runtest.WantClaimed(t, "finish by "+h, err)
		_, err = env.Runs.Cancel(ctx, lotse, run, runs.Holder(h))
		runtest.WantClaimed(t, "the agent's cancel by "+h, err)
	}
	_, err := env.Runs.Renew(ctx, lotse, run, "")
	if p := problem.From("runs.TestFencing", err); p == nil || p.Code != problem.ValidationFailed || len(p.Fields) != 1 || p.Fields[0].Code != "required" {
		t.Fatalf("renew without a holder: %v", err)
	}
	if _, err := env.Runs.AwaitInput(ctx, lotse, run, "bad holder!"); problem.CodeOf(err) != problem.ValidationFailed {
		t.Fatalf("a malformed holder: %v", err)
	}
	if got := runtest.ReadRun(t, env, "lotse", run); got.State != domain.RunRunning || got.Version != 2 || got.Holder != "proc-a" {
		t.Fatalf("the refused calls changed the run: %+v", got)
	}
}

// lapseLease lets the lease of run lapse and fails the test unless the
// sweeper requeues it for another process.
func lapseLease(t *testing.T, env *moduletest.Env, run string) {
	t.Helper()
	env.Clock.Advance(2 * time.Minute)
	if n, err := env.Runs.SweepOnce(t.Context()); err != nil || n != 1 {
		t.Fatalf("lease sweep changed %d (%v)", n, err)
	}
	if got := runtest.ReadRun(t, env, "lotse", run); got.State != domain.RunQueued {
		t.Fatalf("after the lapse: %+v", got)
	}
}

// checkLateHolderRefused fails the test unless proc-a, whose run proc-b
// took over, is refused run_claimed for answer, wait, finish and renew,
// none of its late answers is stored and its answer before the takeover
// (a-1) is.
func checkLateHolderRefused(t *testing.T, env *moduletest.Env, thread, run string) {
	t.Helper()
	ctx := t.Context()
	lotse := env.Principal("lotse")
	runtest.WantClaimed(t, "late answer", heldAnswer(t, env, thread, run, "proc-a", "a-2"))
	_, err := env.Runs.AwaitInput(ctx, lotse, run, "proc-a")
	runtest.WantClaimed(t, "late await", err)
	_, err = env.Runs.Finish(ctx, lotse, run, "proc-a", domain.RunCompleted, "")
	runtest.WantClaimed(t, "late finish", err)
	_, err = env.Runs.Renew(ctx, lotse, run, "proc-a")
	runtest.WantClaimed(t, "late renew", err)
	if n := storedMessages(env, "a-2") + storedMessages(env, "a-q"); n != 0 {
		t.Fatalf("%d late answers stored", n)
	}
	if n := storedMessages(env, "a-1"); n != 1 {
		t.Fatalf("the answer before the takeover: %d stored", n)
	}
}

// TestFencing pins the holder fence of the runs module without HTTP: on a
// run that holder proc-a started, another holder or no holder may not
// answer in it, make it wait, finish it or cancel it as its agent
// (conflict run_claimed; nothing stored, the run unchanged), renew needs
// a holder (validation_failed) and a malformed holder is invalid input;
// proc-a answers and waits. Once proc-a's lease lapsed (the sweeper
// requeues the run) nobody may act on the queued run, proc-b takes it over
// as attempt 2, and proc-a's late answer, wait, finish and renew are
// refused while proc-b finishes it.
func TestFencing(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	lotse := env.Principal("lotse")
	run := runtest.RunOf(t, env, env.Post("alex", env.Main("Support/Eskalation"), "f1", "@lotse check the printer"))
	r, err := env.Runs.Start(ctx, lotse, run, "proc-a")
	if err != nil || r.State != domain.RunRunning || r.Attempt != 1 {
		t.Fatalf("proc-a starts: %+v %v", r, err)
	}
	thread := r.ThreadID
	checkFencedOut(t, env, thread, run)

	if err := heldAnswer(t, env, thread, run, "proc-a", "a-1"); err != nil {
		t.Fatalf("the holder's answer: %v", err)
	}
	if w, err := env.Runs.AwaitInput(ctx, lotse, run, "proc-a"); err != nil || w.State != domain.RunWaitingInput {
		t.Fatalf("the holder's await: %+v %v", w, err)
	}

	// The lease lapses: the sweeper requeues the run for another process.
	lapseLease(t, env, run)
	runtest.WantClaimed(t, "late answer on the queued run", heldAnswer(t, env, thread, run, "proc-a", "a-q"))
	b, err := env.Runs.Start(ctx, lotse, run, "proc-b")
	if err != nil || b.Attempt != 2 || b.Holder != "proc-b" {
		t.Fatalf("takeover %+v %v", b, err)
	}
	checkLateHolderRefused(t, env, thread, run)
	if done, err := env.Runs.Finish(ctx, lotse, run, "proc-b", domain.RunCompleted, ""); err != nil || done.State != domain.RunCompleted {
		t.Fatalf("the new holder's finish: %+v %v", done, err)
	}
}
