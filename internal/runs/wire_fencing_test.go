package runs_test

import (
	"net/http"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// heldOp runs a run mutation that takes a holder (awaitRunInput, cancelRun,
// or finishRun with outcome) as agent with holder ("" sends none).
func heldOp(t *testing.T, env *apitest.Env, agent, op, id, holder, outcome string) (claimRun, []apitest.GQLError) {
	t.Helper()
	vars := map[string]any{"id": id}
	if holder != "" {
		vars["h"] = holder
	}
	doc := `mutation($id: ID!, $h: String) { ` + op + `(id: $id, holder: $h) { ` + claimSel + ` } }`
	if op == "finishRun" {
		vars["o"] = outcome
		doc = `mutation($id: ID!, $h: String, $o: RunOutcome!) { finishRun(id: $id, holder: $h, input: {outcome: $o}) { ` + claimSel + ` } }`
	}
	var out map[string]claimRun
	res := env.GraphQL(env.World.Token(agent), doc, vars, &out)
	return out[op], res.Errors
}

// answerAs posts content with run_id run in thread as agent from holder
// ("" sends none) over GraphQL.
func answerAs(t *testing.T, env *apitest.Env, agent, thread, run, holder, clientMsgID, content string) []apitest.GQLError {
	t.Helper()
	vars := map[string]any{"t": thread, "in": map[string]any{"clientMsgId": clientMsgID, "contentMd": content, "runId": run}}
	if holder != "" {
		vars["h"] = holder
	}
	res := env.GraphQL(env.World.Token(agent), `mutation($t: ID!, $in: MessageCreate!, $h: String) { createMessage(threadId: $t, input: $in, holder: $h) { replayed } }`, vars, nil)
	return res.Errors
}

// answerREST posts an answer with run_id over REST with the holder header
// (none when holder is "").
func answerREST(env *apitest.Env, agent, thread, run, holder, clientMsgID, content string) *apitest.Response {
	h := http.Header{}
	if holder != "" {
		h.Set("Bothy-Run-Holder", holder)
	}
	return env.RESTWith(http.MethodPost, "/api/v1/threads/"+thread+"/messages", env.World.Token(agent),
		map[string]any{"client_msg_id": clientMsgID, "content_md": content, "run_id": run}, h)
}

// startedByProcA has Alex ask Lotse in Support/Eskalation (clientMsgID,
// question) and the holder proc-a start the run; it returns the run's id
// and Lotse's stream, read up to the run's invocation.
func startedByProcA(t *testing.T, env *apitest.Env, clientMsgID, question string) (string, *stream) {
	t.Helper()
	s := newStream(t, env, "lotse")
	env.MustPost("alex", env.Main("Support/Eskalation"), clientMsgID, question)
	run := s.nextRun()
	if _, errs := claim(t, env, "lotse", "startRun", run, "proc-a"); len(errs) > 0 {
		t.Fatal(errs)
	}
	return run, s
}

// TestFencing_OnlyTheHolderActs: on a run that holder proc-a started, no
// other holder and no call without a holder may answer in it, make it wait
// or finish it (409 run_claimed on both faces, nothing stored or changed);
// proc-a does all three.
func TestFencing_OnlyTheHolderActs(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	run, _ := startedByProcA(t, env, "f1", "@lotse check the printer")
	thread := getRun(t, env, "lotse", run).ThreadID
	stored := func(clientMsgID string) int {
		return env.Count(`SELECT count(*) FROM messages WHERE client_msg_id = $1`, clientMsgID)
	}

	for _, holder := range []string{"proc-b", ""} {
		errs := answerAs(t, env, "lotse", thread, run, holder, "ans-"+holder+"x", "not mine")
		wantGQLConflict(t, "answer by "+holder, errs, "run_claimed")
		r := answerREST(env, "lotse", thread, run, holder, "rest-"+holder+"x", "not mine")
		apitest.WantProblem(t, "REST answer by "+holder, r, http.StatusConflict, "conflict", "run_claimed")
		if n := stored("ans-"+holder+"x") + stored("rest-"+holder+"x"); n != 0 {
			t.Fatalf("%d refused answers stored", n)
		}
		_, errs = heldOp(t, env, "lotse", "awaitRunInput", run, holder, "")
		wantGQLConflict(t, "await by "+holder, errs, "run_claimed")
		_, errs = heldOp(t, env, "lotse", "finishRun", run, holder, "COMPLETED")
		wantGQLConflict(t, "finish by "+holder, errs, "run_claimed")
		_, errs = heldOp(t, env, "lotse", "cancelRun", run, holder, "")
		wantGQLConflict(t, "the agent's cancel by "+holder, errs, "run_claimed")
		r = env.RESTWith(http.MethodPost, "/api/v1/runs/"+run+"/finish", env.World.Token("lotse"), map[string]any{"outcome": "completed"},
			http.Header{"Bothy-Run-Holder": []string{holder}})
		if holder == "" {
			r = env.REST(http.MethodPost, "/api/v1/runs/"+run+"/finish", env.World.Token("lotse"), map[string]any{"outcome": "completed"})
		}
		apitest.WantProblem(t, "REST finish by "+holder, r, http.StatusConflict, "conflict", "run_claimed")
	}
	if got := getRun(t, env, "lotse", run); got.State != "RUNNING" || got.Version != 2 {
		t.Fatalf("the refused calls changed the run: %+v", got)
	}

	// The holder answers (REST, with the header), waits and finishes.
	if r := answerREST(env, "lotse", thread, run, "proc-a", "ans-a", "the printer is fine"); r.Status != http.StatusCreated {
		t.Fatalf("holder's answer: %d %s", r.Status, r.Body)
	}
	if w, errs := heldOp(t, env, "lotse", "awaitRunInput", run, "proc-a", ""); len(errs) > 0 || w.State != "WAITING_INPUT" {
		t.Fatalf("holder's await: %+v %+v", w, errs)
	}
	r := env.RESTWith(http.MethodPost, "/api/v1/runs/"+run+"/finish", env.World.Token("lotse"), map[string]any{"outcome": "completed"},
		http.Header{"Bothy-Run-Holder": []string{"proc-a"}})
	if r.Status != http.StatusOK {
		t.Fatalf("holder's finish: %d %s", r.Status, r.Body)
	}
	if got := getRun(t, env, "lotse", run); got.State != "COMPLETED" {
		t.Fatalf("after the holder's finish: %+v", got)
	}
	// Bad holders are refused as input, not as claims.
	r = answerREST(env, "lotse", thread, run, "bad holder!", "ans-bad", "x")
	apitest.WantProblem(t, "malformed holder header", r, http.StatusBadRequest, "validation_failed", "")
	if _, errs := claim(t, env, "lotse", "renewRun", run, ""); len(errs) != 1 || errs[0].Extensions.Code != "validation_failed" {
		t.Fatalf("renew with an empty holder: %+v", errs)
	}
}

// lapseAndRequeue lets the lease of run lapse, sweeps, and fails the test
// unless the run is queued again within 15 seconds. The server's own
// sweeper wakes on the clock too and may requeue the run first: either
// sweep does it once.
func lapseAndRequeue(t *testing.T, env *apitest.Env, run string) {
	t.Helper()
	env.Clock.Advance(2 * time.Minute)
	if n, err := env.Server.Runs.SweepOnce(t.Context()); err != nil || n > 1 {
		t.Fatalf("lease sweep changed %d (%v)", n, err)
	}
	// A sweep of the server's own that skipped ours may still commit.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got := getRun(t, env, "lotse", run)
		if got.State == "QUEUED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the lease lapsed and a sweep the run is %s, want QUEUED", got.State)
		}
	}
}

