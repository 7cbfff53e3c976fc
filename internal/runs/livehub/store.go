package livehub

import (
	"context"
	"time"

	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/runs/livebox"
)

// Store is what the hub needs of the database. Package runs implements it:
// a box is stored beside its run (the table run_live, created and ended in
// the run's own transactions, read joined with the run), and a table has
// one owner.
type Store interface {
	// Notify sends payload on Channel in the transaction of ctx, or at once.
	Notify(ctx context.Context, payload string) error
	// NotifyLarge stores body, an operation too large for a notification,
	// under id and sends payload (which names it) on Channel.
	NotifyLarge(ctx context.Context, id, body, payload string) error
	// Op reads the stored large operation id.
	Op(ctx context.Context, id string) (string, error)
	// Box reads the stored box of run runID. snapshot is the listener's
	// snapshot (Snapshot) or "" to leave Stored.Fresh false.
	Box(ctx context.Context, runID, snapshot string) (Stored, error)
	// Write stores box b of run runID unless the stored copy is as new
	// already (several replicas may write the same box).
	Write(ctx context.Context, runID string, b livebox.Box) error
	// PurgeOps deletes the large operations stored longer than age ago.
	PurgeOps(ctx context.Context, age time.Duration) error
	// Snapshot reads the snapshot of conn, the listener's connection,
	// right after its LISTEN.
	Snapshot(ctx context.Context, conn *db.Conn) (string, error)
}

// Stored is a box as stored, with what a replica needs to place it.
type Stored struct {
	AnchorID, ThreadID string
	Box                livebox.Box
	// Fresh says the run was created after the listener's snapshot: the
	// replica has heard every operation of the box.
	Fresh bool
}
