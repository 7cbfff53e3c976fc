package runs_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/ids"
)

// answer posts content as agent into thread naming run (empty: none).
func answer(env *apitest.Env, agent, thread, clientID, content, run string) *apitest.Response {
	body := map[string]any{"client_msg_id": clientID, "content_md": content}
	if run != "" {
		body["run_id"] = run
	}
	return env.REST(http.MethodPost, "/api/v1/threads/"+thread+"/messages", env.World.Token(agent), body)
}

// answerDo is answer for a goroutine other than the test's (see
// apitest.Env.Do).
func answerDo(env *apitest.Env, agent, thread, clientID, content, run string) (*apitest.Response, error) {
	body := map[string]any{"client_msg_id": clientID, "content_md": content}
	if run != "" {
		body["run_id"] = run
	}
	return env.Do(http.MethodPost, "/api/v1/threads/"+thread+"/messages", env.World.Token(agent), body)
}

func TestAG01_AgentMessagesNeverTrigger(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	s := newStream(t, env, "lotse")
	main := env.Main("Support/Allgemein")
	say(t, env, "alex", main, "@lotse a task")
	run := s.nextRun()
	busy := getRun(t, env, "lotse", run).ThreadID
	mustRunOp(t, env, "lotse", "startRun", run)
	before := struct{ runs, invocations, threads, followups int }{
		env.Count(`SELECT count(*) FROM runs`), env.Count(`SELECT count(*) FROM agent_events WHERE type = 'agent.invocation'`),
		env.Count(`SELECT count(*) FROM threads`), env.Count(`SELECT count(*) FROM run_followups`)}
	cases := []struct{ name, who, thread, content string }{
		{"lotse without mention in a free channel", "lotse", main, "an update"},
		{"lotse mentioning itself", "lotse", main, "@lotse have a look"},
		{"lotse mentioning texter", "lotse", main, "@texter please help"},
		{"texter as guest mentioning lotse", "texter", main, "@lotse over to you"},
		{"lotse in its own running thread", "lotse", busy, "still working"},
		{"texter in lotse's busy thread", "texter", busy, "@texter me too"},
		{"lotse in the main thread with auto_thread", "lotse", main, "@lotse new topic"},
	}
	for i, c := range cases {
		r := answer(env, c.who, c.thread, fmt.Sprintf("ag01-%d", i), c.content, "")
		var m map[string]any
		r.JSON(t, &m)
		if r.Status != http.StatusCreated || m["origin"] != "agent" || m["author"].(map[string]any)["kind"] != "agent" {
			t.Fatalf("%s: %d %s", c.name, r.Status, r.Body)
		}
		if _, has := m["trigger_state"]; has {
			t.Fatalf("%s: trigger_state %v", c.name, m["trigger_state"])
		}
	}
	after := struct{ runs, invocations, threads, followups int }{
		env.Count(`SELECT count(*) FROM runs`), env.Count(`SELECT count(*) FROM agent_events WHERE type = 'agent.invocation'`),
		env.Count(`SELECT count(*) FROM threads`), env.Count(`SELECT count(*) FROM run_followups`)}
	if after != before {
		t.Fatalf("agent messages did trigger work: before %+v after %+v", before, after)
	}
	if n := env.Count(`SELECT count(*) FROM messages WHERE origin = 'agent' AND trigger_state IS NOT NULL`); n != 0 {
		t.Fatalf("%d agent messages with trigger_state", n)
	}
	if r := getRun(t, env, "lotse", run); r.State != "RUNNING" || r.Version != 2 {
		t.Fatalf("the active run changed: %+v", r)
	}
}

