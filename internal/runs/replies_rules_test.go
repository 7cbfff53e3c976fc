package runs_test

import (
	"fmt"
	"reflect"
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/devtools/runtest"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs/domain"
)

// triggerWork counts what trigger work leaves behind: runs, invocations,
// threads, follow-ups.
type triggerWork struct{ runs, invocations, threads, followups int }

func countTriggerWork(env *moduletest.Env) triggerWork {
	return triggerWork{env.Count(`SELECT count(*) FROM runs`), env.Count(`SELECT count(*) FROM agent_events WHERE type = 'agent.invocation'`),
		env.Count(`SELECT count(*) FROM threads`), env.Count(`SELECT count(*) FROM run_followups`)}
}

// TestReplyRules_NothingAnAgentWritesTriggers pins
// docs/design/replies.md#nothing-an-agent-writes-triggers through the
// messaging service and its runs subscriber: messages of agents and apps,
// with or without mentions, in a free-response main thread with
// auto_thread and in a thread whose run is active, start no run, no
// follow-up, no thread, no invocation, get no trigger state, and leave the
// active run as it was.
func TestReplyRules_NothingAnAgentWritesTriggers(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	main := env.Main("Support/Allgemein")
	run := runtest.RunOf(t, env, env.Post("alex", main, "nt-task", "@lotse a task"))
	busy := runtest.ReadRun(t, env, "lotse", run).ThreadID
	runtest.StartAs(t, env, "lotse", run)
	before := countTriggerWork(env)
	cases := []struct{ name, who, thread, content string }{
		{"lotse without mention in a free channel", "lotse", main, "an update"},
		{"lotse mentioning itself", "lotse", main, "@lotse have a look"},
		{"lotse mentioning texter", "lotse", main, "@texter please help"},
		{"texter as guest mentioning lotse", "texter", main, "@lotse over to you"},
		{"lotse in its own running thread", "lotse", busy, "still working"},
		{"texter in lotse's busy thread", "texter", busy, "@texter me too"},
		{"feedbot mentioning lotse", "feedbot", main, "@lotse new feed item"},
		{"feedbot in lotse's busy thread", "feedbot", busy, "@lotse item"},
	}
	for i, c := range cases {
		m := env.Post(c.who, c.thread, fmt.Sprintf("nt-%d", i), c.content)
		wantOrigin := messaging.Origin("agent")
		if c.who == "feedbot" {
			wantOrigin = "app"
		}
		if m.Origin != wantOrigin || m.Author.ID != env.World.ID(c.who) || m.TriggerState != messaging.TriggerNone || m.TriggerReason != "" {
			t.Fatalf("%s: origin %s author %s trigger %q %q", c.name, m.Origin, m.Author.ID, m.TriggerState, m.TriggerReason)
		}
	}
	if after := countTriggerWork(env); after != before {
		t.Fatalf("agent and app messages did trigger work: before %+v after %+v", before, after)
	}
	if n := env.Count(`SELECT count(*) FROM messages WHERE origin <> 'human' AND trigger_state IS NOT NULL`); n != 0 {
		t.Fatalf("%d agent or app messages with a trigger state", n)
	}
	if r := runtest.ReadRun(t, env, "lotse", run); r.State != domain.RunRunning || r.Version != 2 {
		t.Fatalf("the active run changed: %+v", r)
	}
}

// TestReplyRules_RunMismatchAlike pins the ownership half of
// docs/design/replies.md#answer-check: an unknown run, a run of another
// thread, another agent's run of this thread, and a run named by a person
// all answer the one validation_failed with the single /run_id
// run_mismatch field and its fixed detail, identical in every field, and
// store nothing (no message, no thread position, no event); a run_id on a
// thread's first message is refused the same way.
func TestReplyRules_RunMismatchAlike(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	otherThread := runtest.RunOf(t, env, env.Post("alex", env.Main("Support/Eskalation"), "rm-else", "@lotse elsewhere"))
	guest := runtest.RunOf(t, env, env.Post("alex", env.Main("Support/Allgemein"), "rm-guest", "@texter guest"))
	thread := runtest.ReadRun(t, env, "texter", guest).ThreadID
	seq := env.Count(`SELECT last_seq FROM threads WHERE id = $1`, thread)
	evs := env.Count(`SELECT count(*) FROM event_log`)
	msgs := env.Count(`SELECT count(*) FROM messages`)
	want := &problem.Error{Code: problem.ValidationFailed, Fields: []problem.FieldError{{Pointer: "/run_id", Code: "run_mismatch", Detail: messaging.RunMismatchDetail}}}
	var first *problem.Error
	for i, c := range []struct{ name, who, run string }{
		{"unknown run", "lotse", ids.New()}, {"run of another thread", "lotse", otherThread},
		{"another agent's run", "lotse", guest}, {"a person names a run", "alex", guest},
	} {
		_, _, err := env.Messaging.Create(ctx, env.Principal(c.who), thread, messaging.Input{ClientMsgID: fmt.Sprintf("rm-%d", i), ContentMD: "mismatch", RunID: c.run})
		runtest.SameProblem(t, c.name, err, want)
		p := problem.From("runs.TestReplyRules_RunMismatchAlike", err)
		if first == nil {
			first = p
		} else if p.Code != first.Code || p.Reason != first.Reason || p.Detail != first.Detail || !reflect.DeepEqual(p.Fields, first.Fields) {
			t.Fatalf("%s: %#v differs from %#v", c.name, p, first)
		}
	}
	_, _, _, err := env.Messaging.CreateThread(ctx, env.Principal("lotse"), env.World.Channel("Support/Allgemein").ID,
		messaging.ThreadInput{Title: "with a run", First: messaging.Input{ClientMsgID: "rm-first", ContentMD: "first", RunID: guest}})
	runtest.SameProblem(t, "run_id on a first message", err, &problem.Error{Code: problem.ValidationFailed,
		Fields: []problem.FieldError{{Pointer: "/first_message/run_id", Code: "run_mismatch", Detail: messaging.RunMismatchDetail}}})
	if env.Count(`SELECT last_seq FROM threads WHERE id = $1`, thread) != seq || env.Count(`SELECT count(*) FROM event_log`) != evs || env.Count(`SELECT count(*) FROM messages`) != msgs {
		t.Fatal("a refused answer stored something")
	}
}

