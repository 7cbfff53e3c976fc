package runs

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"bothy.example.com/bothy/internal/events"
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
}

// NewHub returns a hub with no listener yet (see Listen).
func NewHub() *Hub { return &Hub{change: make(chan struct{}), stopping: make(chan struct{})} }

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

// Listen holds one connection of pool in LISTEN until ctx ends, waking the
// hub on every notification. A lost connection is replaced after a short
// pause, and waiters are woken then so that none waits on a dead listener.
func (h *Hub) Listen(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) {
	// One line when the connection is lost, not one per retry: during a
	// database outage the retries fail every half second.
	lost := false
	for ctx.Err() == nil {
		if err := h.listenOnce(ctx, pool, func() {
			if lost {
				log.InfoContext(ctx, "agent event listener listens again")
				lost = false
			}
		}); err != nil && ctx.Err() == nil {
			if !lost {
				log.WarnContext(ctx, "agent event listener lost its connection", "error", err.Error())
				lost = true
			}
			h.Wake()
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
}

func (h *Hub) listenOnce(ctx context.Context, pool *pgxpool.Pool, listening func()) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection keeps its LISTEN state: never hand it back to the pool.
	pc := conn.Hijack()
	defer pc.Close(context.WithoutCancel(ctx))
	if _, err := pc.Exec(ctx, "LISTEN "+events.NotifyChannel); err != nil {
		return err
	}
	listening()
	// Commits made before LISTEN took effect are picked up by waiters that
	// re-read after this wake.
	h.Wake()
	for {
		if _, err := pc.WaitForNotification(ctx); err != nil {
			return err
		}
		h.Wake()
	}
}