func TestAG26_AgentWithoutWrite(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	lotse := env.World.Token("lotse")
	kampagnen := env.Main("Marketing/Kampagnen")
	ideas := env.World.Channel("Marketing/Ideas").ID
	msgBody := map[string]any{"client_msg_id": "x", "content_md": "hello marketing"}
	threadBody := map[string]any{"title": "t", "first_message": map[string]any{"client_msg_id": "y", "content_md": "report"}}
	post := func(thread string) *apitest.Response {
		return env.REST(http.MethodPost, "/api/v1/threads/"+thread+"/messages", lotse, msgBody)
	}
	create := func(channel string) *apitest.Response {
		return env.REST(http.MethodPost, "/api/v1/channels/"+channel+"/threads", lotse, threadBody)
	}
	unknown := ids.New()
	for _, pair := range [][2]*apitest.Response{{post(kampagnen), post(unknown)}, {create(ideas), create(unknown)}} {
		if pair[0].Status != 404 || !apitest.SameAnswer(t, pair[0], pair[1]) {
			t.Fatalf("404 differs from an unknown id:\n%d %s\n%d %s", pair[0].Status, pair[0].Body, pair[1].Status, pair[1].Body)
		}
	}
	g := env.REST(http.MethodPost, "/api/v1/grants", env.World.Token("robin"), map[string]any{"subject_id": env.World.ID("lotse"),
		"subject_kind": "principal", "target_kind": "space", "target_id": env.World.Spaces["Marketing"], "level": "read"})
	if g.Status != 201 {
		t.Fatalf("grant: %d %s", g.Status, g.Body)
	}
	for _, r := range []*apitest.Response{post(kampagnen), create(ideas)} {
		if p := r.Problem(t); r.Status != 403 || p.Code != "forbidden" || p.Reason != "level_insufficient" {
			t.Fatalf("with read only: %d %+v", r.Status, p)
		}
	}
	if n := env.Count(`SELECT count(*) FROM messages WHERE author_principal_id = $1`, env.World.ID("lotse")); n != 0 {
		t.Fatalf("%d messages stored", n)
	}
	rows, _ := env.Server.Authz.AuditRows(t.Context(), env.World.ID("lotse"))
	got := map[string]int{}
	for _, r := range rows {
		got[r.Action+"/"+r.Reason] = r.Count
	}
	// One aggregated row per action and reason: the invisible thread or
	// channel (no_grant), the unknown ids (not_found), then read only.
	want := map[string]int{"message.create/no_grant": 1, "message.create/not_found": 1, "thread.create/no_grant": 1,
		"thread.create/not_found": 1, "message.create/level_insufficient": 1, "thread.create/level_insufficient": 1}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("audit rows %v, want %v", got, want)
	}
	// Archived: even the operator is read-only.
	env.REST(http.MethodPost, "/api/v1/channels/"+env.World.Channel("Support/Allgemein").ID+"/archive", env.World.Token("robin"), nil)
	r := post(env.Main("Support/Allgemein"))
	if p := r.Problem(t); r.Status != 403 || p.Code != "channel_read_only" || p.Reason != "channel_archived" {
		t.Fatalf("archived: %d %+v", r.Status, p)
	}
}

func TestAgentWritesWithGrantOrAsOperator(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	if r := answer(env, "lotse", env.Main("Support/Allgemein"), "op", "as operator", ""); r.Status != 201 {
		t.Fatalf("operator rule: %d", r.Status)
	}
	report := openThread(t, env, "lotse", "Support/Reports", "", "through the grant")
	if report == "" {
		t.Fatal("no report thread")
	}
	texter := newStream(t, env, "texter")
	say(t, env, "alex", env.Main("Support/Allgemein"), "@texter a guest question")
	guestRun := texter.nextRun()
	guestThread := getRun(t, env, "texter", guestRun).ThreadID
	if r := answer(env, "texter", guestThread, "g1", "guest answer", guestRun); r.Status != 201 {
		t.Fatalf("guest answer: %d %s", r.Status, r.Body)
	}
	var grant string
	env.Pool.QueryRow(t.Context(), `SELECT id::text FROM grants WHERE subject_principal_id = $1`, env.World.ID("texter")).Scan(&grant)
	env.REST(http.MethodDelete, "/api/v1/grants/"+grant, env.World.Token("robin"), nil)
	if r := answer(env, "texter", guestThread, "g2", "after revocation", guestRun); r.Status != 404 {
		t.Fatalf("guest after revocation: %d %s", r.Status, r.Body)
	}
	// The operator rule follows the operator: a main thread has no fixed one.
	lotse := newStream(t, env, "lotse")
	esk := env.Main("Support/Eskalation")
	say(t, env, "alex", esk, "@lotse escalation")
	run := lotse.nextRun()
	env.REST(http.MethodPut, "/api/v1/channels/"+env.World.Channel("Support/Eskalation").ID+"/operator", env.World.Token("robin"),
		map[string]any{"mode": "agent", "agent_id": env.World.ID("texter")})
	if r := answer(env, "lotse", esk, "e1", "too late", run); r.Status != 404 {
		t.Fatalf("old operator in the main thread: %d %s", r.Status, r.Body)
	}
}

