package runs

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/runs/livebox"
	"bothy.example.com/bothy/internal/runs/livehub"
)

// liveStore is the live hub's store (livehub.Store): the boxes are stored
// beside their runs in run_live, which this package owns.
type liveStore struct{ st *store }

var _ livehub.Store = liveStore{}

// insertLive stores the empty live box of run runID, whose anchor is
// anchorID, in the transaction that creates the run.
func (s *store) insertLive(ctx context.Context, runID, anchorID string) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `INSERT INTO run_live (run_id, anchor_id) VALUES ($1, $2)`, runID, anchorID)
	return err
}

// Box reads the stored box of run runID; snapshot is the listener's
// snapshot (pg_current_snapshot taken right after LISTEN), or "" to leave
// Fresh false. ErrNotFound for a run without a box.
func (l liveStore) Box(ctx context.Context, runID, snapshot string) (livehub.Stored, error) {
	var x livehub.Stored
	var at *time.Time
	var snap any
	if snapshot != "" {
		snap = snapshot
	}
	err := db.Q(ctx, l.st.pool).QueryRow(ctx, `SELECT l.anchor_id::text, r.thread_id::text, l.version, l.text, l.status, l.done, l.ended, l.updated_at,
		coalesce(NOT pg_visible_in_snapshot(l.created_xid, $2::text::pg_snapshot), false)
		FROM run_live l JOIN runs r ON r.id = l.run_id WHERE l.run_id = $1`, runID, snap).
		Scan(&x.AnchorID, &x.ThreadID, &x.Box.Version, &x.Box.Text, &x.Box.Status, &x.Box.Done, &x.Box.Ended, &at, &x.Fresh)
	if errors.Is(err, pgx.ErrNoRows) {
		return livehub.Stored{}, ErrNotFound
	}
	if at != nil {
		x.Box.UpdatedAt = *at
	}
	return x, err
}

// livesOf reads the stored boxes of the runs runIDs (runs without one are
// left out).
func (s *store) livesOf(ctx context.Context, runIDs []string) (map[string]livehub.Stored, error) {
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT l.run_id::text, l.anchor_id::text, r.thread_id::text, l.version, l.text, l.status, l.done, l.ended, l.updated_at
		FROM run_live l JOIN runs r ON r.id = l.run_id WHERE l.run_id = ANY($1::uuid[])`, runIDs)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]livehub.Stored{}
	for rows.Next() {
		var id string
		var x livehub.Stored
		var at *time.Time
		if err := rows.Scan(&id, &x.AnchorID, &x.ThreadID, &x.Box.Version, &x.Box.Text, &x.Box.Status, &x.Box.Done, &x.Box.Ended, &at); err != nil {
			return nil, err
		}
		if at != nil {
			x.Box.UpdatedAt = *at
		}
		out[id] = x
	}
	return out, rows.Err()
}

// Write writes box b of run runID unless the stored copy is as new
// already (several replicas may write the same box; versions only grow).
func (l liveStore) Write(ctx context.Context, runID string, b livebox.Box) error {
	var at any
	if !b.UpdatedAt.IsZero() {
		at = b.UpdatedAt
	}
	_, err := db.Q(ctx, l.st.pool).Exec(ctx, `UPDATE run_live SET version = $2, text = $3, status = $4, done = $5, ended = $6, updated_at = $7
		WHERE run_id = $1 AND (version < $2 OR (version = $2 AND NOT ended))`, runID, b.Version, b.Text, b.Status, b.Done, b.Ended, at)
	return err
}

// endLive marks the stored box of run runID done and ended, in the unit
// that ends the run: a box no replica holds (never written) is final so.
// Its version and text stay: the replicas that hold the box write them.
func (s *store) endLive(ctx context.Context, runID string) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE run_live SET done = true, ended = true WHERE run_id = $1`, runID)
	return err
}

// Notify sends payload on livehub.Channel in the transaction of ctx (so it
// is delivered once, and only if, the transaction commits), or at once.
func (l liveStore) Notify(ctx context.Context, payload string) error {
	_, err := db.Q(ctx, l.st.pool).Exec(ctx, `SELECT pg_notify($1, $2)`, livehub.Channel, payload)
	return err
}

// NotifyLarge stores an operation too large for a notification under id
// and announces it on livehub.Channel, in one statement.
func (l liveStore) NotifyLarge(ctx context.Context, id, body, payload string) error {
	_, err := db.Q(ctx, l.st.pool).Exec(ctx, `WITH ins AS (INSERT INTO run_live_ops (id, body) VALUES ($1, $2) RETURNING id)
		SELECT pg_notify($3, $4) FROM ins`, id, body, livehub.Channel, payload)
	return err
}

// Op reads the stored large operation id.
func (l liveStore) Op(ctx context.Context, id string) (string, error) {
	var body string
	err := db.Q(ctx, l.st.pool).QueryRow(ctx, `SELECT body FROM run_live_ops WHERE id = $1`, id).Scan(&body)
	return body, err
}

// PurgeOps deletes the large operations stored longer than age ago by the
// database's clock, which stamped them (every replica read them long ago).
func (l liveStore) PurgeOps(ctx context.Context, age time.Duration) error {
	_, err := db.Q(ctx, l.st.pool).Exec(ctx, `DELETE FROM run_live_ops WHERE created_at < now() - make_interval(secs => $1)`, age.Seconds())
	return err
}

// runForLive reads run id for an update of its live box and locks it FOR
// SHARE in the transaction of ctx: an end or a takeover of the run (FOR
// UPDATE) waits until the update's notification is committed, so every
// update is ordered before the end it raced.
func (s *store) runForLive(ctx context.Context, id string) (Run, error) {
	return scanRun(db.Q(ctx, s.pool).QueryRow(ctx, `SELECT `+runColumns+` FROM runs WHERE id = $1 FOR SHARE`, id))
}

// Snapshot reads the snapshot of conn, the listener's connection, right
// after its LISTEN.
func (liveStore) Snapshot(ctx context.Context, conn *db.Conn) (string, error) {
	var snap string
	err := conn.QueryRow(ctx, `SELECT pg_current_snapshot()::text`).Scan(&snap)
	return snap, err
}
