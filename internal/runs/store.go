package runs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs/domain"
	"bothy.example.com/bothy/internal/runs/record"
)

// Run is a stored run (the type lives in internal/runs/record, which the
// run context's package reads too).
type Run = record.Run

// ErrNotFound is returned for an unknown run.
var ErrNotFound = fmt.Errorf("runs: %w", problem.ErrMissing)

const runColumns = `id, thread_id, agent_id, coalesce(agent_session_id::text, ''), session_mode, trigger_kind,
	coalesce(triggering_message_id::text, ''), coalesce(trigger_thread_id::text, ''), coalesce(trigger_seq, 0), coalesce(triggered_by::text, ''), state, cancel_requested,
	coalesce(end_reason, ''), version, queued_at, started_at, ended_at, last_activity_at,
	coalesce(holder, ''), lease_expires_at, attempt, trigger_lost_at, approval_until, coalesce(traceparent, '')`

// runDest returns the scan destinations of runColumns into x.
func runDest(x *Run) []any {
	return []any{&x.ID, &x.ThreadID, &x.AgentID, &x.SessionID, &x.SessionMode, &x.TriggerKind, &x.TriggeringMessageID,
		&x.TriggerThreadID, &x.TriggerSeq, &x.TriggeredBy, &x.State, &x.CancelRequested, &x.EndReason, &x.Version, &x.QueuedAt, &x.StartedAt, &x.EndedAt, &x.LastActivityAt,
		&x.Holder, &x.LeaseExpiresAt, &x.Attempt, &x.TriggerLostAt, &x.ApprovalUntil, &x.Traceparent}
}

func scanRun(r pgx.Row) (Run, error) {
	var x Run
	err := r.Scan(runDest(&x)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return Run{}, ErrNotFound
	}
	return x, err
}

func (s *store) getRun(ctx context.Context, id string, lock rowLock) (Run, error) {
	q := db.Q(ctx, s.pool)
	return scanRun(q.QueryRow(ctx, `SELECT `+runColumns+` FROM runs WHERE id = $1 `+string(lock), id))
}

