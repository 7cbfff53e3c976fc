package runs_test

import (
	"testing"
	"time"

	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/devtools/runtest"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs"
	"bothy.example.com/bothy/internal/runs/domain"
)

// approvalReq is a valid approval request of these tests.
var approvalReq = runs.ApprovalRequest{Title: "File the ticket?", Detail: "createTicket(printer, 3rd floor)",
	Options: []runs.ApprovalOption{{ID: "yes", Label: "Yes"}, {ID: "no", Label: "No"}}}

// lossOnEveryPath checks every path of agent's running run (held by the
// test's holder) right after its person lost trigger, with no sweep in
// between: the context is not found, start, renew, await, a live box update, an
// approval request and an answer naming the run are conflict
// trigger_revoked (an answer may be refused with one of answerCodes first:
// an archived channel is read-only before the run is asked), and so is an
// answer from another holder (trigger_revoked wins over run_claimed);
// nothing is stored. end then ends the run (finish COMPLETED, or the
// agent's own cancel), which is cancelled with trigger_revoked.
func lossOnEveryPath(t *testing.T, env *moduletest.Env, agent, run string, end func() (runs.Run, error), answerCodes ...problem.Code) {
	t.Helper()
	ctx := t.Context()
	p := env.Principal(agent)
	if _, err := runtest.ContextOf(t, env, agent, run); problem.CodeOf(err) != problem.NotFound {
		t.Fatalf("context after the loss: %v", err)
	}
	_, err := env.Runs.Start(ctx, p, run, holder)
	wantConflict(t, "start after the loss", err, "trigger_revoked")
	_, err = env.Runs.Renew(ctx, p, run, holder)
	wantConflict(t, "renew after the loss", err, "trigger_revoked")
	_, err = env.Runs.AwaitInput(ctx, p, run, holder)
	wantConflict(t, "await after the loss", err, "trigger_revoked")
	_, err = env.Runs.UpdateLive(ctx, p, run, holder, runs.LiveUpdate{Append: "still writing"})
	wantConflict(t, "live box after the loss", err, "trigger_revoked")
	_, err = env.Runs.RequestApproval(ctx, p, run, holder, approvalReq)
	wantConflict(t, "approval after the loss", err, "trigger_revoked")
	thread := runtest.ReadRun(t, env, agent, run).ThreadID
	before := env.Count(`SELECT count(*) FROM messages`)
	for _, h := range []string{holder, "someone-else"} {
		_, _, err = env.Messaging.Create(ctx, p, thread, messaging.Input{ClientMsgID: "lost-" + h, ContentMD: "an answer to a request its author lost", RunID: run, Holder: h})
		ok := false
		if q := problem.From("runs.lossOnEveryPath", err); q != nil {
			ok = q.Code == problem.Conflict && q.Reason == "trigger_revoked"
			for _, c := range answerCodes {
				ok = ok || q.Code == c
			}
		}
		if !ok {
			t.Fatalf("answer by %s after the loss: %v", h, err)
		}
	}
	if after := env.Count(`SELECT count(*) FROM messages`); after != before {
		t.Fatalf("%d messages stored after the loss", after-before)
	}
	r, err := end()
	if err != nil || r.State != domain.RunCancelled || r.EndReason != "trigger_revoked" {
		t.Fatalf("the end of the lost run: %+v %v", r, err)
	}
}

