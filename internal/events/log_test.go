package events_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/platform/ids"
)

// appendInUnit appends evs in a unit of work of their own and fails the
// test when it cannot.
func appendInUnit(t *testing.T, env *moduletest.Env, evs ...events.Event) {
	t.Helper()
	if err := env.DB.InTx(t.Context(), func(ctx context.Context) error { return env.Events.Append(ctx, evs...) }); err != nil {
		t.Fatalf("append %d events: %v", len(evs), err)
	}
}

// all lists the whole client event log.
func all(t *testing.T, env *moduletest.Env) []events.Event { return after(t, env, 0) }

// after lists the client event log after seq.
func after(t *testing.T, env *moduletest.Env, seq int64) []events.Event {
	t.Helper()
	evs, err := env.Events.AfterIn(t.Context(), seq, 1000, true, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// seqs returns the seqs of evs.
func seqs(evs []events.Event) []int64 {
	out := make([]int64, 0, len(evs))
	for _, e := range evs {
		out = append(out, e.Seq)
	}
	return out
}

// TestParseCursor: a cursor is plain decimal digits (0-9 only, no sign,
// so neither "+5" nor "-0") that fit an int64, and "" is the start (0);
// anything else is refused.
func TestParseCursor(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"", 0, true},
		{"0", 0, true},
		{"42", 42, true},
		{"007", 7, true},
		{"9223372036854775807", 9223372036854775807, true},
		{"-1", 0, false},
		{"9223372036854775808", 0, false},
		{"1.5", 0, false},
		{"1e3", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"0x10", 0, false},
		{"now", 0, false},
		{"+5", 0, false},
		{"+0", 0, false},
		{"-0", 0, false},
		{"1_000", 0, false},
		{"\u0661", 0, false},
		{"5\n", 0, false},
	}
	for _, c := range cases {
		got, ok := events.ParseCursor(c.in)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("ParseCursor(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// TestClientLog proves the rules of the client event log on one database,
// one rule a subtest, in order; each subtest reads only what it appended
// (after the log's end as it found it).
func TestClientLog(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	t.Run("append and list", func(t *testing.T) { appendAndList(t, env) })
	t.Run("part of its unit", func(t *testing.T) { appendIsPartOfItsUnit(t, env) })
	t.Run("tombstone", func(t *testing.T) { tombstone(t, env) })
	t.Run("writers ordered by commit", func(t *testing.T) { appendOrdersWritersByCommit(t, env) })
	t.Run("notify at commit", func(t *testing.T) { notifyAtCommit(t, env) })
}

// end returns the last seq of the client event log.
func end(t *testing.T, env *moduletest.Env) int64 {
	t.Helper()
	n, err := env.Events.End(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// appendAndList: client events are numbered in order, stored with the
// clock's time and read back as written; AfterIn reads after the cursor
// (exclusive), oldest first, up to limit, and only what the visibility
// predicate names: events of the given channels, of the given threads
// (whatever their channel), and space events (no channel) of the given
// spaces; End is the last seq, and the appended counter counts per stream.
func appendAndList(t *testing.T, env *moduletest.Env) {
	ctx := t.Context()
	allgemein, eskalation := env.World.Channel("Support/Allgemein"), env.World.Channel("Support/Eskalation")
	support, marketing := env.World.Spaces["Support"], env.World.Spaces["Marketing"]
	thread, message := ids.New(), ids.New()
	clientBefore := env.Metric(`bothy_events_appended_total{stream="client"}`)
	agentBefore := env.Metric(`bothy_events_appended_total{stream="agent"}`)
	base := end(t, env)
	start := env.Clock.Now()

	written := []events.Event{
		{Type: events.MessageCreated, ChannelID: allgemein.ID, ThreadID: allgemein.MainThreadID, MessageID: message,
			Payload: map[string]any{"id": message, "author": "alex", "n": 1.0, "tags": []any{"a", "b"}}},
		{Type: events.ThreadCreated, ChannelID: eskalation.ID, ThreadID: thread, Payload: map[string]any{"id": thread}},
		{Type: events.SpaceUpdated, SpaceID: support, Payload: map[string]any{"id": support}},
		// A channel event that also names its space is a channel event.
		{Type: events.ChannelUpdated, ChannelID: eskalation.ID, SpaceID: support, Payload: map[string]any{"id": eskalation.ID}},
		{Type: events.SpaceCreated, SpaceID: marketing, Payload: map[string]any{}},
	}
	agentEvent := events.Event{AgentID: env.World.ID("lotse"), Type: events.AgentInvocation, RunID: ids.New(), Payload: map[string]any{"k": "v"}}
	appendInUnit(t, env, written[:2]...)
	env.Clock.Advance(time.Second)
	appendInUnit(t, env, append(slices.Clone(written[2:]), agentEvent)...)

	got := after(t, env, base)
	wantReadBack(t, got, written, start)
	s := seqs(got)
	if e := end(t, env); e != s[4] {
		t.Fatalf("End %d, want %d", e, s[4])
	}

	cases := []struct {
		name                      string
		after                     int64
		limit                     int
		all                       bool
		channels, threads, spaces []string
		want                      []int64
	}{
		{"everything", base, 100, true, nil, nil, nil, s},
		{"after the second", s[1], 100, true, nil, nil, nil, s[2:]},
		{"after the last", s[4], 100, true, nil, nil, nil, nil},
		{"limit", base, 2, true, nil, nil, nil, s[:2]},
		{"nothing named", base, 100, false, nil, nil, nil, nil},
		{"one channel", base, 100, false, []string{allgemein.ID}, nil, nil, s[:1]},
		{"the other channel", base, 100, false, []string{eskalation.ID}, nil, nil, []int64{s[1], s[3]}},
		{"a thread only", base, 100, false, nil, []string{thread}, nil, s[1:2]},
		{"a space: its space events only", base, 100, false, nil, nil, []string{support}, s[2:3]},
		{"two spaces", base, 100, false, nil, nil, []string{support, marketing}, []int64{s[2], s[4]}},
		{"channel, thread and space", s[0], 1, false, []string{allgemein.ID}, []string{thread}, []string{support}, s[1:2]},
		{"unknown ids", base, 100, false, []string{ids.New()}, []string{ids.New()}, []string{ids.New()}, nil},
	}
	for _, c := range cases {
		evs, err := env.Events.AfterIn(ctx, c.after, c.limit, c.all, c.channels, c.threads, c.spaces)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := seqs(evs); !slices.Equal(got, c.want) {
			t.Errorf("%s: seqs %v, want %v", c.name, got, c.want)
		}
	}

	if d := env.Metric(`bothy_events_appended_total{stream="client"}`) - clientBefore; d != 5 {
		t.Errorf("client events counted %v, want 5", d)
	}
	if d := env.Metric(`bothy_events_appended_total{stream="agent"}`) - agentBefore; d != 1 {
		t.Errorf("agent events counted %v, want 1", d)
	}
}

// wantReadBack checks the client events got read back as written, in
// order with increasing seqs: the first two appended at start, the rest a
// second later.
func wantReadBack(t *testing.T, got, written []events.Event, start time.Time) {
	t.Helper()
	if len(got) != len(written) {
		t.Fatalf("%d client events stored, want %d: %+v", len(got), len(written), got)
	}
	for i, e := range got {
		want := written[i]
		want.Seq = e.Seq
		want.CreatedAt = start
		if i >= 2 {
			want.CreatedAt = start.Add(time.Second)
		}
		if i > 0 && e.Seq <= got[i-1].Seq {
			t.Fatalf("seqs not increasing: %v", seqs(got))
		}
		if !e.CreatedAt.Equal(want.CreatedAt) {
			t.Fatalf("event %d created %v, want %v", i, e.CreatedAt, want.CreatedAt)
		}
		e.CreatedAt = want.CreatedAt
		if !reflect.DeepEqual(e, want) {
			t.Fatalf("event %d read back\n got %+v\nwant %+v", i, e, want)
		}
	}
}

// appendIsPartOfItsUnit: events are written in the unit of work of
// their change: a unit that rolls back leaves no event, and an event
// without channel or space fails its whole unit; appending nothing is a
// no-op.
func appendIsPartOfItsUnit(t *testing.T, env *moduletest.Env) {
	ctx := t.Context()
	count := func() int {
		return env.Count(`SELECT count(*) FROM event_log`) + env.Count(`SELECT count(*) FROM agent_events`)
	}
	before := count()
	channel := env.World.Channel("Support/Allgemein").ID
	if err := env.Events.Append(ctx); err != nil {
		t.Fatal(err)
	}
	failed := errors.New("the change failed")
	err := env.DB.InTx(ctx, func(ctx context.Context) error {
		if err := env.Events.Append(ctx, events.Event{Type: events.MessageCreated, ChannelID: channel, Payload: map[string]any{}},
			events.Event{AgentID: env.World.ID("lotse"), Type: events.AgentInvocation, Payload: map[string]any{}}); err != nil {
			return err
		}
		return failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("unit: %v", err)
	}
	err = env.DB.InTx(ctx, func(ctx context.Context) error {
		return env.Events.Append(ctx, events.Event{Type: events.MessageCreated, ChannelID: channel, Payload: map[string]any{}},
			events.Event{Type: events.MessageCreated, Payload: map[string]any{}})
	})
	if err == nil {
		t.Fatal("an event without channel or space was stored")
	}
	if n := count() - before; n != 0 {
		t.Fatalf("%d events of failed units stored", n)
	}
}

// appendOrdersWritersByCommit: a unit that appends waits for every
// earlier appending unit to commit, so seq order is commit order and a
// reader that has seen seq n never later finds a smaller seq appear.
func appendOrdersWritersByCommit(t *testing.T, env *moduletest.Env) {
	ctx := t.Context()
	base := end(t, env)
	channel := env.World.Channel("Support/Allgemein").ID
	ev := func(who string) events.Event {
		return events.Event{Type: events.MessageCreated, ChannelID: channel, Payload: map[string]any{"who": who}}
	}
	appended, release := make(chan struct{}), make(chan struct{})
	// However the test ends, the first unit ends: else it would hold the
	// writers' lock for the subtests that follow.
	var releaseOnce sync.Once
	releaseFirst := func() { releaseOnce.Do(func() { close(release) }) }
	defer releaseFirst()
	first := make(chan error, 1)
	go func() {
		first <- env.DB.InTx(ctx, func(ctx context.Context) error {
			if err := env.Events.Append(ctx, ev("alex")); err != nil {
				return err
			}
			close(appended)
			<-release
			return nil
		})
	}()
	select {
	case <-appended:
	case err := <-first:
		t.Fatalf("the first unit: %v", err)
	}
	second := make(chan error, 1)
	go func() {
		second <- env.DB.InTx(ctx, func(ctx context.Context) error { return env.Events.Append(ctx, ev("sam")) })
	}()
	// The second unit waits on a lock, or it did not wait at all: the
	// signal is PostgreSQL's own view of its sessions.
	for waiting := 0; waiting == 0; {
		select {
		case err := <-second:
			t.Fatalf("the second unit appended while the first was open (%v)", err)
		case <-time.After(10 * time.Millisecond):
		}
		waiting = env.Count(`SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
			WHERE d.datname = current_database() AND l.locktype = 'advisory' AND NOT l.granted`)
	}
	if n := len(after(t, env, base)); n != 0 {
		t.Fatalf("%d events visible before any commit", n)
	}
	releaseFirst()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	got := after(t, env, base)
	if len(got) != 2 || got[0].Payload["who"] != "alex" || got[1].Payload["who"] != "sam" {
		t.Fatalf("log %+v, want Alex's event before Sam's", got)
	}
}

// notifyAtCommit: appending schedules one notification per stream,
// sent at commit: "events" for the client log, the last new seq for agent
// streams; WakeStreams sends "0"; a unit that rolls back sends nothing.
func notifyAtCommit(t *testing.T, env *moduletest.Env) {
	ctx := t.Context()
	conn, err := env.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+events.NotifyChannel); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = conn.Exec(context.Background(), "UNLISTEN *") }()
	channel, lotse := env.World.Channel("Support/Allgemein").ID, env.World.ID("lotse")
	client := events.Event{Type: events.MessageCreated, ChannelID: channel, Payload: map[string]any{}}
	agent := events.Event{AgentID: lotse, Type: events.AgentInvocation, Payload: map[string]any{}}

	_ = env.DB.InTx(ctx, func(ctx context.Context) error {
		if err := env.Events.Append(ctx, client, agent); err != nil {
			t.Errorf("append: %v", err)
		}
		return errors.New("roll back")
	})
	appendInUnit(t, env, client, client)
	appendInUnit(t, env, agent, agent)
	agentEnd, err := env.Events.AgentEnd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.DB.InTx(ctx, env.Events.WakeStreams); err != nil {
		t.Fatal(err)
	}
	want := []string{events.NotifyClientEvents, fmt.Sprint(agentEnd), "0"}
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for i, w := range want {
		n, err := conn.Conn().WaitForNotification(wait)
		if err != nil {
			t.Fatalf("notification %d: %v", i, err)
		}
		if n.Channel != events.NotifyChannel || n.Payload != w {
			t.Fatalf("notification %d: %s %q, want %q (the rolled-back unit must send nothing)", i, n.Channel, n.Payload, w)
		}
	}
}

// tombstone: deleting a message replaces the payload of every event of
// that message, and of no other event.
func tombstone(t *testing.T, env *moduletest.Env) {
	ctx := t.Context()
	base := end(t, env)
	channel := env.World.Channel("Support/Allgemein").ID
	deleted, kept := ids.New(), ids.New()
	appendInUnit(t, env,
		events.Event{Type: events.MessageCreated, ChannelID: channel, MessageID: deleted, Payload: map[string]any{"content": "Sam's secret"}},
		events.Event{Type: events.MessageCreated, ChannelID: channel, MessageID: kept, Payload: map[string]any{"content": "Robin's note"}},
		events.Event{Type: events.MessageDeleted, ChannelID: channel, MessageID: deleted, Payload: map[string]any{"content": "Sam's secret, edited"}},
	)
	tomb := map[string]any{"id": deleted, "deleted": true}
	if err := env.DB.InTx(ctx, func(ctx context.Context) error { return env.Events.Tombstone(ctx, deleted, tomb) }); err != nil {
		t.Fatal(err)
	}
	got := after(t, env, base)
	for i, want := range []map[string]any{tomb, {"content": "Robin's note"}, tomb} {
		if !reflect.DeepEqual(got[i].Payload, want) {
			t.Errorf("event %d payload %v, want %v", i, got[i].Payload, want)
		}
	}
}
