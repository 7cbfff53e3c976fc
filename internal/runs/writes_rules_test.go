package runs_test

import (
	"reflect"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/devtools/runtest"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
)

// wantAuditCounts fails the test unless the audit rows of who are want,
// each row keyed action/reason with its count: each refusal is audited
// once per action and reason.
func wantAuditCounts(t *testing.T, env *moduletest.Env, who string, want map[string]int) {
	t.Helper()
	got := map[string]int{}
	for _, r := range env.AuditRows(who) {
		got[r.Action+"/"+r.Reason] = r.Count
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("audit rows %v, want %v", got, want)
	}
}

// TestAgentWrites_AgentWithoutWrite pins
// docs/design/replies.md#agents-write-with-their-own-rights for an agent
// without write: Lotse posting into Kampagnen or creating a thread in
// Ideas, which it cannot see, gets the not_found of an unknown id; given
// read on Marketing it gets forbidden level_insufficient; nothing is
// stored, and each refusal is audited once per action and reason. In an
// archived channel even the operator is read-only (channel_read_only
// channel_archived).
func TestAgentWrites_AgentWithoutWrite(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	lotse := env.Principal("lotse")
	post := func(thread string) error {
		_, _, err := env.Messaging.Create(ctx, lotse, thread, messaging.Input{ClientMsgID: "x", ContentMD: "hello marketing"})
		return err
	}
	create := func(channel string) error {
		_, _, _, err := env.Messaging.CreateThread(ctx, lotse, channel, messaging.ThreadInput{Title: "t", First: messaging.Input{ClientMsgID: "y", ContentMD: "report"}})
		return err
	}
	kampagnen, ideas, unknown := env.Main("Marketing/Kampagnen"), env.World.Channel("Marketing/Ideas").ID, ids.New()
	for what, pair := range map[string][2]error{"post": {post(kampagnen), post(unknown)}, "create": {create(ideas), create(unknown)}} {
		want := problem.From("runs.TestAgentWrites_AgentWithoutWrite", pair[1])
		if want == nil || want.Code != problem.NotFound {
			t.Fatalf("%s into an unknown id: %v", what, pair[1])
		}
		runtest.SameProblem(t, what+" without sight", pair[0], want)
	}
	if _, err := env.Admin.CreateGrant(ctx, env.Principal("robin"), admin.GrantInput{SubjectID: lotse.ID, SubjectKind: authz.SubjectPrincipal,
		TargetKind: authz.KindSpace, TargetID: env.World.Spaces["Marketing"], Level: authz.Read}); err != nil {
		t.Fatalf("grant: %v", err)
	}
	for what, err := range map[string]error{"post": post(kampagnen), "create": create(ideas)} {
		if p := problem.From("runs.TestAgentWrites_AgentWithoutWrite", err); p == nil || p.Code != problem.Forbidden || p.Reason != "level_insufficient" {
			t.Fatalf("%s with read only: %v", what, err)
		}
	}
	if n := env.Count(`SELECT count(*) FROM messages WHERE author_principal_id = $1`, lotse.ID); n != 0 {
		t.Fatalf("%d messages stored", n)
	}
	wantAuditCounts(t, env, "lotse", map[string]int{"message.create/no_grant": 1, "message.create/not_found": 1, "thread.create/no_grant": 1,
		"thread.create/not_found": 1, "message.create/level_insufficient": 1, "thread.create/level_insufficient": 1})
	if _, err := env.Admin.ArchiveChannel(ctx, env.Principal("robin"), env.World.Channel("Support/Allgemein").ID); err != nil {
		t.Fatalf("archive: %v", err)
	}
	err := post(env.Main("Support/Allgemein"))
	if p := problem.From("runs.TestAgentWrites_AgentWithoutWrite", err); p == nil || p.Code != problem.ChannelReadOnly || p.Reason != "channel_archived" {
		t.Fatalf("the operator in an archived channel: %v", err)
	}
}

