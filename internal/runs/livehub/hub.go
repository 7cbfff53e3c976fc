// Package livehub holds the live boxes of one replica
// (docs/design/runs.md#live-box): it orders every update of a box by a
// PostgreSQL notification, applies the notifications every replica
// receives with the pure rule of package livebox, brings a replica that
// joined late or reconnected up to date, writes the boxes it changed, and
// hands each change to the readers that follow the boxes. It decides no
// right and knows no run: package runs checks the run, its holder and its
// trigger before it publishes an update, decides who may read a box, and
// stores the boxes (Store).
package livehub

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/runs/livebox"
)

// How the boxes of the replicas stay one.
//
// An update of a box is not written to the database: the replica that takes
// it sends it as a notification on Channel, and every replica (the
// sender too) applies the notifications it receives, in the one order
// PostgreSQL delivers them to all listeners, with livebox.Apply. So every
// replica holds the same box, the sender learns from its own copy whether
// the update was taken, and readers on every replica get each change at
// once. A replica writes the boxes it changed at most every
// run.live_flush_interval, and every box at its end.
//
// A replica knows it heard every operation of a box when the run was
// created after its listener's snapshot. Otherwise (it started, or its
// listener reconnected, while the box was being written) it keeps the
// operations it receives and asks on Channel for the box ("sync"); a
// replica that holds the box answers with it and the last operation it
// applied ("snap"), and the asking replica takes the box and applies what
// it kept after that operation. When nobody answers within syncWait
// (every replica lost the box), the asking replica sends the stored box
// ("reset") and every replica takes it at that point of the order.

// syncWait is how long a replica waits for a snap before it resets a
// box from its stored copy.
const syncWait = 2 * time.Second

// historyMax bounds the deltas a replica keeps per box for readers that
// resume from a version (older ones get the whole box).
const historyMax = 4096

// keepEnded is how long a replica keeps an ended box in memory.
const keepEnded = time.Minute

// payloadMax is the largest operation sent inline; a larger one is
// stored and announced (PostgreSQL refuses payloads from 8,000 bytes on).
const payloadMax = 7900

// The kinds of the notifications on Channel besides the operations of
// livebox.
const (
	kindSync  = "sync"
	kindSnap  = "snap"
	kindReset = "reset"
	// kindBarrier marks a point of the order: once a replica receives its
	// own barrier it has applied everything committed before it was sent.
	kindBarrier = "barrier"
)

// Channel is the PostgreSQL notification channel of live box operations:
// every replica LISTENs on it (the stream hub's connection, with the Hub as
// its stream.Side) and applies the operations in the order PostgreSQL
// delivers them.
const Channel = "bothy_live"

// Msg is one notification on Channel: a box operation (its Kind one of
// livebox's kinds) or one of the hub's own (a sync, snap, reset or
// barrier). Package runs publishes the operations of a run's updates and
// lifecycle with Publish, in the transaction that decides them.
type Msg struct {
	ID      string  `json:"i"`
	Run     string  `json:"r"`
	Kind    string  `json:"k"`
	Base    int     `json:"b,omitempty"`
	Append  string  `json:"a,omitempty"`
	Replace *string `json:"p,omitempty"`
	Status  *string `json:"s,omitempty"`
	Done    bool    `json:"d,omitempty"`
	// At is the sender's clock in microseconds since 1970.
	At int64 `json:"t,omitempty"`
	// From is the sending replica.
	From string `json:"o,omitempty"`
	// Box, Last, Anchor and Thread carry a box (snap, reset).
	Box    *wireBox `json:"x,omitempty"`
	Last   string   `json:"l,omitempty"`
	Anchor string   `json:"m,omitempty"`
	Thread string   `json:"h,omitempty"`
	// Ref names a stored operation too large to send inline.
	Ref string `json:"ref,omitempty"`
}

// wireBox is a box in a notification.
type wireBox struct {
	Version int    `json:"v"`
	Text    string `json:"t"`
	Status  string `json:"s"`
	Done    bool   `json:"d"`
	Ended   bool   `json:"e"`
	At      int64  `json:"a"`
}

