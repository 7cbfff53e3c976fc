package server_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/apitest"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/ids"
)

// TestRetention: the purge removes client events, agent events of ended
// runs, audit rows and dead tokens past their keys; it keeps an open run's
// events however old; a cursor older than what is kept answers 410
// cursor_expired naming the oldest valid cursor on both faces.
func TestRetention(t *testing.T) {
	env := apitest.Start(t, apitest.Options{Config: map[string]string{config.RetentionAuditLog: "720h"}})
	ctx := t.Context()
	esk := env.Main("Support/Eskalation")
	before := env.Metric(`bothy_events_appended_total{stream="agent"}`)
	env.MustPost("alex", esk, "t1", "@lotse anyone?")
	if after := env.Metric(`bothy_events_appended_total{stream="agent"}`); after != before+1 {
		t.Fatalf("agent events appended %v, want %v", after, before+1)
	}
	if env.Metric(`bothy_events_appended_total{stream="client"}`) == 0 {
		t.Fatal("client events are not counted")
	}
	env.MustPost("alex", esk, "t2", "@lotse hello?") // a pending follow-up: the next run
	env.Clock.Advance(6 * time.Minute)
	if n, err := env.Server.Runs.SweepOnce(ctx); err != nil || n != 1 {
		t.Fatalf("sweep %d %v", n, err)
	}
	var ended, open string
	env.Pool.QueryRow(ctx, `SELECT id::text FROM runs WHERE state = 'failed'`).Scan(&ended)
	env.Pool.QueryRow(ctx, `SELECT id::text FROM runs WHERE state = 'queued'`).Scan(&open)
	if ended == "" || open == "" {
		t.Fatalf("runs ended %q open %q", ended, open)
	}
	oldAudit, newAudit := ids.New(), ids.New()
	now := env.Clock.Now()
	audit := func(id string, at time.Time) {
		env.Exec(`INSERT INTO audit_log (id, actor_id, action, decision, resource_kind, window_start, first_at, last_at)
			VALUES ($1, $2, 'thread.read', 'deny', 'thread', $3, $3, $3)`, id, mustPrincipal(t, env, "sam").ID, at)
	}
	audit(oldAudit, now)
	robin := mustPrincipal(t, env, "robin")
	env.Exec(`UPDATE tokens SET revoked_at = $2 WHERE principal_id = $1`, robin.ID, now)

	// A month and more later, one new message; then the purge.
	env.Clock.Advance(31 * 24 * time.Hour)
	audit(newAudit, env.Clock.Now())
	env.MustPost("sam", env.Main("Support/Allgemein"), "later", "a month later")
	var oldest int64
	env.Pool.QueryRow(ctx, `SELECT max(seq) FROM event_log WHERE created_at < $1`, env.Clock.Now().Add(-30*24*time.Hour)).Scan(&oldest)
	removed, err := env.Server.Retention.PurgeOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if removed.EventLog == 0 || removed.AgentEvents == 0 || removed.AuditLog != 1 || removed.Tokens == 0 {
		t.Fatalf("removed %+v", removed)
	}
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
	if n := env.Count(`SELECT count(*) FROM audit_log WHERE id IN ($1, $2)`, oldAudit, newAudit); n != 1 {
		t.Fatalf("%d of the two audit rows left, want the new one", n)
	}
	if n := env.Count(`SELECT count(*) FROM tokens WHERE principal_id = $1`, robin.ID); n != 0 {
		t.Fatalf("%d revoked tokens left", n)
	}
	if n := env.Count(`SELECT count(*) FROM tokens WHERE principal_id = $1`, mustPrincipal(t, env, "alex").ID); n == 0 {
		t.Fatal("a live token was removed")
	}
	// The agent still receives the open run's invocation.
	evs, _ := poll(t, env, "lotse", "", 0)
	var got bool
	for _, e := range evs {
		if e.Payload["run_id"] == ended {
			t.Fatalf("the ended run's event is still handed out: %+v", e)
		}
		got = got || e.Payload["run_id"] == open
	}
	if !got {
		t.Fatalf("agent stream after the purge lacks the open run: %+v", evs)
	}

	alex := env.World.Token("alex")
	r := env.REST(http.MethodGet, "/api/v1/events?after=1", alex, nil)
	p := r.Problem(t)
	if r.Status != http.StatusGone || p.Code != "cursor_expired" || p.OldestCursor != strconv.FormatInt(oldest, 10) {
		t.Fatalf("expired cursor: %d %s", r.Status, r.Body)
	}
	res := env.GraphQL(alex, `query($a: String) { events(after: $a) { nextAfter } }`, map[string]any{"a": "1"}, nil)
	if len(res.Errors) != 1 || res.Errors[0].Extensions.Code != "cursor_expired" || res.Errors[0].Extensions.OldestCursor != p.OldestCursor {
		t.Fatalf("GraphQL expired cursor: %+v", res.Errors)
	}
	for _, after := range []string{p.OldestCursor, ""} {
		var page struct {
			Events []struct {
				Seq string `json:"seq"`
			} `json:"events"`
		}
		// No cursor is an omitted parameter: an empty one is refused
		// (the rule for empty optional inputs).
		path := "/api/v1/events"
		if after != "" {
			path += "?after=" + after
		}
		r := env.REST(http.MethodGet, path, alex, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("after=%q: %d %s", after, r.Status, r.Body)
		}
		r.JSON(t, &page)
		if len(page.Events) == 0 {
			t.Fatalf("after=%q: no events", after)
		}
		if first, _ := strconv.ParseInt(page.Events[0].Seq, 10, 64); first <= oldest {
			t.Fatalf("after=%q: event %d was purged", after, first)
		}
	}
}
