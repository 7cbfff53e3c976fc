package runs_test

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// approvalREST is an Approval in the REST shape.
type approvalREST struct {
	ID           string           `json:"id"`
	RunID        string           `json:"run_id"`
	MessageID    string           `json:"message_id"`
	State        string           `json:"state"`
	Title        string           `json:"title"`
	Detail       *string          `json:"detail"`
	Options      []map[string]any `json:"options"`
	RestrictedTo map[string]any   `json:"restricted_to"`
	ExpiresAt    string           `json:"expires_at"`
	DecidedBy    map[string]any   `json:"decided_by"`
	DecidedAt    *string          `json:"decided_at"`
	Option       map[string]any   `json:"option"`
}

var approvalBody = map[string]any{"title": "File a ticket in the tracker?", "detail": "POST tracker/tickets {\"title\": \"printer\"}",
	"options": []map[string]any{{"id": "approve", "label": "Approve"}, {"id": "deny", "label": "Deny"}}}

// requestApprovalREST asks as lotse from holder over REST.
func requestApprovalREST(env *apitest.Env, run, holder string, body map[string]any) *apitest.Response {
	h := http.Header{}
	if holder != "" {
		h.Set("Bothy-Run-Holder", holder)
	}
	return env.RESTWith(http.MethodPost, "/api/v1/runs/"+run+"/approvals", env.World.Token("lotse"), body, h)
}

// respondREST answers approval id as who.
func respondREST(env *apitest.Env, who, id, option string) *apitest.Response {
	return env.REST(http.MethodPost, "/api/v1/approvals/"+id+"/response", env.World.Token(who), map[string]any{"option_id": option})
}

// runState reads run's state as alex over GraphQL.
func runState(t *testing.T, env *apitest.Env, run string) string {
	t.Helper()
	var out struct {
		Run struct{ State string } `json:"run"`
	}
	env.GraphQL(env.World.Token("alex"), `query($id: ID!) { run(id: $id) { state } }`, map[string]any{"id": run}, &out)
	return out.Run.State
}

// decidedEvents returns the agent.approval_decided payloads in lotse's
// stream after cursor.
func decidedEvents(t *testing.T, env *apitest.Env, s *stream) []map[string]any {
	t.Helper()
	evs, next := env.Poll(t, "lotse", s.cursor, 0)
	s.cursor = next
	var out []map[string]any
	for _, e := range evs {
		if e.Type == "agent.approval_decided" {
			out = append(out, e.Payload)
		}
	}
	return out
}

// TestApprovals_OnBothFaces: the holder of a running run asks Alex, who
// triggered it: a card in the thread, the run waiting; Robin (who reads
// the thread) sees the title and the state, never the detail or the
// options, and gets the 404 of a missing approval when he answers; a
// second request while one is pending, another holder and an unknown
// option are refused; Alex's answer decides once (audited), the run runs
// again and Lotse's stream says which option; a second answer is
// already_decided.
func TestApprovals_OnBothFaces(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	run, s := startedByProcA(t, env, "appr-q", "@lotse file a ticket for the printer")
	a := requestApprovalChecked(t, env, run)
	checkApprovalPrivacy(t, env, a)
	checkRefusedAnswers(t, env, run, a)

	alexApproves(t, env, a)
	if st := runState(t, env, run); st != "RUNNING" {
		t.Fatalf("run %s after the answer", st)
	}
	if n := env.Count(`SELECT count(*) FROM audit_log WHERE action = 'approval.respond' AND decision = 'allow' AND actor_id = $1`, env.World.ID("alex")); n != 1 {
		t.Fatalf("%d audit rows of the answer", n)
	}
	evs := decidedEvents(t, env, s)
	if len(evs) != 1 || evs[0]["approval_id"] != a.ID || evs[0]["option_id"] != "approve" || evs[0]["state"] != "decided" || evs[0]["run_id"] != run {
		t.Fatalf("agent events %+v", evs)
	}
	apitest.WantProblem(t, "twice", respondREST(env, "alex", a.ID, "deny"), http.StatusConflict, "conflict", "already_decided")
	// Robin now reads who answered, not what.
	var seen approvalREST
	env.REST(http.MethodGet, "/api/v1/approvals/"+a.ID, env.World.Token("robin"), nil).JSON(t, &seen)
	if seen.State != "decided" || seen.DecidedBy["handle"] != "alex" || seen.Option != nil {
		t.Fatalf("robin reads the decision as %+v", seen)
	}
}

// alexApproves answers approval a as alex with the option approve and
// fails the test unless the answer is the decided approval naming the
// option, alex and when.
func alexApproves(t *testing.T, env *apitest.Env, a approvalREST) {
	t.Helper()
	d := respondREST(env, "alex", a.ID, "approve")
	if d.Status != http.StatusOK {
		t.Fatalf("alex: %d %s", d.Status, d.Body)
	}
	var decided approvalREST
	d.JSON(t, &decided)
	if decided.State != "decided" || decided.Option["id"] != "approve" || decided.DecidedBy["handle"] != "alex" || decided.DecidedAt == nil {
		t.Fatalf("decided %+v", decided)
	}
}