func TestReport_NewThreadPerReport(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	ch := env.World.Channel("Support/Reports").ID
	before := env.Count(`SELECT coalesce(max(seq), 0) FROM event_log`)
	body := map[string]any{"title": "Nightly report", "first_message": map[string]any{"client_msg_id": "rep-1", "content_md": "Nightly report\nAll systems nominal."}}
	r := env.REST(http.MethodPost, "/api/v1/channels/"+ch+"/threads", env.World.Token("lotse"), body)
	var c struct {
		Thread       map[string]any `json:"thread"`
		FirstMessage map[string]any `json:"first_message"`
	}
	r.JSON(t, &c)
	if r.Status != 201 || c.Thread["title_source"] != "auto" || c.Thread["created_by"] != env.World.ID("lotse") || c.Thread["operator_agent_id"] != nil {
		t.Fatalf("report thread: %d %v", r.Status, c.Thread)
	}
	if c.FirstMessage["origin"] != "agent" || c.FirstMessage["thread_seq"] != float64(1) {
		t.Fatalf("first message %v", c.FirstMessage)
	}
	var types []string
	rows, _ := env.Pool.Query(t.Context(), `SELECT type FROM event_log WHERE seq > $1 ORDER BY seq`, before)
	for rows.Next() {
		var s string
		rows.Scan(&s)
		types = append(types, s)
	}
	if strings.Join(types, ",") != "thread.created,message.created" {
		t.Fatalf("events %v", types)
	}
	if env.Count(`SELECT count(*) FROM runs`) != 0 || env.Count(`SELECT count(*) FROM agent_events`) != 0 {
		t.Fatal("a report started a run")
	}
	again := env.REST(http.MethodPost, "/api/v1/channels/"+ch+"/threads", env.World.Token("lotse"), body)
	if again.Status != 200 || again.Header.Get("Idempotent-Replay") != "true" {
		t.Fatalf("replay: %d", again.Status)
	}
}

func TestAgentMessage_RateLimitClass(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{"ratelimit.rl.message.burst": "2", "ratelimit.rl.message.per_minute": "1"}})
	thread := openThread(t, env, "lotse", "Support/Reports", "", "r1") // one token
	if r := answer(env, "lotse", thread, "r2", "second", ""); r.Status != 201 {
		t.Fatalf("within the burst: %d", r.Status)
	}
	r := answer(env, "lotse", thread, "r3", "third", "")
	if r.Status != 429 || r.Problem(t).Code != "rate_limited" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("beyond the burst: %d %s", r.Status, r.Body)
	}
	if m := say(t, env, "alex", thread, "alex has her own bucket"); m["origin"] != "human" {
		t.Fatal(m)
	}
}

