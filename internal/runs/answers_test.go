package runs_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/devtools/runtest"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs/domain"
)

// holder is the adapter that claims runs in these tests.
const holder = runtest.Holder

// TestOnMessagePosted_AnswerBranch drives the runs subscriber directly
// inside a real unit of work: an agent answer naming its run is checked and
// does no trigger work; a non-agent message naming a run is an internal
// error (messaging never builds one).
func TestOnMessagePosted_AnswerBranch(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	esk := env.Main("Support/Eskalation")
	run := runtest.RunOf(t, env, env.Post("alex", esk, "r1", "@lotse a run"))
	thread, channel, err := env.Chat.ThreadInfo(t.Context(), esk)
	if err != nil {
		t.Fatal(err)
	}
	lotse, alex := env.Principal("lotse"), env.Principal("alex")
	// An accepted answer is recorded against its message (Run.answers), so
	// the case names a stored message of the agent.
	stored := env.Post("lotse", esk, "r1-answer", "a stored agent message")
	cases := []struct {
		name   string
		posted messaging.Posted
		code   problem.Code
	}{
		{"agent answer with its run", messaging.Posted{Message: messaging.Message{ID: stored.ID, Origin: "agent", Kind: "text"}, Author: lotse, RunID: run, ClientMsgID: "r1-answer"}, ""},
		{"agent message without run", messaging.Posted{Message: messaging.Message{Origin: "agent", Kind: "text"}, Author: lotse}, ""},
		{"agent names an unknown run", messaging.Posted{Message: messaging.Message{Origin: "agent", Kind: "text"}, Author: lotse, RunID: ids.New()}, problem.ValidationFailed},
		{"human names a run", messaging.Posted{Message: messaging.Message{Origin: "human", Kind: "text"}, Author: alex, RunID: run}, problem.InternalError},
		{"anchor never checked", messaging.Posted{Message: messaging.Message{Origin: "agent", Kind: "run"}, Author: lotse, RunID: run}, problem.InternalError},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.posted.Thread, c.posted.Channel = thread, channel
			before := env.Count(`SELECT count(*) FROM runs`)
			var evs []events.Event
			var err error
			// The subscriber runs in a transaction that commits whatever it
			// answers (a failed one commits as a rollback).
			if txErr := env.DB.InTx(t.Context(), func(ctx context.Context) error {
				evs, err = env.Runs.OnMessagePosted(ctx, &c.posted)
				return nil
			}); txErr != nil && err == nil {
				t.Fatal(txErr)
			}
			var got problem.Code
			if err != nil {
				got = problem.CodeOf(err)
			}
			if got != c.code || len(evs) != 0 {
				t.Fatalf("got %q (%v) with %d events, want %q", got, err, len(evs), c.code)
			}
			if c.posted.Message.TriggerState != "" {
				t.Fatalf("trigger_state %q", c.posted.Message.TriggerState)
			}
			if env.Count(`SELECT count(*) FROM runs`) != before {
				t.Fatal("the branch created a run")
			}
		})
	}
}

// TestAnswer_RunIDEndedRun: an answer naming a run that ended (completed,
// failed, cancelled) is refused with run_not_active and stores nothing;
// the same answer without run_id is accepted.
func TestAnswer_RunIDEndedRun(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	esk := env.Main("Support/Eskalation")
	lotse, alex := env.Principal("lotse"), env.Principal("alex")
	start := func(run string) {
		t.Helper()
		if _, err := env.Runs.Start(ctx, lotse, run, holder); err != nil {
			t.Fatalf("start %s: %v", run, err)
		}
	}
	finish := func(run string, to domain.RunState) {
		t.Helper()
		if _, err := env.Runs.Finish(ctx, lotse, run, holder, to, ""); err != nil {
			t.Fatalf("finish %s %s: %v", run, to, err)
		}
	}
	end := map[string]func(run string){
		"completed": func(run string) { start(run); finish(run, domain.RunCompleted) },
		"failed":    func(run string) { start(run); finish(run, domain.RunFailed) },
		"cancelled": func(run string) {
			start(run)
			if _, err := env.Runs.Cancel(ctx, alex, run, ""); err != nil {
				t.Fatalf("cancel: %v", err)
			}
			finish(run, domain.RunCancelled)
		},
	}
	for _, how := range []string{"completed", "failed", "cancelled"} {
		run := runtest.RunOf(t, env, env.Post("alex", esk, "ask-"+how, "@lotse "+how))
		end[how](run)
		before := env.Count(`SELECT count(*) FROM messages`)
		_, _, err := env.Messaging.Create(ctx, lotse, esk, messaging.Input{ClientMsgID: "late-" + how, ContentMD: "late answer", RunID: run})
		if p := problem.From("runs.testAnswer_RunIDEndedRun", err); err == nil || p.Code != problem.Conflict || p.Reason != "run_not_active" {
			t.Fatalf("%s: %v", how, err)
		}
		if env.Count(`SELECT count(*) FROM messages`) != before {
			t.Fatalf("%s: stored", how)
		}
		if _, _, err := env.Messaging.Create(ctx, lotse, esk, messaging.Input{ClientMsgID: "late-" + how, ContentMD: "late answer"}); err != nil {
			t.Fatalf("%s: without run_id: %v", how, err)
		}
	}
}