// triggeredRuns reads at most limit runs triggered by principal, newest
// first, before the run id after (empty: from the newest).
func (s *store) triggeredRuns(ctx context.Context, principal, after string, limit int) ([]Run, error) {
	var afterID any
	if after != "" {
		afterID = after
	}
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT `+runColumns+` FROM runs
		WHERE triggered_by = $1 AND ($2::uuid IS NULL OR id < $2) ORDER BY id DESC LIMIT $3`, principal, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("triggered runs: %w", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("triggered runs: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// runInThreadSQL reads run $1 with its thread and the thread's channel
// (chat's shared view thread_info, scanned with chat.ThreadInfoDest), the
// grant levels of principal $2 on that channel and its space, live at $3
// (authz's shared function grant_levels, read with authz.GrantLevelOf),
// and whether the run or another run of its session has any follow-up on
// record.
var runInThreadSQL = `SELECT ` + runColumns + `, ti.*,
		(SELECT coalesce(array_agg(gl.level), '{}') FROM grant_levels($3::timestamptz, $2::uuid, ti.ti_space_id, ti.ti_cid) gl),
		EXISTS (SELECT 1 FROM run_followups f WHERE f.run_id = runs.id)
		OR EXISTS (SELECT 1 FROM runs s JOIN run_followups f ON f.run_id = s.id WHERE s.agent_session_id = runs.agent_session_id)
	FROM runs JOIN thread_info ti ON ti.ti_thread_id = runs.thread_id
	WHERE runs.id = $1`

// runInThread is a run as getRunInThread reads it.
type runInThread struct {
	run     Run
	thread  chat.Thread
	channel chat.Channel
	// levels are the reader's grant levels on the channel and its space.
	levels []string
	// followUps is false when neither the run nor another run of its
	// session has a follow-up on record: no message of the run's context
	// can then be a delivered follow-up, and the run has none in play.
	followUps bool
}

// getRunInThread reads run id with its thread, the thread's channel, the
// grant levels of principal readerID there and whether follow-ups are on
// record, in one statement, or ErrNotFound: a run read takes one round
// trip for all, and a missing run the same one as a visible one.
func (s *store) getRunInThread(ctx context.Context, id, readerID string) (runInThread, error) {
	q := db.Q(ctx, s.pool)
	var x runInThread
	dest := append(append(runDest(&x.run), chat.ThreadInfoDest(&x.thread, &x.channel)...), &x.levels, &x.followUps)
	err := q.QueryRow(ctx, runInThreadSQL, id, readerID, s.clock.Now()).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return runInThread{}, ErrNotFound
	}
	return x, err
}

func (s *store) activeRunOf(ctx context.Context, threadID string) (Run, error) {
	q := db.Q(ctx, s.pool)
	return scanRun(q.QueryRow(ctx, `SELECT `+runColumns+` FROM runs WHERE thread_id = $1 AND state IN (`+activeStatesSQL+`) FOR UPDATE`, threadID))
}

func (s *store) insertRun(ctx context.Context, r Run) error {
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
	var traceparent any
	if r.Traceparent != "" {
		traceparent = r.Traceparent
	}
	_, err := q.Exec(ctx, `INSERT INTO runs (id, thread_id, agent_id, agent_session_id, session_mode, trigger_kind, triggering_message_id,
		trigger_thread_id, trigger_seq, triggered_by, state, version, queued_at, last_activity_at, traceparent)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'queued', 1, $11, $11, $12)`,
		r.ID, r.ThreadID, r.AgentID, session, r.SessionMode, r.TriggerKind, msg, tthread, tseq, by, r.QueuedAt, traceparent)
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

func (s *store) currentSession(ctx context.Context, threadID, agentID string) (Session, error) {
	q := db.Q(ctx, s.pool)
	return scanSession(q.QueryRow(ctx, `SELECT `+sessionColumns+` FROM agent_sessions WHERE thread_id = $1 AND agent_id = $2 AND is_current FOR UPDATE`, threadID, agentID))
}

func (s *store) insertSession(ctx context.Context, sess Session) error {
	q := db.Q(ctx, s.pool)
	var ref any
	if sess.ExternalRef != "" {
		ref = sess.ExternalRef
	}
	_, err := q.Exec(ctx, `INSERT INTO agent_sessions (id, thread_id, agent_id, is_current, started, external_ref, created_at) VALUES ($1, $2, $3, true, $4, $5, $6)`,
		sess.ID, sess.ThreadID, sess.AgentID, sess.Started, ref, sess.CreatedAt)
	return err
}

func (s *store) sessionRuns(ctx context.Context, sessionID string) (int, error) {
	q := db.Q(ctx, s.pool)
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM runs WHERE agent_session_id = $1`, sessionID).Scan(&n)
	return n, err
}

func validID(id string) bool { return ids.Valid(id) }

// OwnRuns returns those of runs ids that belong to agent agentID, in one
// statement: an agent reads the runs named in its own stream without a
// thread right (ids and states only; every nested field decides anew).
func (s *store) OwnRuns(ctx context.Context, agentID string, idList []string) (map[string]Run, error) {
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
func (s *store) CountByState(ctx context.Context) (map[domain.RunState]int64, error) {
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

// activeStatesSQL is domain.ActiveRunStates as an SQL list of literals,
// for a `state IN (...)` filter of this file's statements (the values are
// constants, never input; the partial indexes on active runs and the views
// active_runs and ended_runs list the same, which a test of
// internal/runs/domain checks). Other modules read the runs module's views
// instead (migrations/00015_module_views.sql).
var activeStatesSQL = func() string {
	active := domain.ActiveRunStates()
	parts := make([]string, len(active))
	for i, s := range active {
		parts[i] = "'" + string(s) + "'"
	}
	return strings.Join(parts, ", ")
}()

// store holds the package's SQL, kept in an unexported field (st) of
// the service that decides what to write (the store convention: README.md#architecture).
type store struct {
	pool  db.Querier
	clock clock.Clock
}

// rowLock is how getRun locks the run row it reads.
type rowLock string

const (
	// lockForUpdate locks the row for the rest of the transaction.
	lockForUpdate rowLock = "FOR UPDATE"
	// lockSkipLocked locks the row unless another unit holds it (then
	// there is no row).
	lockSkipLocked rowLock = "FOR UPDATE SKIP LOCKED"
)

// setLease sets the lease of run id to end at until.
func (s *store) setLease(ctx context.Context, id string, until time.Time) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE runs SET lease_expires_at = $2 WHERE id = $1`, id, until)
	return err
}

// markSessionStarted records that session id has started.
func (s *store) markSessionStarted(ctx context.Context, id string) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE agent_sessions SET started = true WHERE id = $1`, id)
	return err
}

