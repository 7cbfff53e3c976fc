package agentflow_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/sdk/agent"
)

// stubbornModel is a roundModel that does not stop when its context ends:
// a model whose answer is ready although the run was cancelled meanwhile.
type stubbornModel struct{ roundModel }

func (m stubbornModel) Answer(_ context.Context, p agent.Prompt) (string, error) {
	m.prompts <- p
	return <-m.replies, nil
}

// runThread returns the thread of run id.
func runThread(t *testing.T, env *apitest.Env, id string) string {
	t.Helper()
	var thread string
	if err := env.Pool.QueryRow(t.Context(), `SELECT thread_id::text FROM runs WHERE id = $1`, id).Scan(&thread); err != nil {
		t.Fatal(err)
	}
	return thread
}

// agentAnswers returns the keys and contents of the agent's text messages
// in thread, oldest first.
func agentAnswers(t *testing.T, env *apitest.Env, handle, thread string) (keys, contents []string) {
	t.Helper()
	rows, err := env.Pool.Query(t.Context(), `SELECT client_msg_id, content_md FROM messages WHERE thread_id = $1 AND author_principal_id = $2 AND kind = 'text'
		ORDER BY thread_seq`, thread, env.World.ID(handle))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, c string
		if err := rows.Scan(&k, &c); err != nil {
			t.Fatal(err)
		}
		keys, contents = append(keys, k), append(contents, c)
	}
	return keys, contents
}

// heldAt reports whether the adapter's log says that its acknowledgement
// waits at the follow-up message.
func heldAt(t *testing.T, logs *apitest.Buffer, message string) bool {
	for _, l := range logs.Lines(t) {
		if l["msg"] == "acknowledgement held at a follow-up its run's model has not seen" && l["message_id"] == message {
			return true
		}
	}
	return false
}

// followUpState returns the state of the follow-up message and whether it
// was ever delivered.
func followUpState(t *testing.T, env *apitest.Env, message string) (state string, delivered bool) {
	t.Helper()
	if err := env.Pool.QueryRow(t.Context(), `SELECT state, delivered_at IS NOT NULL FROM run_followups WHERE message_id = $1`, message).Scan(&state, &delivered); err != nil {
		t.Fatal(err)
	}
	return state, delivered
}

// TestFollowUpWhileTheModelWorks: against a real server, a follow-up Alex
// writes while the model works stays pending (the adapter's
// acknowledgement waits in front of it) until the model has seen it in a
// second round; the answer of that round is posted under the follow-up's
// key, the follow-up is delivered before the run completes and absorbed by
// it, and no next run starts.
func TestFollowUpWhileTheModelWorks(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	m := newRoundModel()
	_, logs := runAdapterLogged(t, env, "lotse", m, agent.TransportPoll)
	env.MustPost("alex", env.Main("Support/Allgemein"), "fu-1", "@lotse the printer on floor 2 is broken")
	p := m.next(t)
	run := p.Context.RunID
	thread := runThread(t, env, run)

	fu := env.MustPost("alex", thread, "fu-2", "@lotse also the one on floor 3")
	if fu["trigger_state"] != "followup" {
		t.Fatalf("follow-up %+v", fu)
	}
	fuID := fu["id"].(string)
	waitFor(t, "the acknowledgement to wait at the follow-up", 15*time.Second, func() bool { return heldAt(t, logs, fuID) })
	if state, delivered := followUpState(t, env, fuID); state != "pending" || delivered {
		t.Fatalf("the follow-up is %s (delivered %v) before the model saw it", state, delivered)
	}

	m.replies <- "the first answer"
	p = m.next(t)
	if p.Context.RunID != run || len(p.Context.FollowUps) != 1 || p.Context.FollowUps[0].MessageID != fuID ||
		!strings.Contains(p.User, "also the one on floor 3") {
		t.Fatalf("the second round does not show the follow-up:\n%s", p.User)
	}
	if state, _ := followUpState(t, env, fuID); state != "pending" {
		t.Fatalf("the follow-up is %s while the model works on it", state)
	}
	m.replies <- "the second answer"
	waitFor(t, "the run to complete", 30*time.Second, func() bool {
		return env.Count(`SELECT count(*) FROM runs WHERE id = $1 AND state = 'completed'`, run) == 1
	})

	wantFollowUpAbsorbedAndAnswered(t, env, run, thread, fuID)
}

