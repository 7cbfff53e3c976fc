package events_test

import (
	"slices"
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/platform/ids"
)

// TestAgentEventFacts: events' shared view agent_event_facts
// (migrations/00015_module_views.sql), which the runs module joins to mark
// acknowledged follow-ups delivered, holds every agent event with the
// columns the runs module reads (agent_id, seq, type, run_id,
// message_id), read by name from rows the stream holds. A renamed or
// dropped column fails here.
func TestAgentEventFacts(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	lotse := env.World.ID("lotse")
	base, err := env.Events.AgentEnd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	run, message := ids.New(), ids.New()
	appendInUnit(t, env,
		events.Event{AgentID: lotse, Type: events.AgentFollowup, RunID: run, MessageID: message, Payload: map[string]any{}},
		events.Event{AgentID: lotse, Type: events.AgentInvocation, Payload: map[string]any{}})
	stream, err := env.Events.AgentAfter(ctx, lotse, base, 100)
	if err != nil || len(stream) != 2 {
		t.Fatalf("stream %v %v", stream, err)
	}
	type fact struct {
		agent        string
		seq          int64
		typ          string
		run, message *string
	}
	rows, err := env.Pool.Query(ctx, `SELECT e.agent_id::text, e.seq, e.type, e.run_id::text, e.message_id::text
		FROM agent_event_facts e WHERE e.agent_id = $1 AND e.seq > $2 ORDER BY e.seq`, lotse, base)
	if err != nil {
		t.Fatal(err)
	}
	var got []fact
	for rows.Next() {
		var f fact
		if err := rows.Scan(&f.agent, &f.seq, &f.typ, &f.run, &f.message); err != nil {
			t.Fatal(err)
		}
		got = append(got, f)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []fact{
		{agent: lotse, seq: stream[0].Seq, typ: string(events.AgentFollowup), run: &run, message: &message},
		{agent: lotse, seq: stream[1].Seq, typ: string(events.AgentInvocation)},
	}
	if !slices.EqualFunc(got, want, func(a, b fact) bool {
		eq := func(x, y *string) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
		return a.agent == b.agent && a.seq == b.seq && a.typ == b.typ && eq(a.run, b.run) && eq(a.message, b.message)
	}) {
		t.Fatalf("agent_event_facts holds %+v, want %+v", got, want)
	}
}
