package runcontext_test

import (
	"maps"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/devtools/runtest"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/runs"
	"bothy.example.com/bothy/internal/runs/domain"
)

// contents returns the contents of es in order.
func contents(es []runs.FinishedElement) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ContentMD
	}
	return out
}

// TestContextCases_GuestRun pins the plan of a guest run
// (docs/design/trust.md#context-plan): a person mentions Texter in a main
// thread where it may answer as a guest; the run has session mode guest
// and no session, its context starts at the thread's beginning (floor 0),
// holds the main thread before the trigger as channel context, and the
// trigger is trigger/user.
func TestContextCases_GuestRun(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	main := env.Main("Support/Allgemein")
	env.Post("writer", main, "gr-before", "before the guest")
	run := runtest.AgentRunOf(t, env, env.Post("alex", main, "gr-trigger", "@texter as a guest"), "texter")
	if r := runtest.ReadRun(t, env, "texter", run); r.SessionMode != domain.ModeGuest || r.SessionID != "" {
		t.Fatalf("not a guest run: mode %s session %q", r.SessionMode, r.SessionID)
	}
	c := mustContext(t, env, "texter", run)
	if c.RC.ContextFloorSeq != 0 || len(c.Thread) != 0 || len(c.Channel) != 1 || c.Channel[0].ContentMD != "before the guest" {
		t.Fatalf("guest context: floor %d thread %+v channel %+v", c.RC.ContextFloorSeq, c.Thread, c.Channel)
	}
	if c.Trigger.Trust != domain.TrustTrigger || c.Trigger.Role != domain.RoleUser || c.Trigger.ContentMD != "@texter as a guest" {
		t.Fatalf("guest trigger %+v", c.Trigger)
	}
}

// checkAutoThreadFacts fails the test unless every element of c, the
// first run's context of TestContextCases_AutoThreadAndFacts, names
// channel, its author, origin and kind, and has a role and a trust marker.
func checkAutoThreadFacts(t *testing.T, env *moduletest.Env, c modCtx, channel string) {
	t.Helper()
	authors := map[string]string{"writer in the main thread": "writer", "writer replies": "writer", "a feed item": "feedbot", "@lotse please look": "alex"}
	origins := map[string]messaging.Origin{"writer": "human", "feedbot": "app", "alex": "human"}
	for _, e := range c.all() {
		who := authors[e.ContentMD]
		if e.ChannelID != channel || e.AuthorID != env.World.ID(who) || e.Origin != origins[who] || e.Kind != messaging.Kind("text") || e.Role == "" || e.Trust == "" {
			t.Errorf("element %q lacks its facts: %+v", e.ContentMD, e)
		}
	}
}

// TestContextCases_AutoThreadAndFacts pins the first and the next run of
// an auto thread (docs/design/trust.md#context-plan) and the facts of
// every element (docs/design/trust.md#run-context): the first run's
// context is its trigger with no thread context and the main thread
// before it as channel context; every element names the channel, its
// author, origin and kind, and a reply names the message it replies to
// (one that replies to nothing names none). The next run resumes the
// session: no channel context, and the thread context without the
// agent's own reply.
func TestContextCases_AutoThreadAndFacts(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	main := env.Main("Support/Allgemein")
	channel := env.World.Channel("Support/Allgemein").ID
	w := env.Post("writer", main, "at-w", "writer in the main thread")
	if _, _, err := env.Messaging.Create(ctx, env.Principal("writer"), main, messaging.Input{ClientMsgID: "at-reply", ContentMD: "writer replies", ReplyToMessageID: w.ID}); err != nil {
		t.Fatalf("reply: %v", err)
	}
	env.Post("feedbot", main, "at-feed", "a feed item")
	m := env.Post("alex", main, "at-trigger", "@lotse please look")
	run1 := runtest.RunOf(t, env, m)
	c := mustContext(t, env, "lotse", run1)
	if c.Trigger.ID != m.ID || len(c.Thread) != 0 || strings.Join(contents(c.Channel), "|") != "writer in the main thread|writer replies|a feed item" {
		t.Fatalf("first run: trigger %s thread %+v channel %+v", c.Trigger.ID, c.Thread, contents(c.Channel))
	}
	checkAutoThreadFacts(t, env, c, channel)
	if r := c.byContent(t, "writer replies"); r.ReplyToMessageID != w.ID {
		t.Fatalf("reply_to %q, want %s", r.ReplyToMessageID, w.ID)
	}
	if r := c.byContent(t, "writer in the main"); r.ReplyToMessageID != "" {
		t.Fatalf("a message that replies to nothing has reply_to %q", r.ReplyToMessageID)
	}

	thread := runtest.StartAs(t, env, "lotse", run1).ThreadID
	env.Post("lotse", thread, "at-own", "lotse replies in the new thread")
	runtest.FinishAs(t, env, "lotse", run1, domain.RunCompleted)
	env.Post("writer", thread, "at-detail", "writer adds detail")
	run2 := runtest.RunOf(t, env, env.Post("alex", thread, "at-again", "and now?"))
	if mode := runtest.ReadRun(t, env, "lotse", run2).SessionMode; mode != domain.ModeResume {
		t.Fatalf("second run %s", mode)
	}
	c = mustContext(t, env, "lotse", run2)
	if c.RC.ContextFloorSeq != 0 || c.Channel != nil || strings.Join(contents(c.Thread), "|") != "writer adds detail" {
		t.Fatalf("second run: floor %d channel %+v thread %v", c.RC.ContextFloorSeq, c.Channel, contents(c.Thread))
	}
}

