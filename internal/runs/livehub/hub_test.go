package livehub

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/runs/livebox"
)

// fakeStore is a Store in memory: the hub's own logic (order, sync, large
// operations) is tested here; the statements are tested through package
// runs against PostgreSQL (TestLiveBox_*).
type fakeStore struct {
	mu     sync.Mutex
	stored Stored
	sent   []string
	ops    map[string]string
}

func (f *fakeStore) Notify(_ context.Context, payload string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, payload)
	return nil
}

func (f *fakeStore) NotifyLarge(ctx context.Context, id, body, payload string) error {
	f.mu.Lock()
	f.ops[id] = body
	f.mu.Unlock()
	return f.Notify(ctx, payload)
}

func (f *fakeStore) Op(_ context.Context, id string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops[id], nil
}

func (f *fakeStore) Box(context.Context, string, string) (Stored, error) { return f.stored, nil }

func (f *fakeStore) Write(context.Context, string, livebox.Box) error { return nil }

func (f *fakeStore) PurgeOps(context.Context, time.Duration) error { return nil }

func (f *fakeStore) Snapshot(context.Context, *db.Conn) (string, error) { return "", nil }

// deliver hands every notification sent so far to the hub, as the
// listener would, and returns their kinds.
func (f *fakeStore) deliver(t *testing.T, h *Hub) []string {
	t.Helper()
	f.mu.Lock()
	sent := f.sent
	f.sent = nil
	f.mu.Unlock()
	var kinds []string
	for _, p := range sent {
		var m Msg
		if err := json.Unmarshal([]byte(p), &m); err != nil {
			t.Fatalf("notification %q: %v", p, err)
		}
		kinds = append(kinds, m.Kind+m.Ref)
		h.Receive(t.Context(), p)
	}
	return kinds
}

func newHub(stored Stored) (*Hub, *fakeStore) {
	st := &fakeStore{stored: stored, ops: map[string]string{}}
	return New(st, slog.New(slog.NewTextHandler(io.Discard, nil)), 0, 0), st
}

// publish sends m as package runs does, failing the test on an error.
func publish(t *testing.T, h *Hub, m Msg) {
	t.Helper()
	if err := h.Publish(t.Context(), m); err != nil {
		t.Fatalf("publish %s: %v", m.ID, err)
	}
}

func update(id, text string, base int) Msg {
	return Msg{ID: id, Run: "r1", Kind: string(livebox.Update), Base: base, Append: text, At: time.Now().UnixMicro()}
}

// A fresh box (its run created after the listener's snapshot) is held at
// once: the sender learns the outcome of its own update from its copy, the
// readers get the change, and a text too large for a notification travels
// as a stored operation.
func TestFreshBoxAppliesUpdatesInOrder(t *testing.T) {
	h, st := newHub(Stored{AnchorID: "m1", ThreadID: "t1", Fresh: true})
	sub := h.Follow(4)
	defer sub.Close()
	large := strings.Repeat("x", payloadMax)
	for i, m := range []Msg{update("op1", "hello", 0), update("op2", large, 1)} {
		wait := h.Expect(m.ID)
		publish(t, h, m)
		st.deliver(t, h)
		res := <-wait
		if res.Err != nil || res.Box.Version != i+1 || res.Anchor != "m1" {
			t.Fatalf("update %s: %+v", m.ID, res)
		}
		ev := <-sub.Events()
		if ev.RunID != "r1" || ev.MessageID != "m1" || ev.ThreadID != "t1" || ev.Delta.Version != i+1 {
			t.Fatalf("event of %s: %+v", m.ID, ev)
		}
	}
	if len(st.ops) != 1 {
		t.Fatalf("%d stored operations, want the large one", len(st.ops))
	}
	held := h.Current([]string{"r1", "r2"})
	if b, ok := held["r1"]; !ok || len(held) != 1 || b.Box.Text != "hello"+large {
		t.Fatalf("held: %+v", held)
	}
	wantStaleRefused(t, h, st)
}

// wantStaleRefused: an update against a version the box has left is
// refused by the rule, and its sender hears it with the current box.
func wantStaleRefused(t *testing.T, h *Hub, st *fakeStore) {
	t.Helper()
	wait := h.Expect("op3")
	publish(t, h, update("op3", "late", 1))
	st.deliver(t, h)
	if res := <-wait; !errors.Is(res.Err, livebox.ErrVersion) || res.Box.Version != 2 {
		t.Fatalf("stale update: %+v", res)
	}
}

// A replica that did not hear every operation of a box keeps what it
// receives and asks for the box; a snap from a replica that holds it is
// taken, and the kept operations after the snap's last one are applied
// (the one before it is answered ErrUnsure to its sender here).
func TestLateReplicaAdoptsASnap(t *testing.T) {
	h, st := newHub(Stored{AnchorID: "m1", ThreadID: "t1", Fresh: false})
	first, second := h.Expect("op1"), h.Expect("op2")
	publish(t, h, update("op1", "a", 2))
	publish(t, h, update("op2", "b", 3))
	if kinds := st.deliver(t, h); strings.Join(kinds, ",") != "update,update" {
		t.Fatalf("delivered %v", kinds)
	}
	if kinds := st.deliver(t, h); strings.Join(kinds, ",") != kindSync {
		t.Fatalf("the late replica sent %v, want one sync", kinds)
	}
	if held := h.Current([]string{"r1"}); len(held) != 0 {
		t.Fatalf("a box not synced is held: %+v", held)
	}
	snap := Msg{ID: "s1", Run: "r1", Kind: kindSnap, Last: "op1", Anchor: "m1", Thread: "t1",
		Box: &wireBox{Version: 3, Text: "xya", Status: "writing"}, From: "other"}
	body, _ := json.Marshal(snap)
	h.Receive(t.Context(), string(body))
	if res := <-first; !errors.Is(res.Err, ErrUnsure) {
		t.Fatalf("op1 inside the snap: %+v, want ErrUnsure", res)
	}
	if res := <-second; res.Err != nil || res.Box.Version != 4 || res.Box.Text != "xyab" {
		t.Fatalf("op2 after the snap: %+v", res)
	}
}
