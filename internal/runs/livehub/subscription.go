package livehub

import (
	"sync"

	"bothy.example.com/bothy/internal/runs/livebox"
)

// Event is one change of a box as readers receive it.
type Event struct {
	RunID, MessageID, ThreadID string
	Delta                      livebox.Delta
}

// Subscription receives the changes of every box on this replica;
// its owner decides which of them its reader may see.
type Subscription struct {
	h    *Hub
	ch   chan Event
	once sync.Once
	full chan struct{}
}

// Follow returns a subscription to the box changes of this replica with
// room for queue changes; when a reader falls further behind, Full is
// closed and the subscription receives nothing more.
func (h *Hub) Follow(queue int) *Subscription {
	if queue < 1 {
		queue = 1
	}
	sub := &Subscription{h: h, ch: make(chan Event, queue), full: make(chan struct{})}
	h.mu.Lock()
	h.subs[sub] = struct{}{}
	h.mu.Unlock()
	return sub
}

// Events returns the channel of changes.
func (l *Subscription) Events() <-chan Event { return l.ch }

// Full is closed when the reader fell behind by more than its queue.
func (l *Subscription) Full() <-chan struct{} { return l.full }

// Close ends the subscription.
func (l *Subscription) Close() {
	l.h.mu.Lock()
	delete(l.h.subs, l)
	l.h.mu.Unlock()
}

// offer queues ev without blocking the listener; the caller holds h.mu.
func (l *Subscription) offer(ev Event) {
	select {
	case l.ch <- ev:
	default:
		delete(l.h.subs, l)
		l.once.Do(func() { close(l.full) })
	}
}

// Since returns what a reader that holds version after of run's box needs
// to be current: the deltas after it, or the whole box as one replacing
// delta when this replica no longer keeps them; none when the reader is
// current or this replica does not hold the box (the reader gets its
// changes from now on).
func (l *Subscription) Since(run string, after int) []Event {
	h := l.h
	h.mu.Lock()
	defer h.mu.Unlock()
	b := h.boxes[run]
	if b == nil || !b.synced {
		return nil
	}
	ds, ok := livebox.Replay(b.history, after, b.box.Version)
	if !ok {
		whole := b.box.Text
		ds = []livebox.Delta{{Version: b.box.Version, Replace: &whole, Status: b.box.Status, Done: b.box.Done, At: b.box.UpdatedAt}}
	}
	out := make([]Event, len(ds))
	for i, d := range ds {
		out[i] = Event{RunID: run, MessageID: b.anchor, ThreadID: b.thread, Delta: d}
	}
	return out
}