// settleDelivered moves run runID's delivered follow-ups to state to.
func (s *store) settleDelivered(ctx context.Context, runID string, to domain.FollowupState) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE run_followups SET state = $2 WHERE run_id = $1 AND state = 'delivered'`, runID, to)
	return err
}

// pendingFollowups returns the message ids of run runID's pending
// follow-ups in thread order.
func (s *store) pendingFollowups(ctx context.Context, runID string) ([]string, error) {
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT f.message_id::text FROM run_followups f JOIN message_facts m ON m.id = f.message_id
		WHERE f.run_id = $1 AND f.state = 'pending' ORDER BY m.thread_seq`, runID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// dropFollowup drops message messageID as a follow-up of run runID, for why.
func (s *store) dropFollowup(ctx context.Context, runID, messageID, why string) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE run_followups SET state = 'dropped', drop_reason = $3 WHERE run_id = $1 AND message_id = $2 AND state = 'pending'`, runID, messageID, why)
	return err
}

// promoteFollowup marks message messageID, a follow-up of run runID, as
// the trigger of the next run.
func (s *store) promoteFollowup(ctx context.Context, runID, messageID string) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE run_followups SET state = 'promoted' WHERE run_id = $1 AND message_id = $2 AND state = 'pending'`, runID, messageID)
	return err
}

// moveFollowup makes message messageID, a follow-up of run runID, a
// follow-up of run nextID.
func (s *store) moveFollowup(ctx context.Context, runID, messageID, nextID string) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE run_followups SET run_id = $3 WHERE run_id = $1 AND message_id = $2 AND state = 'pending'`, runID, messageID, nextID)
	return err
}

// runPlace returns the thread and agent of run id, or ErrNotFound.
func (s *store) runPlace(ctx context.Context, id string) (threadID, agentID string, err error) {
	err = db.Q(ctx, s.pool).QueryRow(ctx, `SELECT thread_id::text, agent_id::text FROM runs WHERE id = $1`, id).Scan(&threadID, &agentID)
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	return threadID, agentID, err
}

// lockAckedRuns takes FOR SHARE, in id order, the runs of the
// agent.followup events of agent agentID after from up to to: a run's end
// holds its row FOR UPDATE while it settles and promotes its follow-ups,
// so a delivery waits for it (and then finds them settled) or the end
// waits for the delivery (and then finds them delivered).
func (s *store) lockAckedRuns(ctx context.Context, agentID string, from, to int64) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `SELECT r.id FROM runs r WHERE r.id IN (
			SELECT e.run_id FROM agent_event_facts e WHERE e.agent_id = $1 AND e.seq > $2 AND e.seq <= $3 AND e.type = $4)
		ORDER BY r.id FOR SHARE OF r`, agentID, from, to, events.AgentFollowup)
	return err
}

// deliverAcked delivers (at now) the pending follow-ups whose agent.followup
// events of agent agentID lie after from up to to.
func (s *store) deliverAcked(ctx context.Context, agentID string, from, to int64, now time.Time) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE run_followups f SET state = 'delivered', delivered_at = $4
			FROM agent_event_facts e WHERE e.agent_id = $1 AND e.seq > $2 AND e.seq <= $3 AND e.type = $5
			AND f.run_id = e.run_id AND f.message_id = e.message_id AND f.state = 'pending'`,
		agentID, from, to, now, events.AgentFollowup)
	return err
}