// TestLossPaths_EveryPath pins docs/design/runs.md#loss-of-trigger for the
// administration paths and the move on the module services: disabling the
// person (admin.UpdatePrincipal), archiving the run's channel or its space
// (admin) and moving the run's thread into a channel where the person has
// no trigger (chat's Move, which re-checks through the wiring) each mark
// the person's running run at once (cancel requested, trigger lost; the
// agent is told run.cancel_requested) and every path of it then answers
// the loss (lossOnEveryPath): the finish, and the agent's own cancel,
// end it cancelled trigger_revoked. A run of the same person elsewhere
// keeps its context until its own loss, and Sam, whose space was
// archived, cannot answer the approval of his waiting run
// (channel_read_only channel_archived; it stays pending).
func TestLossPaths_EveryPath(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	listenLive(t, env)
	robin := env.Principal("robin")
	f := newLossFixture(t, env)

	t.Run("thread moved", func(t *testing.T) {
		thread := runtest.ReadRun(t, env, "lotse", f.moved).ThreadID
		if _, err := env.Modules.ChatUseCases.Move(t.Context(), robin, thread, env.World.Channel("Marketing/Kampagnen").ID); err != nil {
			t.Fatalf("move: %v", err)
		}
		f.marked(t, "lotse", f.moved)
		f.unaffected(t)
		lossOnEveryPath(t, env, "lotse", f.moved, f.finish(t, "lotse", f.moved))
	})
	t.Run("channel archived", func(t *testing.T) {
		if _, err := env.Admin.ArchiveChannel(t.Context(), robin, env.World.Channel("Support/Eskalation").ID); err != nil {
			t.Fatalf("archive: %v", err)
		}
		f.marked(t, "lotse", f.archivedChan)
		f.unaffected(t)
		lossOnEveryPath(t, env, "lotse", f.archivedChan, f.cancel(t, "lotse", f.archivedChan), problem.ChannelReadOnly)
	})
	t.Run("space archived", func(t *testing.T) {
		if _, err := env.Admin.ArchiveSpace(t.Context(), robin, env.World.Spaces["Marketing"]); err != nil {
			t.Fatalf("archive: %v", err)
		}
		if r := runtest.ReadRun(t, env, "texter", f.archivedSpace); r.State != domain.RunWaitingInput || !r.CancelRequested || r.TriggerLostAt == nil {
			t.Fatalf("the waiting run right after the loss: %+v", r)
		}
		f.told(t, "texter", f.archivedSpace)
		f.unaffected(t)
		// Sam's answer to the approval is refused (the archive caps every
		// level at read): the approval stays pending.
		_, err := env.Runs.RespondToApproval(t.Context(), env.Principal("sam"), f.approval.ID, "yes")
		if p := problem.From("runs.TestLossPaths_EveryPath", err); p == nil || p.Code != problem.ChannelReadOnly || p.Reason != "channel_archived" {
			t.Fatalf("sam answers the approval after the loss: %v", err)
		}
		if n := env.Count(`SELECT count(*) FROM run_approvals WHERE id = $1 AND state = 'pending'`, f.approval.ID); n != 1 {
			t.Fatal("the refused answer decided the approval")
		}
		lossOnEveryPath(t, env, "texter", f.archivedSpace, f.finish(t, "texter", f.archivedSpace), problem.ChannelReadOnly)
	})
	t.Run("person disabled", func(t *testing.T) {
		st := identity.StatusDisabled
		if _, err := env.Admin.UpdatePrincipal(t.Context(), robin, env.World.ID("alex"), identity.PrincipalPatch{Status: &st}); err != nil {
			t.Fatalf("disable: %v", err)
		}
		f.marked(t, "lotse", f.disabled)
		lossOnEveryPath(t, env, "lotse", f.disabled, f.cancel(t, "lotse", f.disabled))
	})
}

// lossFixture holds the running runs of TestLossPaths_EveryPath, one per
// path of loss, each started by the test's holder: lotse's runs for Alex
// in two threads of Support/Allgemein (moved, disabled) and in
// Support/Eskalation (archivedChan), and texter's run for Sam in
// Marketing/Kampagnen (archivedSpace), waiting for approval.
type lossFixture struct {
	env                                          *moduletest.Env
	moved, disabled, archivedChan, archivedSpace string
	approval                                     runs.Approval
}

// newLossFixture starts the runs of the fixture, requests the approval and
// polls lotse's stream up to now, so that told sees only what follows.
func newLossFixture(t *testing.T, env *moduletest.Env) *lossFixture {
	t.Helper()
	ctx := t.Context()
	started := func(agent, run string) string {
		t.Helper()
		runtest.StartAs(t, env, agent, run)
		return run
	}
	alexIn := func(name string) string {
		t.Helper()
		th := runtest.NewThread(t, env, "writer", "Support/Allgemein", "loss2 "+name)
		return started("lotse", runtest.RunOf(t, env, env.Post("alex", th, "loss2-"+name, "@lotse "+name)))
	}
	f := &lossFixture{env: env}
	f.moved = alexIn("moved")
	f.disabled = alexIn("disabled")
	f.archivedChan = started("lotse", runtest.RunOf(t, env, env.Post("alex", env.Main("Support/Eskalation"), "loss2-chan", "@lotse escalation")))
	f.archivedSpace = started("texter", runtest.ActiveRunIn(t, env, runtest.NewThread(t, env, "sam", "Marketing/Kampagnen", "@texter a campaign")))
	var err error
	if f.approval, err = env.Runs.RequestApproval(ctx, env.Principal("texter"), f.archivedSpace, holder, approvalReq); err != nil {
		t.Fatalf("approval: %v", err)
	}
	if _, err := env.Runs.Poll(ctx, env.Principal("lotse"), "", 0); err != nil {
		t.Fatal(err)
	}
	return f
}

