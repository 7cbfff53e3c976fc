package runs_test

import (
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// gqlRun is a Run as the GraphQL face returns it.
type gqlRun struct {
	ID                  string  `json:"id"`
	ThreadID            string  `json:"threadId"`
	State               string  `json:"state"`
	Version             int     `json:"version"`
	TriggerKind         string  `json:"triggerKind"`
	TriggeringMessageID *string `json:"triggeringMessageId"`
	CancelRequested     *bool   `json:"cancelRequested"`
	EndReason           *string `json:"endReason"`
	Session             struct {
		ID   *string `json:"id"`
		Mode string  `json:"mode"`
	} `json:"session"`
	Agent struct {
		Handle string `json:"handle"`
	} `json:"agent"`
	TriggeredBy *struct {
		Handle string `json:"handle"`
	} `json:"triggeredBy"`
}

const runSel = `id threadId state version triggerKind triggeringMessageId cancelRequested endReason session { id mode } agent { handle } triggeredBy { handle }`

// runOp runs a run mutation (startRun, awaitRunInput, cancelRun) as who.
func runOp(t *testing.T, env *apitest.Env, who, op, id string) (gqlRun, []apitest.GQLError) {
	t.Helper()
	var out map[string]gqlRun
	res := env.GraphQL(env.World.Token(who), fmt.Sprintf(`mutation($id: ID!) { %s(id: $id) { %s } }`, op, runSel), map[string]any{"id": id}, &out)
	return out[op], res.Errors
}

func finish(t *testing.T, env *apitest.Env, who, id, outcome string) (gqlRun, []apitest.GQLError) {
	t.Helper()
	run, errs, err := finishDo(env, who, id, outcome)
	if err != nil {
		t.Fatal(err)
	}
	return run, errs
}

// finishDo is finish for a goroutine other than the test's: a request that
// fails is returned, never a Fatal.
func finishDo(env *apitest.Env, who, id, outcome string) (gqlRun, []apitest.GQLError, error) {
	var out struct {
		FinishRun gqlRun `json:"finishRun"`
	}
	res, err := env.GraphQLDo(env.World.Token(who), `mutation($id: ID!, $o: RunOutcome!) { finishRun(id: $id, input: {outcome: $o}) { `+runSel+` } }`,
		map[string]any{"id": id, "o": outcome}, &out)
	if err != nil {
		return gqlRun{}, nil, err
	}
	return out.FinishRun, res.Errors, nil
}

func mustRunOp(t *testing.T, env *apitest.Env, who, op, id string) gqlRun {
	t.Helper()
	r, errs := runOp(t, env, who, op, id)
	if len(errs) > 0 {
		t.Fatalf("%s as %s: %+v", op, who, errs)
	}
	return r
}

func getRun(t *testing.T, env *apitest.Env, who, id string) gqlRun {
	t.Helper()
	var out struct {
		Run gqlRun `json:"run"`
	}
	res := env.GraphQL(env.World.Token(who), `query($id: ID!) { run(id: $id) { `+runSel+` } }`, map[string]any{"id": id}, &out)
	if len(res.Errors) > 0 {
		t.Fatalf("run as %s: %+v", who, res.Errors)
	}
	return out.Run
}

// TestAgentLoop walks the whole loop as an adapter does it.
func TestAgentLoop(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	m := env.MustPost("alex", env.Main("Support/Allgemein"), "q1", "@lotse the printer on floor 2 is broken")
	if m["trigger_state"] != "accepted" {
		t.Fatalf("trigger_state %v", m["trigger_state"])
	}
	runID, thread, cursor := checkInvocation(t, env, m)
	checkQueuedRun(t, env, m, runID, thread)

	if r := mustRunOp(t, env, "lotse", "startRun", runID); r.State != "RUNNING" || r.Version != 2 {
		t.Fatalf("started %+v", r)
	}
	if r := mustRunOp(t, env, "lotse", "awaitRunInput", runID); r.State != "WAITING_INPUT" || r.Version != 3 {
		t.Fatalf("waiting %+v", r)
	}
	checkFollowUpOfWaitingRun(t, env, runID, thread, cursor)
	done, errs := finish(t, env, "lotse", runID, "COMPLETED")
	if len(errs) > 0 || done.State != "COMPLETED" || done.Version != 5 {
		t.Fatalf("finish %+v %+v", done, errs)
	}
	if s := env.Count(`SELECT count(*) FROM run_followups WHERE state = 'absorbed'`); s != 1 {
		t.Fatalf("follow-up not absorbed")
	}
	// run.state_changed events: queued, running, waiting, running, completed.
	if n := env.Count(`SELECT count(*) FROM event_log WHERE type = 'run.state_changed'`); n != 5 {
		t.Fatalf("%d run.state_changed events", n)
	}
	checkEndedRunRefusals(t, env, runID)
}

// checkFollowUpOfWaitingRun has alex follow up in thread while run runID
// waits for input and fails the test unless the message is a follow-up
// that takes the run back to running, is pending, reaches lotse's stream
// after cursor as agent.followup, and is delivered by the ack, not by the
// poll that hands it out.
func checkFollowUpOfWaitingRun(t *testing.T, env *apitest.Env, runID, thread, cursor string) {
	t.Helper()
	f := env.MustPost("alex", thread, "q2", "It is the one near the kitchen")
	if f["trigger_state"] != "followup" {
		t.Fatalf("follow-up trigger_state %v", f["trigger_state"])
	}
	if r := getRun(t, env, "lotse", runID); r.State != "RUNNING" || r.Version != 4 {
		t.Fatalf("after follow-up %+v", r)
	}
	if s := env.Count(`SELECT count(*) FROM run_followups WHERE state = 'pending'`); s != 1 {
		t.Fatalf("%d pending follow-ups", s)
	}
	evs, _ := env.Poll(t, "lotse", cursor, 0)
	if len(evs) != 1 || evs[0].Type != "agent.followup" || evs[0].Payload["message_id"] != f["id"] || evs[0].Payload["run_id"] != runID {
		t.Fatalf("follow-up events %+v", evs)
	}
	// Handing out delivers nothing; the acknowledgement does.
	if s := env.Count(`SELECT count(*) FROM run_followups WHERE state = 'pending' AND delivered_at IS NULL`); s != 1 {
		t.Fatalf("follow-up delivered by a poll")
	}
	ack(t, env, "lotse", evs[0].Seq)
	if s := env.Count(`SELECT count(*) FROM run_followups WHERE state = 'delivered' AND delivered_at IS NOT NULL`); s != 1 {
		t.Fatalf("follow-up not delivered by the ack")
	}
}

// checkInvocation polls Lotse's first event, the invocation of the run
// message m triggered, and checks its payload: its members (content must
// not travel), the message, channel and new thread, and a new session. It
// returns the run, its thread and the stream's cursor after it.
func checkInvocation(t *testing.T, env *apitest.Env, m map[string]any) (runID, thread, cursor string) {
	t.Helper()
	evs, cursor := env.Poll(t, "lotse", "", 0)
	if len(evs) != 1 || evs[0].Type != "agent.invocation" {
		t.Fatalf("events %+v", evs)
	}
	inv := evs[0].Payload
	keys := []string{}
	for k := range inv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if fmt.Sprint(keys) != "[attempt channel_id message_id run_id session thread_id]" || inv["attempt"] != float64(1) {
		t.Fatalf("invocation payload members %v (content must not travel)", keys)
	}
	if inv["message_id"] != m["id"] || inv["channel_id"] != env.World.Channel("Support/Allgemein").ID || inv["thread_id"] == env.Main("Support/Allgemein") {
		t.Fatalf("invocation %v", inv)
	}
	if s := inv["session"].(map[string]any); s["mode"] != "new" || s["id"] == nil {
		t.Fatalf("session %v", s)
	}
	return inv["run_id"].(string), inv["thread_id"].(string), cursor
}

// checkQueuedRun checks the queued run runID and its auto thread: parent
// m, fixed operator Lotse, title from m, the run's anchor inside.
func checkQueuedRun(t *testing.T, env *apitest.Env, m map[string]any, runID, thread string) {
	t.Helper()
	run := getRun(t, env, "lotse", runID)
	if run.State != "QUEUED" || run.Version != 1 || run.TriggeredBy.Handle != "alex" || run.Agent.Handle != "lotse" || run.ThreadID != thread {
		t.Fatalf("queued run %+v", run)
	}
	// The auto thread: parent M, fixed operator Lotse, title from M, anchor inside.
	var th map[string]any
	env.REST(http.MethodGet, "/api/v1/threads/"+thread, env.World.Token("alex"), nil).JSON(t, &th)
	if th["parent_message_id"] != m["id"] || th["operator_agent_id"] != env.World.ID("lotse") || th["title_source"] != "auto" || th["title"] != "@lotse the printer on floor 2 is broken" {
		t.Fatalf("auto thread %v", th)
	}
	var page struct{ Messages []map[string]any }
	env.REST(http.MethodGet, "/api/v1/threads/"+thread+"/messages", env.World.Token("alex"), nil).JSON(t, &page)
	if len(page.Messages) != 1 || page.Messages[0]["kind"] != "run" || page.Messages[0]["run_id"] != runID || page.Messages[0]["origin"] != "agent" {
		t.Fatalf("anchor %v", page.Messages)
	}
}

// checkEndedRunRefusals checks that the ended run runID refuses further
// changes, that only its agent may drive a run, and that persons cannot
// poll agent streams.
func checkEndedRunRefusals(t *testing.T, env *apitest.Env, runID string) {
	t.Helper()
	// An ended run refuses further changes.
	if _, errs := runOp(t, env, "lotse", "startRun", runID); len(errs) != 1 || errs[0].Extensions.Code != "conflict" || errs[0].Extensions.Reason != "run_not_active" {
		t.Fatalf("start after end: %+v", errs)
	}
	// Agent-self: others may not drive the run.
	if _, errs := runOp(t, env, "alex", "startRun", runID); len(errs) != 1 || errs[0].Extensions.Reason != "subject_kind_not_allowed" {
		t.Fatalf("person starts: %+v", errs)
	}
	if _, errs := runOp(t, env, "texter", "startRun", runID); len(errs) != 1 || errs[0].Extensions.Reason != "not_self" {
		t.Fatalf("other agent starts: %+v", errs)
	}
	// Persons cannot poll agent streams.
	res := env.GraphQL(env.World.Token("alex"), `{ agentEvents { nextAfter } }`, nil, nil)
	if len(res.Errors) != 1 || res.Errors[0].Extensions.Reason != "subject_kind_not_allowed" {
		t.Fatalf("person polls: %+v", res.Errors)
	}
}

func TestAG01_AgentAndAppMessagesDoNoTriggerWork(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	main := env.Main("Support/Allgemein")
	// A thread with an active run of Lotse.
	env.MustPost("alex", main, "q", "@lotse help")
	evs, _ := env.Poll(t, "lotse", "", 0)
	runID := evs[0].Payload["run_id"].(string)
	thread := evs[0].Payload["thread_id"].(string)
	mustRunOp(t, env, "lotse", "startRun", runID)
	runsBefore := env.Count(`SELECT count(*) FROM runs`)
	eventsBefore := env.Count(`SELECT count(*) FROM agent_events`)
	threadsBefore := env.Count(`SELECT count(*) FROM threads`)
	cases := []struct{ who, thread, content string }{
		{"lotse", main, "no mention in a free channel"},
		{"lotse", main, "@lotse talking to myself"},
		{"lotse", main, "@texter please take over"},
		{"texter", main, "@lotse over to you"},
		{"feedbot", main, "@lotse new feed item"},
		{"feedbot", main, "feed item without mention"},
		{"lotse", thread, "@lotse a follow-up from myself"},
		{"texter", thread, "@texter guest in a busy thread"},
		{"feedbot", thread, "@lotse app in a busy thread"},
	}
	for i, c := range cases {
		got := env.MustPost(c.who, c.thread, fmt.Sprintf("ag01-%d", i), c.content)
		if _, has := got["trigger_state"]; has {
			t.Fatalf("%s wrote %q with trigger_state %v", c.who, c.content, got["trigger_state"])
		}
	}
	if n := env.Count(`SELECT count(*) FROM runs`); n != runsBefore {
		t.Fatalf("%d new runs", n-runsBefore)
	}
	if n := env.Count(`SELECT count(*) FROM agent_events`); n != eventsBefore {
		t.Fatalf("%d new agent events", n-eventsBefore)
	}
	if n := env.Count(`SELECT count(*) FROM threads`); n != threadsBefore {
		t.Fatalf("%d new threads", n-threadsBefore)
	}
	if n := env.Count(`SELECT count(*) FROM run_followups`); n != 0 {
		t.Fatalf("%d follow-ups", n)
	}
	if n := env.Count(`SELECT count(*) FROM messages WHERE origin <> 'human' AND trigger_state IS NOT NULL`); n != 0 {
		t.Fatalf("%d non-human messages with trigger_state", n)
	}
	if r := getRun(t, env, "lotse", runID); r.State != "RUNNING" || r.Version != 2 {
		t.Fatalf("active run changed: %+v", r)
	}
}

func TestTriggerOutcomesOverHTTP(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	main := env.Main("Support/Allgemein")
	cases := []struct {
		who, content, state, reason string
	}{
		{"writer", "@lotse can you help?", "failed", "trigger_not_allowed"},
		{"alex", "@texter as a guest please", "accepted", ""},
		{"sam", "no mention, free response", "accepted", ""},
	}
	for i, c := range cases {
		m := env.MustPost(c.who, main, fmt.Sprintf("t%d", i), c.content)
		if m["trigger_state"] != c.state || (c.reason != "" && m["trigger_reason"] != c.reason) {
			t.Fatalf("%s %q: %v %v", c.who, c.content, m["trigger_state"], m["trigger_reason"])
		}
	}
	// Eskalation: no free response and auto_thread off; a mention runs in
	// the main thread itself.
	esk := env.Main("Support/Eskalation")
	if m := env.MustPost("alex", esk, "e1", "nobody addressed"); m["trigger_state"] != nil {
		t.Fatalf("no addressee: %v", m["trigger_state"])
	}
	env.MustPost("alex", esk, "e2", "@lotse look at this")
	if n := env.Count(`SELECT count(*) FROM runs WHERE thread_id = $1`, esk); n != 1 {
		t.Fatalf("run not in the main thread of Eskalation: %d", n)
	}
	// A guest mention in Eskalation (no allow_mentioned_agents): the guest
	// check comes before the active run of Lotse there.
	if m := env.MustPost("alex", esk, "e3", "@texter hi"); m["trigger_reason"] != "agent_not_allowed_here" {
		t.Fatalf("guest in Eskalation: %v", m["trigger_reason"])
	}
	// The guest run has no session.
	var guestRun string
	env.Pool.QueryRow(t.Context(), `SELECT session_mode FROM runs WHERE agent_id = $1`, env.World.ID("texter")).Scan(&guestRun)
	if guestRun != "guest" {
		t.Fatalf("texter's run mode %q", guestRun)
	}
}

// TestCancelRunOnTheWire: cancelRun over GraphQL answers not_found to
// somebody who cannot see the run, the cancelled queued run, and for a
// running run its cancelRequested flag; finishRun confirms. The cancel
// rules are TestCancelRun in internal/runs.
func TestCancelRunOnTheWire(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	esk := env.Main("Support/Eskalation")
	s := newStream(t, env, "lotse")
	env.MustPost("alex", esk, "c1", "@lotse first")
	first := s.nextRun()
	if _, errs := runOp(t, env, "writer", "cancelRun", first); len(errs) != 1 || errs[0].Extensions.Code != "not_found" {
		t.Fatalf("writer cancels: %+v", errs)
	}
	if r := mustRunOp(t, env, "alex", "cancelRun", first); r.State != "CANCELLED" || r.Version != 2 {
		t.Fatalf("queued cancel %+v", r)
	}
	env.MustPost("alex", esk, "c2", "@lotse second")
	second := s.nextRun()
	mustRunOp(t, env, "lotse", "startRun", second)
	if r := mustRunOp(t, env, "alex", "cancelRun", second); r.State != "RUNNING" || r.CancelRequested == nil || !*r.CancelRequested {
		t.Fatalf("running cancel %+v", r)
	}
	if done, errs := finish(t, env, "lotse", second, "CANCELLED"); len(errs) > 0 || done.State != "CANCELLED" {
		t.Fatalf("confirm %+v %+v", done, errs)
	}
}

// TestSessionRoutesOnTheWire: the REST session routes answer reset and
// bind (started, external_ref), refuse a person without trigger with 403,
// and the run after a bind shows mode BIND with the bound session on
// GraphQL. The session mode rules are TestSessionModes in internal/runs.
func TestSessionRoutesOnTheWire(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	esk := env.Main("Support/Eskalation")
	reset := env.REST(http.MethodPost, "/api/v1/threads/"+esk+"/agent-session/reset", env.World.Token("alex"), nil)
	if reset.Status != 200 {
		t.Fatalf("reset %d %s", reset.Status, reset.Body)
	}
	bind := env.REST(http.MethodPost, "/api/v1/threads/"+esk+"/agent-session/bind", env.World.Token("alex"), map[string]any{"external_ref": "conv-42"})
	var b map[string]any
	bind.JSON(t, &b)
	if bind.Status != 200 || b["started"] != true || b["external_ref"] != "conv-42" {
		t.Fatalf("bind %d %v", bind.Status, b)
	}
	s := newStream(t, env, "lotse")
	env.MustPost("alex", esk, "four", "@lotse four")
	if r := getRun(t, env, "lotse", s.nextRun()); r.Session.Mode != "BIND" || *r.Session.ID != b["id"] {
		t.Fatalf("after bind %+v", r.Session)
	}
	if r := env.REST(http.MethodPost, "/api/v1/threads/"+env.Main("Support/Allgemein")+"/agent-session/reset", env.World.Token("writer"), nil); r.Status != 403 {
		t.Fatalf("writer resets: %d", r.Status)
	}
}

func TestLongPollAcrossServers(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	peer := env.Peer()
	_, cursor := env.Poll(t, "lotse", "", 0)
	type result struct {
		evs []apitest.AgentEvent
		d   time.Duration
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		evs, _, err := env.PollDo("lotse", cursor, 20)
		if err != nil {
			t.Error(err)
		}
		done <- result{evs, time.Since(start)}
	}()
	env.AwaitPolls(t, 1)
	peer.MustPost("alex", peer.Main("Support/Eskalation"), "x", "@lotse through the other replica")
	res := <-done
	if len(res.evs) != 1 || res.evs[0].Type != "agent.invocation" {
		t.Fatalf("poll got %+v", res.evs)
	}
	// The wait was 20 s: an answer well before it came from the notification.
	if res.d > 10*time.Second {
		t.Fatalf("the poll was not woken (%s)", res.d)
	}
	empty, next := env.Poll(t, "lotse", res.evs[0].Seq, 1)
	if len(empty) != 0 || next != res.evs[0].Seq {
		t.Fatalf("empty poll %+v %s", empty, next)
	}
}

// queuedRunREST polls lotse's stream over REST and fails the test unless
// it holds the one invocation, whose run alex reads over REST as queued,
// lotse's, in a new session; it returns the run's id.
func queuedRunREST(t *testing.T, env *apitest.Env) string {
	t.Helper()
	var page struct {
		Events []struct {
			Type    string         `json:"type"`
			Payload map[string]any `json:"payload"`
		}
		NextAfter string `json:"next_after"`
	}
	r := env.REST(http.MethodGet, "/api/v1/agent/events?wait=0", env.World.Token("lotse"), nil)
	r.JSON(t, &page)
	if r.Status != 200 || len(page.Events) != 1 || page.Events[0].Type != "agent.invocation" {
		t.Fatalf("poll: %d %s", r.Status, r.Body)
	}
	runID := page.Events[0].Payload["run_id"].(string)
	var run map[string]any
	env.REST(http.MethodGet, "/api/v1/runs/"+runID, env.World.Token("alex"), nil).JSON(t, &run)
	if run["state"] != "queued" || run["agent"].(map[string]any)["handle"] != "lotse" || run["session"].(map[string]any)["mode"] != "new" {
		t.Fatalf("getRun %v", run)
	}
	return runID
}

// TestRunRoutesREST drives the run routes through the REST shim; every
// answer is validated against the OpenAPI document by the client.
func TestRunRoutesREST(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	env.MustPost("alex", env.Main("Support/Eskalation"), "r1", "@lotse please")
	lotse := env.World.Token("lotse")
	runID := queuedRunREST(t, env)
	var run map[string]any
	for _, step := range []struct{ path, state string }{{"start", "running"}, {"await-input", "waiting_input"}, {"start", "running"}} {
		r := env.REST(http.MethodPost, "/api/v1/runs/"+runID+"/"+step.path, lotse, nil)
		r.JSON(t, &run)
		if r.Status != 200 || run["state"] != step.state {
			t.Fatalf("%s: %d %s", step.path, r.Status, r.Body)
		}
	}
	if r := env.REST(http.MethodPost, "/api/v1/runs/"+runID+"/finish", lotse, map[string]any{"outcome": "exploded"}); r.Status != 400 || r.Problem(t).Errors[0].Code != "invalid_enum" {
		t.Fatalf("bad outcome: %d %s", r.Status, r.Body)
	}
	r := env.REST(http.MethodPost, "/api/v1/runs/"+runID+"/finish", lotse, map[string]any{"outcome": "failed", "reason": "model_unavailable"})
	r.JSON(t, &run)
	if r.Status != 200 || run["state"] != "failed" || run["end_reason"] != "model_unavailable" {
		t.Fatalf("finish: %d %s", r.Status, r.Body)
	}
	if r := env.REST(http.MethodPost, "/api/v1/runs/"+runID+"/cancel", env.World.Token("alex"), nil); r.Status != 409 || r.Problem(t).Reason != "run_not_active" {
		t.Fatalf("cancel ended run: %d %s", r.Status, r.Body)
	}
	if r := env.REST(http.MethodGet, "/api/v1/runs/"+runID, env.World.Token("sam"), nil); r.Status != 404 {
		t.Fatalf("sam reads a run in Eskalation: %d", r.Status)
	}
	if r := env.REST(http.MethodGet, "/api/v1/agent/events", env.World.Token("alex"), nil); r.Status != 403 {
		t.Fatalf("person polls: %d", r.Status)
	}
}
