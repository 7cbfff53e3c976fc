package stream

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"bothy.example.com/bothy/internal/platform/db"
)

// Hub wakes long polls of this process when any replica commits agent
// events. One listener connection per process LISTENs on
// events.NotifyChannel; every notification (whose payload is only a cursor)
// wakes all waiters, which then read their own stream.
type Hub struct {
	mu       sync.Mutex
	change   chan struct{}
	stopping chan struct{}
	stopOnce sync.Once
	// waiting counts the polls parked on change, so that a test can wait
	// for a poll to park instead of sleeping (see AwaitWaiting).
	waiting counter
	// placed counts the reads of agent streams placed by this process: a
	// poll or a subscription whose cursor is resolved, so that it sees
	// every event committed from then on (see AwaitPlaced).
	placed counter

	connected  atomic.Bool
	reconnects atomic.Uint64
	// notifications counts the notifications the listener heard (proof
	// that it hears anything: bothy_listener_notifications_total).
	notifications atomic.Uint64
	// retry cuts the listener's pause short (RetryNow); attempting, ended
	// and listenerMoved (under mu) let RetryNow wait for the outcome of
	// the attempt it asked for: listenerMoved is closed (and replaced)
	// whenever the listener connects or an attempt ends.
	retry         chan struct{}
	attempting    bool
	ended         uint64
	listenerMoved chan struct{}

	// side receives the notifications of a second channel on the same
	// connection: the live boxes of package runs (set by its service
	// through SetSide).
	side Side
}

// Side is a listener that shares the hub's connection for a channel of its
// own: the live boxes of package runs/livehub (livehub.Channel). Its
// notifications never wake the long polls. Each method is called on the
// listener's goroutine, so notifications arrive in PostgreSQL's order.
type Side interface {
	// Channel is the notification channel the side listens on.
	Channel() string
	// Subscribe LISTENs conn on Channel; it runs right after the hub's
	// own LISTEN.
	Subscribe(ctx context.Context, conn *db.Conn) error
	// Connected is called once conn listens on both channels: what the
	// side heard before may have missed notifications.
	Connected(ctx context.Context, conn *db.Conn) error
	// Disconnected is called when the connection is lost.
	Disconnected()
	// Receive handles one notification of Channel.
	Receive(ctx context.Context, payload string)
}

// SetSide makes side share the listener's connection from its next
// connection on. The runs module's service sets it once, before Listen
// starts.
func (h *Hub) SetSide(side Side) { h.side = side }

// Waiters is what a test observes of the long polls of one process: how
// many wait for a change, and a way to block until enough do.
type Waiters interface {
	Waiting() int
	AwaitWaiting(ctx context.Context, n int) error
}

// NewHub returns a hub with no listener yet (see Listen).
func NewHub() *Hub {
	return &Hub{change: make(chan struct{}), stopping: make(chan struct{}), waiting: newCounter(), placed: newCounter(),
		retry: make(chan struct{}, 1), listenerMoved: make(chan struct{})}
}

// park counts a poll that waits for the next change until the returned
// function is called.
func (h *Hub) park() (unpark func()) {
	h.moveWaiting(+1)
	return func() { h.moveWaiting(-1) }
}

func (h *Hub) moveWaiting(by int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.waiting.add(int64(by))
}

// counter is a count a waiter can follow: moved is closed (and replaced)
// at every change. The hub's mu guards it.
type counter struct {
	n     int64
	moved chan struct{}
}

func newCounter() counter { return counter{moved: make(chan struct{})} }

// add changes the count by by; the caller holds the hub's mu.
func (c *counter) add(by int64) {
	c.n += by
	close(c.moved)
	c.moved = make(chan struct{})
}

// await blocks until enough holds for c's count or ctx ends, and returns
// the last count it read.
func (h *Hub) await(ctx context.Context, c *counter, enough func(int64) bool) (int64, error) {
	for {
		h.mu.Lock()
		got, moved := c.n, c.moved
		h.mu.Unlock()
		if enough(got) {
			return got, nil
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return got, ctx.Err()
		}
	}
}

// Waiting returns the number of long polls of this process that wait for
// a change now.
func (h *Hub) Waiting() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return int(h.waiting.n)
}

// AwaitWaiting blocks until at least n long polls of this process wait for
// a change (each has read its stream and will see any commit from now on),
// or ctx ends. Tests use it to know a poll is parked instead of sleeping.
func (h *Hub) AwaitWaiting(ctx context.Context, n int) error {
	got, err := h.await(ctx, &h.waiting, func(got int64) bool { return got >= int64(n) })
	if err != nil {
		return fmt.Errorf("runs: %d long polls waiting, want %d: %w", got, n, err)
	}
	return nil
}

// markPlaced counts one read of an agent stream placed: its cursor is
// resolved, and every event committed from now on reaches its reader.
func (h *Hub) markPlaced() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.placed.add(1)
}

// Placed returns how many reads of agent streams (polls, subscriptions)
// this process has placed so far.
func (h *Hub) Placed() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.placed.n
}

// AwaitPlaced blocks until this process has placed more than n reads of
// agent streams in all, or ctx ends. The conformance kit waits on it
// after an adapter's first read arrives, before it posts a scenario's
// mention: a read arrives before the server resolves its cursor, and an
// adapter that reads from "now" would miss a mention posted in between.
func (h *Hub) AwaitPlaced(ctx context.Context, n int64) error {
	got, err := h.await(ctx, &h.placed, func(got int64) bool { return got > n })
	if err != nil {
		return fmt.Errorf("stream: %d reads placed, want more than %d: %w", got, n, err)
	}
	return nil
}

