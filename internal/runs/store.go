package runs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/runs/domain"
)

// Run is a stored run.
type Run struct {
	ID                  string
	ThreadID            string
	AgentID             string
	SessionID           string
	SessionMode         domain.Mode
	TriggerKind         domain.TriggerKind
	TriggeringMessageID string
	// TriggerThreadID and TriggerSeq locate the triggering message.
	TriggerThreadID string
	TriggerSeq      int64
	TriggeredBy     string
	State           domain.RunState
	CancelRequested bool
	EndReason       string
	Version         int
	QueuedAt        time.Time
	StartedAt       *time.Time
	EndedAt         *time.Time
	LastActivityAt  time.Time
	// Holder is the adapter process that claimed the run and
	// LeaseExpiresAt when its claim lapses (both empty while queued or ended).
	Holder         string
	LeaseExpiresAt *time.Time
	// Attempt counts the run's invocations (1, then one more per expired lease).
	Attempt int
	// TriggerLostAt is when the triggering person lost trigger.
	TriggerLostAt *time.Time
}

// ErrNotFound is returned for an unknown run.
var ErrNotFound = errors.New("runs: not found")

const runColumns = `id, thread_id, agent_id, coalesce(agent_session_id::text, ''), session_mode, trigger_kind,
	coalesce(triggering_message_id::text, ''), coalesce(trigger_thread_id::text, ''), coalesce(trigger_seq, 0), coalesce(triggered_by::text, ''), state, cancel_requested,
	coalesce(end_reason, ''), version, queued_at, started_at, ended_at, last_activity_at,
	coalesce(holder, ''), lease_expires_at, attempt, trigger_lost_at`

func scanRun(r pgx.Row) (Run, error) {
	var x Run
	err := r.Scan(&x.ID, &x.ThreadID, &x.AgentID, &x.SessionID, &x.SessionMode, &x.TriggerKind, &x.TriggeringMessageID,
		&x.TriggerThreadID, &x.TriggerSeq, &x.TriggeredBy, &x.State, &x.CancelRequested, &x.EndReason, &x.Version, &x.QueuedAt, &x.StartedAt, &x.EndedAt, &x.LastActivityAt,
		&x.Holder, &x.LeaseExpiresAt, &x.Attempt, &x.TriggerLostAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Run{}, ErrNotFound
	}
	return x, err
}

func (s *Service) getRun(ctx context.Context, id string, lock string) (Run, error) {
	q := db.Q(ctx, s.pool)
	return scanRun(q.QueryRow(ctx, `SELECT `+runColumns+` FROM runs WHERE id = $1 `+lock, id))
}

func (s *Service) activeRunOf(ctx context.Context, threadID string) (Run, error) {
	q := db.Q(ctx, s.pool)
	return scanRun(q.QueryRow(ctx, `SELECT `+runColumns+` FROM runs WHERE thread_id = $1 AND state IN (`+domain.ActiveRunStatesSQL+`) FOR UPDATE`, threadID))
}

func (s *Service) insertRun(ctx context.Context, r Run) error {
	q := db.Q(ctx, s.pool)
	var session any
	if r.SessionID != "" {
		session = r.SessionID
	}
	var msg, by, tthread, tseq any
	if r.TriggeringMessageID != "" {
		msg, tthread, tseq = r.TriggeringMessageID, r.TriggerThreadID, r.TriggerSeq
	}
	if r.TriggeredBy != "" {
		by = r.TriggeredBy
	}
	_, err := q.Exec(ctx, `INSERT INTO runs (id, thread_id, agent_id, agent_session_id, session_mode, trigger_kind, triggering_message_id,
		trigger_thread_id, trigger_seq, triggered_by, state, version, queued_at, last_activity_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'queued', 1, $11, $11)`,
		r.ID, r.ThreadID, r.AgentID, session, r.SessionMode, r.TriggerKind, msg, tthread, tseq, by, r.QueuedAt)
	if err != nil {
		return fmt.Errorf("insert run: %w", err)
	}
	return nil
}

// Session is a stored agent session.
type Session struct {
	ID          string
	ThreadID    string
	AgentID     string
	IsCurrent   bool
	Started     bool
	ExternalRef string
	CreatedAt   time.Time
}

const sessionColumns = `id, thread_id, agent_id, is_current, started, coalesce(external_ref, ''), created_at`

func scanSession(r pgx.Row) (Session, error) {
	var s Session
	err := r.Scan(&s.ID, &s.ThreadID, &s.AgentID, &s.IsCurrent, &s.Started, &s.ExternalRef, &s.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Session{}, ErrNotFound
	}
	return s, err
}

func (s *Service) currentSession(ctx context.Context, threadID, agentID string) (Session, error) {
	q := db.Q(ctx, s.pool)
	return scanSession(q.QueryRow(ctx, `SELECT `+sessionColumns+` FROM agent_sessions WHERE thread_id = $1 AND agent_id = $2 AND is_current FOR UPDATE`, threadID, agentID))
}

func (s *Service) insertSession(ctx context.Context, sess Session) error {
	q := db.Q(ctx, s.pool)
	var ref any
	if sess.ExternalRef != "" {
		ref = sess.ExternalRef
	}
	_, err := q.Exec(ctx, `INSERT INTO agent_sessions (id, thread_id, agent_id, is_current, started, external_ref, created_at) VALUES ($1, $2, $3, true, $4, $5, $6)`,
		sess.ID, sess.ThreadID, sess.AgentID, sess.Started, ref, sess.CreatedAt)
	return err
}

func (s *Service) sessionRuns(ctx context.Context, sessionID string) (int, error) {
	q := db.Q(ctx, s.pool)
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM runs WHERE agent_session_id = $1`, sessionID).Scan(&n)
	return n, err
}

func validID(id string) bool { return ids.Valid(id) }

// OwnRuns returns those of runs ids that belong to agent agentID, in one
// statement: an agent reads the runs named in its own stream without a
// thread right (ids and states only; every nested field decides anew).
func (s *Service) OwnRuns(ctx context.Context, agentID string, idList []string) (map[string]Run, error) {
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ANY($1::uuid[]) AND agent_id = $2`, idList, agentID)
	if err != nil {
		return nil, fmt.Errorf("own runs: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Run, error) { return scanRun(r) })
	if err != nil {
		return nil, fmt.Errorf("own runs: %w", err)
	}
	out := make(map[string]Run, len(list))
	for _, r := range list {
		out[r.ID] = r
	}
	return out, nil
}

// CountByState counts the runs of the whole database by state, for the
// bothy_runs gauge (one indexed GROUP BY).
func (s *Service) CountByState(ctx context.Context) (map[domain.RunState]int64, error) {
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT state::text, count(*) FROM runs GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("count runs by state: %w", err)
	}
	counts := map[domain.RunState]int64{}
	for rows.Next() {
		var st domain.RunState
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("count runs by state: %w", err)
		}
		counts[st] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count runs by state: %w", err)
	}
	return counts, nil
}

// EndedRunsSQL is the set of ids of runs that have ended, as a subquery for
// a module that must restrict one statement of its own to them (the
// retention of agent events). Runs owns runs; this is the only shape others
// may use.
var EndedRunsSQL = `(SELECT id FROM runs WHERE state NOT IN (` + domain.ActiveRunStatesSQL + `))`