// TestContextCases_MovedAndDeletedTrigger pins that a thread moved out of
// its channel has no channel context any more
// (docs/design/trust.md#context-plan): after the move into Eskalation, the
// run's context holds nothing of the source channel and every element
// names Eskalation. A trigger deleted after the run was accepted stays the
// context's trigger, as a tombstone without content.
func TestContextCases_MovedAndDeletedTrigger(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	alex := env.Principal("alex")
	main := env.Main("Support/Allgemein")
	env.Post("writer", main, "mv-secret", "secret of Allgemein")
	parent := env.Post("writer", main, "mv-parent", "the parent")
	th, _, _, err := env.Messaging.CreateThread(ctx, alex, env.World.Channel("Support/Allgemein").ID,
		messaging.ThreadInput{Title: "moving", ParentMessageID: parent.ID, First: messaging.Input{ClientMsgID: "mv-first", ContentMD: "moving thread"}})
	if err != nil {
		t.Fatalf("thread: %v", err)
	}
	// The first message of a thread with an operator triggers: cancelled.
	if _, err := env.Runs.Cancel(ctx, alex, runtest.ActiveRunIn(t, env, th.ID), ""); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if _, err := env.Modules.ChatUseCases.Move(ctx, alex, th.ID, env.World.Channel("Support/Eskalation").ID); err != nil {
		t.Fatalf("move: %v", err)
	}
	trig := env.Post("alex", th.ID, "mv-trigger", "@lotse in Eskalation now")
	run := runtest.RunOf(t, env, trig)
	c := mustContext(t, env, "lotse", run)
	if c.Channel != nil {
		t.Fatalf("channel context after a move: %+v", c.Channel)
	}
	for _, e := range append(c.all(), c.FollowUps...) {
		if e.ChannelID != env.World.Channel("Support/Eskalation").ID || strings.Contains(e.ContentMD, "secret") || e.ContentMD == "the parent" {
			t.Fatalf("element of the source channel: %+v", e)
		}
	}
	if strings.Join(contents(c.Thread), "|") != "moving thread" {
		t.Fatalf("thread context %v", contents(c.Thread))
	}

	if _, err := env.Messaging.Delete(ctx, alex, trig.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	c = mustContext(t, env, "lotse", run)
	if c.Trigger.ID != trig.ID || c.Trigger.ContentMD != "" || c.Trigger.Trust != domain.TrustTrigger {
		t.Fatalf("deleted trigger %+v", c.Trigger)
	}
}

// TestContextCases_MainThreadUnreadable pins that the channel context is
// decided before the main thread is read
// (docs/design/trust.md#context-plan): the fixed operator of an auto
// thread whose channel no longer has it as operator may not read the main
// thread, so its run gets no channel context and the main-thread window is
// never read for it (no filter_mismatch is counted).
func TestContextCases_MainThreadUnreadable(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	main := env.Main("Support/Allgemein")
	env.Post("writer", main, "mu-talk", "main-thread talk lotse may not read")
	m := env.Post("alex", main, "mu-trigger", "@lotse please look")
	first := runtest.RunOf(t, env, m)
	thread := runtest.ReadRun(t, env, "lotse", first).ThreadID
	if _, err := env.Runs.Cancel(ctx, env.Principal("alex"), first, ""); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if _, err := env.Admin.SetOperator(ctx, env.Principal("robin"), env.World.Channel("Support/Allgemein").ID, chat.OperatorNone, ""); err != nil {
		t.Fatalf("operator: %v", err)
	}
	run := runtest.RunOf(t, env, env.Post("alex", thread, "mu-again", "@lotse and in the thread"))
	before := env.Metric(`bothy_authz_errors_total{reason="filter_mismatch"}`)
	c := mustContext(t, env, "lotse", run)
	if len(c.Channel) != 0 {
		t.Fatalf("channel context from a main thread the agent cannot read: %+v", c.Channel)
	}
	if after := env.Metric(`bothy_authz_errors_total{reason="filter_mismatch"}`); after != before {
		t.Fatalf("filter_mismatch went from %v to %v: the window was read before the decision", before, after)
	}
}

// TestContextCases_TrustSummaryLowest pins the trust summary when no
// element is unverified (docs/design/trust.md#trust-summary): a thread
// opened by Sam (trigger on the channel) and Alex's trigger sum up to
// lowest authorized with one authorized and one trigger; a fresh thread
// whose first message is the trigger sums up to lowest trigger, one
// element.
func TestContextCases_TrustSummaryLowest(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	env.SetStatus("lotse", identity.StatusDisabled)
	thread := runtest.NewThread(t, env, "sam", "Support/Allgemein", "sam opens the thread")
	env.SetStatus("lotse", identity.StatusActive)
	run := runtest.RunOf(t, env, env.Post("alex", thread, "ts-alex", "@lotse what does sam mean?"))
	sum, counts := mustContext(t, env, "lotse", run).summary()
	if want := map[domain.Trust]int{domain.TrustAuthorized: 1, domain.TrustTrigger: 1}; sum.Lowest != domain.TrustAuthorized || !maps.Equal(counts, want) {
		t.Fatalf("sam and alex: lowest %s counts %v", sum.Lowest, counts)
	}
	fresh := runtest.ActiveRunIn(t, env, runtest.NewThread(t, env, "alex", "Support/Allgemein", "@lotse a fresh question"))
	sum, counts = mustContext(t, env, "lotse", fresh).summary()
	if want := map[domain.Trust]int{domain.TrustTrigger: 1}; sum.Lowest != domain.TrustTrigger || !maps.Equal(counts, want) {
		t.Fatalf("the trigger alone: lowest %s counts %v", sum.Lowest, counts)
	}
}
