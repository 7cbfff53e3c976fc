package runs_test

import (
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/devtools/runtest"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/runs"
	"bothy.example.com/bothy/internal/runs/domain"
)

// TestLossRules_LiveAndRechecked pins docs/design/runs.md#loss-of-trigger
// on the runs service: Sam's grant is revoked by the raw writer (no
// re-check yet), and the loss is already decided live (awaitRunInput and
// an answer naming the run are trigger_revoked, nothing stored);
// RecheckTriggers then cancels Sam's queued run at once (trigger_revoked),
// asks the running ones to cancel (cancel_requested, trigger lost, no
// context) and drops Sam's pending follow-up; a finish of a lost run ends
// it cancelled trigger_revoked whatever outcome it names, and the sweep
// after run.cancel_grace ends the other one the same way.
func TestLossRules_LiveAndRechecked(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	lotse := env.Principal("lotse")
	samRun := func(name string) (thread, run string) {
		t.Helper()
		thread = runtest.NewThread(t, env, "writer", "Support/Allgemein", "thread "+name)
		return thread, runtest.RunOf(t, env, env.Post("sam", thread, "ll-"+name, "@lotse "+name))
	}
	_, queued := samRun("queued")
	waitThread, waiting := samRun("waiting")
	_, finishing := samRun("finishing")
	runtest.StartAs(t, env, "lotse", waiting)
	runtest.StartAs(t, env, "lotse", finishing)
	follow := env.Post("sam", waitThread, "ll-follow", "@lotse one more thing")
	if follow.TriggerState != messaging.TriggerFollowup {
		t.Fatalf("follow-up %v", follow.TriggerState)
	}
	if _, err := env.Writers.Authz.RevokeGrant(ctx, runtest.ChannelGrant(t, env, "sam", "Support/Allgemein")); err != nil {
		t.Fatal(err)
	}

	// Decided live before any re-check.
	_, err := env.Runs.AwaitInput(ctx, lotse, waiting, holder)
	wantConflict(t, "await after the loss", err, "trigger_revoked")
	msgs := env.Count(`SELECT count(*) FROM messages`)
	_, _, err = env.Messaging.Create(ctx, lotse, waitThread, messaging.Input{ClientMsgID: "ll-answer", ContentMD: "answer", RunID: waiting, Holder: holder})
	wantConflict(t, "an answer after the loss", err, "trigger_revoked")
	if env.Count(`SELECT count(*) FROM messages`) != msgs {
		t.Fatal("a refused answer was stored")
	}

	if _, err := env.Runs.RecheckTriggers(ctx, runs.TriggerScope{PrincipalID: env.World.ID("sam")}); err != nil {
		t.Fatal(err)
	}
	checkRechecked(t, env, queued, []string{waiting, finishing}, follow.ID)

	if r, err := env.Runs.Finish(ctx, lotse, finishing, holder, domain.RunCompleted, ""); err != nil || r.State != domain.RunCancelled || r.EndReason != "trigger_revoked" {
		t.Fatalf("finish of a lost run: %+v %v", r, err)
	}
	checkGraceSweep(t, env, waiting)
}

// checkRechecked fails the test unless the re-check after Sam's loss of
// trigger cancelled the queued run trigger_revoked, asked each running
// run to cancel (trigger lost, no context), and dropped the pending
// follow-up.
func checkRechecked(t *testing.T, env *moduletest.Env, queued string, running []string, followUp string) {
	t.Helper()
	if r := runtest.ReadRun(t, env, "lotse", queued); r.State != domain.RunCancelled || r.EndReason != "trigger_revoked" {
		t.Fatalf("queued run %+v", r)
	}
	for _, id := range running {
		r := runtest.ReadRun(t, env, "lotse", id)
		if r.State != domain.RunRunning || !r.CancelRequested || r.TriggerLostAt == nil {
			t.Fatalf("running run %+v", r)
		}
		if _, err := runtest.ContextOf(t, env, "lotse", id); err == nil {
			t.Fatalf("run %s of a lost trigger has a context", id)
		}
	}
	if n := env.Count(`SELECT count(*) FROM run_followups WHERE message_id = $1 AND state = 'dropped'`, followUp); n != 1 {
		t.Fatal("the follow-up of the person who lost trigger was not dropped")
	}
}

// checkGraceSweep fails the test unless the sweep ends nothing within
// run.cancel_grace and, after it, ends the lost run waiting cancelled
// trigger_revoked.
func checkGraceSweep(t *testing.T, env *moduletest.Env, waiting string) {
	t.Helper()
	if n, err := env.Runs.SweepOnce(t.Context()); err != nil || n != 0 {
		t.Fatalf("sweep within the grace ended %d (%v)", n, err)
	}
	env.Clock.Advance(env.Config.Duration(config.RunCancelGrace) + time.Second)
	if n, err := env.Runs.SweepOnce(t.Context()); err != nil || n != 1 {
		t.Fatalf("sweep after the grace ended %d (%v)", n, err)
	}
	if r := runtest.ReadRun(t, env, "lotse", waiting); r.State != domain.RunCancelled || r.EndReason != "trigger_revoked" {
		t.Fatalf("after the grace %+v", r)
	}
}