// checkOnlyAnswerA1 fails the test unless run's answers on both faces are
// the one message id, client_msg_id a-1: what the old holder said before
// the takeover, as the new holder reads it.
func checkOnlyAnswerA1(t *testing.T, env *apitest.Env, run, id string) {
	t.Helper()
	var out struct {
		Run struct {
			Answers []struct {
				MessageID   string `json:"messageId"`
				ClientMsgID string `json:"clientMsgId"`
			} `json:"answers"`
		} `json:"run"`
	}
	env.GraphQL(env.World.Token("lotse"), `query($id: ID!) { run(id: $id) { answers { messageId clientMsgId } } }`, map[string]any{"id": run}, &out)
	if a := out.Run.Answers; len(a) != 1 || a[0].MessageID != id || a[0].ClientMsgID != "a-1" {
		t.Fatalf("answers after the takeover: %+v (want %s a-1)", a, id)
	}
	rr := env.REST(http.MethodGet, "/api/v1/runs/"+run, env.World.Token("lotse"), nil)
	var restRun struct {
		Answers []map[string]string `json:"answers"`
	}
	rr.JSON(t, &restRun)
	if len(restRun.Answers) != 1 || restRun.Answers[0]["message_id"] != id || restRun.Answers[0]["client_msg_id"] != "a-1" {
		t.Fatalf("REST answers: %s", rr.Body)
	}
}

