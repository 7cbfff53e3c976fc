package runs_test

import (
	"net/http"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// holderOp is one operation on a run that takes a holder, on both faces:
// the GraphQL document (variables r, t and h) and its input, the REST
// route and body, and whether REST carries the holder in the body
// (startRun, renewRun, createRunToken) rather than the Bothy-Run-Holder
// header.
type holderOp struct {
	name    string
	doc     string
	vars    map[string]any
	path    string
	body    map[string]any
	inBody  bool
	restPtr string
}

// holderOps are the operations on run (in thread) that name a holder.
func holderOps(run, thread string) []holderOp {
	const head = "/api/v1/runs/"
	header, body := "header:Bothy-Run-Holder", "/holder"
	live := map[string]any{"baseVersion": 0, "append": "x"}
	approval := map[string]any{"title": "File a ticket?", "options": []map[string]any{{"id": "approve", "label": "Approve"}}}
	return []holderOp{
		{name: "startRun", doc: `mutation($r: ID!, $h: String!) { startRun(id: $r, holder: $h) { id } }`, path: head + run + "/start", inBody: true, restPtr: body},
		{name: "renewRun", doc: `mutation($r: ID!, $h: String!) { renewRun(id: $r, holder: $h) { id } }`, path: head + run + "/renew", inBody: true, restPtr: body},
		{name: "createRunToken", doc: `mutation($r: ID!, $h: String!) { createRunToken(runId: $r, holder: $h) { runId } }`, path: head + run + "/tokens", inBody: true, restPtr: body},
		{name: "awaitRunInput", doc: `mutation($r: ID!, $h: String!) { awaitRunInput(id: $r, holder: $h) { id } }`, path: head + run + "/await-input", restPtr: header},
		{name: "finishRun", doc: `mutation($r: ID!, $h: String!) { finishRun(id: $r, holder: $h, input: {outcome: COMPLETED}) { id } }`,
			path: head + run + "/finish", body: map[string]any{"outcome": "completed"}, restPtr: header},
		{name: "cancelRun", doc: `mutation($r: ID!, $h: String!) { cancelRun(id: $r, holder: $h) { id } }`, path: head + run + "/cancel", restPtr: header},
		{name: "updateRunLive", doc: `mutation($r: ID!, $h: String!, $in: RunLiveUpdate!) { updateRunLive(runId: $r, holder: $h, input: $in) { version } }`,
			vars: map[string]any{"in": live}, path: head + run + "/live", body: map[string]any{"base_version": 0, "append": "x"}, restPtr: header},
		{name: "requestApproval", doc: `mutation($r: ID!, $h: String!, $in: ApprovalRequest!) { requestApproval(runId: $r, holder: $h, input: $in) { id } }`,
			vars: map[string]any{"in": approval}, path: head + run + "/approvals", body: approval, restPtr: header},
		{name: "createMessage", doc: `mutation($t: ID!, $h: String!, $in: MessageCreate!) { createMessage(threadId: $t, holder: $h, input: $in) { replayed } }`,
			vars: map[string]any{"in": map[string]any{"clientMsgId": "held", "contentMd": "x", "runId": run}}, path: "/api/v1/threads/" + thread + "/messages",
			body: map[string]any{"client_msg_id": "held", "content_md": "x", "run_id": run}, restPtr: header},
	}
}

// checkBadHolder sends op on run (in thread) with token and the refused
// holder on both faces and fails the test unless each answers one
// validation error with code on the holder: GraphQL on the argument
// holder, REST at op's pointer.
func (op holderOp) checkBadHolder(t *testing.T, env *apitest.Env, token, run, thread, holder, code string) {
	t.Helper()
	what := op.name + " with holder " + holder
	vars := map[string]any{"r": run, "t": thread, "h": holder}
	for k, v := range op.vars {
		vars[k] = v
	}
	res := env.GraphQL(token, op.doc, vars, nil)
	if len(res.Errors) != 1 || res.Errors[0].Extensions.Code != "validation_failed" {
		t.Fatalf("GraphQL %s: %+v, want validation_failed", what, res.Errors)
	}
	if fe := res.Errors[0].Extensions.FieldErrors; len(fe) != 1 || fe[0].Pointer != "holder" || fe[0].Field != "holder" || fe[0].Code != code {
		t.Fatalf("GraphQL %s: field errors %+v, want %s on holder", what, fe, code)
	}
	b, h := op.body, http.Header{"Bothy-Run-Holder": {holder}}
	if op.inBody {
		b, h = map[string]any{"holder": holder}, nil
	}
	r := env.RESTWith(http.MethodPost, op.path, token, b, h)
	p := apitest.WantProblem(t, "REST "+what, r, http.StatusBadRequest, "validation_failed", "")
	if len(p.Errors) != 1 || p.Errors[0].Pointer != op.restPtr || p.Errors[0].Code != code {
		t.Fatalf("REST %s: errors %+v, want %s at %s", what, p.Errors, code, op.restPtr)
	}
}

// TestHolder_OneFieldErrorOnEveryFace: a holder that is present but empty
// (empty) or no holder name (invalid_format) is refused the same way by
// every operation that takes one, before anything is looked at: on
// GraphQL as validation_failed on the argument holder (pointer holder), on
// REST at /holder where the holder is a body member and at
// header:Bothy-Run-Holder elsewhere. The run stays as it was.
func TestHolder_OneFieldErrorOnEveryFace(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	run, _ := startedByProcA(t, env, "h1", "@lotse check the printer")
	thread := getRun(t, env, "lotse", run).ThreadID
	token := env.World.Token("lotse")
	for _, bad := range []struct{ holder, code string }{{"bad holder!", "invalid_format"}, {"", "empty"}, {"pröc", "invalid_format"}} {
		for _, op := range holderOps(run, thread) {
			op.checkBadHolder(t, env, token, run, thread, bad.holder, bad.code)
		}
	}
	if got := getRun(t, env, "lotse", run); got.State != "RUNNING" || got.Version != 2 {
		t.Fatalf("the refused calls changed the run: %+v", got)
	}
	if n := env.Count(`SELECT count(*) FROM messages WHERE client_msg_id = 'held'`); n != 0 {
		t.Fatalf("a refused answer is stored")
	}
}

// TestHolder_RefusedWithTheOtherInputs: a refused holder is listed in the
// one validation error beside the request's other invalid members, on both
// faces (finishRun with an empty holder and an empty reason).
func TestHolder_RefusedWithTheOtherInputs(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	run, _ := startedByProcA(t, env, "h2", "@lotse check the printer")
	token := env.World.Token("lotse")
	res := env.GraphQL(token, `mutation($r: ID!) { finishRun(id: $r, holder: "", input: {outcome: FAILED, reason: ""}) { id } }`, map[string]any{"r": run}, nil)
	if len(res.Errors) != 1 || len(res.Errors[0].Extensions.FieldErrors) != 2 {
		t.Fatalf("GraphQL: %+v, want one error naming holder and reason", res.Errors)
	}
	fields := map[string]string{}
	for _, f := range res.Errors[0].Extensions.FieldErrors {
		fields[f.Field] = f.Code
	}
	if fields["holder"] != "empty" || fields["input.reason"] != "empty" {
		t.Fatalf("GraphQL field errors: %+v", res.Errors[0].Extensions.FieldErrors)
	}
	r := env.RESTWith(http.MethodPost, "/api/v1/runs/"+run+"/finish", token, map[string]any{"outcome": "failed", "reason": ""},
		http.Header{"Bothy-Run-Holder": {""}})
	p := apitest.WantProblem(t, "REST", r, http.StatusBadRequest, "validation_failed", "")
	pointers := map[string]string{}
	for _, f := range p.Errors {
		pointers[f.Pointer] = f.Code
	}
	if len(p.Errors) != 2 || pointers["header:Bothy-Run-Holder"] != "empty" || pointers["/reason"] != "empty" {
		t.Fatalf("REST errors: %+v", p.Errors)
	}
	if got := getRun(t, env, "lotse", run); got.State != "RUNNING" {
		t.Fatalf("the refused finish changed the run: %+v", got)
	}
}
