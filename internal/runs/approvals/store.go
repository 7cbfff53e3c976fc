package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/problem"
)

// ErrNotFound is returned for an unknown approval.
var ErrNotFound = fmt.Errorf("approvals: %w", problem.ErrMissing)

// Store is the SQL of the approvals (run_approvals). Its methods run in
// the transaction of their context, if any (db.Q): the runs module calls
// them inside its units of work.
type Store struct {
	pool db.Querier
}

// NewStore returns the store of the approvals on pool.
func NewStore(pool db.Querier) *Store { return &Store{pool: pool} }

const approvalColumns = `id::text, run_id::text, message_id::text, restricted_to::text, title, detail, options, state,
	coalesce(option_id, ''), coalesce(decided_by::text, ''), decided_at, expires_at, created_at`

func scanApproval(r pgx.Row) (Approval, error) {
	var a Approval
	var opts []byte
	err := r.Scan(&a.ID, &a.RunID, &a.MessageID, &a.RestrictedTo, &a.Title, &a.Detail, &opts, &a.State, &a.OptionID, &a.DecidedBy,
		&a.DecidedAt, &a.ExpiresAt, &a.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Approval{}, ErrNotFound
	}
	if err != nil {
		return Approval{}, err
	}
	err = json.Unmarshal(opts, &a.Options)
	return a, err
}

// Insert stores a.
func (s *Store) Insert(ctx context.Context, a Approval) error {
	opts, err := json.Marshal(a.Options)
	if err != nil {
		return err
	}
	_, err = db.Q(ctx, s.pool).Exec(ctx, `INSERT INTO run_approvals (id, run_id, message_id, restricted_to, title, detail, options, state, expires_at, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9)`, a.ID, a.RunID, a.MessageID, a.RestrictedTo, a.Title, a.Detail, opts, a.ExpiresAt, a.CreatedAt)
	return err
}

// Get reads approval id, locked FOR UPDATE when lock is set; ErrNotFound
// when there is none.
func (s *Store) Get(ctx context.Context, id string, lock bool) (Approval, error) {
	q := `SELECT ` + approvalColumns + ` FROM run_approvals WHERE id = $1`
	if lock {
		q += ` FOR UPDATE`
	}
	return scanApproval(db.Q(ctx, s.pool).QueryRow(ctx, q, id))
}

// OfCards reads the approvals whose card is one of the messages
// messageIDs, keyed by message.
func (s *Store) OfCards(ctx context.Context, messageIDs []string) (map[string]Approval, error) {
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT `+approvalColumns+` FROM run_approvals WHERE message_id = ANY($1::uuid[])`, messageIDs)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]Approval{}
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, err
		}
		out[a.MessageID] = a
	}
	return out, rows.Err()
}

// PendingOf reads the pending approval of run runID, locked FOR UPDATE;
// ErrNotFound when there is none.
func (s *Store) PendingOf(ctx context.Context, runID string) (Approval, error) {
	return scanApproval(db.Q(ctx, s.pool).QueryRow(ctx, `SELECT `+approvalColumns+` FROM run_approvals
		WHERE run_id = $1 AND state = 'pending' ORDER BY created_at DESC LIMIT 1 FOR UPDATE`, runID))
}

// Decide stores the decision on approval id: state, and for a decided one
// the option, who and when.
func (s *Store) Decide(ctx context.Context, id, state, optionID, by string, at time.Time) error {
	var opt, who any
	if optionID != "" {
		opt, who = optionID, by
	}
	_, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE run_approvals SET state = $2, option_id = $3, decided_by = $4, decided_at = $5 WHERE id = $1`,
		id, state, opt, who, at)
	return err
}

// WithdrawOf withdraws the pending approvals of run runID (it ended or
// went back to queued).
func (s *Store) WithdrawOf(ctx context.Context, runID string, at time.Time) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE run_approvals SET state = 'withdrawn', decided_at = $2 WHERE run_id = $1 AND state = 'pending'`, runID, at)
	return err
}
