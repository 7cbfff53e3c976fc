package events_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
)

// TestHorizon: ClientEventsBefore names the last event created strictly
// before a time; DeleteClientEvents removes events up to a seq, oldest
// first, at most limit at a time; the horizon of a stream starts at 0,
// moves only up, and belongs to its stream alone; a reader whose cursor
// lies below the horizon gets cursor_expired naming the horizon as the
// oldest valid cursor, while the horizon itself and cursor 0 read the kept
// events.
func TestHorizon(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	allgemein := env.World.Channel("Support/Allgemein")
	ev := events.Event{Type: events.MessageCreated, ChannelID: allgemein.ID, ThreadID: allgemein.MainThreadID, Payload: map[string]any{}}
	if h, err := env.Events.Horizon(ctx, events.StreamClient); err != nil || h != 0 {
		t.Fatalf("horizon of a new log: %d %v", h, err)
	}
	for range 5 {
		appendInUnit(t, env, ev)
	}
	env.Clock.Advance(time.Hour)
	cutoff := env.Clock.Now()
	appendInUnit(t, env, ev, ev)
	s := seqs(all(t, env))

	for _, c := range []struct {
		at   time.Time
		want int64
	}{{moduletest.Start, 0}, {moduletest.Start.Add(time.Microsecond), s[4]}, {cutoff, s[4]}, {cutoff.Add(time.Microsecond), s[6]}} {
		if got, err := env.Events.ClientEventsBefore(ctx, c.at); err != nil || got != c.want {
			t.Errorf("ClientEventsBefore(%s) = %d %v, want %d", c.at.Format(time.TimeOnly), got, err, c.want)
		}
	}

	upto := s[4]
	if err := env.Events.MoveHorizon(ctx, events.StreamClient, upto); err != nil {
		t.Fatal(err)
	}
	deleteClientEventsUpTo(t, env, upto, s)
	checkHorizonOnlyMovesUp(t, env, upto, s[1])

	checkReadersAtTheHorizon(t, env, upto, s[5:])
}

// deleteClientEventsUpTo deletes the client events up to upto (the fifth
// of the seqs s) two at a time and checks that every batch removes the
// oldest first, that the batches are 2, 2, 1, 0, and that the events after
// upto are kept.
func deleteClientEventsUpTo(t *testing.T, env *moduletest.Env, upto int64, s []int64) {
	t.Helper()
	var removed []int64
	for {
		n, err := env.Events.DeleteClientEvents(t.Context(), upto, 2)
		if err != nil {
			t.Fatal(err)
		}
		removed = append(removed, n)
		if n == 0 {
			break
		}
		// Oldest first: what is left starts right after what went.
		var gone int64
		for _, k := range removed {
			gone += k
		}
		if left := seqs(all(t, env)); left[0] != s[gone] {
			t.Fatalf("after removing %d: log starts at %d, want %d", gone, left[0], s[gone])
		}
	}
	if !slices.Equal(removed, []int64{2, 2, 1, 0}) {
		t.Fatalf("batches removed %v, want [2 2 1 0]", removed)
	}
	if left := seqs(all(t, env)); !slices.Equal(left, s[5:]) {
		t.Fatalf("left %v, want %v", left, s[5:])
	}
}

// checkHorizonOnlyMovesUp moves the client stream's horizon, now at upto,
// down to lower and to 0, and checks that it stays at upto and that
// another stream's horizon is still 0.
func checkHorizonOnlyMovesUp(t *testing.T, env *moduletest.Env, upto, lower int64) {
	t.Helper()
	ctx := t.Context()
	for _, lower := range []int64{lower, 0} {
		if err := env.Events.MoveHorizon(ctx, events.StreamClient, lower); err != nil {
			t.Fatal(err)
		}
	}
	if h, err := env.Events.Horizon(ctx, events.StreamClient); err != nil || h != upto {
		t.Fatalf("horizon %d %v after moving it down, want it kept at %d", h, err, upto)
	}
	if h, err := env.Events.Horizon(ctx, "agent_events"); err != nil || h != 0 {
		t.Fatalf("another stream's horizon %d %v, want 0", h, err)
	}
}