// TestAgentWrites_GrantOrOperator pins
// docs/design/replies.md#agents-write-with-their-own-rights and the
// operator rule (docs/design/rights.md#operator-rule) on the messaging
// service: Lotse writes in Allgemein's main thread as its operator and
// opens a thread in Reports through its write grant; Texter answers its
// guest run while it holds its grant and gets not_found once it is
// revoked; once Eskalation's operator becomes Texter, Lotse's answer in
// Eskalation's main thread (which has no fixed operator) is not_found.
func TestAgentWrites_GrantOrOperator(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	robin := env.Principal("robin")
	lotse, texter := env.Principal("lotse"), env.Principal("texter")
	answerIn := func(who identity.Principal, thread, id, run string) error {
		_, _, err := env.Messaging.Create(ctx, who, thread, messaging.Input{ClientMsgID: id, ContentMD: "reply " + id, RunID: run, Holder: holder})
		return err
	}
	if err := answerIn(lotse, env.Main("Support/Allgemein"), "op", ""); err != nil {
		t.Fatalf("as operator: %v", err)
	}
	if _, _, _, err := env.Messaging.CreateThread(ctx, lotse, env.World.Channel("Support/Reports").ID,
		messaging.ThreadInput{Title: "through the grant", First: messaging.Input{ClientMsgID: "rep", ContentMD: "through the grant"}}); err != nil {
		t.Fatalf("through the grant: %v", err)
	}

	guest := runtest.AgentRunOf(t, env, env.Post("alex", env.Main("Support/Allgemein"), "go-guest", "@texter a guest question"), "texter")
	guestThread := runtest.StartAs(t, env, "texter", guest).ThreadID
	if err := answerIn(texter, guestThread, "g1", guest); err != nil {
		t.Fatalf("guest answer: %v", err)
	}
	if _, err := env.Admin.RevokeGrant(ctx, robin, runtest.ChannelGrant(t, env, "texter", "Support/Allgemein")); err != nil {
		t.Fatal(err)
	}
	if err := answerIn(texter, guestThread, "g2", guest); problem.CodeOf(err) != problem.NotFound {
		t.Fatalf("guest answer after the revocation: %v", err)
	}

	esk := env.Main("Support/Eskalation")
	run := runtest.RunOf(t, env, env.Post("alex", esk, "go-esk", "@lotse escalation"))
	runtest.StartAs(t, env, "lotse", run)
	if _, err := env.Admin.SetOperator(ctx, robin, env.World.Channel("Support/Eskalation").ID, chat.OperatorAgent, texter.ID); err != nil {
		t.Fatalf("operator: %v", err)
	}
	if err := answerIn(lotse, esk, "e1", run); problem.CodeOf(err) != problem.NotFound {
		t.Fatalf("the old operator in the main thread: %v", err)
	}
	if n := env.Count(`SELECT count(*) FROM messages WHERE client_msg_id IN ('g2', 'e1')`); n != 0 {
		t.Fatalf("%d refused answers stored", n)
	}
}

// checkReportThread fails the test unless th, the report thread agent
// created in channel ch, has title_source auto, is the agent's, has no
// fixed operator, and its first message is the agent's first of the
// thread and triggers nothing.
func checkReportThread(t *testing.T, agent, ch string, th chat.Thread, first messaging.Message) {
	t.Helper()
	if th.TitleSource != chat.TitleSource("auto") || th.CreatedBy != agent || th.OperatorAgentID != "" || th.ChannelID != ch {
		t.Fatalf("report thread %+v", th)
	}
	if first.Origin != "agent" || first.ThreadSeq != 1 || first.Author.ID != agent || first.TriggerState != messaging.TriggerNone {
		t.Fatalf("first message %+v", first)
	}
}

// eventLogTypes returns the types of every event in the event log in
// order: what a write emitted.
func eventLogTypes(t *testing.T, env *moduletest.Env) []string {
	t.Helper()
	var types []string
	rows, err := env.Pool.Query(t.Context(), `SELECT type FROM event_log ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		types = append(types, s)
	}
	return types
}

// TestAgentWrites_NewThreadPerReport pins
// docs/design/replies.md#announcements: an agent's report as a new thread
// in a forum it may write to is a thread with title_source auto, created
// by the agent, without a fixed operator, whose first message is the
// agent's (origin agent, thread_seq 1); it emits thread.created and
// message.created and nothing else, starts no run and no agent event; the
// same create again is a replay of the same thread.
func TestAgentWrites_NewThreadPerReport(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	lotse := env.Principal("lotse")
	ch := env.World.Channel("Support/Reports").ID
	in := messaging.ThreadInput{Title: "Nightly report", First: messaging.Input{ClientMsgID: "rep-1", ContentMD: "Nightly report\nAll systems nominal."}}
	th, first, replay, err := env.Messaging.CreateThread(ctx, lotse, ch, in)
	if err != nil || replay {
		t.Fatalf("report: %v (replay %v)", err, replay)
	}
	checkReportThread(t, lotse.ID, ch, th, first)
	if types := eventLogTypes(t, env); strings.Join(types, ",") != "thread.created,message.created" {
		t.Fatalf("events %v", types)
	}
	if env.Count(`SELECT count(*) FROM runs`) != 0 || env.Count(`SELECT count(*) FROM agent_events`) != 0 {
		t.Fatal("a report started a run")
	}
	again, _, replay, err := env.Messaging.CreateThread(ctx, lotse, ch, in)
	if err != nil || !replay || again.ID != th.ID {
		t.Fatalf("replay: %+v %v (replay %v)", again, err, replay)
	}
	if n := env.Count(`SELECT count(*) FROM threads WHERE channel_id = $1 AND created_by = $2`, ch, lotse.ID); n != 1 {
		t.Fatalf("%d report threads", n)
	}
}