// Stop ends every waiting poll (they answer what they have) and makes new
// polls return at once; the server calls it when it shuts down, so that
// long polls do not hold a graceful shutdown.
func (h *Hub) Stop() { h.stopOnce.Do(func() { close(h.stopping) }) }

// Stopping is closed once the hub stops.
func (h *Hub) Stopping() <-chan struct{} { return h.stopping }

// Changed returns a channel that is closed at the next notification. Take
// it before reading the stream, so no commit between read and wait is
// missed.
func (h *Hub) Changed() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.change
}

// Wake closes the current change channel and starts a new one.
func (h *Hub) Wake() {
	h.mu.Lock()
	close(h.change)
	h.change = make(chan struct{})
	h.mu.Unlock()
}

// Connect opens the dedicated LISTEN connection (database.listen_url).
type Connect func(ctx context.Context) (*db.Conn, error)

// Connected reports whether the LISTEN connection is up (for /readyz and
// the bothy_listener_connected gauge).
func (h *Hub) Connected() bool { return h.connected.Load() }

// Reconnects counts the connections the listener opened after losing one.
func (h *Hub) Reconnects() uint64 { return h.reconnects.Load() }

// Notifications is how many notifications the listener has heard since
// the hub began.
func (h *Hub) Notifications() uint64 { return h.notifications.Load() }

// RetryNow has a listener that is down try to connect at once instead of
// after the rest of its pause, and waits until it is connected, or until
// the attempt it asked for failed, or ctx ends; it reports whether the
// listener is connected. Readiness calls it once it has seen the database
// answer: the pause exists to spare a database that does not answer, and
// without the call /readyz would say listener_down for up to
// database.listen_backoff_max after the database is back.
func (h *Hub) RetryNow(ctx context.Context) bool {
	h.mu.Lock()
	if h.connected.Load() {
		h.mu.Unlock()
		return true
	}
	// An attempt already under way may have started before the database
	// came back: wait for the one after it too.
	want := h.ended + 1
	if h.attempting {
		want++
	}
	moved := h.listenerMoved
	h.mu.Unlock()
	select {
	case h.retry <- struct{}{}:
	default: // a retry is already asked for
	}
	for {
		select {
		case <-moved:
		case <-ctx.Done():
			return h.connected.Load()
		}
		h.mu.Lock()
		connected, ended := h.connected.Load(), h.ended
		moved = h.listenerMoved
		h.mu.Unlock()
		if connected {
			return true
		}
		if ended >= want {
			return false
		}
	}
}

// listenerState records that an attempt starts (attempting), that the
// listener connected (connected) or that an attempt or connection ended
// (neither), and wakes RetryNow.
func (h *Hub) listenerState(attempting, connected bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !attempting && !connected {
		h.ended++
	}
	if connected {
		// A retry asked for while the listener was down is answered.
		select {
		case <-h.retry:
		default:
		}
	}
	h.attempting = attempting
	h.connected.Store(connected)
	close(h.listenerMoved)
	h.listenerMoved = make(chan struct{})
}

// Listen holds one connection of connect in LISTEN until ctx ends, waking
// the hub on every notification. The connection is its own, not one of the
// pool's, so that the pool may go through a transaction-mode pooler (which
// cannot keep a LISTEN) while this one connects directly. A lost connection
// is replaced after a pause that doubles from 100ms up to backoffMax and
// starts again after a connection that worked, or at once when RetryNow
// asks; waiters are woken at once so that none waits on a dead listener.
func (h *Hub) Listen(ctx context.Context, connect Connect, backoffMax time.Duration, log *slog.Logger) {
	const backoffMin = 100 * time.Millisecond
	pause := backoffMin
	for attempt := 0; ctx.Err() == nil; attempt++ {
		if attempt > 0 {
			h.reconnects.Add(1)
		}
		h.listenerState(true, false)
		listened, err := h.listenOnce(ctx, connect)
		h.listenerState(false, false)
		if ctx.Err() != nil {
			return
		}
		if listened {
			pause = backoffMin
		}
		log.WarnContext(ctx, "agent event listener lost its connection", "error", errText(err), "retry_in_ms", pause.Milliseconds())
		h.Wake()
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		case <-h.retry:
		}
		if pause *= 2; pause > backoffMax {
			pause = backoffMax
		}
	}
}

func errText(err error) string {
	if err == nil {
		return "closed"
	}
	return err.Error()
}

// listenOnce connects, LISTENs and wakes the hub until the connection
// fails; listened reports whether LISTEN took effect.
func (h *Hub) listenOnce(ctx context.Context, connect Connect) (listened bool, err error) {
	conn, err := connect(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, listenSQL); err != nil {
		return false, err
	}
	if h.side != nil {
		if err := h.side.Subscribe(ctx, conn); err != nil {
			return false, err
		}
		if err := h.side.Connected(ctx, conn); err != nil {
			return false, err
		}
		defer h.side.Disconnected()
	}
	h.listenerState(false, true)
	// Commits made before LISTEN took effect are picked up by waiters that
	// re-read after this wake.
	h.Wake()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		h.notifications.Add(1)
		if h.side != nil && n.Channel == h.side.Channel() {
			h.side.Receive(ctx, n.Payload)
			continue
		}
		h.Wake()
	}
}
