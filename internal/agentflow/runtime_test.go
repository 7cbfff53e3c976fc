package agentflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/sdk/agent"
)

// runAdapter runs a reference adapter of agent against env until the test
// ends or stop is called; it returns stop, which waits for the adapter.
func runAdapter(t *testing.T, env *apitest.Env, handle string, model agent.Model) (stop func()) {
	t.Helper()
	return runAdapterOver(t, env, handle, model, agent.TransportPoll)
}

// runAdapterOver is runAdapter with the stream read over transport.
func runAdapterOver(t *testing.T, env *apitest.Env, handle string, model agent.Model, transport string) (stop func()) {
	t.Helper()
	stop, _ = runAdapterLogged(t, env, handle, model, transport)
	return stop
}

// runAdapterLogged is runAdapterOver that also returns the adapter's log,
// whose lines are the signals a test waits for (instead of sleeping).
func runAdapterLogged(t *testing.T, env *apitest.Env, handle string, model agent.Model, transport string) (stop func(), logs *apitest.Buffer) {
	t.Helper()
	return runAdapterWith(t, env, handle, model, func(c *agent.Config) { c.Transport = transport })
}

// runAdapterWith is runAdapterLogged with mod changing the adapter's
// configuration.
func runAdapterWith(t *testing.T, env *apitest.Env, handle string, model agent.Model, mod func(*agent.Config)) (stop func(), logs *apitest.Buffer) {
	t.Helper()
	c, err := agent.NewClient(env.URL, env.World.Token(handle), agent.ClientOptions{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	logs = &apitest.Buffer{}
	cfg := agent.Config{Client: c, Model: model, PollWait: 2 * time.Second, RetryBackoff: 20 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if mod != nil {
		mod(&cfg)
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-done
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("adapter log:\n%s", logs.String())
		}
	})
	return stop, logs
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// answersIn counts the agent's answers (text messages) per thread of runs.
func answersPerRun(t *testing.T, env *apitest.Env, handle string) map[string]int {
	t.Helper()
	rows, err := env.Pool.Query(t.Context(), `SELECT r.id::text, count(m.id) FROM runs r
		LEFT JOIN messages m ON m.thread_id = r.thread_id AND m.author_principal_id = r.agent_id AND m.kind = 'text'
		WHERE r.agent_id = $1 GROUP BY r.id`, env.World.ID(handle))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		out[id] = n
	}
	return out
}

// TestTwoAdaptersOneAgent: two adapter processes for one agent token and
// 20 runs give exactly 20 answers, one per run, every run completed.
func TestTwoAdaptersOneAgent(t *testing.T) {
	t.Parallel()
	shareTwentyRuns(t, "two", agent.TransportPoll, agent.TransportPoll)
}

// shareTwentyRuns runs two adapters for Lotse, over the transports a and b,
// and has Alex ask 20 questions: every run completes with exactly one
// answer.
func shareTwentyRuns(t *testing.T, prefix, a, b string) {
	t.Helper()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{
		"ratelimit.rl.message.burst": "200", "ratelimit.rl.agent_runtime.burst": "2000"}})
	runAdapterOver(t, env, "lotse", agent.EchoModel{}, a)
	runAdapterOver(t, env, "lotse", agent.EchoModel{}, b)
	main := env.Main("Support/Allgemein")
	for i := 0; i < 20; i++ {
		env.MustPost("alex", main, fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf("@lotse question %d", i))
	}
	waitFor(t, "20 completed runs", 90*time.Second, func() bool {
		return env.Count(`SELECT count(*) FROM runs WHERE state = 'completed'`) == 20
	})
	got := answersPerRun(t, env, "lotse")
	if len(got) != 20 {
		t.Fatalf("%d runs", len(got))
	}
	for run, n := range got {
		if n != 1 {
			t.Fatalf("run %s has %d answers", run, n)
		}
	}
	if n := env.Count(`SELECT count(*) FROM runs WHERE state <> 'completed'`); n != 0 {
		t.Fatalf("%d runs did not complete", n)
	}
}

// differentModel answers differently on every call, as a language model does.
type differentModel struct{ n *int }

func (m differentModel) Answer(context.Context, agent.Prompt) (string, error) {
	*m.n++
	return fmt.Sprintf("reply number %d", *m.n), nil
}

