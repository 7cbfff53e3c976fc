package approvals_test

import (
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/devtools/runtest"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs/approvals"
	"bothy.example.com/bothy/internal/runs/domain"
)

// approvalReq is a valid approval request of these tests.
var approvalReq = approvals.Request{Title: "File the ticket?", Detail: "createTicket(printer, 3rd floor)",
	Options: []approvals.Option{{ID: "yes", Label: "Yes"}, {ID: "no", Label: "No"}}}

// wantConflict fails the test unless err is conflict reason.
func wantConflict(t *testing.T, what string, err error, reason string) {
	t.Helper()
	if p := problem.From("approvals.wantConflict", err); p == nil || p.Code != problem.Conflict || p.Reason != reason {
		t.Fatalf("%s: %v, want conflict %s", what, err, reason)
	}
}

// approvalDecisions returns the payloads of agent.approval_decided in the
// stream of agent.
func approvalDecisions(t *testing.T, env *moduletest.Env, agent string) []map[string]any {
	t.Helper()
	page, err := env.Runs.Poll(t.Context(), env.Principal(agent), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, e := range page.Events {
		if e.Type == events.AgentApprovalDecided {
			out = append(out, e.Payload)
		}
	}
	return out
}

// oneFieldError fails the test unless err is a validation failure with
// exactly one field error, and returns that field error: the refusals of
// a request and of an answer each name one field.
func oneFieldError(t *testing.T, what string, err error) problem.FieldError {
	t.Helper()
	p := problem.From("approvals.oneFieldError", err)
	if p == nil || p.Code != problem.ValidationFailed || len(p.Fields) != 1 {
		t.Fatalf("%s: %v", what, err)
	}
	return p.Fields[0]
}

// checkInvalidRequests sends each invalid request of the table as the
// holder of run and fails the test unless each is refused at its field.
func checkInvalidRequests(t *testing.T, env *moduletest.Env, run string) {
	t.Helper()
	for name, c := range map[string]struct {
		req     approvals.Request
		pointer string
	}{
		"no title":     {approvals.Request{Options: approvalReq.Options}, "/title"},
		"no options":   {approvals.Request{Title: "x"}, "/options"},
		"bad option":   {approvals.Request{Title: "x", Options: []approvals.Option{{ID: "Yes!", Label: "Yes"}}}, "/options/0/id"},
		"too long":     {approvals.Request{Title: "x", Options: approvalReq.Options, ExpiresIn: approvals.MaxExpiry + 1}, "/expires_in"},
		"two-line one": {approvals.Request{Title: "one\ntwo", Options: approvalReq.Options}, "/title"},
	} {
		_, err := env.Runs.RequestApproval(t.Context(), env.Principal("lotse"), run, holder, c.req)
		if f := oneFieldError(t, name, err); f.Pointer != c.pointer {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// checkPendingRequest fails the test unless a, the approval lotse just
// requested in run, is pending for alex with the default expiry, its card
// is lotse's in the run's thread with the title as its content, and the
// run waits for input until the approval's expiry.
func checkPendingRequest(t *testing.T, env *moduletest.Env, run string, a approvals.Approval) {
	t.Helper()
	if a.State != approvals.Pending || a.RunID != run || a.RestrictedTo != env.World.ID("alex") || len(a.Options) != 2 ||
		!a.ExpiresAt.Equal(env.Clock.Now().Add(approvals.DefaultExpiry*time.Second).Truncate(time.Microsecond)) {
		t.Fatalf("approval %+v", a)
	}
	card, err := env.Messaging.Get(t.Context(), env.Principal("alex"), a.MessageID)
	if err != nil || card.Kind != messaging.KindCard || card.Author.ID != env.Principal("lotse").ID || card.ContentMD != approvalReq.Title || card.ThreadID != runtest.ReadRun(t, env, "lotse", run).ThreadID {
		t.Fatalf("card %+v %v", card, err)
	}
	r := runtest.ReadRun(t, env, "lotse", run)
	if r.State != domain.RunWaitingInput || r.ApprovalUntil == nil || !r.ApprovalUntil.Equal(a.ExpiresAt) {
		t.Fatalf("run while it waits %+v", r)
	}
}

// TestApprovalRules_Request pins the request half of
// docs/design/trust.md#approvals: the request is validated (title, options,
// expiry); a queued run is run_not_started, another holder run_claimed;
// the holder's request posts a card of the run's agent with the title as
// its content, stores the approval pending for the run's person with the
// default expiry, and moves the run to waiting_input with its stall timer
// paused until that expiry; a second request while one is pending is
// approval_pending.
func TestApprovalRules_Request(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	lotse := env.Principal("lotse")
	run := runtest.RunOf(t, env, env.Post("alex", env.Main("Support/Eskalation"), "ap-q", "@lotse file a ticket for the printer"))
	checkInvalidRequests(t, env, run)
	_, err := env.Runs.RequestApproval(ctx, lotse, run, holder, approvalReq)
	wantConflict(t, "queued run", err, "run_not_started")
	runtest.StartAs(t, env, "lotse", run)
	_, err = env.Runs.RequestApproval(ctx, lotse, run, "proc-b", approvalReq)
	runtest.WantClaimed(t, "another holder", err)
	if n := env.Count(`SELECT count(*) FROM messages WHERE kind = 'card'`); n != 0 {
		t.Fatalf("refused requests posted %d cards", n)
	}

	a, err := env.Runs.RequestApproval(ctx, lotse, run, holder, approvalReq)
	if err != nil {
		t.Fatal(err)
	}
	checkPendingRequest(t, env, run, a)
	_, err = env.Runs.RequestApproval(ctx, lotse, run, holder, approvalReq)
	wantConflict(t, "second request", err, "approval_pending")
}

// checkReaders fails the test unless each reader of the thread reads the
// approval a pending, the private part only for the person and the agent,
// and returns the problem of an unknown approval (a 404) that whoever
// cannot read the run gets too.
func checkReaders(t *testing.T, env *moduletest.Env, a approvals.Approval) *problem.Error {
	t.Helper()
	ctx := t.Context()
	for who, private := range map[string]bool{"robin": false, "alex": true, "lotse": true} {
		got, priv, err := env.Runs.ReadApproval(ctx, env.Principal(who), a.ID)
		if err != nil || priv != private || got.Title != approvalReq.Title || got.State != approvals.Pending {
			t.Fatalf("%s reads %+v private %v: %v", who, got, priv, err)
		}
	}
	_, _, missing := env.Runs.ReadApproval(ctx, env.Principal("alex"), ids.New())
	want := problem.From("approvals.TestApprovalRules_ReadAndRespond", missing)
	if want == nil || want.Code != problem.NotFound {
		t.Fatalf("unknown approval: %v", missing)
	}
	_, _, err := env.Runs.ReadApproval(ctx, env.Principal("writer"), a.ID)
	runtest.SameProblem(t, "writer, who cannot read Eskalation", err, want)
	return want
}

// checkDecidedNo fails the test unless d is alex's answer "no" to a, the
// run runs again, and lotse's stream holds the one agent.approval_decided
// with that option.
func checkDecidedNo(t *testing.T, env *moduletest.Env, run string, a, d approvals.Approval, err error) {
	t.Helper()
	if err != nil || d.State != approvals.Decided || d.OptionID != "no" || d.DecidedBy != env.Principal("alex").ID {
		t.Fatalf("alex answers %+v %v", d, err)
	}
	if r := runtest.ReadRun(t, env, "lotse", run); r.State != domain.RunRunning || r.ApprovalUntil != nil {
		t.Fatalf("run after the answer %+v", r)
	}
	if evs := approvalDecisions(t, env, "lotse"); len(evs) != 1 || evs[0]["approval_id"] != a.ID || evs[0]["option_id"] != "no" || evs[0]["run_id"] != run {
		t.Fatalf("agent events %+v", evs)
	}
}

// TestApprovalRules_ReadAndRespond pins who reads and who answers
// (docs/design/trust.md#approvals): a reader of the thread reads title and
// state but not the private part, the person and the run's agent read
// all; someone who cannot read the run gets the 404 of a missing
// approval. Only the person answers (anyone else: the same 404), with a
// known option (unknown_option); the answer decides once (already_decided),
// takes the run back to running and puts agent.approval_decided with the
// option in the agent's stream.
func TestApprovalRules_ReadAndRespond(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	alex := env.Principal("alex")
	run := runtest.RunOf(t, env, env.Post("alex", env.Main("Support/Eskalation"), "ar-q", "@lotse file a ticket"))
	runtest.StartAs(t, env, "lotse", run)
	a, err := env.Runs.RequestApproval(ctx, env.Principal("lotse"), run, holder, approvalReq)
	if err != nil {
		t.Fatal(err)
	}
	want := checkReaders(t, env, a)

	for _, who := range []string{"robin", "lotse", "writer"} {
		_, err := env.Runs.RespondToApproval(ctx, env.Principal(who), a.ID, "yes")
		runtest.SameProblem(t, who+" answers", err, want)
	}
	_, err = env.Runs.RespondToApproval(ctx, alex, ids.New(), "yes")
	runtest.SameProblem(t, "an unknown approval", err, want)
	_, err = env.Runs.RespondToApproval(ctx, alex, a.ID, "maybe")
	if f := oneFieldError(t, "unknown option", err); f.Code != "unknown_option" {
		t.Fatalf("unknown option: %v", err)
	}
	if got, _, _ := env.Runs.ReadApproval(ctx, alex, a.ID); got.State != approvals.Pending {
		t.Fatalf("refused answers decided it: %+v", got)
	}

	d, err := env.Runs.RespondToApproval(ctx, alex, a.ID, "no")
	checkDecidedNo(t, env, run, a, d, err)
	_, err = env.Runs.RespondToApproval(ctx, alex, a.ID, "yes")
	wantConflict(t, "second answer", err, "already_decided")
}

// TestApprovalRules_ExpiryAndEnd pins the end of an unanswered approval
// (docs/design/trust.md#approvals): past the stall timeout but before its
// expiry the run keeps waiting; an answer at the expiry is
// approval_expired; the sweep decides it expired, the run runs again and
// the agent learns it without an option; an approval pending when its run
// ends is withdrawn and an answer to it is run_not_active.
func TestApprovalRules_ExpiryAndEnd(t *testing.T) {
	t.Parallel()
	env := moduletest.Build(t, moduletest.Options{Config: map[string]string{"run.stall_timeout": "60s", "run.lease_timeout": "1h"}})
	ctx := t.Context()
	alex, lotse := env.Principal("alex"), env.Principal("lotse")
	run := runtest.RunOf(t, env, env.Post("alex", env.Main("Support/Eskalation"), "ae-q", "@lotse deploy the fix"))
	runtest.StartAs(t, env, "lotse", run)
	req := approvals.Request{Title: "Deploy?", Options: []approvals.Option{{ID: "yes", Label: "Yes"}}, ExpiresIn: 120}
	a, err := env.Runs.RequestApproval(ctx, lotse, run, holder, req)
	if err != nil {
		t.Fatal(err)
	}
	env.Clock.Advance(90 * time.Second)
	if _, err := env.Runs.SweepOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if r := runtest.ReadRun(t, env, "lotse", run); r.State != domain.RunWaitingInput {
		t.Fatalf("a run waiting for an approval stalled: %s %s", r.State, r.EndReason)
	}
	env.Clock.Advance(30 * time.Second) // at the expiry
	_, err = env.Runs.RespondToApproval(ctx, alex, a.ID, "yes")
	wantConflict(t, "at the expiry", err, "approval_expired")
	if n, err := env.Runs.SweepOnce(ctx); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	if r := runtest.ReadRun(t, env, "lotse", run); r.State != domain.RunRunning || r.ApprovalUntil != nil {
		t.Fatalf("run after the expiry %+v", r)
	}
	if got, _, _ := env.Runs.ReadApproval(ctx, alex, a.ID); got.State != approvals.Expired || got.OptionID != "" {
		t.Fatalf("approval after the sweep %+v", got)
	}
	if evs := approvalDecisions(t, env, "lotse"); len(evs) != 1 || evs[0]["state"] != approvals.Expired || evs[0]["option_id"] != nil {
		t.Fatalf("agent events %+v", evs)
	}
	_, err = env.Runs.RespondToApproval(ctx, alex, a.ID, "yes")
	wantConflict(t, "after the sweep", err, "approval_expired")

	b, err := env.Runs.RequestApproval(ctx, lotse, run, holder, req)
	if err != nil {
		t.Fatal(err)
	}
	runtest.FinishAs(t, env, "lotse", run, domain.RunCompleted)
	if got, _, _ := env.Runs.ReadApproval(ctx, alex, b.ID); got.State != approvals.Withdrawn {
		t.Fatalf("approval of an ended run %+v", got)
	}
	_, err = env.Runs.RespondToApproval(ctx, alex, b.ID, "yes")
	wantConflict(t, "ended run", err, "run_not_active")
}