// requestApprovalChecked requests approvalBody for run as proc-a and
// returns the approval: another holder and a request without options are
// refused first, the run waits once it is asked, and a second request
// while it is pending is approval_pending.
func requestApprovalChecked(t *testing.T, env *apitest.Env, run string) approvalREST {
	t.Helper()
	apitest.WantProblem(t, "other holder", requestApprovalREST(env, run, "proc-b", approvalBody), http.StatusConflict, "conflict", "run_claimed")
	apitest.WantProblem(t, "no options", requestApprovalREST(env, run, "proc-a", map[string]any{"title": "x", "options": []any{}}), http.StatusBadRequest, "validation_failed", "")
	r := requestApprovalREST(env, run, "proc-a", approvalBody)
	if r.Status != http.StatusCreated {
		t.Fatalf("request: %d %s", r.Status, r.Body)
	}
	var a approvalREST
	r.JSON(t, &a)
	if a.State != "pending" || a.RunID != run || a.MessageID == "" || a.ExpiresAt == "" || a.RestrictedTo["handle"] != "alex" || len(a.Options) != 2 {
		t.Fatalf("approval %+v", a)
	}
	if st := runState(t, env, run); st != "WAITING_INPUT" {
		t.Fatalf("run %s while it waits", st)
	}
	apitest.WantProblem(t, "second request", requestApprovalREST(env, run, "proc-a", approvalBody), http.StatusConflict, "conflict", "approval_pending")
	return a
}

// checkApprovalPrivacy checks that Robin, who reads the thread, reads the
// pending approval's title and state but not its detail or options, over
// REST and on its card, where Alex reads them.
func checkApprovalPrivacy(t *testing.T, env *apitest.Env, a approvalREST) {
	t.Helper()
	var seen approvalREST
	env.REST(http.MethodGet, "/api/v1/approvals/"+a.ID, env.World.Token("robin"), nil).JSON(t, &seen)
	if seen.Title != approvalBody["title"] || seen.State != "pending" || seen.Detail != nil || seen.Options != nil {
		t.Fatalf("robin reads %+v", seen)
	}
	var card struct {
		Message struct {
			Kind      string `json:"kind"`
			ContentMd string `json:"contentMd"`
			Approval  struct {
				ID      string  `json:"id"`
				Detail  *string `json:"detail"`
				Options []any   `json:"options"`
			} `json:"approval"`
		} `json:"message"`
	}
	for who, private := range map[string]bool{"robin": false, "alex": true} {
		env.GraphQL(env.World.Token(who), `query($id: ID!) { message(id: $id) { kind contentMd approval { id detail options { id label } } } }`, map[string]any{"id": a.MessageID}, &card)
		if card.Message.Kind != "CARD" || card.Message.ContentMd != approvalBody["title"] || card.Message.Approval.ID != a.ID ||
			(card.Message.Approval.Detail != nil) != private || (card.Message.Approval.Options != nil) != private {
			t.Fatalf("%s reads the card as %+v", who, card)
		}
	}
}

// checkRefusedAnswers checks the answers to approval a that are refused:
// anyone but Alex gets the 404 of a missing approval on both faces, and
// Alex's unknown option is invalid; run keeps waiting.
func checkRefusedAnswers(t *testing.T, env *apitest.Env, run string, a approvalREST) {
	t.Helper()
	missing := respondREST(env, "robin", "01a23b18-0000-7000-8000-000000000000", "approve")
	apitest.WantProblem(t, "missing", missing, http.StatusNotFound, "not_found", "")
	if other := respondREST(env, "robin", a.ID, "approve"); !apitest.SameAnswer(t, other, missing) {
		t.Fatalf("robin's answer %s differs from a missing approval's %s", other.Body, missing.Body)
	}
	var gq struct {
		RespondToApproval *struct{ State string } `json:"respondToApproval"`
	}
	res := env.GraphQL(env.World.Token("sam"), `mutation($id: ID!) { respondToApproval(id: $id, optionId: "approve") { state } }`, map[string]any{"id": a.ID}, &gq)
	if len(res.Errors) != 1 || res.Errors[0].Extensions.Code != "not_found" || gq.RespondToApproval != nil {
		t.Fatalf("sam: %+v", res.Errors)
	}
	apitest.WantProblem(t, "unknown option", respondREST(env, "alex", a.ID, "maybe"), http.StatusBadRequest, "validation_failed", "")
	if st := runState(t, env, run); st != "WAITING_INPUT" {
		t.Fatalf("refused answers changed the run: %s", st)
	}
}

