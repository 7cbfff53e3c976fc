package runs

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

// The live boxes of a replica (docs/design/runs.md#live-box).
//
// An update of a box is not written to the database: the replica that takes
// it sends it as a notification on LiveChannel, and every replica (the
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
// operations it receives and asks on LiveChannel for the box ("sync"); a
// replica that holds the box answers with it and the last operation it
// applied ("snap"), and the asking replica takes the box and applies what
// it kept after that operation. When nobody answers within liveSyncWait
// (every replica lost the box), the asking replica sends the stored box
// ("reset") and every replica takes it at that point of the order.

// liveSyncWait is how long a replica waits for a snap before it resets a
// box from its stored copy.
const liveSyncWait = 2 * time.Second

// liveHistoryMax bounds the deltas a replica keeps per box for readers that
// resume from a version (older ones get the whole box).
const liveHistoryMax = 4096

// liveKeepEnded is how long a replica keeps an ended box in memory.
const liveKeepEnded = time.Minute

// livePayloadMax is the largest operation sent inline; a larger one is
// stored and announced (PostgreSQL refuses payloads from 8,000 bytes on).
const livePayloadMax = 7900

// The kinds of the notifications on LiveChannel besides the operations of
// livebox.
const (
	liveSync  = "sync"
	liveSnap  = "snap"
	liveReset = "reset"
	// liveBarrier marks a point of the order: once a replica receives its
	// own barrier it has applied everything committed before it was sent.
	liveBarrier = "barrier"
)

// liveMsg is one notification on LiveChannel.
type liveMsg struct {
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

func (m liveMsg) op() livebox.Op {
	return livebox.Op{Kind: livebox.Kind(m.Kind), Base: m.Base, Append: m.Append, Replace: m.Replace, Status: m.Status,
		Done: m.Done, At: time.UnixMicro(m.At).UTC()}
}

// LiveEvent is one change of a box as readers receive it.
type LiveEvent struct {
	RunID, MessageID, ThreadID string
	Delta                      livebox.Delta
}

// liveResult is what a replica learned of its own update: the box after
// it (with the anchor that shows it), or why it was refused.
type liveResult struct {
	box    livebox.Box
	anchor string
	err    error
}

// errLiveUnsure answers an own update that was decided while this replica
// did not hold the box: it may or may not have been taken.
var errLiveUnsure = errors.New("live box: decided while this replica did not hold the box")

// replicaBox is one box as a replica holds it.
type replicaBox struct {
	anchor, thread string
	box            livebox.Box
	synced         bool
	// kept are the operations received while not synced; asked is when
	// this replica asked for the box (zero until it did).
	kept  []liveMsg
	asked time.Time
	// history are the last deltas, for readers that resume.
	history []livebox.Delta
	// last is the id of the last operation applied.
	last string
	// dirty says the stored copy is behind a change this replica must
	// write; endedAt when the box ended (evicted liveKeepEnded later).
	// These times, like asked and touched, are the replica's own clock:
	// they pace memory and the network, not the run.
	dirty   bool
	endedAt time.Time
	// touched is when an operation last reached the box.
	touched time.Time
}

// liveHub holds a replica's live boxes.
type liveHub struct {
	st       *store
	log      *slog.Logger
	replica  string
	maxBytes int
	flush    time.Duration
	kick     chan struct{}

	mu       sync.Mutex
	snapshot string
	boxes    map[string]*replicaBox
	waiters  map[string]chan liveResult
	subs     map[*LiveSubscription]struct{}
	// stored counts the box writes of this replica (for tests and
	// benchmarks); announced is closed and replaced after each write.
	stored    int
	announced chan struct{}
}

func newLiveHub(st *store, log *slog.Logger, maxBytes int, flush time.Duration) *liveHub {
	if maxBytes <= 0 {
		maxBytes = 64 << 10
	}
	if flush <= 0 {
		flush = 250 * time.Millisecond
	}
	return &liveHub{st: st, log: log, replica: ids.New(), maxBytes: maxBytes, flush: flush, kick: make(chan struct{}, 1),
		boxes: map[string]*replicaBox{}, waiters: map[string]chan liveResult{}, subs: map[*LiveSubscription]struct{}{},
		announced: make(chan struct{})}
}

// connected is called by the hub's listener right after its LISTEN, on its
// connection: everything heard before may have missed operations, so every
// box is dropped and boxes are placed against the new snapshot.
func (h *liveHub) connected(ctx context.Context, conn *db.Conn) error {
	snap, err := listenerSnapshot(ctx, conn)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.snapshot = snap
	h.boxes = map[string]*replicaBox{}
	for id, w := range h.waiters {
		w <- liveResult{err: errLiveUnsure}
		delete(h.waiters, id)
	}
	return err
}

// disconnected is called when the listener lost its connection.
func (h *liveHub) disconnected() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.snapshot = ""
}

