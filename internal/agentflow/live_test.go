package agentflow_test

import (
	"context"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/sdk/agent"
)

// waitBox polls the run's live box as reader until ok holds (the box
// changes by notification; the test waits on what a reader sees).
func waitBox(t *testing.T, ctx context.Context, reader *agent.Client, runID string, ok func(agent.RunLive) bool) agent.RunLive {
	t.Helper()
	for {
		b, err := reader.RunLive(ctx, runID)
		if err == nil && ok(b) {
			return b
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the box of %s never got there: last %+v (%v)", runID, b, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// liveRun has Alex ask Lotse in Support/Eskalation and returns the thread
// and a client that reads as Alex.
func liveRun(t *testing.T, env *apitest.Env, key, question string) (string, *agent.Client) {
	t.Helper()
	thread := env.Main("Support/Eskalation")
	env.MustPost("alex", thread, key, question)
	reader, err := agent.NewClient(env.URL, env.World.Token("alex"), agent.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return thread, reader
}

// runLive runs Lotse with Config.Live for one run handled by h.
func runLive(ctx context.Context, env *apitest.Env, h agent.Handler) error {
	return agent.Run(ctx, agent.Config{Server: env.URL, Token: env.World.Token("lotse"), Once: true, Live: true, LiveInterval: 10 * time.Millisecond}, h)
}

// TestLiveStreamsIntoTheBox: with Config.Live, what a handler streams
// reaches the run's live box before the answer, in pieces sent together;
// the answer then empties the box, done, keeping the status.
func TestLiveStreamsIntoTheBox(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	_, reader := liveRun(t, env, "live-1", "@lotse stream it")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var runID string
	err := runLive(ctx, env,
		func(ctx context.Context, task *agent.Task) error {
			runID = task.RunID()
			task.Status(ctx, "looking")
			for _, w := range []string{"The ", "printer ", "is ", "back."} {
				task.Stream(ctx, w)
			}
			b := waitBox(t, ctx, reader, runID, func(b agent.RunLive) bool { return b.Text == "The printer is back." })
			if b.Status != "looking" || b.Done || b.Version < 1 || b.Version > 5 {
				t.Errorf("box while streaming: %+v", b)
			}
			return task.Answer(ctx, "The printer is back.")
		})
	if err != nil {
		t.Fatal(err)
	}
	b, err := reader.RunLive(ctx, runID)
	if err != nil || b.Text != "" || !b.Done || b.Status != "looking" {
		t.Fatalf("box after the answer: %+v %v", b, err)
	}
}

// TestLiveStopDuringStream: a person stops a run while its handler
// streams: the handler's ctx ends at once, the box keeps what was
// streamed, done with status "stopped", the run ends cancelled and
// nothing is posted.
func TestLiveStopDuringStream(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	thread, reader := liveRun(t, env, "live-stop", "@lotse write a lot")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var runID string
	err := runLive(ctx, env,
		func(hctx context.Context, task *agent.Task) error {
			runID = task.RunID()
			task.Stream(hctx, "a partial ")
			waitBox(t, ctx, reader, runID, func(b agent.RunLive) bool { return b.Text == "a partial " })
			if res := env.GraphQL(env.World.Token("alex"), `mutation($id: ID!) { cancelRun(id: $id) { id } }`, map[string]any{"id": runID}, nil); len(res.Errors) > 0 {
				t.Errorf("cancel: %+v", res.Errors)
			}
			<-hctx.Done()
			return hctx.Err()
		})
	if err != nil {
		t.Fatal(err)
	}
	b, err := reader.RunLive(ctx, runID)
	if err != nil || b.Text != "a partial " || !b.Done || b.Status != agent.StoppedStatus {
		t.Fatalf("box after the stop: %+v %v", b, err)
	}
	if n := env.Count(`SELECT count(*) FROM runs WHERE id = $1 AND state = 'cancelled'`, runID); n != 1 {
		t.Fatal("the run did not end cancelled")
	}
	if n := env.Count(`SELECT count(*) FROM messages WHERE thread_id = $1 AND run_id = $2 AND kind = 'text'`, thread, runID); n != 0 {
		t.Fatalf("%d answers after a stop", n)
	}
}
