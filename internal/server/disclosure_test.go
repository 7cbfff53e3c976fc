package server_test

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
)

// TestReplayAfterMoveAnswersOnlyWhatIsReadable: the idempotent replay of a
// createThread whose thread moved since into a channel the writer cannot
// read answers the same 404 as a missing thread, not the thread's new
// channel, last_seq or state.
func TestReplayAfterMoveAnswersOnlyWhatIsReadable(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	path := "/api/v1/channels/" + env.World.Channel("Support/Allgemein").ID + "/threads"
	body := map[string]any{"title": "Plans", "first_message": map[string]any{"client_msg_id": "replay-1", "content_md": "first"}}
	first := env.MustREST(t, http.MethodPost, path, env.World.Token("alex"), body, http.StatusCreated)
	thread := first["thread"].(map[string]any)["id"].(string)
	// Replay while readable: the same thread.
	again := env.REST(http.MethodPost, path, env.World.Token("alex"), body)
	if again.Status != http.StatusOK || again.Header.Get("Idempotent-Replay") != "true" {
		t.Fatalf("replay: %d %s", again.Status, again.Body)
	}
	// Robin moves it to Marketing, which Alex cannot read.
	env.MustREST(t, http.MethodPost, "/api/v1/threads/"+thread+"/move", env.World.Token("robin"),
		map[string]any{"channel_id": env.World.Channel("Marketing/Kampagnen").ID}, http.StatusOK)
	replay := env.REST(http.MethodPost, path, env.World.Token("alex"), body)
	missing := env.REST(http.MethodGet, "/api/v1/threads/01a22d00-0000-7000-8000-000000000000", env.World.Token("alex"), nil)
	apitest.WantProblem(t, "replay after the move", replay, http.StatusNotFound, "not_found", "")
	if replay.Header.Get("Idempotent-Replay") != "" {
		t.Fatal("a refused replay says it is a replay")
	}
	if p, q := replay.Problem(t), missing.Problem(t); p.Title != q.Title || p.Detail != q.Detail || p.Type != q.Type {
		t.Fatalf("replay 404 %+v differs from a missing thread's %+v", p, q)
	}
}

// TestAutoTitleStaysWithItsMessage: an auto thread's title (the first line
// of the main-thread message that started it) does not move with the
// thread into another channel, and goes when that message is deleted.
func TestAutoTitleStaysWithItsMessage(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	main := env.Main("Support/Allgemein")
	autoThread := func(cid, content string) (thread, message string) {
		t.Helper()
		m := env.MustPost("alex", main, cid, content)
		var id string
		if err := env.Pool.QueryRow(context.Background(), `SELECT id::text FROM threads WHERE parent_message_id = $1`, m["id"]).Scan(&id); err != nil {
			t.Fatalf("no auto thread: %v", err)
		}
		var th map[string]any
		env.REST(http.MethodGet, "/api/v1/threads/"+id, env.World.Token("alex"), nil).JSON(t, &th)
		if th["title_source"] != "auto" || th["title"] != "@lotse the salary list is in the drive" {
			t.Fatalf("auto thread %v", th)
		}
		return id, m["id"].(string)
	}
	titleOf := func(thread string) (string, string) {
		var title, source *string
		env.Pool.QueryRow(context.Background(), `SELECT title, title_source FROM threads WHERE id = $1`, thread).Scan(&title, &source)
		deref := func(s *string) string {
			if s == nil {
				return ""
			}
			return *s
		}
		return deref(title), deref(source)
	}

	moved, _ := autoThread("auto-1", "@lotse the salary list is in the drive\nsecond line")
	r := env.MustREST(t, http.MethodPost, "/api/v1/threads/"+moved+"/move", env.World.Token("alex"),
		map[string]any{"channel_id": env.World.Channel("Support/Eskalation").ID}, http.StatusOK)
	if _, has := r["title"]; has {
		t.Fatalf("moved thread still has a title: %v", r)
	}
	if title, source := titleOf(moved); title != "" || source != "" {
		t.Fatalf("stored title after the move: %q (%s)", title, source)
	}
	if n := env.Count(`SELECT count(*) FROM event_log WHERE type = 'thread.moved' AND payload::text LIKE '%salary%'`); n != 0 {
		t.Fatal("the title travelled in the thread.moved events")
	}

	kept, msg := autoThread("auto-2", "@lotse the salary list is in the drive")
	env.MustREST(t, http.MethodDelete, "/api/v1/messages/"+msg, env.World.Token("alex"), nil, http.StatusOK)
	if title, source := titleOf(kept); title != "" || source != "" {
		t.Fatalf("title after its message was deleted: %q (%s)", title, source)
	}
	// A person's own title is theirs: it stays on a move.
	path := "/api/v1/channels/" + env.World.Channel("Support/Allgemein").ID + "/threads"
	own := env.MustREST(t, http.MethodPost, path, env.World.Token("alex"), map[string]any{"title": "My title",
		"first_message": map[string]any{"client_msg_id": "own-1", "content_md": "x"}}, http.StatusCreated)
	ownID := own["thread"].(map[string]any)["id"].(string)
	env.MustREST(t, http.MethodPost, "/api/v1/threads/"+ownID+"/move", env.World.Token("alex"),
		map[string]any{"channel_id": env.World.Channel("Support/Eskalation").ID}, http.StatusOK)
	if title, _ := titleOf(ownID); title != "My title" {
		t.Fatalf("a user title changed on move: %q", title)
	}
}