// checkReadersAtTheHorizon checks the reader's side of the horizon upto
// of the client stream, whose kept events are kept.
func checkReadersAtTheHorizon(t *testing.T, env *moduletest.Env, upto int64, kept []int64) {
	t.Helper()
	ctx := t.Context()
	// The reader's side (feed decides it from Horizon): below the horizon
	// is cursor_expired, the horizon itself and 0 read what is kept.
	alex := env.Principal("alex")
	for _, below := range []int64{1, upto - 1} {
		_, err := env.Feed.List(ctx, alex, strconv.FormatInt(below, 10), 0)
		if err == nil {
			t.Fatalf("cursor %d below the horizon %d: no error, want cursor_expired", below, upto)
		}
		if p := problem.From("events.testHorizon", err); p.Code != problem.CursorExpired || p.OldestCursor != strconv.FormatInt(upto, 10) {
			t.Fatalf("cursor %d below the horizon %d: %v (oldest %q), want cursor_expired naming %d", below, upto, err, p.OldestCursor, upto)
		}
	}
	for _, after := range []string{strconv.FormatInt(upto, 10), "0", ""} {
		page, err := env.Feed.List(ctx, alex, after, 0)
		if err != nil {
			t.Fatalf("cursor %q: %v", after, err)
		}
		var got []int64
		for _, e := range page.Events {
			got = append(got, e.Seq)
		}
		if !slices.Equal(got, kept) {
			t.Fatalf("cursor %q reads %v, want %v", after, got, kept)
		}
	}
}

// TestAgentStreams proves the rules of the agents' streams on one
// database, one rule a subtest, in order.
func TestAgentStreams(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	t.Run("stream", func(t *testing.T) { agentStream(t, env) })
	t.Run("retention", func(t *testing.T) { deleteAgentEvents(t, env) })
}

// agentStream: agent events go to their agent's stream, never to the
// client log; AgentAfter reads one agent's events after the cursor, oldest
// first, up to limit, as written; AgentEnd is the last seq over all
// agents (their seqs are shared).
func agentStream(t *testing.T, env *moduletest.Env) {
	ctx := t.Context()
	lotse, texter := env.World.ID("lotse"), env.World.ID("texter")
	run, message := ids.New(), ids.New()
	if end, err := env.Events.AgentEnd(ctx); err != nil || end != 0 {
		t.Fatalf("AgentEnd of empty streams: %d %v", end, err)
	}
	written := []events.Event{
		{AgentID: lotse, Type: events.AgentInvocation, RunID: run, MessageID: message, Payload: map[string]any{"run_id": run, "n": 1.0}},
		{AgentID: texter, Type: events.AgentInvocation, RunID: ids.New(), Payload: map[string]any{}},
		{AgentID: lotse, Type: events.AgentFollowup, RunID: run, Payload: map[string]any{"run_id": run}},
		{AgentID: lotse, Type: events.RunCancelRequested, Payload: map[string]any{}},
	}
	appendInUnit(t, env, written[:2]...)
	appendInUnit(t, env, written[2:]...)
	if n := len(all(t, env)); n != 0 {
		t.Fatalf("%d agent events in the client log", n)
	}

	mine, err := env.Events.AgentAfter(ctx, lotse, 0, 100)
	if err != nil || len(mine) != 3 {
		t.Fatalf("Lotse's stream %+v %v", mine, err)
	}
	checkAgentEventsReadBack(t, env, mine, []events.Event{written[0], written[2], written[3]})
	theirs, err := env.Events.AgentAfter(ctx, texter, 0, 100)
	if err != nil || len(theirs) != 1 || theirs[0].Seq <= mine[0].Seq || theirs[0].Seq >= mine[1].Seq {
		t.Fatalf("Texter's stream %+v %v", theirs, err)
	}
	checkAgentAfterCursors(t, env, lotse, mine)
}