func TestAgentMessage_OriginEverywhere(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	main := env.Main("Support/Allgemein")
	before := env.Metric(`bothy_messages_created_total{origin="agent"}`)
	r := answer(env, "lotse", main, "o1", "an answer", "")
	check := func(where string, m map[string]any) {
		t.Helper()
		a, _ := m["author"].(map[string]any)
		if m["origin"] != "agent" || a["kind"] != "agent" || a["handle"] != "lotse" {
			t.Fatalf("%s: %v", where, m)
		}
	}
	var m map[string]any
	r.JSON(t, &m)
	check("201", m)
	replay := answer(env, "lotse", main, "o1", "an answer", "")
	replay.JSON(t, &m)
	check("replay", m)
	var payload []byte
	env.Pool.QueryRow(t.Context(), `SELECT payload::text FROM event_log WHERE type = 'message.created' AND message_id = $1`, m["id"]).Scan(&payload)
	var ev map[string]any
	if err := json.Unmarshal(payload, &ev); err != nil {
		t.Fatal(err)
	}
	check("event_log", ev)
	var page struct{ Events []map[string]any }
	env.REST(http.MethodGet, "/api/v1/events", env.World.Token("alex"), nil).JSON(t, &page)
	found := false
	for _, e := range page.Events {
		if p := e["payload"].(map[string]any); p["id"] == m["id"] {
			check("listEvents", p)
			found = true
		}
	}
	if !found {
		t.Fatal("alex does not see the message.created event")
	}
	env.REST(http.MethodGet, "/api/v1/messages/"+m["id"].(string), env.World.Token("alex"), nil).JSON(t, &m)
	check("getMessage", m)
	var hist struct{ Messages []map[string]any }
	env.REST(http.MethodGet, "/api/v1/threads/"+main+"/messages", env.World.Token("alex"), nil).JSON(t, &hist)
	check("history", hist.Messages[0])
	if after := env.Metric(`bothy_messages_created_total{origin="agent"}`); after != before+1 {
		t.Fatalf("metric went from %v to %v (the replay must not count)", before, after)
	}
}

func TestAgentMessage_CannotForgeOriginOrKind(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	main := env.Main("Support/Allgemein")
	for name, extra := range map[string]map[string]any{"origin": {"origin": "human"}, "system_code": {"system_code": "thread.reopened"},
		"kind system": {"kind": "system"}, "kind run": {"kind": "run"}} {
		body := map[string]any{"client_msg_id": "f-" + name, "content_md": "forged"}
		for k, v := range extra {
			body[k] = v
		}
		r := env.REST(http.MethodPost, "/api/v1/threads/"+main+"/messages", env.World.Token("lotse"), body)
		if r.Status != 400 || r.Problem(t).Code != "validation_failed" {
			t.Fatalf("%s: %d %s", name, r.Status, r.Body)
		}
	}
	if n := env.Count(`SELECT count(*) FROM messages`); n != 0 {
		t.Fatalf("%d messages stored", n)
	}
}

func TestAnswer_RunIDMismatch(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	lotse := newStream(t, env, "lotse")
	texter := newStream(t, env, "texter")
	say(t, env, "alex", env.Main("Support/Eskalation"), "@lotse elsewhere")
	otherThreadRun := lotse.nextRun()
	// A thread of Allgemein with an active guest run of Texter.
	say(t, env, "alex", env.Main("Support/Allgemein"), "@texter guest")
	guest := texter.nextRun()
	thread := getRun(t, env, "texter", guest).ThreadID
	seq := env.Count(`SELECT last_seq FROM threads WHERE id = $1`, thread)
	events := env.Count(`SELECT count(*) FROM event_log`)
	var bodies []map[string]any
	for i, c := range []struct{ who, run string }{{"lotse", ids.New()}, {"lotse", otherThreadRun}, {"lotse", guest}, {"alex", guest}} {
		r := answer(env, c.who, thread, fmt.Sprintf("m%d", i), "mismatch", c.run)
		p := r.Problem(t)
		if r.Status != 400 || p.Code != "validation_failed" || len(p.Errors) != 1 || p.Errors[0].Pointer != "/run_id" || p.Errors[0].Code != "run_mismatch" {
			t.Fatalf("case %d: %d %s", i, r.Status, r.Body)
		}
		bodies = append(bodies, apitest.ComparableProblem(t, r.Body))
	}
	for _, b := range bodies[1:] {
		if !reflect.DeepEqual(b, bodies[0]) {
			t.Fatalf("bodies differ:\n%v\n%v", bodies[0], b)
		}
	}
	if env.Count(`SELECT last_seq FROM threads WHERE id = $1`, thread) != seq || env.Count(`SELECT count(*) FROM event_log`) != events {
		t.Fatal("a refused answer stored something")
	}
}

