package livehub

import (
	"context"

	"bothy.example.com/bothy/internal/platform/db"
)

// The hub shares the stream hub's LISTEN connection as its Side
// (stream.Side): the stream hub knows no live box, only a second channel.
// Connected, Disconnected and Receive (hub.go) are the rest of that side.

// listenSQL subscribes the listener's connection to Channel.
const listenSQL = "LISTEN " + Channel

// Channel returns the live boxes' channel, Channel.
func (h *Hub) Channel() string { return Channel }

// Subscribe LISTENs conn on Channel.
func (h *Hub) Subscribe(ctx context.Context, conn *db.Conn) error {
	_, err := conn.Exec(ctx, listenSQL)
	return err
}

// MaxBytes is run.live_max_bytes, the most text a box holds.
func (h *Hub) MaxBytes() int { return h.maxBytes }

// Writes returns how many box writes this replica made, and a channel
// closed at its next write (tests and benchmarks wait on it instead of
// sleeping).
func (h *Hub) Writes() (int, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stored, h.announced
}