// insertFollowup stores message messageID as a pending follow-up of run runID.
func (s *store) insertFollowup(ctx context.Context, runID, messageID string, now time.Time) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `INSERT INTO run_followups (run_id, message_id, state, created_at) VALUES ($1, $2, 'pending', $3)`,
		runID, messageID, now)
	return err
}

// writeRun stores the state, times, claim and flags of run.
func (s *store) writeRun(ctx context.Context, run Run) error {
	var reasonV, holderV any
	if run.EndReason != "" {
		reasonV = run.EndReason
	}
	if run.Holder != "" {
		holderV = run.Holder
	}
	_, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE runs SET state = $2, version = $3, last_activity_at = $4, started_at = $5, ended_at = $6, end_reason = $7, cancel_requested = $8,
		holder = $9, lease_expires_at = $10, attempt = $11, trigger_lost_at = $12, approval_until = $13 WHERE id = $1`,
		run.ID, run.State, run.Version, run.LastActivityAt, run.StartedAt, run.EndedAt, reasonV, run.CancelRequested, holderV, run.LeaseExpiresAt, run.Attempt, run.TriggerLostAt,
		run.ApprovalUntil)
	return err
}

// answerRun reads run id for an answer check and takes it FOR SHARE; an
// unknown run is ErrNotFound. The Run carries what the trigger check of
// the answer needs (its person and loss mark) besides the AnswerRun.
func (s *store) answerRun(ctx context.Context, id string) (domain.AnswerRun, Run, error) {
	var run domain.AnswerRun
	var r Run
	var by *string
	err := db.Q(ctx, s.pool).QueryRow(ctx, `SELECT id::text, thread_id::text, agent_id::text, state, coalesce(holder, ''),
			triggered_by::text, trigger_lost_at FROM runs WHERE id = $1 FOR SHARE`, id).
		Scan(&run.ID, &run.ThreadID, &run.AgentID, &run.State, &run.Holder, &by, &r.TriggerLostAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return run, r, ErrNotFound
	}
	r.ID, r.ThreadID, r.AgentID, r.State, r.Holder = run.ID, run.ThreadID, run.AgentID, run.State, run.Holder
	if by != nil {
		r.TriggeredBy = *by
	}
	return run, r, err
}

// recordAnswer records message messageID, sent with clientMsgID, as an
// answer of run runID.
func (s *store) recordAnswer(ctx context.Context, runID, messageID, clientMsgID string, at time.Time) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `INSERT INTO run_answers (run_id, message_id, client_msg_id, created_at) VALUES ($1, $2, $3, $4)`,
		runID, messageID, clientMsgID, at)
	return err
}

// answersOf returns the answers of the runs runIDs, each run's oldest
// first.
func (s *store) answersOf(ctx context.Context, runIDs []string) (map[string][]Answer, error) {
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT run_id::text, message_id::text, client_msg_id FROM run_answers
		WHERE run_id = ANY($1::uuid[]) ORDER BY created_at, message_id`, ids.ArrayParam(runIDs))
	if err != nil {
		return nil, err
	}
	out := map[string][]Answer{}
	var runID string
	var a Answer
	_, err = pgx.ForEachRow(rows, []any{&runID, &a.MessageID, &a.ClientMsgID}, func() error {
		out[runID] = append(out[runID], a)
		return nil
	})
	return out, err
}

// renewClaimedLease renews the lease of run id to until while it is claimed
// and running or waiting.
func (s *store) renewClaimedLease(ctx context.Context, id string, until time.Time) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE runs SET lease_expires_at = $2 WHERE id = $1 AND lease_expires_at IS NOT NULL AND state IN ('running', 'waiting_input')`,
		id, until)
	return err
}

// retireSessions marks agent's sessions of thread threadID not current.
func (s *store) retireSessions(ctx context.Context, threadID, agentID string) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE agent_sessions SET is_current = false WHERE thread_id = $1 AND agent_id = $2 AND is_current`, threadID, agentID)
	return err
}

