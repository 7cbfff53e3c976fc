package approvals_test

import (
	"reflect"
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs"
	"bothy.example.com/bothy/internal/runs/domain"
)

// The run steps the approval tests take, as package runs' tests take them
// (a test package shares no helpers with another).

// holder is the adapter process these tests claim runs as.
const holder = "adapter-test"

// runOf returns the id of the run message m triggered.
func runOf(t *testing.T, env *moduletest.Env, m messaging.Message) string {
	t.Helper()
	var id string
	if err := env.Pool.QueryRow(t.Context(), `SELECT id::text FROM runs WHERE triggering_message_id = $1`, m.ID).Scan(&id); err != nil {
		t.Fatalf("run of %q: %v", m.ContentMD, err)
	}
	return id
}

// startAs starts run id as agent with the test's holder.
func startAs(t *testing.T, env *moduletest.Env, agent, id string) {
	t.Helper()
	if _, err := env.Runs.Start(t.Context(), env.Principal(agent), id, holder); err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
}

// finishAs ends run id as agent with the test's holder.
func finishAs(t *testing.T, env *moduletest.Env, agent, id string, to domain.RunState) {
	t.Helper()
	if _, err := env.Runs.Finish(t.Context(), env.Principal(agent), id, holder, to, ""); err != nil {
		t.Fatalf("finish %s %s: %v", id, to, err)
	}
}

// readRun returns run id as who reads it.
func readRun(t *testing.T, env *moduletest.Env, who, id string) runs.Run {
	t.Helper()
	rd, err := env.Runs.Read(t.Context(), env.Principal(who), id)
	if err != nil {
		t.Fatalf("run %s as %s: %v", id, who, err)
	}
	return rd.Run
}

// wantClaimed fails the test unless err is conflict run_claimed.
func wantClaimed(t *testing.T, what string, err error) {
	t.Helper()
	if p := problem.From("approvals.wantClaimed", err); p == nil || p.Code != problem.Conflict || p.Reason != "run_claimed" {
		t.Fatalf("%s: %v, want conflict run_claimed", what, err)
	}
}

// sameProblem fails the test unless err is a *problem.Error equal to want
// in every field a reader sees (code, reason, detail, fields).
func sameProblem(t *testing.T, what string, err error, want *problem.Error) {
	t.Helper()
	p := problem.From("approvals.sameProblem", err)
	if err == nil || p == nil || p.Code != want.Code || p.Reason != want.Reason || p.Detail != want.Detail || !reflect.DeepEqual(p.Fields, want.Fields) {
		t.Fatalf("%s: %#v, want the answer %#v", what, p, want)
	}
}
