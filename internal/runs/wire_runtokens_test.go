package runs_test

import (
	"net/http"
	"reflect"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// mintRunToken mints a run token for run as lotse's holder over REST.
func mintRunToken(t *testing.T, env *apitest.Env, run, holder string) string {
	t.Helper()
	out := env.MustREST(t, http.MethodPost, "/api/v1/runs/"+run+"/tokens", env.World.Token("lotse"), map[string]any{"holder": holder}, http.StatusCreated)
	tok, _ := out["token"].(string)
	if len(tok) < 20 || tok[:8] != "bothy_r_" || out["run_id"] != run || out["holder"] != holder {
		t.Fatalf("run token: %+v", out)
	}
	return tok
}

// TestRunTokens_OnlyTheirRun: a run token minted by the holder of a run
// reads the run, its context and its thread, streams into the live box and
// answers as that holder without naming it (REST and GraphQL); it may not
// post anything but the answer, poll the stream, mint a token, read
// another thread or run (the 404 of a missing one) or claim; after the run
// ended it no longer authenticates. Only the holder mints one; Sam and
// another holder cannot.
func TestRunTokens_OnlyTheirRun(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	run, s := startedByProcA(t, env, "rt-1", "@lotse check the printer")
	// A second run in another thread, for the out-of-scope reads.
	env.MustPost("alex", env.Main("Support/Allgemein"), "rt-2", "@lotse and the scanner?")
	other := s.nextRun()
	otherThread := getRun(t, env, "alex", other).ThreadID
	thread := getRun(t, env, "lotse", run).ThreadID

	apitest.WantProblem(t, "another holder mints", env.REST(http.MethodPost, "/api/v1/runs/"+run+"/tokens", env.World.Token("lotse"), map[string]any{"holder": "proc-b"}),
		http.StatusConflict, "conflict", "run_claimed")
	apitest.WantProblem(t, "sam mints", env.REST(http.MethodPost, "/api/v1/runs/"+run+"/tokens", env.World.Token("sam"), map[string]any{"holder": "proc-a"}),
		http.StatusNotFound, "not_found", "")
	tok := mintRunToken(t, env, run, "proc-a")

	// What it may do: read the run, its context and thread; live box;
	// the answer, as proc-a without naming it.
	env.MustREST(t, http.MethodGet, "/api/v1/runs/"+run, tok, nil, http.StatusOK)
	env.MustREST(t, http.MethodGet, "/api/v1/runs/"+run+"/context", tok, nil, http.StatusOK)
	env.MustREST(t, http.MethodGet, "/api/v1/threads/"+thread+"/messages", tok, nil, http.StatusOK)
	var live struct {
		UpdateRunLive struct{ Version int } `json:"updateRunLive"`
	}
	if res := env.GraphQL(tok, `mutation($id: ID!) { updateRunLive(runId: $id, input: {baseVersion: 0, append: "Looking"}) { version } }`,
		map[string]any{"id": run}, &live); len(res.Errors) > 0 || live.UpdateRunLive.Version != 1 {
		t.Fatalf("live box with a run token: %+v %+v", res.Errors, live)
	}
	apitest.WantProblem(t, "a plain message", env.REST(http.MethodPost, "/api/v1/threads/"+thread+"/messages", tok,
		map[string]any{"client_msg_id": "rt-plain", "content_md": "hello"}), http.StatusForbidden, "forbidden", "run_token_scope")
	env.MustREST(t, http.MethodPost, "/api/v1/threads/"+thread+"/messages", tok,
		map[string]any{"client_msg_id": "rt-answer", "content_md": "It is back.", "run_id": run}, http.StatusCreated)

	// What it may not do.
	apitest.WantProblem(t, "poll", env.REST(http.MethodGet, "/api/v1/agent/events", tok, nil), http.StatusForbidden, "forbidden", "run_token_scope")
	apitest.WantProblem(t, "events", env.REST(http.MethodGet, "/api/v1/events", tok, nil), http.StatusForbidden, "forbidden", "run_token_scope")
	apitest.WantProblem(t, "mint", env.REST(http.MethodPost, "/api/v1/runs/"+run+"/tokens", tok, map[string]any{"holder": "proc-a"}),
		http.StatusForbidden, "forbidden", "run_token_scope")
	missing := "01a23b18-0000-7000-8000-000000000000"
	for _, p := range [][2]string{{"/api/v1/runs/" + other, "/api/v1/runs/" + missing}, {"/api/v1/threads/" + otherThread + "/messages", "/api/v1/threads/" + missing + "/messages"},
		{"/api/v1/runs/" + other + "/context", "/api/v1/runs/" + missing + "/context"}} {
		hidden, gone := env.REST(http.MethodGet, p[0], tok, nil), env.REST(http.MethodGet, p[1], tok, nil)
		apitest.WantProblem(t, p[0], hidden, http.StatusNotFound, "not_found", "")
		apitest.WantProblem(t, p[1], gone, http.StatusNotFound, "not_found", "")
	}
	var claim struct{ StartRun *struct{ State string } }
	if res := env.GraphQL(tok, `mutation($id: ID!) { startRun(id: $id, holder: "proc-a") { state } }`, map[string]any{"id": run}, &claim); len(res.Errors) == 0 ||
		res.Errors[0].Extensions.Reason != "run_token_scope" {
		t.Fatalf("claim with a run token: %+v", res.Errors)
	}

	// Finished as proc-a (the token's holder) without naming it; then dead.
	var fin struct{ FinishRun struct{ State string } }
	if res := env.GraphQL(tok, `mutation($id: ID!) { finishRun(id: $id, input: {outcome: COMPLETED}) { state } }`, map[string]any{"id": run}, &fin); len(res.Errors) > 0 || fin.FinishRun.State != "COMPLETED" {
		t.Fatalf("finish with a run token: %+v %+v", res.Errors, fin)
	}
	apitest.WantProblem(t, "after the end", env.REST(http.MethodGet, "/api/v1/runs/"+run, tok, nil), http.StatusUnauthorized, "unauthorized", "")
	if n := env.Count(`SELECT count(*) FROM run_answers WHERE run_id = $1`, run); n != 1 {
		t.Fatalf("%d answers", n)
	}
	// Audited: the door's allows (proc-b's, refused after by the claim,
	// and proc-a's) and the run token's denial.
	if n := env.Count(`SELECT coalesce(sum(count), 0) FROM audit_log WHERE action = 'run.token.create' AND decision = 'allow'`); n != 2 {
		t.Fatalf("%d audited mints", n)
	}
	if n := env.Count(`SELECT coalesce(sum(count), 0) FROM audit_log WHERE action = 'run.token.create' AND decision = 'deny' AND reason = 'run_token_scope'`); n != 1 {
		t.Fatalf("%d audited refusals of a run token", n)
	}
}

// TestRunTokens_ReadTheirContextWhereverTheRunLives: a mention in the main
// thread of a text channel starts the run in a new thread, so the run's
// trigger and channel context lie in the main thread, outside the thread
// the token reads. The token still reads its run's context, on both
// faces, exactly as the agent's own token does, and its answer's
// provenance is decided from that same context.
func TestRunTokens_ReadTheirContextWhereverTheRunLives(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	s := newStream(t, env, "lotse")
	say(t, env, "writer", env.Main("Support/Allgemein"), "writer: the printer on floor 2 is jammed")
	say(t, env, "alex", env.Main("Support/Allgemein"), "@lotse is the printer fixed?")
	run := s.nextRun()
	thread := getRun(t, env, "lotse", run).ThreadID
	if thread == env.Main("Support/Allgemein") {
		t.Fatal("the run did not start a thread of its own")
	}
	if _, errs := claim(t, env, "lotse", "startRun", run, "proc-a"); len(errs) > 0 {
		t.Fatal(errs)
	}
	tok := mintRunToken(t, env, run, "proc-a")
	want := env.MustREST(t, http.MethodGet, "/api/v1/runs/"+run+"/context", env.World.Token("lotse"), nil, http.StatusOK)
	got := env.MustREST(t, http.MethodGet, "/api/v1/runs/"+run+"/context", tok, nil, http.StatusOK)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the run token reads\n%v\nthe agent reads\n%v", got, want)
	}
	if tm := got["trigger_message"].(map[string]any); tm["content_md"] != "@lotse is the printer fixed?" {
		t.Fatalf("trigger %v", tm)
	}
	var gq struct {
		Run *struct {
			Context *struct {
				TriggerMessage struct{ ContentMd string } `json:"triggerMessage"`
			} `json:"context"`
		} `json:"run"`
	}
	if res := env.GraphQL(tok, `query($id: ID!) { run(id: $id) { context { triggerMessage { contentMd } } } }`, map[string]any{"id": run}, &gq); len(res.Errors) > 0 ||
		gq.Run == nil || gq.Run.Context == nil || gq.Run.Context.TriggerMessage.ContentMd != "@lotse is the printer fixed?" {
		t.Fatalf("GraphQL with the run token: %+v %+v", res.Errors, gq)
	}
	if n := env.Metric(`bothy_authz_errors_total{reason="filter_mismatch"}`); n != 0 {
		t.Fatalf("%v filter mismatches", n)
	}
	// The answer's provenance comes from the context the token reads: the
	// writer's message in the channel context makes it unverified.
	out := env.MustREST(t, http.MethodPost, "/api/v1/threads/"+thread+"/messages", tok,
		map[string]any{"client_msg_id": "rt-auto", "content_md": "It is fixed.", "run_id": run}, http.StatusCreated)
	if lowest := want["trust_summary"].(map[string]any)["lowest"]; lowest != "unverified" || out["provenance"] != "unverified" {
		t.Fatalf("context lowest %v, answer provenance %v", lowest, out["provenance"])
	}
}