// dueRun is a run the sweeper looks at, with its thread.
type dueRun struct{ run, thread string }

// dueRuns lists up to 100 active runs, oldest first, that may be due: queued
// with no activity since queuedBefore, running or waiting with no activity
// since stalledBefore or a lease ended by now, or that lost trigger at or
// before lostBefore.
func (s *store) dueRuns(ctx context.Context, queuedBefore, stalledBefore, now, lostBefore time.Time) ([]dueRun, error) {
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT id::text, thread_id::text FROM runs
		WHERE (state = 'queued' AND last_activity_at < $1)
		   OR (state IN ('running', 'waiting_input') AND ((last_activity_at < $2 AND approval_until IS NULL) OR lease_expires_at <= $3 OR approval_until <= $3))
		   OR (state IN (`+activeStatesSQL+`) AND trigger_lost_at <= $4)
		ORDER BY queued_at LIMIT 100`, queuedBefore, stalledBefore, now, lostBefore)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (dueRun, error) {
		var d dueRun
		err := r.Scan(&d.run, &d.thread)
		return d, err
	})
}

// triggerScopeSQL restricts a statement to TriggerScope ($1 principal, $2
// channel, $3 space); %s is the column of the person.
const triggerScopeSQL = `($1 = '' OR %s::text = $1) AND ($2 = '' OR t.channel_id::text = $2) AND ($3 = '' OR t.space_id::text = $3)`

// heldRuns lists the active runs in scope whose trigger has not been lost,
// with the person who triggered them.
func (s *store) heldRuns(ctx context.Context, scope TriggerScope) ([]heldBy, error) {
	runRows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT r.id::text, '', r.thread_id::text, r.triggered_by::text FROM runs r
		JOIN thread_places t ON t.id = r.thread_id
		WHERE r.state IN (`+activeStatesSQL+`) AND r.trigger_lost_at IS NULL AND r.triggered_by IS NOT NULL AND `+
		fmt.Sprintf(triggerScopeSQL, "r.triggered_by"), scope.PrincipalID, scope.ChannelID, scope.SpaceID)
	if err != nil {
		return nil, fmt.Errorf("recheck runs: %w", err)
	}
	runList, err := pgx.CollectRows(runRows, scanHeld)
	if err != nil {
		return nil, fmt.Errorf("recheck runs: %w", err)
	}
	return runList, nil
}

// heldFollowups lists the pending and delivered follow-ups of active runs
// in scope, with their authors.
func (s *store) heldFollowups(ctx context.Context, scope TriggerScope) ([]heldBy, error) {
	fRows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT f.run_id::text, f.message_id::text, r.thread_id::text, m.author_principal_id::text FROM run_followups f
		JOIN runs r ON r.id = f.run_id JOIN message_facts m ON m.id = f.message_id
		JOIN thread_places t ON t.id = r.thread_id
		WHERE r.state IN (`+activeStatesSQL+`) AND f.state IN ('pending', 'delivered') AND `+
		fmt.Sprintf(triggerScopeSQL, "m.author_principal_id"), scope.PrincipalID, scope.ChannelID, scope.SpaceID)
	if err != nil {
		return nil, fmt.Errorf("recheck follow-ups: %w", err)
	}
	fList, err := pgx.CollectRows(fRows, scanHeld)
	if err != nil {
		return nil, fmt.Errorf("recheck follow-ups: %w", err)
	}
	return fList, nil
}

// dropHeldFollowup drops the follow-up h while it is pending or delivered.
func (s *store) dropHeldFollowup(ctx context.Context, h heldBy, why string) error {
	_, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE run_followups SET state = 'dropped', drop_reason = $3 WHERE run_id = $1 AND message_id = $2 AND state IN ('pending', 'delivered')`,
		h.runID, h.messageID, why)
	return err
}

// scanHeld scans one row of heldRuns into a heldBy: run, message, thread
// and person, in that order.
func scanHeld(r pgx.CollectableRow) (heldBy, error) {
	var h heldBy
	err := r.Scan(&h.runID, &h.messageID, &h.threadID, &h.person)
	return h, err
}