// checkAgentEventsReadBack checks that the events mine, as AgentAfter read
// them, are the events written, in order: with rising seqs, created now,
// and with the agent, type, run, message and payload they were written
// with.
func checkAgentEventsReadBack(t *testing.T, env *moduletest.Env, mine, written []events.Event) {
	t.Helper()
	for i, want := range written {
		got := mine[i]
		if got.Seq <= 0 || (i > 0 && got.Seq <= mine[i-1].Seq) || !got.CreatedAt.Equal(env.Clock.Now()) {
			t.Fatalf("event %d: seq %d created %v", i, got.Seq, got.CreatedAt)
		}
		want.Seq, want.CreatedAt = got.Seq, got.CreatedAt
		if got.AgentID != want.AgentID || got.Type != want.Type || got.RunID != want.RunID || got.MessageID != want.MessageID ||
			!slices.Equal(keys(got.Payload), keys(want.Payload)) || got.Payload["run_id"] != want.Payload["run_id"] {
			t.Fatalf("event %d read back\n got %+v\nwant %+v", i, got, want)
		}
	}
}

// checkAgentAfterCursors checks the cursor and limit of AgentAfter on the
// agent's stream mine (all of its events): after the first with limit 1
// reads the second, after the last reads nothing, and AgentEnd is the
// last.
func checkAgentAfterCursors(t *testing.T, env *moduletest.Env, agent string, mine []events.Event) {
	t.Helper()
	ctx := t.Context()
	if after, err := env.Events.AgentAfter(ctx, agent, mine[0].Seq, 1); err != nil || len(after) != 1 || after[0].Seq != mine[1].Seq {
		t.Fatalf("after the first, limit 1: %+v %v", after, err)
	}
	if after, err := env.Events.AgentAfter(ctx, agent, mine[2].Seq, 100); err != nil || len(after) != 0 {
		t.Fatalf("after the last: %+v %v", after, err)
	}
	if end, err := env.Events.AgentEnd(ctx); err != nil || end != mine[2].Seq {
		t.Fatalf("AgentEnd %d %v, want %d", end, err, mine[2].Seq)
	}
}

// keys returns the sorted keys of m.
func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// deleteAgentEvents: retention removes, at most limit at a time, the
// agent events created before the cutoff whose run has ended (the runs
// module's view ended_runs); it keeps events of active runs, of runs that
// do not exist, events without a run and events created at the cutoff or
// later.
func deleteAgentEvents(t *testing.T, env *moduletest.Env) {
	ctx := t.Context()
	lotse := env.World.ID("lotse")
	base, err := env.Events.AgentEnd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Two runs of the runs module's table (a test shapes its world by
	// hand): one completed, one still running.
	ended, open, unknown := ids.New(), ids.New(), ids.New()
	for run, state := range map[string]string{ended: "completed", open: "running"} {
		env.Exec(`INSERT INTO runs (id, thread_id, agent_id, session_mode, trigger_kind, state, queued_at, last_activity_at)
			VALUES ($1, $2, $3, 'guest', 'message', $4, $5, $5)`, run, env.Main("Support/Allgemein"), lotse, state, env.Clock.Now())
	}
	ev := func(run, what string) events.Event {
		return events.Event{AgentID: lotse, Type: events.AgentInvocation, RunID: run, Payload: map[string]any{"what": what}}
	}
	appendInUnit(t, env, ev(ended, "gone 1"), ev(ended, "gone 2"), ev(ended, "gone 3"), ev(open, "open run"), ev(unknown, "unknown run"), ev("", "no run"))
	env.Clock.Advance(time.Hour)
	cutoff := env.Clock.Now()
	appendInUnit(t, env, ev(ended, "at the cutoff"))

	removed := moduletest.Batches(t, 2, func(limit int) (int64, error) { return env.Events.DeleteAgentEvents(ctx, cutoff, limit) })
	if !slices.Equal(removed, []int64{2, 1, 0}) {
		t.Fatalf("batches removed %v, want [2 1 0]", removed)
	}
	left, err := env.Events.AgentAfter(ctx, lotse, base, 100)
	if err != nil {
		t.Fatal(err)
	}
	var what []string
	for _, e := range left {
		what = append(what, e.Payload["what"].(string))
	}
	if want := []string{"open run", "unknown run", "no run", "at the cutoff"}; !slices.Equal(what, want) {
		t.Fatalf("left %v, want %v", what, want)
	}
}
