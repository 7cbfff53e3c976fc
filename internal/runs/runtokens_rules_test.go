package runs_test

import (
	"testing"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/devtools/runtest"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs"
	"bothy.example.com/bothy/internal/runs/domain"
)

// wantForbidden fails the test unless err is forbidden reason.
func wantForbidden(t *testing.T, what string, err error, reason string) {
	t.Helper()
	if p := problem.From("runs.wantForbidden", err); p == nil || p.Code != problem.Forbidden || p.Reason != reason {
		t.Fatalf("%s: %v, want forbidden %s", what, err, reason)
	}
}

// TestRunTokenRules_Mint pins who mints a run token
// (runs.Service.CreateRunToken; docs/design/runs.md#fencing): only the
// run's agent as the holder that claimed it; a queued run is
// run_not_started, another holder is run_claimed, no holder validation_failed, a person who sees the run
// forbidden subject_kind_not_allowed, one who does not the not_found of an
// unknown run; an ended run is run_not_active. The minted token
// authenticates as the agent bound to its run, thread and holder.
func TestRunTokenRules_Mint(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	lotse := env.Principal("lotse")
	run := runtest.RunOf(t, env, env.Post("alex", env.Main("Support/Eskalation"), "rtm-1", "@lotse check the printer"))
	// Queued, nobody holds it: claim it first (not run_claimed, which
	// would say another process holds it).
	_, err := env.Runs.CreateRunToken(ctx, lotse, run, holder)
	wantConflict(t, "a queued run", err, "run_not_started")
	runtest.StartAs(t, env, "lotse", run)
	_, err = env.Runs.CreateRunToken(ctx, lotse, run, "proc-b")
	runtest.WantClaimed(t, "another holder", err)
	if _, err := env.Runs.CreateRunToken(ctx, lotse, run, ""); problem.CodeOf(err) != problem.ValidationFailed {
		t.Fatalf("no holder: %v", err)
	}
	_, err = env.Runs.CreateRunToken(ctx, env.Principal("alex"), run, holder)
	wantForbidden(t, "alex mints", err, "subject_kind_not_allowed")
	_, unknown := env.Runs.CreateRunToken(ctx, lotse, ids.New(), holder)
	want := problem.From("runs.TestRunTokenRules_Mint", unknown)
	if want == nil || want.Code != problem.NotFound {
		t.Fatalf("unknown run: %v", unknown)
	}
	_, err = env.Runs.CreateRunToken(ctx, env.Principal("sam"), run, holder)
	runtest.SameProblem(t, "sam, who cannot see the run", err, want)
	if n := env.Count(`SELECT count(*) FROM tokens WHERE run_id IS NOT NULL`); n != 0 {
		t.Fatalf("refused mints stored %d tokens", n)
	}

	tok, err := env.Runs.CreateRunToken(ctx, lotse, run, holder)
	if err != nil {
		t.Fatal(err)
	}
	p, err := env.Identity.Authenticate(ctx, tok.Token)
	if err != nil || p.ID != lotse.ID || p.RunID != run || p.RunHolder != holder || p.RunThreadID != runtest.ReadRun(t, env, "lotse", run).ThreadID {
		t.Fatalf("the token authenticates as %+v: %v", p, err)
	}
	runtest.FinishAs(t, env, "lotse", run, domain.RunCompleted)
	_, err = env.Runs.CreateRunToken(ctx, lotse, run, holder)
	wantConflict(t, "ended run", err, "run_not_active")
}