// TestReplyRules_CannotForgeKind pins that a client can never send a
// system or run message (docs/design/replies.md#agents-write-with-their-own-rights):
// an agent's create with kind system or run is validation_failed
// (/kind invalid_enum) and stores nothing; what it may send is stored
// with origin agent and the agent as author.
func TestReplyRules_CannotForgeKind(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	lotse := env.Principal("lotse")
	main := env.Main("Support/Allgemein")
	for _, kind := range []messaging.Kind{"system", "run"} {
		_, _, err := env.Messaging.Create(ctx, lotse, main, messaging.Input{ClientMsgID: "fk-" + string(kind), ContentMD: "forged", Kind: kind})
		runtest.SameProblem(t, "kind "+string(kind), err, &problem.Error{Code: problem.ValidationFailed, Fields: []problem.FieldError{{Pointer: "/kind", Code: "invalid_enum"}}})
	}
	if n := env.Count(`SELECT count(*) FROM messages`); n != 0 {
		t.Fatalf("%d messages stored", n)
	}
	m := env.Post("lotse", main, "fk-ok", "an ordinary update")
	if m.Origin != "agent" || m.Author.ID != lotse.ID || m.Kind != messaging.KindText || m.SystemCode != "" {
		t.Fatalf("stored as %+v", m)
	}
}

// checkReplaysAfterEnd repeats the answer in into thread as lotse by
// every holder (its own, another, none) after its run ended, and fails the
// test unless each is a replay of first and none stored or published
// anything.
func checkReplaysAfterEnd(t *testing.T, env *moduletest.Env, thread string, in messaging.Input, first messaging.Message) {
	t.Helper()
	evs, msgs := env.Count(`SELECT count(*) FROM event_log`), env.Count(`SELECT count(*) FROM messages`)
	for _, h := range []string{holder, "another-process", ""} {
		in.Holder = h
		again, replay, err := env.Messaging.Create(t.Context(), env.Principal("lotse"), thread, in)
		if err != nil || !replay || again.ID != first.ID || again.ContentMD != first.ContentMD || again.ThreadSeq != first.ThreadSeq {
			t.Fatalf("replay by %q: %+v %v %v", h, again, replay, err)
		}
	}
	if env.Count(`SELECT count(*) FROM event_log`) != evs || env.Count(`SELECT count(*) FROM messages`) != msgs {
		t.Fatal("a replay stored or published something")
	}
}

// TestReplyRules_ReplayAfterEnd pins
// docs/design/replies.md#answers-survive-lost-connections: the identical
// answer naming a run, repeated after the run completed, is answered as a
// replay of the stored message (same id, no new message, no event),
// whoever holds the run; the same client_msg_id with other content is a
// conflict; a new answer naming the ended run is refused run_not_active
// (docs/design/replies.md#answer-check) and the run is recorded with its
// one answer.
func TestReplyRules_ReplayAfterEnd(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	lotse := env.Principal("lotse")
	esk := env.Main("Support/Eskalation")
	run := runtest.RunOf(t, env, env.Post("alex", esk, "ra-ask", "@lotse please"))
	runtest.StartAs(t, env, "lotse", run)
	in := messaging.Input{ClientMsgID: "ra-ans", ContentMD: "the answer", RunID: run, Holder: holder}
	first, replay, err := env.Messaging.Create(ctx, lotse, esk, in)
	if err != nil || replay {
		t.Fatalf("the answer: %v (replay %v)", err, replay)
	}
	runtest.FinishAs(t, env, "lotse", run, domain.RunCompleted)
	checkReplaysAfterEnd(t, env, esk, in, first)
	_, _, err = env.Messaging.Create(ctx, lotse, esk, messaging.Input{ClientMsgID: "ra-ans", ContentMD: "another answer", RunID: run})
	if problem.CodeOf(err) != problem.Conflict {
		t.Fatalf("same key, other content: %v", err)
	}
	_, _, err = env.Messaging.Create(ctx, lotse, esk, messaging.Input{ClientMsgID: "ra-late", ContentMD: "late", RunID: run})
	if p := problem.From("runs.TestReplyRules_ReplayAfterEnd", err); p == nil || p.Code != problem.Conflict || p.Reason != "run_not_active" {
		t.Fatalf("a new answer after the end: %v", err)
	}
	answers, err := env.Runs.Answers(ctx, []string{run})
	if err != nil || len(answers[run]) != 1 || answers[run][0].MessageID != first.ID || answers[run][0].ClientMsgID != "ra-ans" {
		t.Fatalf("the run's answers %+v %v", answers[run], err)
	}
}
