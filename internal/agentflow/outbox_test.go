package agentflow_test

import (
	"net/http"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/sdk/agent"
)

// TestOutboxSendsAnAnswerLostInACrash: a process claimed a run, wrote its
// answer to the outbox and died before the server confirmed it. The next
// adapter started on that outbox sends the answer first, under its key and
// as the holder that wrote it, and the model is not asked again; the run,
// taken over when its lease lapsed, completes with that one answer. An
// answer whose run a person cancelled meanwhile is dropped instead. Either
// way the outbox is empty afterwards.
func TestOutboxSendsAnAnswerLostInACrash(t *testing.T) {
	t.Parallel()
	for _, cancelled := range []bool{false, true} {
		name := "run still held"
		if cancelled {
			name = "run cancelled meanwhile"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := apitest.Start(t, apitest.Options{Config: map[string]string{"run.lease_timeout": "2s"}})
			thread := env.Main("Support/Eskalation")
			_, inv := claimedByTheDead(t, env, thread, "@lotse survive a crash while sending")
			dir := t.TempDir()
			box, err := agent.OpenOutbox(dir)
			if err != nil {
				t.Fatal(err)
			}
			key := agent.AnswerKey(inv.RunID, inv.MessageID)
			if err := box.Put(agent.OutboxEntry{Key: key, ThreadID: inv.ThreadID, RunID: inv.RunID, Holder: "dead-process",
				Text: "the answer from before the crash", Written: time.Now()}); err != nil {
				t.Fatal(err)
			}
			if cancelled {
				env.MustREST(t, http.MethodPost, "/api/v1/runs/"+inv.RunID+"/cancel", env.World.Token("alex"), nil, http.StatusOK)
				env.Clock.Advance(3 * time.Second)
				if _, err := env.Server.Runs.SweepOnce(t.Context()); err != nil {
					t.Fatal(err)
				}
				if env.Count(`SELECT count(*) FROM runs WHERE id = $1 AND state = 'cancelled'`, inv.RunID) != 1 {
					t.Fatal("the run did not end cancelled")
				}
			}
			answers := func() int {
				return env.Count(`SELECT count(*) FROM messages WHERE thread_id = $1 AND author_principal_id = $2 AND kind = 'text'`, thread, env.World.ID("lotse"))
			}
			n := 0
			runAdapterWith(t, env, "lotse", differentModel{&n}, func(c *agent.Config) { c.Outbox = dir })
			waitFor(t, "the outbox to empty", 10*time.Second, func() bool {
				left, _ := box.Pending()
				return len(left) == 0
			})
			if cancelled {
				if answers() != 0 {
					t.Fatal("the answer of a cancelled run was sent from the outbox")
				}
				return
			}
			if env.Count(`SELECT count(*) FROM messages WHERE client_msg_id = $1 AND content_md = 'the answer from before the crash'`, key) != 1 {
				t.Fatal("the outbox's answer was not sent under its key")
			}
			env.Clock.Advance(3 * time.Second)
			if _, err := env.Server.Runs.SweepOnce(t.Context()); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the run to complete", 30*time.Second, func() bool {
				return env.Count(`SELECT count(*) FROM runs WHERE id = $1 AND state = 'completed'`, inv.RunID) == 1
			})
			if got := answers(); got != 1 || n != 0 {
				t.Fatalf("%d answers, the model asked %d times; want the outbox's one answer and no model", got, n)
			}
		})
	}
}
