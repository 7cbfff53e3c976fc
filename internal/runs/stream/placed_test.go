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
	lotse, alex := env.Principal("lotse"), env.Principal("alex")
	placed := hub.Placed()
	for _, c := range []struct {
		what  string
		read  func() error
		count int64
	}{
		{"a poll", func() error { _, err := env.Runs.Poll(t.Context(), lotse, "now", 0); return err }, 1},
		{"a poll that waits", func() error { _, err := env.Runs.Poll(t.Context(), lotse, "now", 10*time.Millisecond); return err }, 1},
		{"a subscription's start", func() error { _, err := env.Runs.StreamStart(t.Context(), lotse, ""); return err }, 1},
		{"a cursor beyond the end", func() error { _, _ = env.Runs.Poll(t.Context(), lotse, "999999999", 0); return nil }, 0},
		{"a person's poll", func() error { _, _ = env.Runs.Poll(t.Context(), alex, "", 0); return nil }, 0},
	} {
		if err := c.read(); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		if got := hub.Placed(); got != placed+c.count {
			t.Fatalf("%s: %d reads placed, want %d", c.what, got-placed, c.count)
		}
		placed += c.count
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
