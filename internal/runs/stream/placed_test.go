package stream_test

import (
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/moduletest"
)

// TestReadsPlaced: the hub counts a read of an agent stream once its
// cursor is resolved, for a poll (with or without a wait) and for a
// subscription's start; a read refused (a cursor beyond the end, a person
// who has no stream) places nothing. The conformance kit posts its first
// mention only after such a count moved (stream.Hub.AwaitPlaced), so an
// adapter reading from "now" cannot miss it.
func TestReadsPlaced(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	hub := env.Modules.Hub
	lotse := env.Principal("lotse")
	placed := hub.Placed()
	poll := func(who string, after string, wait time.Duration) func() error {
		return func() error { _, err := env.Runs.Poll(t.Context(), env.Principal(who), after, wait); return err }
	}
	for _, c := range []struct {
		what    string
		read    func() error
		refused bool
	}{
		{"a poll", poll("lotse", "now", 0), false},
		{"a poll that waits", poll("lotse", "now", 10*time.Millisecond), false},
		{"a subscription's start", func() error { _, err := env.Runs.StreamStart(t.Context(), lotse, ""); return err }, false},
		{"a cursor beyond the end", poll("lotse", "999999999", 0), true},
		{"a person's poll", poll("alex", "", 0), true},
	} {
		if err := c.read(); (err != nil) != c.refused {
			t.Fatalf("%s: error %v, want refused %v", c.what, err, c.refused)
		}
		want := placed + 1
		if c.refused {
			want = placed
		}
		if got := hub.Placed(); got != want {
			t.Fatalf("%s: %d reads placed, want %d", c.what, got-placed, want-placed)
		}
		placed = want
	}
	// AwaitPlaced returns at once for a count passed, and waits for the
	// next read otherwise.
	if err := hub.AwaitPlaced(t.Context(), placed-1); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- hub.AwaitPlaced(t.Context(), placed) }()
	if _, err := env.Runs.Poll(t.Context(), lotse, "", 0); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