// TestFencing_Takeover: after proc-a's lease lapsed and proc-b took the run
// over, proc-a's late answer, wait and finish are refused and change
// nothing; its answer stored before the takeover stays, and a
// byte-identical replay of it still answers the replay.
func TestFencing_Takeover(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	run, _ := startedByProcA(t, env, "t1", "@lotse two questions")
	thread := getRun(t, env, "lotse", run).ThreadID
	if r := answerREST(env, "lotse", thread, run, "proc-a", "a-1", "first part"); r.Status != http.StatusCreated {
		t.Fatalf("answer before the takeover: %d %s", r.Status, r.Body)
	}
	lapseAndRequeue(t, env, run)
	// Lapsed, not yet taken over: the queued run is nobody's to act on.
	wantGQLConflict(t, "late answer on the queued run", answerAs(t, env, "lotse", thread, run, "proc-a", "a-q", "late"), "run_claimed")
	if b, errs := claim(t, env, "lotse", "startRun", run, "proc-b"); len(errs) > 0 || b.Attempt != 2 {
		t.Fatalf("takeover %+v %+v", b, errs)
	}

	wantGQLConflict(t, "late answer", answerAs(t, env, "lotse", thread, run, "proc-a", "a-2", "second part, late"), "run_claimed")
	_, errs := heldOp(t, env, "lotse", "awaitRunInput", run, "proc-a", "")
	wantGQLConflict(t, "late await", errs, "run_claimed")
	_, errs = heldOp(t, env, "lotse", "finishRun", run, "proc-a", "COMPLETED")
	wantGQLConflict(t, "late finish", errs, "run_claimed")
	_, errs = claim(t, env, "lotse", "renewRun", run, "proc-a")
	wantGQLConflict(t, "late renew", errs, "run_claimed")
	if n := env.Count(`SELECT count(*) FROM messages WHERE client_msg_id IN ('a-2', 'a-q')`); n != 0 {
		t.Fatalf("%d late answers stored", n)
	}
	// The stored answer stays, and its replay answers the replay.
	r := answerREST(env, "lotse", thread, run, "proc-a", "a-1", "first part")
	if r.Status != http.StatusOK || r.Header.Get("Idempotent-Replay") != "true" {
		t.Fatalf("replay of the stored answer: %d %v %s", r.Status, r.Header, r.Body)
	}
	var first struct {
		ID string `json:"id"`
	}
	r.JSON(t, &first)
	// The new holder sees what the old one said: the run's answers.
	checkOnlyAnswerA1(t, env, run, first.ID)
	got := getRun(t, env, "lotse", run)
	if got.State != "RUNNING" {
		t.Fatalf("the late calls changed the run: %+v", got)
	}
	if _, errs := heldOp(t, env, "lotse", "finishRun", run, "proc-b", "COMPLETED"); len(errs) > 0 {
		t.Fatalf("the new holder's finish: %+v", errs)
	}
}

// TestCancelRequestedRunNeverRequeued: a run a person asked to cancel whose
// holder's lease lapses before the adapter confirmed ends cancelled; it
// does not go back to queued with a new invocation.
func TestCancelRequestedRunNeverRequeued(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	run, s := startedByProcA(t, env, "c1", "@lotse a long job")
	if r := mustRunOp(t, env, "alex", "cancelRun", run); r.CancelRequested == nil || !*r.CancelRequested {
		t.Fatalf("cancel: %+v", r)
	}
	env.Clock.Advance(2 * time.Minute) // past the lease, within nothing else
	if n, err := env.Server.Runs.SweepOnce(t.Context()); err != nil || n != 1 {
		t.Fatalf("sweep changed %d (%v)", n, err)
	}
	got := getRun(t, env, "lotse", run)
	if got.State != "CANCELLED" || got.EndReason == nil || *got.EndReason != "cancelled" {
		t.Fatalf("after the lapse: %+v", got)
	}
	evs, _ := env.Poll(t, "lotse", s.cursor, 0)
	for _, e := range evs {
		if e.Type == "agent.invocation" {
			t.Fatalf("the cancelled run was invoked again: %+v", evs)
		}
	}
}
