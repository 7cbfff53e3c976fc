package retention_test

import (
	"strconv"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/pgtest"
	"bothy.example.com/bothy/internal/platform/problem"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestRetention: the purge removes client events, agent events of ended
// runs, audit rows and dead tokens past their keys; it keeps an open run's
// events however old, and the agent still receives them; a cursor older
// than what is kept is cursor_expired naming the oldest valid cursor, and
// the oldest cursor and no cursor read only kept events. That both faces
// answer the expired cursor alike is TestCursorExpiredOnBothFaces in
// internal/server.
func TestRetention(t *testing.T) {
	t.Parallel()
	env := moduletest.Build(t, moduletest.Options{Config: map[string]string{config.RetentionAuditLog: "720h"}})
	ctx := t.Context()
	esk := env.Main("Support/Eskalation")
	before := env.Metric(`bothy_events_appended_total{stream="agent"}`)
	env.Post("alex", esk, "t1", "@lotse anyone?")
	if after := env.Metric(`bothy_events_appended_total{stream="agent"}`); after != before+1 {
		t.Fatalf("agent events appended %v, want %v", after, before+1)
	}
	if env.Metric(`bothy_events_appended_total{stream="client"}`) == 0 {
		t.Fatal("client events are not counted")
	}
	env.Post("alex", esk, "t2", "@lotse hello?") // a pending follow-up: the next run
	ended, open := sweepToEndedAndOpenRun(t, env)
	oldAudit, newAudit := ids.New(), ids.New()
	now := env.Clock.Now()
	audit := func(id string, at time.Time) {
		env.Exec(`INSERT INTO audit_log (id, actor_id, action, decision, resource_kind, window_start, first_at, last_at)
			VALUES ($1, $2, 'thread.read', 'deny', 'thread', $3, $3, $3)`, id, env.World.ID("sam"), at)
	}
	audit(oldAudit, now)
	robinID := env.World.ID("robin")
	env.Exec(`UPDATE tokens SET revoked_at = $2 WHERE principal_id = $1`, robinID, now)
	// Run tokens: one of the ended run (it no longer authenticates), one
	// of the open run.
	runToken := func(run string) string {
		id := ids.New()
		env.Exec(`INSERT INTO tokens (id, principal_id, kind, hash, label, created_at, run_id, run_holder)
			VALUES ($1::uuid, $2, 'run', sha256(convert_to($1::text, 'UTF8')), 'run', $3, $4, 'proc')`, id, env.World.ID("lotse"), now, run)
		return id
	}
	endedToken, openToken := runToken(ended), runToken(open)

	// A month and more later, one new message; then the purge.
	env.Clock.Advance(31 * 24 * time.Hour)
	audit(newAudit, env.Clock.Now())
	env.Post("sam", env.Main("Support/Allgemein"), "later", "a month later")
	var oldest int64
	if err := env.Pool.QueryRow(ctx, `SELECT max(seq) FROM event_log WHERE created_at < $1`, env.Clock.Now().Add(-30*24*time.Hour)).Scan(&oldest); err != nil {
		t.Fatal(err)
	}
	removed, err := env.Modules.Retention.PurgeOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if removed.EventLog == 0 || removed.AgentEvents == 0 || removed.AuditLog != 1 || removed.Tokens == 0 {
		t.Fatalf("removed %+v", removed)
	}
	wantEventsPurged(t, env, oldest, ended, open)
	wantAuditAndTokensPurged(t, env, oldAudit, newAudit, endedToken, openToken)
	wantOpenRunHandedOut(t, env, ended, open)

	checkCursorsAfterPurge(t, env, oldest)
}

// wantEventsPurged checks the purge of events: no client event up to
// oldest (the newest past the key) is left but the new ones are, and the
// agent events of the ended run are gone while the open run's stay.
func wantEventsPurged(t *testing.T, env *moduletest.Env, oldest int64, ended, open string) {
	t.Helper()
	if n := env.Count(`SELECT count(*) FROM event_log WHERE seq <= $1`, oldest); n != 0 {
		t.Fatalf("%d old client events left", n)
	}
	if n := env.Count(`SELECT count(*) FROM event_log`); n == 0 {
		t.Fatal("the new client events were removed")
	}
	if n := env.Count(`SELECT count(*) FROM agent_events WHERE run_id = $1`, ended); n != 0 {
		t.Fatalf("%d agent events of the ended run left", n)
	}
	if n := env.Count(`SELECT count(*) FROM agent_events WHERE run_id = $1`, open); n == 0 {
		t.Fatal("the open run's (unacknowledged) agent event was removed")
	}
}

// wantAuditAndTokensPurged checks the purge of audit rows and tokens: of
// the two audit rows only the new one is left, robin's revoked tokens and
// the ended run's token are gone, alex's live tokens and the open run's
// token stay.
func wantAuditAndTokensPurged(t *testing.T, env *moduletest.Env, oldAudit, newAudit, endedToken, openToken string) {
	t.Helper()
	robinID := env.World.ID("robin")
	if n := env.Count(`SELECT count(*) FROM audit_log WHERE id IN ($1, $2)`, oldAudit, newAudit); n != 1 {
		t.Fatalf("%d of the two audit rows left, want the new one", n)
	}
	if n := env.Count(`SELECT count(*) FROM tokens WHERE principal_id = $1`, robinID); n != 0 {
		t.Fatalf("%d revoked tokens left", n)
	}
	if n := env.Count(`SELECT count(*) FROM tokens WHERE principal_id = $1`, env.World.ID("alex")); n == 0 {
		t.Fatal("a live token was removed")
	}
	if n := env.Count(`SELECT count(*) FROM tokens WHERE id = $1`, endedToken); n != 0 {
		t.Fatal("the run token of the ended run was kept")
	}
	if n := env.Count(`SELECT count(*) FROM tokens WHERE id = $1`, openToken); n != 1 {
		t.Fatal("the run token of the open run was removed")
	}
}

// sweepToEndedAndOpenRun lets lotse's run time out in the sweep (it
// fails), which queues the pending follow-up's run, and returns the ids of
// the ended run and the open one.
func sweepToEndedAndOpenRun(t *testing.T, env *moduletest.Env) (ended, open string) {
	t.Helper()
	ctx := t.Context()
	env.Clock.Advance(6 * time.Minute)
	if n, err := env.Runs.SweepOnce(ctx); err != nil || n != 1 {
		t.Fatalf("sweep %d %v", n, err)
	}
	if err := env.Pool.QueryRow(ctx, `SELECT id::text FROM runs WHERE state = 'failed'`).Scan(&ended); err != nil {
		t.Fatalf("ended run: %v", err)
	}
	if err := env.Pool.QueryRow(ctx, `SELECT id::text FROM runs WHERE state = 'queued'`).Scan(&open); err != nil {
		t.Fatalf("open run: %v", err)
	}
	if ended == "" || open == "" {
		t.Fatalf("runs ended %q open %q", ended, open)
	}
	return ended, open
}

// wantOpenRunHandedOut checks that lotse's stream still hands out the open
// run's invocation after the purge, and no event of the ended run.
func wantOpenRunHandedOut(t *testing.T, env *moduletest.Env, ended, open string) {
	t.Helper()
	ctx := t.Context()
	// The agent still receives the open run's invocation.
	stream, err := env.Runs.Poll(ctx, env.Principal("lotse"), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got bool
	for _, e := range stream.Events {
		if e.Payload["run_id"] == ended {
			t.Fatalf("the ended run's event is still handed out: %+v", e)
		}
		got = got || e.Payload["run_id"] == open
	}
	if !got {
		t.Fatalf("agent stream after the purge lacks the open run: %+v", stream.Events)
	}
}

// checkCursorsAfterPurge checks that a cursor older than oldest, the last
// purged client event, is cursor_expired naming the oldest valid cursor,
// and that the oldest valid cursor and no cursor read only kept events.
func checkCursorsAfterPurge(t *testing.T, env *moduletest.Env, oldest int64) {
	t.Helper()
	ctx := t.Context()
	alex := env.Principal("alex")
	_, err := env.Feed.List(ctx, alex, "1", 0)
	p := problem.From("retention.testRetention", err)
	if err == nil || p.Code != problem.CursorExpired || p.OldestCursor != strconv.FormatInt(oldest, 10) {
		t.Fatalf("expired cursor: %v (oldest cursor %q, want %d)", err, p.OldestCursor, oldest)
	}
	// The oldest valid cursor, and no cursor, read only kept events.
	for _, after := range []string{p.OldestCursor, ""} {
		page, err := env.Feed.List(ctx, alex, after, 0)
		if err != nil {
			t.Fatalf("after=%q: %v", after, err)
		}
		if len(page.Events) == 0 {
			t.Fatalf("after=%q: no events", after)
		}
		if first := page.Events[0].Seq; first <= oldest {
			t.Fatalf("after=%q: event %d was purged", after, first)
		}
	}
}