// TestRunTokenRules_Scope pins what a run token may do (authz.RunBound):
// read its run, its context and its thread, and answer in its run as its
// holder, and finish it; any other run or thread answers exactly the
// not_found of a missing one; a plain message, polling the stream,
// minting a token and claiming the run are forbidden run_token_scope.
// After its run ended the token no longer authenticates.
func TestRunTokenRules_Scope(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	run := runtest.RunOf(t, env, env.Post("alex", env.Main("Support/Eskalation"), "rts-1", "@lotse check the printer"))
	other := runtest.RunOf(t, env, env.Post("alex", env.Main("Support/Allgemein"), "rts-2", "@lotse and the scanner?"))
	otherThread := runtest.ReadRun(t, env, "alex", other).ThreadID
	runtest.StartAs(t, env, "lotse", run)
	thread := runtest.ReadRun(t, env, "lotse", run).ThreadID
	tok, err := env.Runs.CreateRunToken(ctx, env.Principal("lotse"), run, holder)
	if err != nil {
		t.Fatal(err)
	}
	p, err := env.Identity.Authenticate(ctx, tok.Token)
	if err != nil {
		t.Fatal(err)
	}

	// What it may do.
	if rd, err := env.Runs.Read(ctx, p, run); err != nil || rd.Run.ID != run {
		t.Fatalf("read its run: %v", err)
	}
	rd, err := env.Runs.ReadForContext(ctx, p, run)
	if err != nil {
		t.Fatalf("read for its context: %v", err)
	}
	if rc, err := env.Runs.Context(ctx, p, rd, runtest.DefaultLimits(env)); err != nil || rc.RunID != run {
		t.Fatalf("its context: %v", err)
	}
	if _, err := env.Messaging.History(ctx, p, thread, 0, 50); err != nil {
		t.Fatalf("its thread: %v", err)
	}
	_, _, err = env.Messaging.Create(ctx, p, thread, messaging.Input{ClientMsgID: "rts-plain", ContentMD: "hello"})
	wantForbidden(t, "a plain message", err, authz.ReasonRunToken)
	if _, _, err := env.Messaging.Create(ctx, p, thread, messaging.Input{ClientMsgID: "rts-answer", ContentMD: "It is back.", RunID: run, Holder: p.RunHolder}); err != nil {
		t.Fatalf("the answer: %v", err)
	}

	// What it may not do.
	_, err = env.Runs.Poll(ctx, p, "", 0)
	wantForbidden(t, "poll", err, authz.ReasonRunToken)
	_, err = env.Runs.CreateRunToken(ctx, p, run, holder)
	wantForbidden(t, "mint", err, authz.ReasonRunToken)
	_, err = env.Runs.Start(ctx, p, run, holder)
	wantForbidden(t, "claim", err, authz.ReasonRunToken)
	missing := ids.New()
	_, gone := env.Runs.Read(ctx, p, missing)
	_, err = env.Runs.Read(ctx, p, other)
	runtest.SameProblem(t, "another run", err, problem.From("runs.TestRunTokenRules_Scope", gone))
	_, gone = env.Runs.ReadForContext(ctx, p, missing)
	_, err = env.Runs.ReadForContext(ctx, p, other)
	runtest.SameProblem(t, "another run's context", err, problem.From("runs.TestRunTokenRules_Scope", gone))
	_, gone = env.Messaging.History(ctx, p, missing, 0, 50)
	_, err = env.Messaging.History(ctx, p, otherThread, 0, 50)
	runtest.SameProblem(t, "another thread", err, problem.From("runs.TestRunTokenRules_Scope", gone))
	if problem.CodeOf(gone) != problem.NotFound {
		t.Fatalf("a missing thread: %v", gone)
	}

	if r, err := env.Runs.Finish(ctx, p, run, runs.Holder(p.RunHolder), domain.RunCompleted, ""); err != nil || r.State != domain.RunCompleted {
		t.Fatalf("finish with the token: %+v %v", r, err)
	}
	if _, err := env.Identity.Authenticate(ctx, tok.Token); problem.CodeOf(err) != problem.Unauthorized {
		t.Fatalf("the token after the end: %v", err)
	}
	if n := env.Count(`SELECT count(*) FROM run_answers WHERE run_id = $1`, run); n != 1 {
		t.Fatalf("%d answers", n)
	}
}
