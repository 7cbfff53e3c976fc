package server_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// TestCursorExpiredOnBothFaces: after a purge, a cursor older than what is
// kept answers 410 cursor_expired naming the oldest valid cursor on REST
// and the same code and cursor on GraphQL; the oldest cursor and an
// omitted one read the kept events (an empty one is refused, the rule for
// empty optional inputs). What the purge removes and keeps is
// TestRetention in internal/retention.
func TestCursorExpiredOnBothFaces(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	ctx := t.Context()
	env.MustPost("alex", env.Main("Support/Allgemein"), "early", "a month ago")
	env.Clock.Advance(31 * 24 * time.Hour)
	env.MustPost("sam", env.Main("Support/Allgemein"), "later", "a month later")
	var oldest int64
	if err := env.Pool.QueryRow(ctx, `SELECT max(seq) FROM event_log WHERE created_at < $1`, env.Clock.Now().Add(-30*24*time.Hour)).Scan(&oldest); err != nil {
		t.Fatal(err)
	}
	if removed, err := env.Server.Retention.PurgeOnce(ctx); err != nil || removed.EventLog == 0 {
		t.Fatalf("purge: %+v %v", removed, err)
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