// told fails the test unless agent's stream tells run.cancel_requested for
// run.
func (f *lossFixture) told(t *testing.T, agent, run string) {
	t.Helper()
	page, err := f.env.Runs.Poll(t.Context(), f.env.Principal(agent), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range page.Events {
		if e.Type == events.RunCancelRequested && e.Payload["run_id"] == run {
			return
		}
	}
	t.Fatalf("%s was not told run.cancel_requested for %s", agent, run)
}

// marked fails the test unless run still runs, marked cancel requested and
// trigger lost, and its agent was told.
func (f *lossFixture) marked(t *testing.T, agent, run string) {
	t.Helper()
	if r := runtest.ReadRun(t, f.env, agent, run); r.State != domain.RunRunning || !r.CancelRequested || r.TriggerLostAt == nil {
		t.Fatalf("run %s right after the loss: %+v", run, r)
	}
	f.told(t, agent, run)
}

// unaffected fails the test unless the run of the same person elsewhere
// (disabled, before its own loss) is untouched and reads its context.
func (f *lossFixture) unaffected(t *testing.T) {
	t.Helper()
	if r := runtest.ReadRun(t, f.env, "lotse", f.disabled); r.CancelRequested || r.TriggerLostAt != nil {
		t.Fatalf("the run of the person elsewhere was touched: %+v", r)
	}
	runtest.MustContext(t, f.env, "lotse", f.disabled)
}

// finish returns the end of run by agent's finish COMPLETED.
func (f *lossFixture) finish(t *testing.T, agent, run string) func() (runs.Run, error) {
	return func() (runs.Run, error) {
		return f.env.Runs.Finish(t.Context(), f.env.Principal(agent), run, holder, domain.RunCompleted, "")
	}
}

// cancel returns the end of run by agent's own cancel.
func (f *lossFixture) cancel(t *testing.T, agent, run string) func() (runs.Run, error) {
	return func() (runs.Run, error) { return f.env.Runs.Cancel(t.Context(), f.env.Principal(agent), run, holder) }
}

// TestLossPaths_GrantExpiry pins that the expiry of the grant that gave
// trigger is a loss decided live (docs/design/runs.md#loss-of-trigger):
// nothing re-checks when the clock passes expires_at, yet right after it
// startRun of the person's queued run cancels it with trigger_revoked and
// answers like any ended run (run_not_active, again on a second start),
// their running
// run answers the loss on every path (the first call marks it), and the
// person can no longer answer the approval of a third run (not found: the
// grant was their only way into the channel), which stays pending.
func TestLossPaths_GrantExpiry(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	listenLive(t, env)
	ctx := t.Context()
	texter := env.Principal("texter")
	expires := env.Clock.Now().Add(time.Hour)
	if _, err := env.Admin.CreateGrant(ctx, env.Principal("robin"), admin.GrantInput{SubjectID: env.World.ID("alex"), SubjectKind: authz.SubjectPrincipal,
		TargetKind: authz.KindChannel, TargetID: env.World.Channel("Marketing/Kampagnen").ID, Level: authz.Trigger, ExpiresAt: &expires}); err != nil {
		t.Fatalf("grant: %v", err)
	}
	kampagnen := env.Main("Marketing/Kampagnen")
	running := runtest.RunOf(t, env, env.Post("alex", kampagnen, "ex2-run", "@texter draft the newsletter"))
	waiting := runtest.RunOf(t, env, env.Post("alex", kampagnen, "ex2-wait", "@texter file the ticket"))
	queued := runtest.RunOf(t, env, env.Post("alex", kampagnen, "ex2-queued", "@texter later"))
	runtest.StartAs(t, env, "texter", running)
	runtest.StartAs(t, env, "texter", waiting)
	approval, err := env.Runs.RequestApproval(ctx, texter, waiting, holder, approvalReq)
	if err != nil {
		t.Fatalf("approval: %v", err)
	}

	env.Clock.Advance(2 * time.Hour)
	if r := runtest.ReadRun(t, env, "texter", running); r.CancelRequested || r.TriggerLostAt != nil {
		t.Fatalf("something re-checked at the expiry: %+v", r)
	}
	_, err = env.Runs.Start(ctx, texter, queued, holder)
	wantConflict(t, "start of the queued run after the expiry", err, "run_not_active")
	if r := runtest.ReadRun(t, env, "texter", queued); r.State != domain.RunCancelled || r.EndReason != "trigger_revoked" {
		t.Fatalf("the queued run after its start was refused: %+v", r)
	}
	_, err = env.Runs.Start(ctx, texter, queued, holder)
	wantConflict(t, "start of the cancelled run", err, "run_not_active")

	if _, err := env.Runs.RespondToApproval(ctx, env.Principal("alex"), approval.ID, "yes"); problem.CodeOf(err) != problem.NotFound {
		t.Fatalf("alex answers the approval after the expiry: %v", err)
	}
	if n := env.Count(`SELECT count(*) FROM run_approvals WHERE id = $1 AND state = 'pending'`, approval.ID); n != 1 {
		t.Fatal("the refused answer decided the approval")
	}

	lossOnEveryPath(t, env, "texter", running, func() (runs.Run, error) {
		return env.Runs.Finish(ctx, texter, running, holder, domain.RunCompleted, "")
	})
	if r := runtest.ReadRun(t, env, "texter", running); r.TriggerLostAt == nil {
		t.Fatalf("the first call after the expiry did not mark the run: %+v", r)
	}
}
