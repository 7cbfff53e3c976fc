package runs_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/devtools/runtest"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs/domain"
)

// TestRunTimeouts: the sweeper fails a queued run past run.start_timeout
// (the pending follow-up then starts the next run) and a running run
// without activity for run.stall_timeout, both with end reason timeout.
func TestRunTimeouts(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	esk := env.Main("Support/Eskalation")
	env.Post("alex", esk, "t1", "@lotse anyone?")
	followUp := env.Post("alex", esk, "t2", "@lotse hello?") // a pending follow-up
	n, err := env.Runs.SweepOnce(ctx)
	if err != nil || n != 0 {
		t.Fatalf("early sweep ended %d runs (%v)", n, err)
	}
	env.Clock.Advance(6 * time.Minute) // beyond run.start_timeout
	if n, err := env.Runs.SweepOnce(ctx); err != nil || n != 1 {
		t.Fatalf("sweep ended %d runs (%v)", n, err)
	}
	rows, err := env.Pool.Query(ctx, `SELECT state || ':' || coalesce(end_reason, '') FROM runs ORDER BY queued_at, id`)
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		states = append(states, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(states) != "[failed:timeout queued:]" {
		t.Fatalf("runs after the sweep: %v (the pending follow-up starts the next run)", states)
	}
	// The next run was triggered by the follow-up.
	next := runtest.RunOf(t, env, followUp)
	// A running run without activity for run.stall_timeout fails too.
	if _, err := env.Runs.Start(ctx, env.Principal("lotse"), next, holder); err != nil {
		t.Fatal(err)
	}
	env.Clock.Advance(31 * time.Minute)
	if n, err := env.Runs.SweepOnce(ctx); err != nil || n != 1 {
		t.Fatalf("stall sweep ended %d (%v)", n, err)
	}
	if r := runtest.ReadRun(t, env, "lotse", next); r.State != domain.RunFailed || r.EndReason != "timeout" {
		t.Fatalf("stalled run %+v", r)
	}
}

// TestConcurrentTriggersOneActiveRun: twenty concurrent messages into a
// thread with an operator start one run; the other nineteen are its
// follow-ups.
func TestConcurrentTriggersOneActiveRun(t *testing.T) {
	t.Parallel()
	env := moduletest.Build(t, moduletest.Options{Config: map[string]string{"ratelimit.rl.message.burst": "100"}})
	// A thread with fixed operator Lotse, started by writer (no run).
	thread := runtest.NewThread(t, env, "writer", "Support/Allgemein", "start")
	// The principal is read here: nothing in the goroutines may end the
	// test.
	alex := env.Principal("alex")
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, _, errs[i] = env.Messaging.Create(t.Context(), alex, thread, messaging.Input{ClientMsgID: fmt.Sprintf("c%d", i), ContentMD: fmt.Sprintf("message %d", i)})
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if n := env.Count(`SELECT count(*) FROM runs WHERE thread_id = $1`, thread); n != 1 {
		t.Fatalf("%d runs", n)
	}
	if n := env.Count(`SELECT count(*) FROM run_followups`); n != 19 {
		t.Fatalf("%d follow-ups", n)
	}
	if n := env.Count(`SELECT count(*) FROM messages WHERE thread_id = $1 AND trigger_state = 'accepted'`, thread); n != 1 {
		t.Fatalf("%d accepted", n)
	}
}

// pollInvocationOf polls lotse's stream after cursor and fails the test
// unless its first event is of run; it returns the next cursor.
func pollInvocationOf(t *testing.T, env *moduletest.Env, what, after, run string) string {
	t.Helper()
	page, err := env.Runs.Poll(t.Context(), env.Principal("lotse"), after, 0)
	if err != nil || len(page.Events) == 0 || page.Events[0].Payload["run_id"] != run {
		t.Fatalf("%s: %+v %v", what, page.Events, err)
	}
	return page.NextAfter
}

// checkCancelRequested has alex cancel the running run and fails the test
// unless the run keeps running with cancel_requested and lotse's stream
// after cursor holds run.cancel_requested of the run alone.
func checkCancelRequested(t *testing.T, env *moduletest.Env, run, after string) {
	t.Helper()
	r, err := env.Runs.Cancel(t.Context(), env.Principal("alex"), run, "")
	if err != nil || r.State != domain.RunRunning || !r.CancelRequested {
		t.Fatalf("running cancel %+v %v", r, err)
	}
	page, err := env.Runs.Poll(t.Context(), env.Principal("lotse"), after, 0)
	if err != nil || len(page.Events) != 1 || page.Events[0].Type != "run.cancel_requested" || page.Events[0].Payload["run_id"] != run {
		t.Fatalf("cancel events %+v %v", page.Events, err)
	}
}

// TestCancelRun: somebody who cannot see the run cannot cancel it (not
// found); a person with trigger cancels a queued run at once; a running
// run gets cancel_requested and run.cancel_requested in the agent's
// stream, and ends when the agent confirms.
func TestCancelRun(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	esk := env.Main("Support/Eskalation")
	alex, lotse := env.Principal("alex"), env.Principal("lotse")
	first := runtest.RunOf(t, env, env.Post("alex", esk, "c1", "@lotse first"))
	// Writer has no trigger: may not cancel (but Eskalation is invisible to
	// writer: not found).
	_, err := env.Runs.Cancel(ctx, env.Principal("writer"), first, "")
	if p := problem.From("runs.testCancelRun", err); err == nil || p.Code != problem.NotFound {
		t.Fatalf("writer cancels: %v", err)
	}
	if r, err := env.Runs.Cancel(ctx, alex, first, ""); err != nil || r.State != domain.RunCancelled || r.Version != 2 {
		t.Fatalf("queued cancel %+v %v", r, err)
	}
	after := pollInvocationOf(t, env, "invocation of the first run", "", first)
	second := runtest.RunOf(t, env, env.Post("alex", esk, "c2", "@lotse second"))
	// The agent reads its stream up to the invocation: what comes after the
	// start is the cancel request alone.
	after = pollInvocationOf(t, env, "invocation of the second run", after, second)
	if _, err := env.Runs.Start(ctx, lotse, second, holder); err != nil {
		t.Fatal(err)
	}
	checkCancelRequested(t, env, second, after)
	done, err := env.Runs.Finish(ctx, lotse, second, holder, domain.RunCancelled, "")
	if err != nil || done.State != domain.RunCancelled {
		t.Fatalf("confirm %+v %v", done, err)
	}
}