// publish sends m on LiveChannel in the transaction of ctx.
func (h *liveHub) publish(ctx context.Context, m liveMsg) error {
	m.From = h.replica
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(body) <= livePayloadMax {
		return h.st.notifyLive(ctx, string(body))
	}
	ref, _ := json.Marshal(liveMsg{Ref: m.ID})
	return h.st.notifyLiveLarge(ctx, m.ID, string(body), string(ref))
}

// expect registers a waiter for the outcome of the own operation id.
func (h *liveHub) expect(id string) chan liveResult {
	w := make(chan liveResult, 1)
	h.mu.Lock()
	h.waiters[id] = w
	h.mu.Unlock()
	return w
}

// forget drops the waiter of id.
func (h *liveHub) forget(id string) {
	h.mu.Lock()
	delete(h.waiters, id)
	h.mu.Unlock()
}

// receive handles one notification of LiveChannel, on the listener's
// goroutine (so in PostgreSQL's order).
func (h *liveHub) receive(ctx context.Context, payload string) {
	var m liveMsg
	if err := json.Unmarshal([]byte(payload), &m); err != nil {
		h.log.ErrorContext(ctx, "live box notification unreadable", "error", err.Error())
		return
	}
	if m.Ref != "" {
		body, err := h.st.liveOp(ctx, m.Ref)
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
	case liveBarrier:
		h.resolve(m.ID, liveResult{})
	case liveSync:
		h.answerSync(ctx, m)
	case liveSnap:
		h.adopt(m, false)
	case liveReset:
		h.adopt(m, true)
	default:
		h.receiveOp(ctx, m)
	}
}

// receiveOp applies a box operation, placing the box first when this
// replica does not hold it.
func (h *liveHub) receiveOp(ctx context.Context, m liveMsg) {
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
		lctx, cancel := context.WithTimeout(ctx, liveSyncWait)
		sb, err := h.st.liveOf(lctx, m.Run, snap)
		cancel()
		if err != nil {
			h.log.ErrorContext(ctx, "live box not readable", "run_id", m.Run, "error", err.Error())
			h.resolve(m.ID, liveResult{err: errLiveUnsure})
			return
		}
		// Fresh: every operation of the box reached this replica.
		// Otherwise it asks a replica that holds the box.
		b = &replicaBox{anchor: sb.anchorID, thread: sb.threadID, synced: sb.fresh}
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
			h.send(ctx, liveMsg{ID: ids.New(), Run: m.Run, Kind: liveSync})
			// Nobody holds the box when no snap came in time: reset it
			// from its stored copy.
			run, asked := m.Run, b.asked
			time.AfterFunc(liveSyncWait, func() {
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
func (h *liveHub) apply(run string, b *replicaBox, m liveMsg) {
	nb, d, changed, err := livebox.Apply(b.box, m.op(), h.maxBytes)
	b.last = m.ID
	if changed {
		b.box = nb
		if b.history = append(b.history, d); len(b.history) > liveHistoryMax {
			b.history = slices.Clone(b.history[len(b.history)-liveHistoryMax/2:])
		}
		if m.From == h.replica {
			b.dirty = true
		}
		ev := LiveEvent{RunID: run, MessageID: b.anchor, ThreadID: b.thread, Delta: d}
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
		w <- liveResult{box: b.box, anchor: b.anchor, err: err}
		delete(h.waiters, m.ID)
	}
}

// resolve answers the waiter of id, if any.
func (h *liveHub) resolve(id string, r liveResult) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w := h.waiters[id]; w != nil {
		w <- r
		delete(h.waiters, id)
	}
}

// answerSync answers another replica's sync with the box, if this one
// holds it.
func (h *liveHub) answerSync(ctx context.Context, m liveMsg) {
	h.mu.Lock()
	b := h.boxes[m.Run]
	if b == nil || !b.synced || m.From == h.replica {
		h.mu.Unlock()
		return
	}
	snap := liveMsg{ID: ids.New(), Run: m.Run, Kind: liveSnap, Box: toWire(b.box), Last: b.last, Anchor: b.anchor, Thread: b.thread}
	h.mu.Unlock()
	h.send(ctx, snap)
}

// sendReset sends the stored box of run as the box every replica takes.
func (h *liveHub) sendReset(ctx context.Context, run string) {
	sb, err := h.st.liveOf(ctx, run, "")
	if err != nil {
		h.log.ErrorContext(ctx, "live box not readable for a reset", "run_id", run, "error", err.Error())
		return
	}
	h.send(ctx, liveMsg{ID: ids.New(), Run: run, Kind: liveReset, Box: toWire(sb.box), Anchor: sb.anchorID, Thread: sb.threadID})
}

// send publishes m outside a transaction, logging a failure (the asking
// replica asks again with its next operation).
func (h *liveHub) send(ctx context.Context, m liveMsg) {
	if err := h.publish(ctx, m); err != nil && ctx.Err() == nil {
		h.log.WarnContext(ctx, "live box notification not sent", "kind", m.Kind, "run_id", m.Run, "error", err.Error())
	}
}

// adopt takes the box of a snap (for a replica that does not hold it) or
// of a reset (for every replica), then applies the operations kept since.
func (h *liveHub) adopt(m liveMsg, reset bool) {
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
		i := slices.IndexFunc(b.kept, func(k liveMsg) bool { return k.ID == m.Last })
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

// unsure answers the waiters of the operations kept with errLiveUnsure:
// a box taken whole contains or drops them, and their senders here cannot
// know which. The caller holds mu.
func (h *liveHub) unsure(kept []liveMsg) {
	for _, k := range kept {
		if w := h.waiters[k.ID]; w != nil {
			w <- liveResult{err: errLiveUnsure}
			delete(h.waiters, k.ID)
		}
	}
}

// offerWhole offers the whole box b of run to every reader, after a reset
// replaced it. The caller holds mu.
func (h *liveHub) offerWhole(run string, b *replicaBox) {
	whole := b.box.Text
	ev := LiveEvent{RunID: run, MessageID: b.anchor, ThreadID: b.thread, Delta: livebox.Delta{Version: b.box.Version,
		Replace: &whole, Status: b.box.Status, Done: b.box.Done, At: b.box.UpdatedAt}}
	for s := range h.subs {
		s.offer(ev)
	}
}

// liveBarrierWait bounds a read's wait for its barrier; past it the read
// answers what the replica holds.
const liveBarrierWait = 2 * time.Second

// catchUp returns once this replica has applied every operation committed
// before the call (its own barrier came back through the listener), so a
// read after a commit (an answer, an end) sees it; at most
// liveBarrierWait.
func (h *liveHub) catchUp(ctx context.Context) {
	id := ids.New()
	w := h.expect(id)
	defer h.forget(id)
	if err := h.publish(ctx, liveMsg{ID: id, Kind: liveBarrier}); err != nil {
		return
	}
	t := time.NewTimer(liveBarrierWait)
	defer t.Stop()
	select {
	case <-w:
	case <-t.C:
	case <-ctx.Done():
	}
}

// current returns the boxes of runIDs this replica holds in sync.
func (h *liveHub) current(runIDs []string) map[string]replicaBox {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]replicaBox{}
	for _, id := range runIDs {
		if b := h.boxes[id]; b != nil && b.synced {
			out[id] = replicaBox{anchor: b.anchor, thread: b.thread, box: b.box}
		}
	}
	return out
}

// run writes changed boxes every flush interval (at once for an answer or
// an end), drops ended and idle boxes, and purges stored large operations,
// until ctx ends.
func (h *liveHub) run(ctx context.Context) {
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
			if err := h.st.purgeLiveOps(ctx, time.Minute); err != nil && ctx.Err() == nil {
				h.log.WarnContext(ctx, "purging live box operations failed", "error", err.Error())
			}
			continue
		}
		h.write(ctx)
	}
}