// wantFollowUpAbsorbedAndAnswered checks the end of TestFollowUpWhileTheModelWorks:
// the follow-up fuID, answered in run's second round, is delivered and
// absorbed by run, starts no run of its own, and the one answer in thread
// is the second round's, under the follow-up's key, which the run lists
// for a later holder.
func wantFollowUpAbsorbedAndAnswered(t *testing.T, env *apitest.Env, run, thread, fuID string) {
	t.Helper()
	if state, delivered := followUpState(t, env, fuID); state != "absorbed" || !delivered {
		t.Fatalf("the answered follow-up is %s (delivered %v), want absorbed", state, delivered)
	}
	if n := env.Count(`SELECT count(*) FROM runs`); n != 1 {
		t.Fatalf("%d runs: the answered follow-up started another", n)
	}
	keys, contents := agentAnswers(t, env, "lotse", thread)
	if len(keys) != 1 || keys[0] != agent.AnswerKey(run, fuID) || contents[0] != "the second answer" {
		t.Fatalf("answers %q %q", keys, contents)
	}
	// The run lists its answer for a later holder.
	var out struct {
		Run struct {
			Answers []agent.RunAnswer `json:"answers"`
		} `json:"run"`
	}
	env.GraphQL(env.World.Token("lotse"), `query($id: ID!) { run(id: $id) { answers { messageId clientMsgId } } }`, map[string]any{"id": run}, &out)
	if len(out.Run.Answers) != 1 || out.Run.Answers[0].ClientMsgID != agent.AnswerKey(run, fuID) {
		t.Fatalf("Run.answers %+v", out.Run.Answers)
	}
}

// TestFollowUpWithTwoAdapters: with two adapter processes for one agent,
// the process that does not hold the run does not acknowledge past the
// follow-up either (the position is the agent's), so the follow-up stays
// pending until the holder's model has seen it.
func TestFollowUpWithTwoAdapters(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	models := []roundModel{newRoundModel(), newRoundModel()}
	var logs [2]*apitest.Buffer
	for i, m := range models {
		_, logs[i] = runAdapterLogged(t, env, "lotse", m, agent.TransportPoll)
	}
	env.MustPost("alex", env.Main("Support/Allgemein"), "two-1", "@lotse the printer on floor 2 is broken")
	var holder roundModel
	var p agent.Prompt
	select {
	case p = <-models[0].prompts:
		holder = models[0]
	case p = <-models[1].prompts:
		holder = models[1]
	case <-time.After(15 * time.Second):
		t.Fatal("no adapter asked its model")
	}
	thread := runThread(t, env, p.Context.RunID)
	fu := env.MustPost("alex", thread, "two-2", "@lotse also the one on floor 3")
	fuID := fu["id"].(string)
	waitFor(t, "both processes to hold their acknowledgement at the follow-up", 15*time.Second, func() bool {
		return heldAt(t, logs[0], fuID) && heldAt(t, logs[1], fuID)
	})
	if state, delivered := followUpState(t, env, fuID); state != "pending" || delivered {
		t.Fatalf("the follow-up is %s (delivered %v) before the holder's model saw it", state, delivered)
	}
	holder.replies <- "the first answer"
	if p = holder.next(t); len(p.Context.FollowUps) != 1 || p.Context.FollowUps[0].MessageID != fuID {
		t.Fatalf("the second round shows %+v", p.Context.FollowUps)
	}
	holder.replies <- "the second answer"
	waitFor(t, "the run to complete", 30*time.Second, func() bool {
		return env.Count(`SELECT count(*) FROM runs WHERE id = $1 AND state = 'completed'`, p.Context.RunID) == 1
	})
	if state, _ := followUpState(t, env, fuID); state != "absorbed" {
		t.Fatalf("the follow-up is %s, want absorbed", state)
	}
	keys, _ := agentAnswers(t, env, "lotse", thread)
	if n := env.Count(`SELECT count(*) FROM runs`); n != 1 || len(keys) != 1 || keys[0] != agent.AnswerKey(p.Context.RunID, fuID) {
		t.Fatalf("%d runs, answers %q", n, keys)
	}
}