func toWire(b livebox.Box) *wireBox {
	w := &wireBox{Version: b.Version, Text: b.Text, Status: b.Status, Done: b.Done, Ended: b.Ended}
	if !b.UpdatedAt.IsZero() {
		w.At = b.UpdatedAt.UnixMicro()
	}
	return w
}

func (w *wireBox) box() livebox.Box {
	b := livebox.Box{Version: w.Version, Text: w.Text, Status: w.Status, Done: w.Done, Ended: w.Ended}
	if w.At != 0 {
		b.UpdatedAt = time.UnixMicro(w.At).UTC()
	}
	return b
}

func (m Msg) op() livebox.Op {
	return livebox.Op{Kind: livebox.Kind(m.Kind), Base: m.Base, Append: m.Append, Replace: m.Replace, Status: m.Status,
		Done: m.Done, At: time.UnixMicro(m.At).UTC()}
}

// Result is what a replica learned of its own update: the box after
// it (with the anchor that shows it), or why it was refused (Err: one of
// livebox's refusals, or ErrUnsure).
type Result struct {
	Box    livebox.Box
	Anchor string
	Err    error
}

// ErrUnsure answers an own update that was decided while this replica
// did not hold the box: it may or may not have been taken.
var ErrUnsure = errors.New("live box: decided while this replica did not hold the box")

// replicaBox is one box as a replica holds it.
type replicaBox struct {
	anchor, thread string
	box            livebox.Box
	synced         bool
	// kept are the operations received while not synced; asked is when
	// this replica asked for the box (zero until it did).
	kept  []Msg
	asked time.Time
	// history are the last deltas, for readers that resume.
	history []livebox.Delta
	// last is the id of the last operation applied.
	last string
	// dirty says the stored copy is behind a change this replica must
	// write; endedAt when the box ended (evicted keepEnded later).
	// These times, like asked and touched, are the replica's own clock:
	// they pace memory and the network, not the run.
	dirty   bool
	endedAt time.Time
	// touched is when an operation last reached the box.
	touched time.Time
}

// Hub holds a replica's live boxes.
type Hub struct {
	st       Store
	log      *slog.Logger
	replica  string
	maxBytes int
	flush    time.Duration
	kick     chan struct{}

	mu       sync.Mutex
	snapshot string
	boxes    map[string]*replicaBox
	waiters  map[string]chan Result
	subs     map[*Subscription]struct{}
	// stored counts the box writes of this replica (for tests and
	// benchmarks); announced is closed and replaced after each write.
	stored    int
	announced chan struct{}
}

// New returns the hub of one replica, storing its boxes in st, with
// run.live_max_bytes (maxBytes; 64 KiB when not positive) and
// run.live_flush_interval (flush; 250 ms when not positive).
func New(st Store, log *slog.Logger, maxBytes int, flush time.Duration) *Hub {
	if maxBytes <= 0 {
		maxBytes = 64 << 10
	}
	if flush <= 0 {
		flush = 250 * time.Millisecond
	}
	return &Hub{st: st, log: log, replica: ids.New(), maxBytes: maxBytes, flush: flush, kick: make(chan struct{}, 1),
		boxes: map[string]*replicaBox{}, waiters: map[string]chan Result{}, subs: map[*Subscription]struct{}{},
		announced: make(chan struct{})}
}

// Connected is called by the hub's listener right after its LISTEN, on its
// connection: everything heard before may have missed operations, so every
// box is dropped and boxes are placed against the new snapshot.
func (h *Hub) Connected(ctx context.Context, conn *db.Conn) error {
	snap, err := h.st.Snapshot(ctx, conn)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.snapshot = snap
	h.boxes = map[string]*replicaBox{}
	for id, w := range h.waiters {
		w <- Result{Err: ErrUnsure}
		delete(h.waiters, id)
	}
	return err
}

// Disconnected is called when the listener lost its connection.
func (h *Hub) Disconnected() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.snapshot = ""
}

// Publish sends m on Channel in the transaction of ctx (so it is
// delivered once, and only if, the transaction commits), or at once
// outside a transaction.
func (h *Hub) Publish(ctx context.Context, m Msg) error {
	m.From = h.replica
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(body) <= payloadMax {
		return h.st.Notify(ctx, string(body))
	}
	ref, _ := json.Marshal(Msg{Ref: m.ID})
	return h.st.NotifyLarge(ctx, m.ID, string(body), string(ref))
}

