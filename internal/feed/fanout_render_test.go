package feed

import (
	"bytes"
	"context"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/verdicts"
)

// stillHub is a Waker whose database never changes: commits reach the
// replica (connected) unless told otherwise.
type stillHub struct {
	gen          chan struct{}
	disconnected bool
}

func (h *stillHub) Changed() <-chan struct{} { return h.gen }
func (h *stillHub) Connected() bool          { return !h.disconnected }

// renderWorld is a fan-out without a database, with listeners of alex
// (two), sam and a run token of the same agent, for the rules of
// Delivery.Rendered alone.
type renderWorld struct {
	f     *Fanout
	hub   *stillHub
	clock *clock.Fake
	alex1 *Listener
	alex2 *Listener
	sam   *Listener
}

func newRenderWorld() *renderWorld {
	hub := &stillHub{gen: make(chan struct{})}
	c := clock.NewFake(time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC))
	f := NewFanout(nil, hub, nil, c)
	alex := identity.Principal{ID: "p_alex", Kind: identity.KindUser, Status: identity.StatusActive}
	sam := identity.Principal{ID: "p_sam", Kind: identity.KindUser, Status: identity.StatusActive}
	return &renderWorld{f: f, hub: hub, clock: c, alex1: f.Listen(alex, ""), alex2: f.Listen(alex, ""), sam: f.Listen(sam, "")}
}

var renderedEvent = events.Event{Seq: 41, Type: events.MessageCreated, ChannelID: "c_allgemein", ThreadID: "t_1"}

// TestRenderedSharedByPrincipalAndDocument: a rendering is reused by
// another connection of the same principal with the same document for the
// same event, and by no one else.
func TestRenderedSharedByPrincipalAndDocument(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		other func(w *renderWorld) (*Listener, events.Event, string)
		reuse bool
	}{
		{"same principal, document and event", func(w *renderWorld) (*Listener, events.Event, string) {
			return w.alex2, renderedEvent, "doc-a"
		}, true},
		{"the same connection again", func(w *renderWorld) (*Listener, events.Event, string) {
			return w.alex1, renderedEvent, "doc-a"
		}, true},
		{"another principal", func(w *renderWorld) (*Listener, events.Event, string) {
			return w.sam, renderedEvent, "doc-a"
		}, false},
		{"another document", func(w *renderWorld) (*Listener, events.Event, string) {
			return w.alex2, renderedEvent, "doc-b"
		}, false},
		{"another event", func(w *renderWorld) (*Listener, events.Event, string) {
			e := renderedEvent
			e.Seq++
			return w.alex2, e, "doc-a"
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newRenderWorld()
			first(t, w.alex1.Deliver(renderedEvent), "doc-a", []byte(`{"events":1}`), true)
			l, e, doc := tc.other(w)
			data, keep := l.Deliver(e).Rendered(context.Background(), doc)
			if got := data != nil; got != tc.reuse {
				t.Fatalf("reused: %v (%s), want %v", got, data, tc.reuse)
			}
			if tc.reuse && !bytes.Equal(data, []byte(`{"events":1}`)) {
				t.Fatalf("reused %s, want the first rendering", data)
			}
			if !tc.reuse && keep == nil {
				t.Fatal("a connection with nothing to reuse must render and keep its own")
			}
			wantKept, wantReused := uint64(1), uint64(0)
			if tc.reuse {
				wantReused = 1
			} else {
				wantKept = 2
			}
			if kept, reused := w.f.Renderings(); kept != wantKept || reused != wantReused {
				t.Fatalf("Renderings: kept %d, reused %d; want %d, %d", kept, reused, wantKept, wantReused)
			}
		})
	}
}

// first asks for d's rendering as the first connection, which must
// render, and keeps data.
func first(t *testing.T, d *Delivery, doc string, data []byte, ok bool) {
	t.Helper()
	got, keep := d.Rendered(context.Background(), doc)
	if got != nil || keep == nil {
		t.Fatalf("the first connection got %s and keep %v, want to render and keep", got, keep != nil)
	}
	keep(data, ok)
}

// TestRenderedDroppedOrNotKept: a rendering is not reused after something
// touched the shared reads, after verdicts.TTL, without commits reaching
// the replica, when it had errors, or past the bound on kept bytes.
func TestRenderedDroppedOrNotKept(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		data   []byte
		ok     bool
		change func(w *renderWorld)
		keep   bool // the second connection renders and keeps its own
	}{
		{"an event touched the shared reads", []byte(`{}`), true, func(w *renderWorld) {
			w.f.mu.Lock()
			w.f.touched++
			w.f.mu.Unlock()
		}, true},
		{"older than the verdicts' TTL", []byte(`{}`), true, func(w *renderWorld) { w.clock.Advance(verdicts.TTL) }, true},
		{"commits do not reach the replica", []byte(`{}`), true, func(w *renderWorld) { w.hub.disconnected = true }, false},
		{"a rendering with errors", []byte(`{}`), false, func(*renderWorld) {}, true},
		{"past the bound on kept bytes", make([]byte, RenderedBytes+1), true, func(*renderWorld) {}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newRenderWorld()
			first(t, w.alex1.Deliver(renderedEvent), "doc-a", tc.data, tc.ok)
			tc.change(w)
			data, keep := w.alex2.Deliver(renderedEvent).Rendered(context.Background(), "doc-a")
			if data != nil {
				t.Fatalf("reused %d bytes, want a rendering of its own", len(data))
			}
			if got := keep != nil; got != tc.keep {
				t.Fatalf("keep: %v, want %v", got, tc.keep)
			}
			if _, reused := w.f.Renderings(); reused != 0 {
				t.Fatalf("reused %d renderings, want none", reused)
			}
		})
	}
}

// TestRenderedWaitsForTheFirst: connections that need a rendering another
// is making wait for it instead of rendering too, and render alone when
// it is not to be shared or their request ends first.
func TestRenderedWaitsForTheFirst(t *testing.T) {
	t.Parallel()
	for _, shared := range []bool{true, false} {
		w := newRenderWorld()
		_, keep := w.alex1.Deliver(renderedEvent).Rendered(context.Background(), "doc-a")
		type answer struct {
			data []byte
			keep bool
		}
		got := make(chan answer)
		waiting := make(chan struct{})
		w.f.renderWait = func() { close(waiting) }
		go func() {
			data, k := w.alex2.Deliver(renderedEvent).Rendered(context.Background(), "doc-a")
			got <- answer{data, k != nil}
		}()
		select {
		case a := <-got:
			t.Fatalf("shared %v: the second connection answered %+v before the first kept its rendering", shared, a)
		case <-waiting:
		}
		keep([]byte(`{"events":2}`), shared)
		a := <-got
		if shared && (string(a.data) != `{"events":2}` || a.keep) {
			t.Fatalf("the waiting connection got %+v, want the first's rendering", a)
		}
		if !shared && (a.data != nil || a.keep) {
			t.Fatalf("the waiting connection got %+v, want to render alone", a)
		}
	}
	w := newRenderWorld()
	_, keep := w.alex1.Deliver(renderedEvent).Rendered(context.Background(), "doc-a")
	defer keep(nil, false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if data, k := w.alex2.Deliver(renderedEvent).Rendered(ctx, "doc-a"); data != nil || k != nil {
		t.Fatalf("an ended request got %s and keep %v, want nothing", data, k != nil)
	}
}