// TestFollowUpAfterTheRoundsStartsTheNextRun: with no rounds for
// follow-ups, a follow-up written while the model works is not shown to
// it and not delivered; the run answers its trigger, and the server
// promotes the follow-up, which starts the next run, answered under its own
// key.
func TestFollowUpAfterTheRoundsStartsTheNextRun(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	m := newRoundModel()
	_, logs := runAdapterWith(t, env, "lotse", m, func(c *agent.Config) { c.FollowUpRounds = -1 })
	trigger := env.MustPost("alex", env.Main("Support/Allgemein"), "nx-1", "@lotse the printer on floor 2 is broken")
	p := m.next(t)
	run := p.Context.RunID
	thread := runThread(t, env, run)
	fu := env.MustPost("alex", thread, "nx-2", "@lotse also the one on floor 3")
	fuID := fu["id"].(string)
	waitFor(t, "the acknowledgement to wait at the follow-up", 15*time.Second, func() bool { return heldAt(t, logs, fuID) })
	m.replies <- "the answer to the first"

	p = m.next(t)
	next := p.Context.RunID
	if next == run || p.Context.TriggerMessage.MessageID != fuID || len(p.Context.FollowUps) != 0 {
		t.Fatalf("the next run %s answers %s with follow-ups %+v", next, p.Context.TriggerMessage.MessageID, p.Context.FollowUps)
	}
	m.replies <- "the answer to the follow-up"
	waitFor(t, "both runs to complete", 30*time.Second, func() bool {
		return env.Count(`SELECT count(*) FROM runs WHERE state = 'completed'`) == 2
	})
	if state, delivered := followUpState(t, env, fuID); state != "promoted" || delivered {
		t.Fatalf("the follow-up is %s (delivered %v), want promoted and never delivered", state, delivered)
	}
	keys, contents := agentAnswers(t, env, "lotse", thread)
	want := []string{agent.AnswerKey(run, trigger["id"].(string)), agent.AnswerKey(next, fuID)}
	if len(keys) != 2 || keys[0] != want[0] || keys[1] != want[1] || contents[0] != "the answer to the first" {
		t.Fatalf("answers %q %q, want keys %q", keys, contents, want)
	}
}

// TestReplyAfterATimeoutGoesOutWithoutRunID: a run that failed by
// run.stall_timeout while the model worked still gets the model's reply,
// as a plain agent message under the same key (nothing names the run).
func TestReplyAfterATimeoutGoesOutWithoutRunID(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	m := newRoundModel()
	_, logs := runAdapterWith(t, env, "lotse", m, nil)
	trigger := env.MustPost("alex", env.Main("Support/Eskalation"), "to-1", "@lotse a slow question")
	run := m.next(t).Context.RunID
	env.Clock.Advance(31 * time.Minute)
	if _, err := env.Server.Runs.SweepOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if env.Count(`SELECT count(*) FROM runs WHERE id = $1 AND state = 'failed' AND end_reason = 'timeout'`, run) != 1 {
		t.Fatal("the run did not fail by timeout")
	}
	m.replies <- "the late answer"
	waitFor(t, "the late answer", 30*time.Second, func() bool {
		return strings.Contains(logs.String(), `"msg":"answer posted after the run ended"`)
	})
	keys, contents := agentAnswers(t, env, "lotse", env.Main("Support/Eskalation"))
	if len(keys) != 1 || keys[0] != agent.AnswerKey(run, trigger["id"].(string)) || contents[0] != "the late answer" {
		t.Fatalf("answers %q %q", keys, contents)
	}
	if n := env.Count(`SELECT count(*) FROM run_answers WHERE run_id = $1`, run); n != 0 {
		t.Fatalf("the late answer names the ended run (%d run answers)", n)
	}
}

// TestReplyToALostRequestIsDropped: when Alex loses trigger while the
// model works, the run is cancelled (trigger_revoked) and the reply the
// model still delivers is never posted.
func TestReplyToALostRequestIsDropped(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	m := stubbornModel{newRoundModel()}
	_, logs := runAdapterWith(t, env, "lotse", m, nil)
	env.MustPost("alex", env.Main("Support/Eskalation"), "lost-1", "@lotse a question Alex will lose")
	run := m.next(t).Context.RunID
	r := env.REST(http.MethodDelete, "/api/v1/grants/"+grantOf(t, env, "alex", env.World.Spaces["Support"]), env.World.Token("robin"), nil)
	if r.Status != http.StatusOK {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	// The adapter learns it from run.cancel_requested or its renewal.
	waitFor(t, "the adapter to hear of the loss", 15*time.Second, func() bool {
		return strings.Contains(logs.String(), `"msg":"cancel requested for a run in progress"`) ||
			strings.Contains(logs.String(), `"msg":"the run's person lost trigger while the model worked"`)
	})
	m.replies <- "a reply nobody may get"
	waitFor(t, "the run to end", 30*time.Second, func() bool {
		return env.Count(`SELECT count(*) FROM runs WHERE id = $1 AND state = 'cancelled' AND end_reason = 'trigger_revoked'`, run) == 1
	})
	if keys, _ := agentAnswers(t, env, "lotse", env.Main("Support/Eskalation")); len(keys) != 0 {
		t.Fatalf("answers %q after the loss of trigger", keys)
	}
}

// grantOf returns the live grant of handle on the channel or space target.
func grantOf(t *testing.T, env *apitest.Env, handle, target string) string {
	t.Helper()
	var id string
	if err := env.Pool.QueryRow(t.Context(), `SELECT id::text FROM grants WHERE subject_principal_id = $1 AND (target_channel_id = $2 OR target_space_id = $2) AND revoked_at IS NULL`,
		env.World.ID(handle), target).Scan(&id); err != nil {
		t.Fatalf("grant of %s: %v", handle, err)
	}
	return id
}