// TestApprovals_ExpiryAndEnd: an unanswered approval pauses the stall
// timer and expires at its time (the sweeper decides it expired, the run
// runs again, the agent learns it; an answer after that is
// approval_expired); an approval pending when the run ends is withdrawn
// and answers run_not_active.
func TestApprovals_ExpiryAndEnd(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{"run.stall_timeout": "60s", "run.lease_timeout": "1h"}})
	run, s := startedByProcA(t, env, "appr-exp", "@lotse deploy the fix")
	body := map[string]any{"title": "Deploy?", "options": []map[string]any{{"id": "yes", "label": "Yes"}}, "expires_in": 120}
	var a approvalREST
	requestApprovalREST(env, run, "proc-a", body).JSON(t, &a)
	// Past the stall timeout, before the expiry: the run waits on.
	env.Clock.Advance(90 * time.Second)
	if _, err := env.Runs.SweepOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := runState(t, env, run); st != "WAITING_INPUT" {
		t.Fatalf("a run waiting for an approval stalled: %s", st)
	}
	env.Clock.Advance(31 * time.Second)
	if n, err := env.Runs.SweepOnce(t.Context()); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	if st := runState(t, env, run); st != "RUNNING" {
		t.Fatalf("run %s after the expiry", st)
	}
	if evs := decidedEvents(t, env, s); len(evs) != 1 || evs[0]["state"] != "expired" || evs[0]["option_id"] != nil {
		t.Fatalf("agent events %+v", evs)
	}
	apitest.WantProblem(t, "expired", respondREST(env, "alex", a.ID, "yes"), http.StatusConflict, "conflict", "approval_expired")

	var b approvalREST
	requestApprovalREST(env, run, "proc-a", body).JSON(t, &b)
	if _, errs := heldOp(t, env, "lotse", "finishRun", run, "proc-a", "COMPLETED"); len(errs) > 0 {
		t.Fatal(errs)
	}
	var w approvalREST
	env.REST(http.MethodGet, "/api/v1/approvals/"+b.ID, env.World.Token("alex"), nil).JSON(t, &w)
	if w.State != "withdrawn" {
		t.Fatalf("approval of an ended run: %+v", w)
	}
	apitest.WantProblem(t, "ended", respondREST(env, "alex", b.ID, "yes"), http.StatusConflict, "conflict", "run_not_active")
}

// TestApprovals_HiddenReadsLikeMissing: reading an approval of a run the
// reader may not see answers exactly like reading one that does not
// exist, on both faces, headers included: both pass the door and are
// charged alike (the RateLimit header is there for both), and a malformed
// id answers the same too.
func TestApprovals_HiddenReadsLikeMissing(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	run, _ := startedByProcA(t, env, "appr-hidden", "@lotse file a ticket for the printer")
	r := requestApprovalREST(env, run, "proc-a", approvalBody)
	if r.Status != http.StatusCreated {
		t.Fatalf("request: %d %s", r.Status, r.Body)
	}
	var a approvalREST
	r.JSON(t, &a)
	// Writer may not read Support/Eskalation.
	if g := env.REST(http.MethodGet, "/api/v1/runs/"+run, env.World.Token("writer"), nil); g.Status != http.StatusNotFound {
		t.Fatalf("writer reads the run: %d", g.Status)
	}
	hidden := env.REST(http.MethodGet, "/api/v1/approvals/"+a.ID, env.World.Token("writer"), nil)
	apitest.WantProblem(t, "hidden", hidden, http.StatusNotFound, "not_found", "")
	if hidden.Header.Get("RateLimit") == "" {
		t.Fatalf("a hidden approval's read carries no RateLimit header: %v", hidden.Header)
	}
	for _, id := range []string{"01a23b18-0000-7000-8000-000000000000", "not-an-id"} {
		missing := env.REST(http.MethodGet, "/api/v1/approvals/"+id, env.World.Token("writer"), nil)
		if !apitest.SameAnswer(t, hidden, missing) {
			t.Fatalf("missing %s answers %d %v %s, hidden %d %v %s", id, missing.Status, missing.Header, missing.Body, hidden.Status, hidden.Header, hidden.Body)
		}
	}
	q := `query($id: ID!) { approval(id: $id) { id state } }`
	var out struct {
		Approval *struct{ ID, State string } `json:"approval"`
	}
	gh := env.GraphQL(env.World.Token("writer"), q, map[string]any{"id": a.ID}, &out)
	gm := env.GraphQL(env.World.Token("writer"), q, map[string]any{"id": "01a23b18-0000-7000-8000-000000000000"}, &out)
	if len(gh.Errors) != 1 || len(gm.Errors) != 1 || gh.Errors[0].Extensions.Status != http.StatusNotFound ||
		gh.Errors[0].Message != gm.Errors[0].Message || gh.Status != gm.Status {
		t.Fatalf("GraphQL: hidden %+v, missing %+v", gh.Errors, gm.Errors)
	}
	if hh, mh := apitest.ComparableHeader(gh.Header), apitest.ComparableHeader(gm.Header); hh.Get("RateLimit") == "" || !reflect.DeepEqual(hh, mh) {
		t.Fatalf("GraphQL headers differ: hidden %v, missing %v", hh, mh)
	}
}