// TestHiddenAndMissingTakeTheSameStatements: a resource the caller may not
// see and one that does not exist run the same statements, so neither
// the answer nor its timing tells them apart.
func TestHiddenAndMissingTakeTheSameStatements(t *testing.T) {
	t.Parallel()
	counter := &apitest.StatementCounter{}
	// The sweeper's statements (it looks at the queued run below) would
	// land in whichever request it overlaps: it sweeps once an hour here.
	env := apitest.Start(t, apitest.Options{Tracer: counter, Config: map[string]string{config.RunSweepInterval: "1h"}})
	// Sam's token has been used before (its last-use bookkeeping, written
	// at most once a minute, is not part of what is compared).
	env.REST(http.MethodGet, "/api/v1/me", env.World.Token("sam"), nil)
	hidden := env.MustPost("alex", env.Main("Support/Eskalation"), "hidden-1", "escalation only")
	missingID := "01a22d00-0000-7000-8000-000000000000"
	env.MustPost("alex", env.Main("Support/Eskalation"), "hidden-run", "@lotse a run sam cannot see")
	var run string
	if err := env.Pool.QueryRow(context.Background(), `SELECT id::text FROM runs LIMIT 1`).Scan(&run); err != nil {
		t.Fatal(err)
	}
	// A file attached in Eskalation, and an unattached one of Alex's.
	attached := mustUpload(t, env, "alex", "esk.txt", []byte("escalation notes"))
	if r := postWithFiles(env, "alex", env.Main("Support/Eskalation"), "hidden-file", "notes", attached); r.Status != http.StatusCreated {
		t.Fatalf("attach: %d %s", r.Status, r.Body)
	}
	unattached := mustUpload(t, env, "alex", "mine.txt", []byte("mine"))
	// The first request of a token notes its use (one UPDATE, then at
	// most once per interval): make it before counting.
	if r := env.REST(http.MethodGet, "/api/v1/threads/"+missingID, env.World.Token("sam"), nil); r.Status != http.StatusNotFound {
		t.Fatalf("warm-up: %d", r.Status)
	}
	for _, c := range []struct{ hidden, missing string }{
		{"/api/v1/threads/" + env.Main("Support/Eskalation"), "/api/v1/threads/" + missingID},
		{"/api/v1/messages/" + hidden["id"].(string), "/api/v1/messages/" + missingID},
		{"/api/v1/channels/" + env.World.Channel("Support/Eskalation").ID, "/api/v1/channels/" + missingID},
		{"/api/v1/runs/" + run, "/api/v1/runs/" + missingID},
		{"/api/v1/files/" + attached, "/api/v1/files/" + missingID},
		{"/api/v1/files/" + unattached, "/api/v1/files/" + missingID},
	} {
		statements := func(path string) []string {
			from := counter.Count()
			r := env.REST(http.MethodGet, path, env.World.Token("sam"), nil)
			apitest.WantProblem(t, path, r, http.StatusNotFound, "not_found", "")
			return counter.Since(from)
		}
		// Compared as multisets: the door spends the rate-limit token on its
		// own goroutine while it reads the target, so the spend's statement
		// may land before or after the read; which statements run, and how
		// many of each, is what must not tell hidden from missing.
		h, m := statements(c.hidden), statements(c.missing)
		slices.Sort(h)
		slices.Sort(m)
		if len(h) != len(m) {
			t.Fatalf("%s: hidden ran %d statements %q, missing %d %q", c.hidden, len(h), h, len(m), m)
		}
		for i := range h {
			if h[i] != m[i] {
				t.Fatalf("%s: the statements differ (sorted, at %d):\n%s\n%s", c.hidden, i, h[i], m[i])
			}
		}
	}
}