// Expect registers a waiter for the outcome of the own operation id.
func (h *Hub) Expect(id string) chan Result {
	w := make(chan Result, 1)
	h.mu.Lock()
	h.waiters[id] = w
	h.mu.Unlock()
	return w
}

// Forget drops the waiter of id.
func (h *Hub) Forget(id string) {
	h.mu.Lock()
	delete(h.waiters, id)
	h.mu.Unlock()
}

// Receive handles one notification of Channel, on the listener's
// goroutine (so in PostgreSQL's order).
func (h *Hub) Receive(ctx context.Context, payload string) {
	var m Msg
	if err := json.Unmarshal([]byte(payload), &m); err != nil {
		h.log.ErrorContext(ctx, "live box notification unreadable", "error", err.Error())
		return
	}
	if m.Ref != "" {
		body, err := h.st.Op(ctx, m.Ref)
		if err == nil {
			err = json.Unmarshal([]byte(body), &m)
		}
		if err != nil {
			// An operation this replica cannot read: it no longer holds
			// the boxes that may have changed.
			h.log.ErrorContext(ctx, "live box operation unreadable; boxes are fetched again", "error", err.Error())
			h.mu.Lock()
			for _, b := range h.boxes {
				b.synced = false
			}
			h.mu.Unlock()
			return
		}
	}
	switch m.Kind {
	case kindBarrier:
		h.resolve(m.ID, Result{})
	case kindSync:
		h.answerSync(ctx, m)
	case kindSnap:
		h.adopt(m, false)
	case kindReset:
		h.adopt(m, true)
	default:
		h.receiveOp(ctx, m)
	}
}

// receiveOp applies a box operation, placing the box first when this
// replica does not hold it.
func (h *Hub) receiveOp(ctx context.Context, m Msg) {
	h.mu.Lock()
	b := h.boxes[m.Run]
	snap := h.snapshot
	h.mu.Unlock()
	if b == nil && m.Kind != string(livebox.Update) {
		// An answer or an end of a box this replica does not hold: the
		// replicas that hold it write the result, and the end's own unit
		// marked the stored copy done (endLive). Nothing is read here, so
		// that every run's end costs the listener no statement.
		return
	}
	if b == nil {
		// Bounded: the listener wakes every long poll and must not hang on
		// a database that does not answer.
		lctx, cancel := context.WithTimeout(ctx, syncWait)
		sb, err := h.st.Box(lctx, m.Run, snap)
		cancel()
		if err != nil {
			h.log.ErrorContext(ctx, "live box not readable", "run_id", m.Run, "error", err.Error())
			h.resolve(m.ID, Result{Err: ErrUnsure})
			return
		}
		// Fresh: every operation of the box reached this replica.
		// Otherwise it asks a replica that holds the box.
		b = &replicaBox{anchor: sb.AnchorID, thread: sb.ThreadID, synced: sb.Fresh}
		h.mu.Lock()
		h.boxes[m.Run] = b
		h.mu.Unlock()
	}
	h.mu.Lock()
	b.touched = time.Now()
	if !b.synced {
		b.kept = append(b.kept, m)
		// Real time, not the service's clock: this waits on the network.
		ask := b.asked.IsZero()
		if ask {
			b.asked = time.Now()
		}
		h.mu.Unlock()
		if ask {
			h.send(ctx, Msg{ID: ids.New(), Run: m.Run, Kind: kindSync})
			// Nobody holds the box when no snap came in time: reset it
			// from its stored copy.
			run, asked := m.Run, b.asked
			time.AfterFunc(syncWait, func() {
				h.mu.Lock()
				cur := h.boxes[run]
				due := cur != nil && !cur.synced && cur.asked.Equal(asked)
				h.mu.Unlock()
				if due {
					h.sendReset(context.WithoutCancel(ctx), run)
				}
			})
		}
		return
	}
	h.apply(m.Run, b, m)
	h.mu.Unlock()
}