// claimedByTheDead has Alex ask Lotse in thread and a process with the
// holder "dead-process" read the invocation and start the run, as a
// process that then dies would; it returns Lotse's client and the
// invocation.
func claimedByTheDead(t *testing.T, env *apitest.Env, thread, question string) (*agent.Client, agent.Invocation) {
	t.Helper()
	lotse, err := agent.NewClient(env.URL, env.World.Token("lotse"), agent.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env.MustPost("alex", thread, "dead-1", question)
	page, err := lotse.AgentEvents(t.Context(), "", 0)
	if err != nil || len(page.Events) != 1 {
		t.Fatalf("events %+v %v", page, err)
	}
	var inv agent.Invocation
	if err := json.Unmarshal(page.Events[0].Payload, &inv); err != nil {
		t.Fatal(err)
	}
	if _, err := lotse.StartRun(t.Context(), inv.RunID, "dead-process"); err != nil {
		t.Fatal(err)
	}
	return lotse, inv
}

// TestTakeoverAfterCrash: an adapter that claimed a run and died leaves it
// to another process once its lease lapsed; every request of the run gets
// exactly one answer, also when the dead process had already answered
// some: the survivor reads the run's answers and answers only the open
// requests, each under its own key.
func TestTakeoverAfterCrash(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// deadKey is the key the dead process answered the trigger under
		// ("" for no answer); %s is the run id, %s the trigger's id.
		deadKey  string
		followUp bool
		want     func(run, trigger, followUp string) []takeoverAnswer
	}{
		{"nothing answered", "", false, func(run, trigger, _ string) []takeoverAnswer {
			return []takeoverAnswer{{"answer-" + run + "-" + trigger, "reply number 1"}}
		}},
		{"trigger answered", "answer-%s-%s", false, func(run, trigger, _ string) []takeoverAnswer {
			return []takeoverAnswer{{"answer-" + run + "-" + trigger, "the first holder's reply"}}
		}},
		{"trigger answered under the key of older adapters", "answer-%s", false, func(run, _, _ string) []takeoverAnswer {
			return []takeoverAnswer{{"answer-" + run, "the first holder's reply"}}
		}},
		{"trigger answered, follow-up open", "answer-%s-%s", true, func(run, trigger, followUp string) []takeoverAnswer {
			return []takeoverAnswer{{"answer-" + run + "-" + trigger, "the first holder's reply"}, {"answer-" + run + "-" + followUp, "reply number 1"}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := apitest.Start(t, apitest.Options{Config: map[string]string{"run.lease_timeout": "2s"}})
			thread := env.Main("Support/Eskalation")
			// The first process claims the run (and maybe answers), then dies.
			lotse, inv := claimedByTheDead(t, env, thread, "@lotse survive a crash")
			if tc.deadKey != "" {
				answerAsTheDead(t, lotse, inv, tc.deadKey)
			}
			followUp := ""
			if tc.followUp {
				m := env.MustPost("alex", thread, "crash-2", "@lotse and the second printer?")
				if m["trigger_state"] != "followup" {
					t.Fatalf("follow-up %+v", m)
				}
				followUp = m["id"].(string)
			}
			n := 0
			_, logs := runAdapterLogged(t, env, "lotse", differentModel{&n}, agent.TransportPoll)
			// The survivor meets the claimed run and says that it skips it.
			waitFor(t, "the survivor to skip the claimed run", 10*time.Second, func() bool {
				return strings.Contains(logs.String(), "invocation skipped: another adapter process holds the run")
			})
			if st := env.Count(`SELECT count(*) FROM runs WHERE id = $1 AND state = 'running' AND holder = 'dead-process'`, inv.RunID); st != 1 {
				t.Fatal("the survivor took a run whose lease lives")
			}
			env.Clock.Advance(3 * time.Second)
			if _, err := env.Server.Runs.SweepOnce(t.Context()); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the run to complete", 30*time.Second, func() bool {
				return env.Count(`SELECT count(*) FROM runs WHERE id = $1 AND state = 'completed' AND attempt = 2`, inv.RunID) == 1
			})
			got := lotseAnswers(t, env, thread)
			if want := tc.want(inv.RunID, inv.MessageID, followUp); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("answers %q, want exactly %q", got, want)
			}
			if tc.followUp {
				// Answered in this run, so absorbed by it: no next run.
				if env.Count(`SELECT count(*) FROM run_followups WHERE message_id = $1 AND state = 'absorbed'`, followUp) != 1 ||
					env.Count(`SELECT count(*) FROM runs`) != 1 {
					t.Fatal("the answered follow-up was not absorbed by its run")
				}
			}
		})
	}
}

// takeoverAnswer is an answer of TestTakeoverAfterCrash: its key and its
// content.
type takeoverAnswer struct{ key, content string }

// answerAsTheDead answers the trigger of inv as the dead process holding
// it, through lotse, under deadKey: %s is the run id, a second %s the
// trigger's id.
func answerAsTheDead(t *testing.T, lotse *agent.Client, inv agent.Invocation, deadKey string) {
	t.Helper()
	key := fmt.Sprintf(deadKey, inv.RunID, inv.MessageID)
	if strings.Count(deadKey, "%s") == 1 {
		key = fmt.Sprintf(deadKey, inv.RunID)
	}
	if _, err := lotse.CreateMessage(t.Context(), inv.ThreadID, "dead-process", agent.MessageCreate{ClientMsgID: key,
		ContentMD: "the first holder's reply", RunID: inv.RunID}); err != nil {
		t.Fatal(err)
	}
}

// lotseAnswers returns Lotse's text messages in thread, in thread order.
func lotseAnswers(t *testing.T, env *apitest.Env, thread string) []takeoverAnswer {
	t.Helper()
	var got []takeoverAnswer
	rows, err := env.Pool.Query(t.Context(), `SELECT client_msg_id, content_md FROM messages WHERE thread_id = $1 AND author_principal_id = $2 AND kind = 'text'
		ORDER BY thread_seq`, thread, env.World.ID("lotse"))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var a takeoverAnswer
		if err := rows.Scan(&a.key, &a.content); err != nil {
			t.Fatal(err)
		}
		got = append(got, a)
	}
	rows.Close()
	return got
}
