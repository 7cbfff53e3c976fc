package runs_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/devtools/runtest"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/runs/domain"
)

// followUpSeq polls lotse's whole stream and returns the position of the
// agent.followup of message id, the cursor whose ack delivers it; it
// fails the test when there is none.
func followUpSeq(t *testing.T, env *moduletest.Env, id string) string {
	t.Helper()
	page, err := env.Runs.Poll(t.Context(), env.Principal("lotse"), "0", 0)
	if err != nil {
		t.Fatal(err)
	}
	var seq string
	for _, e := range page.Events {
		if e.Type == events.AgentFollowup && e.MessageID == id {
			seq = strconv.FormatInt(e.Seq, 10)
		}
	}
	if seq == "" {
		t.Fatalf("no agent.followup for the follow-up in %+v", page.Events)
	}
	return seq
}

// TestDeliveryWaitsForTheRunsEnd: the acknowledgement that delivers a
// follow-up and the end of its run that promotes it serialise on the run
// row. While a unit holds the run as its end does (FOR UPDATE) and promotes
// the follow-up, an acknowledgement of the follow-up's event waits; after
// the end committed it finds the follow-up promoted and delivers nothing,
// so the follow-up is never both delivered in the run and the trigger of
// the next.
func TestDeliveryWaitsForTheRunsEnd(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	esk := env.Main("Support/Eskalation")
	lotse := env.Principal("lotse")
	run := runtest.RunOf(t, env, env.Post("alex", esk, "d1", "@lotse first"))
	if _, err := env.Runs.Start(ctx, lotse, run, holder); err != nil {
		t.Fatal(err)
	}
	thread := runtest.ReadRun(t, env, "lotse", run).ThreadID
	followUp := env.Post("alex", thread, "d2", "@lotse and also this")
	seq := followUpSeq(t, env, followUp.ID)

	// A unit that ends the run: it holds the run row.
	tx, err := env.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT id FROM runs WHERE id = $1 FOR UPDATE`, run); err != nil {
		t.Fatal(err)
	}
	acked := make(chan error, 1)
	go func() {
		_, err := env.Runs.Ack(ctx, lotse, seq)
		acked <- err
	}()
	// The acknowledgement waits on a lock (the run row), or it did not
	// wait at all: the signal is PostgreSQL's own view of its sessions.
	for waiting := 0; waiting == 0; {
		select {
		case err := <-acked:
			t.Fatalf("the acknowledgement did not wait for the run's end (%v)", err)
		case <-time.After(10 * time.Millisecond):
		}
		waiting = env.Count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)
	}
	if _, err := tx.Exec(ctx, `UPDATE run_followups SET state = 'promoted' WHERE run_id = $1 AND message_id = $2 AND state = 'pending'`, run, followUp.ID); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-acked; err != nil {
		t.Fatalf("ack: %v", err)
	}
	if n := env.Count(`SELECT count(*) FROM run_followups WHERE message_id = $1 AND state = 'promoted' AND delivered_at IS NULL`, followUp.ID); n != 1 {
		t.Fatal("the promoted follow-up was delivered as well")
	}
}

// TestEndReadsFollowUpFactsOnce: a run that ends with pending follow-ups
// reads their trigger facts once for all of them: the reads of the end are
// as many with five follow-ups as with one (only the writes of moving each
// follow-up grow).
func TestEndReadsFollowUpFactsOnce(t *testing.T) {
	t.Parallel()
	reads := map[int]int{}
	for _, n := range []int{1, 5} {
		counter := &apitest.StatementCounter{}
		env := moduletest.Build(t, moduletest.Options{Tracer: counter})
		ctx := t.Context()
		lotse := env.Principal("lotse")
		run := runtest.RunOf(t, env, env.Post("alex", env.Main("Support/Eskalation"), "f0", "@lotse first"))
		if _, err := env.Runs.Start(ctx, lotse, run, holder); err != nil {
			t.Fatal(err)
		}
		thread := runtest.ReadRun(t, env, "lotse", run).ThreadID
		for i := range n {
			env.Post("alex", thread, fmt.Sprintf("f%d", i+1), fmt.Sprintf("@lotse and point %d", i+1))
		}
		from := counter.Count()
		if _, err := env.Runs.Finish(ctx, lotse, run, holder, domain.RunCompleted, ""); err != nil {
			t.Fatal(err)
		}
		for _, q := range counter.Since(from) {
			if strings.HasPrefix(strings.TrimSpace(strings.ToUpper(q)), "SELECT") {
				reads[n]++
			}
		}
		if n := env.Count(`SELECT count(*) FROM run_followups WHERE state = 'promoted'`); n != 1 {
			t.Fatalf("%d follow-ups promoted, want 1", n)
		}
	}
	if reads[1] != reads[5] {
		t.Fatalf("the end read %d statements with one follow-up and %d with five", reads[1], reads[5])
	}
}