// apply applies m to synced box b; the caller holds h.mu.
func (h *Hub) apply(run string, b *replicaBox, m Msg) {
	nb, d, changed, err := livebox.Apply(b.box, m.op(), h.maxBytes)
	b.last = m.ID
	if changed {
		b.box = nb
		if b.history = append(b.history, d); len(b.history) > historyMax {
			b.history = slices.Clone(b.history[len(b.history)-historyMax/2:])
		}
		if m.From == h.replica {
			b.dirty = true
		}
		ev := Event{RunID: run, MessageID: b.anchor, ThreadID: b.thread, Delta: d}
		for s := range h.subs {
			s.offer(ev)
		}
	}
	if m.Kind == string(livebox.Answered) || m.Kind == string(livebox.Ended) || m.Kind == string(livebox.Takeover) {
		// The final box is written by every replica that holds it at once:
		// no single sender may be trusted to be there.
		b.dirty = true
		select {
		case h.kick <- struct{}{}:
		default:
		}
	}
	if nb.Ended && b.endedAt.IsZero() {
		b.endedAt = time.Now()
	}
	if w := h.waiters[m.ID]; w != nil {
		w <- Result{Box: b.box, Anchor: b.anchor, Err: err}
		delete(h.waiters, m.ID)
	}
}

// resolve answers the waiter of id, if any.
func (h *Hub) resolve(id string, r Result) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w := h.waiters[id]; w != nil {
		w <- r
		delete(h.waiters, id)
	}
}

// answerSync answers another replica's sync with the box, if this one
// holds it.
func (h *Hub) answerSync(ctx context.Context, m Msg) {
	h.mu.Lock()
	b := h.boxes[m.Run]
	if b == nil || !b.synced || m.From == h.replica {
		h.mu.Unlock()
		return
	}
	snap := Msg{ID: ids.New(), Run: m.Run, Kind: kindSnap, Box: toWire(b.box), Last: b.last, Anchor: b.anchor, Thread: b.thread}
	h.mu.Unlock()
	h.send(ctx, snap)
}

// sendReset sends the stored box of run as the box every replica takes.
func (h *Hub) sendReset(ctx context.Context, run string) {
	sb, err := h.st.Box(ctx, run, "")
	if err != nil {
		h.log.ErrorContext(ctx, "live box not readable for a reset", "run_id", run, "error", err.Error())
		return
	}
	h.send(ctx, Msg{ID: ids.New(), Run: run, Kind: kindReset, Box: toWire(sb.Box), Anchor: sb.AnchorID, Thread: sb.ThreadID})
}

// send publishes m outside a transaction, logging a failure (the asking
// replica asks again with its next operation).
func (h *Hub) send(ctx context.Context, m Msg) {
	if err := h.Publish(ctx, m); err != nil && ctx.Err() == nil {
		h.log.WarnContext(ctx, "live box notification not sent", "kind", m.Kind, "run_id", m.Run, "error", err.Error())
	}
}

// adopt takes the box of a snap (for a replica that does not hold it) or
// of a reset (for every replica), then applies the operations kept since.
func (h *Hub) adopt(m Msg, reset bool) {
	if m.Box == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	b := h.boxes[m.Run]
	if !reset && (b == nil || b.synced) {
		return
	}
	if b == nil {
		b = &replicaBox{anchor: m.Anchor, thread: m.Thread}
		h.boxes[m.Run] = b
	}
	from := 0
	if !reset {
		i := slices.IndexFunc(b.kept, func(k Msg) bool { return k.ID == m.Last })
		if i < 0 && !(m.Last == "" && m.Box.Ended) {
			return // another snap will come
		}
		// Operations up to the snap's last one are in its box: their
		// senders here cannot know whether they were taken.
		h.unsure(b.kept[:i+1])
		from = i + 1
	} else {
		h.unsure(b.kept)
		from = len(b.kept)
	}
	kept := b.kept[from:]
	b.box, b.synced, b.last, b.kept, b.history, b.asked = m.Box.box(), true, m.Last, nil, nil, time.Time{}
	if reset {
		b.last = m.ID
		h.offerWhole(m.Run, b)
	}
	for _, k := range kept {
		h.apply(m.Run, b, k)
	}
}