// TestReport_FixedThread: an agent's reports into a fixed thread take the
// next thread_seq each and start no run.
func TestReport_FixedThread(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	thread := runtest.NewThread(t, env, "lotse", "Support/Bulletin", "report one")
	for i := 2; i <= 3; i++ {
		env.Post("lotse", thread, fmt.Sprintf("rep-%d", i), fmt.Sprintf("report %d", i))
	}
	rows, err := env.Pool.Query(t.Context(), `SELECT thread_seq FROM messages WHERE thread_id = $1 ORDER BY thread_seq`, thread)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(seqs) != "[1 2 3]" || env.Count(`SELECT count(*) FROM runs`) != 0 {
		t.Fatalf("seqs %v, runs %d", seqs, env.Count(`SELECT count(*) FROM runs`))
	}
}

// TestReport_HumanReplyTriggersNormally: a person's reply in an agent's
// report thread triggers the channel's operator as any message does; in a
// channel without operator it triggers nothing, and mentioning the agent
// there fails with agent_not_allowed_here.
func TestReport_HumanReplyTriggersNormally(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	bulletin := runtest.NewThread(t, env, "lotse", "Support/Bulletin", "weekly bulletin")
	env.Post("alex", bulletin, "q1", "thanks, one question")
	if n := env.Count(`SELECT count(*) FROM runs WHERE thread_id = $1 AND agent_id = $2`, bulletin, env.World.ID("lotse")); n != 1 {
		t.Fatalf("%d runs in the bulletin thread", n)
	}
	reports := runtest.NewThread(t, env, "lotse", "Support/Reports", "nightly numbers")
	if m := env.Post("alex", reports, "q2", "no operator here"); m.TriggerState != messaging.TriggerNone {
		t.Fatalf("trigger_state %v", m.TriggerState)
	}
	if m := env.Post("alex", reports, "q3", "@lotse explain"); m.TriggerState != messaging.TriggerFailed || m.TriggerReason != "agent_not_allowed_here" {
		t.Fatalf("guest mention in Reports: %v %v", m.TriggerState, m.TriggerReason)
	}
	if n := env.Count(`SELECT count(*) FROM runs WHERE thread_id = $1`, reports); n != 0 {
		t.Fatalf("%d runs in Reports", n)
	}
}

// capture records the run ids of posted messages (a test subscriber).
type capture struct {
	mu   sync.Mutex
	runs []string
}

func (c *capture) OnMessagePosted(_ context.Context, p *messaging.Posted) ([]events.Event, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs = append(c.runs, p.RunID)
	return nil, nil
}

// TestAnswer_RunIDActiveRun: an agent's answer naming its active run
// (running, waiting for input, or queued in another thread's main thread)
// is stored without run_id, hands the run to the subscribers, and leaves
// the run unchanged.
func TestAnswer_RunIDActiveRun(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	sub := &capture{}
	env.Messaging.Subscribe(sub)
	lotse := env.Principal("lotse")
	run := runtest.RunOf(t, env, env.Post("alex", env.Main("Support/Allgemein"), "one", "@lotse one"))
	thread := runtest.ReadRun(t, env, "lotse", run).ThreadID
	if _, err := env.Runs.Start(ctx, lotse, run, holder); err != nil {
		t.Fatal(err)
	}
	queued := runtest.RunOf(t, env, env.Post("alex", env.Main("Support/Eskalation"), "two", "@lotse queued elsewhere"))
	cases := []struct {
		thread, run string
		state       domain.RunState
	}{{thread, run, domain.RunRunning}, {thread, run, domain.RunWaitingInput}, {env.Main("Support/Eskalation"), queued, domain.RunQueued}}
	for i, c := range cases {
		if c.state == domain.RunWaitingInput {
			if _, err := env.Runs.AwaitInput(ctx, lotse, run, holder); err != nil {
				t.Fatal(err)
			}
		}
		before := runtest.ReadRun(t, env, "lotse", c.run)
		if before.State != c.state {
			t.Fatalf("run %s, want %s", before.State, c.state)
		}
		// The holder answers in its run; a queued run is held by nobody.
		h := holder
		if c.state == domain.RunQueued {
			h = ""
		}
		m, _, err := env.Messaging.Create(ctx, lotse, c.thread, messaging.Input{ClientMsgID: fmt.Sprintf("a%d", i), ContentMD: "an answer", RunID: c.run, Holder: h})
		if err != nil || m.RunID != "" {
			t.Fatalf("%s: %+v %v", c.state, m, err)
		}
		if after := runtest.ReadRun(t, env, "lotse", c.run); after.State != before.State || after.Version != before.Version {
			t.Fatalf("%s: the run changed: %+v -> %+v", c.state, before, after)
		}
	}
	sub.mu.Lock()
	seen := append([]string(nil), sub.runs...)
	sub.mu.Unlock()
	if len(seen) < 3 || fmt.Sprint(seen[len(seen)-3:]) != fmt.Sprint([]string{run, run, queued}) {
		t.Fatalf("subscriber saw %v", seen)
	}
	if n := env.Count(`SELECT count(*) FROM messages WHERE origin = 'agent' AND run_id IS NOT NULL AND kind <> 'run'`); n != 0 {
		t.Fatalf("run_id stored on %d answers", n)
	}
}
