package stream

import (
	"context"
	"testing"
	"time"
)

// TestHubAwaitWaiting: AwaitWaiting returns once enough polls are parked,
// Waiting follows park and unpark, and a context that ends first is an
// error naming the counts.
func TestHubAwaitWaiting(t *testing.T) {
	t.Parallel()
	h := NewHub()
	if h.Waiting() != 0 {
		t.Fatalf("a new hub has %d waiting", h.Waiting())
	}
	done := make(chan error, 1)
	go func() { done <- h.AwaitWaiting(context.Background(), 2) }()
	first := h.park()
	select {
	case err := <-done:
		t.Fatalf("AwaitWaiting(2) returned with one parked: %v", err)
	default:
	}
	second := h.park()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("AwaitWaiting(2) did not return with two parked")
	}
	first()
	second()
	if h.Waiting() != 0 {
		t.Fatalf("%d waiting after both unparked", h.Waiting())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.AwaitWaiting(ctx, 1); err == nil {
		t.Fatal("AwaitWaiting with an ended context and nobody parked answered nil")
	}
}