// unsure answers the waiters of the operations kept with ErrUnsure:
// a box taken whole contains or drops them, and their senders here cannot
// know which. The caller holds mu.
func (h *Hub) unsure(kept []Msg) {
	for _, k := range kept {
		if w := h.waiters[k.ID]; w != nil {
			w <- Result{Err: ErrUnsure}
			delete(h.waiters, k.ID)
		}
	}
}

// offerWhole offers the whole box b of run to every reader, after a reset
// replaced it. The caller holds mu.
func (h *Hub) offerWhole(run string, b *replicaBox) {
	whole := b.box.Text
	ev := Event{RunID: run, MessageID: b.anchor, ThreadID: b.thread, Delta: livebox.Delta{Version: b.box.Version,
		Replace: &whole, Status: b.box.Status, Done: b.box.Done, At: b.box.UpdatedAt}}
	for s := range h.subs {
		s.offer(ev)
	}
}

// barrierWait bounds a read's wait for its barrier; past it the read
// answers what the replica holds.
const barrierWait = 2 * time.Second

// CatchUp returns once this replica has applied every operation committed
// before the call (its own barrier came back through the listener), so a
// read after a commit (an answer, an end) sees it; at most
// barrierWait.
func (h *Hub) CatchUp(ctx context.Context) {
	id := ids.New()
	w := h.Expect(id)
	defer h.Forget(id)
	if err := h.Publish(ctx, Msg{ID: id, Kind: kindBarrier}); err != nil {
		return
	}
	t := time.NewTimer(barrierWait)
	defer t.Stop()
	select {
	case <-w:
	case <-t.C:
	case <-ctx.Done():
	}
}

// Current returns the boxes of runIDs this replica holds in sync.
func (h *Hub) Current(runIDs []string) map[string]Held {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]Held{}
	for _, id := range runIDs {
		if b := h.boxes[id]; b != nil && b.synced {
			out[id] = Held{AnchorID: b.anchor, Box: b.box}
		}
	}
	return out
}

// Held is a box as this replica holds it, with the message that shows it.
type Held struct {
	AnchorID string
	Box      livebox.Box
}

// Run writes changed boxes every flush interval (at once for an answer or
// an end), drops ended and idle boxes, and purges stored large operations,
// until ctx ends.
func (h *Hub) Run(ctx context.Context) {
	tick := time.NewTicker(h.flush)
	defer tick.Stop()
	purge := time.NewTicker(time.Minute)
	defer purge.Stop()
	for {
		select {
		case <-ctx.Done():
			h.write(context.WithoutCancel(ctx))
			return
		case <-tick.C:
		case <-h.kick:
		case <-purge.C:
			if err := h.st.PurgeOps(ctx, time.Minute); err != nil && ctx.Err() == nil {
				h.log.WarnContext(ctx, "purging live box operations failed", "error", err.Error())
			}
			continue
		}
		h.write(ctx)
	}
}

// write stores the boxes this replica changed since their last write.
func (h *Hub) write(ctx context.Context) {
	type item struct {
		run string
		box livebox.Box
	}
	var todo []item
	now := time.Now()
	h.mu.Lock()
	for run, b := range h.boxes {
		if b.dirty && b.synced {
			todo = append(todo, item{run, b.box})
			b.dirty = false
		}
		if !b.dirty && ((!b.endedAt.IsZero() && now.Sub(b.endedAt) > keepEnded) || (!b.synced && now.Sub(b.touched) > keepEnded)) {
			delete(h.boxes, run)
		}
	}
	h.mu.Unlock()
	for _, it := range todo {
		if err := h.st.Write(ctx, it.run, it.box); err != nil {
			if ctx.Err() == nil {
				h.log.WarnContext(ctx, "writing a live box failed; it is written again", "run_id", it.run, "error", err.Error())
			}
			h.mu.Lock()
			if b := h.boxes[it.run]; b != nil {
				b.dirty = true
			}
			h.mu.Unlock()
			continue
		}
		h.mu.Lock()
		h.stored++
		close(h.announced)
		h.announced = make(chan struct{})
		h.mu.Unlock()
	}
}
