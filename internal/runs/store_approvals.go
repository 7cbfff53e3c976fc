package runs

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/platform/db"
)

// ApprovalOption is one answer a person may give to an approval.
type ApprovalOption struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

// Approval is a stored approval (docs/design/trust.md#approvals).
type Approval struct {
	ID, RunID, MessageID string
	// RestrictedTo is the person who may answer: the run's triggering
	// person.
	RestrictedTo string
	Title        string
	Detail       string
	Options      []ApprovalOption
	// State is pending, decided, expired or withdrawn (the run ended or
	// went back to queued first).
	State string
	// OptionID, DecidedBy and DecidedAt are set once decided.
	OptionID, DecidedBy string
	DecidedAt           *time.Time
	ExpiresAt           time.Time
	CreatedAt           time.Time
}

// The states of an approval.
const (
	ApprovalPending   = "pending"
	ApprovalDecided   = "decided"
	ApprovalExpired   = "expired"
	ApprovalWithdrawn = "withdrawn"
)

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

// insertApproval stores a.
func (s *store) insertApproval(ctx context.Context, a Approval) error {
	opts, err := json.Marshal(a.Options)
	if err != nil {
		return err
	}
	_, err = db.Q(ctx, s.pool).Exec(ctx, `INSERT INTO run_approvals (id, run_id, message_id, restricted_to, title, detail, options, state, expires_at, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9)`, a.ID, a.RunID, a.MessageID, a.RestrictedTo, a.Title, a.Detail, opts, a.ExpiresAt, a.CreatedAt)
	return err
}

// getApproval reads approval id, locked FOR UPDATE when lock is set;
// ErrNotFound when there is none.
func (s *store) getApproval(ctx context.Context, id string, lock bool) (Approval, error) {
	q := `SELECT ` + approvalColumns + ` FROM run_approvals WHERE id = $1`
	if lock {
		q += ` FOR UPDATE`
	}
	return scanApproval(db.Q(ctx, s.pool).QueryRow(ctx, q, id))
}

// approvalsOf reads the approvals whose card is one of the messages
// messageIDs, keyed by message.
func (s *store) approvalsOf(ctx context.Context, messageIDs []string) (map[string]Approval, error) {
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

// pendingApprovalOf reads the pending approval of run runID, locked FOR
// UPDATE; ErrNotFound when there is none.
func (s *store) pendingApprovalOf(ctx context.Context, runID string) (Approval, error) {
	return scanApproval(db.Q(ctx, s.pool).QueryRow(ctx, `SELECT `+approvalColumns+` FROM run_approvals
		WHERE run_id = $1 AND state = 'pending' ORDER BY created_at DESC LIMIT 1 FOR UPDATE`, runID))
}

// decideApproval stores the decision on approval id: state, and for a
// decided one the option, who and when.
func (s *store) decideApproval(ctx context.Context, id, state, optionID, by string, at time.Time) error {
	var opt, who any
	if optionID != "" {
		opt, who = optionID, by
	}
	_, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE run_approvals SET state = $2, option_id = $3, decided_by = $4, decided_at = $5 WHERE id = $1`,
		id, state, opt, who, at)
	return err
}

// withdrawApprovals withdraws the pending approvals of run runID (it ended
// or went back to queued).
func (s *store) withdrawApprovals(ctx context.Context, runID string, at time.Time) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE run_approvals SET state = 'withdrawn', decided_at = $2 WHERE run_id = $1 AND state = 'pending'`, runID, at)
	return err
}