func TestAnswer_ReplayAfterRunEnded(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	s := newStream(t, env, "lotse")
	esk := env.Main("Support/Eskalation")
	say(t, env, "alex", esk, "@lotse please")
	run := s.nextRun()
	mustRunOp(t, env, "lotse", "startRun", run)
	first := answer(env, "lotse", esk, "ans", "the answer", run)
	finish(t, env, "lotse", run, "COMPLETED")
	events := env.Count(`SELECT count(*) FROM event_log`)
	again := answer(env, "lotse", esk, "ans", "the answer", run)
	if again.Status != 200 || again.Header.Get("Idempotent-Replay") != "true" || !reflect.DeepEqual(apitest.ComparableProblem(t, again.Body), apitest.ComparableProblem(t, first.Body)) {
		t.Fatalf("replay: %d %s", again.Status, again.Body)
	}
	if env.Count(`SELECT count(*) FROM event_log`) != events {
		t.Fatal("the replay published an event")
	}
}

// TestAnswer_ConcurrentWithFinish releases an answer naming a run and the
// run's finish together, many times: either the answer commits before the
// end event, or it is refused with run_not_active and stores nothing. 20
// rounds in make test (60 took a minute of a loaded make test); make
// stress runs the test 50 times over, 1,000 rounds.
func TestAnswer_ConcurrentWithFinish(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{
		"ratelimit.rl.message.burst": "100000", "ratelimit.rl.message.per_minute": "100000",
		"ratelimit.rl.agent_runtime.burst": "100000", "ratelimit.rl.agent_runtime.per_minute": "100000",
		"ratelimit.rl.read.burst": "100000", "ratelimit.rl.read.per_minute": "100000"}})
	s := newStream(t, env, "lotse")
	esk := env.Main("Support/Eskalation")
	const rounds = 20
	won, lost := 0, 0
	for i := 0; i < rounds; i++ {
		say(t, env, "alex", esk, fmt.Sprintf("@lotse round %d", i))
		run := s.nextRun()
		mustRunOp(t, env, "lotse", "startRun", run)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		var ans *apitest.Response
		var finErrs []apitest.GQLError
		var ansErr, finErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-gate
			ans, ansErr = answerDo(env, "lotse", esk, fmt.Sprintf("race-%d", i), "racing answer", run)
		}()
		go func() { defer wg.Done(); <-gate; _, finErrs, finErr = finishDo(env, "lotse", run, "COMPLETED") }()
		close(gate)
		wg.Wait()
		if ansErr != nil || finErr != nil {
			t.Fatalf("round %d: answer %v, finish %v", i, ansErr, finErr)
		}
		if len(finErrs) > 0 {
			t.Fatalf("round %d: finish failed: %+v", i, finErrs)
		}
		switch ans.Status {
		case 201:
			won++
			var m map[string]any
			ans.JSON(t, &m)
			var msgSeq, endSeq int64
			env.Pool.QueryRow(t.Context(), `SELECT seq FROM event_log WHERE type = 'message.created' AND message_id = $1`, m["id"]).Scan(&msgSeq)
			env.Pool.QueryRow(t.Context(), `SELECT seq FROM event_log WHERE type = 'run.state_changed' AND payload->>'id' = $1 AND payload->>'state' = 'completed'`, run).Scan(&endSeq)
			if msgSeq == 0 || endSeq == 0 || msgSeq > endSeq {
				t.Fatalf("round %d: answer event %d after end event %d", i, msgSeq, endSeq)
			}
		case 409:
			lost++
			if p := ans.Problem(t); p.Reason != "run_not_active" {
				t.Fatalf("round %d: %+v", i, p)
			}
			if n := env.Count(`SELECT count(*) FROM messages WHERE client_msg_id = $1`, fmt.Sprintf("race-%d", i)); n != 0 {
				t.Fatalf("round %d: a refused answer was stored", i)
			}
		default:
			t.Fatalf("round %d: answer %d %s", i, ans.Status, ans.Body)
		}
	}
	t.Logf("%d answers before the end, %d refused after it", won, lost)
}