// write stores the boxes this replica changed since their last write.
func (h *liveHub) write(ctx context.Context) {
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
		if !b.dirty && ((!b.endedAt.IsZero() && now.Sub(b.endedAt) > liveKeepEnded) || (!b.synced && now.Sub(b.touched) > liveKeepEnded)) {
			delete(h.boxes, run)
		}
	}
	h.mu.Unlock()
	for _, it := range todo {
		if err := h.st.storeLive(ctx, it.run, it.box); err != nil {
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

// LiveSubscription receives the changes of every box on this replica;
// its owner decides which of them its reader may see.
type LiveSubscription struct {
	h    *liveHub
	ch   chan LiveEvent
	once sync.Once
	full chan struct{}
}

// SubscribeLive returns a subscription to the box changes of this replica
// with room for queue changes; when a reader falls further behind, Full is
// closed and the subscription receives nothing more.
func (s *Service) SubscribeLive(queue int) *LiveSubscription {
	if queue < 1 {
		queue = 1
	}
	sub := &LiveSubscription{h: s.live, ch: make(chan LiveEvent, queue), full: make(chan struct{})}
	s.live.mu.Lock()
	s.live.subs[sub] = struct{}{}
	s.live.mu.Unlock()
	return sub
}

// Events returns the channel of changes.
func (l *LiveSubscription) Events() <-chan LiveEvent { return l.ch }

// Full is closed when the reader fell behind by more than its queue.
func (l *LiveSubscription) Full() <-chan struct{} { return l.full }

// Close ends the subscription.
func (l *LiveSubscription) Close() {
	l.h.mu.Lock()
	delete(l.h.subs, l)
	l.h.mu.Unlock()
}

// offer queues ev without blocking the listener; the caller holds h.mu.
func (l *LiveSubscription) offer(ev LiveEvent) {
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
func (l *LiveSubscription) Since(run string, after int) []LiveEvent {
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
	out := make([]LiveEvent, len(ds))
	for i, d := range ds {
		out[i] = LiveEvent{RunID: run, MessageID: b.anchor, ThreadID: b.thread, Delta: d}
	}
	return out
}
