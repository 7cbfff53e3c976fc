package runs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
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

// extendLease renews r's lease by run.lease_timeout without a new version
// (a lease is not a state change).
func (s *Service) extendLease(ctx context.Context, r Run) (Run, error) {
	tx := db.Q(ctx, s.pool)
	until := s.clock.Now().Add(s.timeouts.Lease)
	if _, err := tx.Exec(ctx, `UPDATE runs SET lease_expires_at = $2 WHERE id = $1`, r.ID, until); err != nil {
		return Run{}, problem.Internal("runs.extendLease", fmt.Errorf("extend lease: %w", err))
	}
	r.LeaseExpiresAt = &until
	return r, nil
}

// Start claims the agent's own run for holder and moves it to running
// (run.start): from queued, or back from waiting_input. While the claim of
// another holder lives the call answers 409 run_claimed; the same holder
// gets the run unchanged with its lease renewed. The first start marks the
// session started.
func (s *Service) Start(ctx context.Context, actor identity.Principal, id, holder string) (Run, error) {
	if err := checkHolder(holder); err != nil {
		return Run{}, err
	}
	return s.change(ctx, actor, authz.RunStart, id, func(ctx context.Context, r Run, channelID string) (Run, []events.Event, error) {
		switch r.State {
		case domain.RunRunning, domain.RunWaitingInput:
			if r.Holder != holder {
				return Run{}, nil, errClaimed()
			}
			if r.State == domain.RunRunning {
				r, err := s.extendLease(ctx, r)
				return r, nil, err
			}
		case domain.RunQueued:
		default:
			return Run{}, nil, errNotActive()
		}
		if r.SessionID != "" {
			if _, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE agent_sessions SET started = true WHERE id = $1`, r.SessionID); err != nil {
				return Run{}, nil, problem.Internal("runs.start", err)
			}
		}
		until := s.clock.Now().Add(s.timeouts.Lease)
		r.Holder, r.LeaseExpiresAt = holder, &until
		r, err := s.transition(ctx, r, domain.RunRunning, "")
		if err != nil {
			return Run{}, nil, err
		}
		return r, []events.Event{s.stateChanged(r, channelID)}, nil
	})
}

// end moves r to an ending state and settles its follow-ups: on completion
// the delivered ones are absorbed, otherwise dropped (delivered_at keeps
// the fact that the session got them). The pending ones, oldest first, go
// through the whole trigger decision again now: the first that would start
// a run of r's agent starts the next run of the thread, the later ones that
// would be its follow-ups become them, and every other one is dropped with
// the decision's reason. The caller holds the thread's and the run's row
// locks.
func (s *Service) end(ctx context.Context, r Run, to domain.RunState, reason, channelID string) (Run, []events.Event, error) {
	tx := db.Q(ctx, s.pool)
	r, err := s.transition(ctx, r, to, reason)
	if err != nil {
		return Run{}, nil, err
	}
	evs := []events.Event{s.stateChanged(r, channelID)}
	settled := domain.FollowupDropped
	if to == domain.RunCompleted {
		settled = domain.FollowupAbsorbed
	}
	if _, err := tx.Exec(ctx, `UPDATE run_followups SET state = $2 WHERE run_id = $1 AND state = 'delivered'`, r.ID, settled); err != nil {
		return Run{}, nil, problem.Internal("runs.end", err)
	}
	rows, err := tx.Query(ctx, `SELECT f.message_id::text FROM run_followups f JOIN `+messaging.FactsSQL+` m ON m.id = f.message_id
		WHERE f.run_id = $1 AND f.state = 'pending' ORDER BY m.thread_seq`, r.ID)
	if err != nil {
		return Run{}, nil, problem.Internal("runs.end", err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return Run{}, nil, problem.Internal("runs.end", err)
	}
	if len(list) == 0 {
		return r, evs, nil
	}
	thread, channel, err := s.chat.ThreadInfo(ctx, r.ThreadID)
	if err != nil {
		return Run{}, nil, problem.Internal("runs.end", err)
	}
	var next Run
	for _, id := range list {
		m, err := s.messaging.Load(ctx, id, channel.ID)
		if err != nil {
			return Run{}, nil, problem.Internal("runs.end", err)
		}
		people, err := s.ident.GetMany(ctx, []string{m.Author.ID})
		if err != nil {
			return Run{}, nil, problem.Internal("runs.end", err)
		}
		p := &messaging.Posted{Message: m, Thread: thread, Channel: channel, Author: people[m.Author.ID]}
		facts, _, err := s.triggerFacts(ctx, p)
		if err != nil {
			return Run{}, nil, problem.Internal("runs.end", err)
		}
		facts.Human = m.Origin == messaging.OriginHuman
		d := DecideTrigger(facts)
		want := messaging.TriggerAccepted
		if next.ID != "" {
			want = messaging.TriggerFollowup
		}
		if d.Outcome != want || d.Agent != r.AgentID {
			why := d.Reason
			if why == "" {
				why = ReasonAddresseeChanged
			}
			if _, err := tx.Exec(ctx, `UPDATE run_followups SET state = 'dropped', drop_reason = $3 WHERE run_id = $1 AND message_id = $2`, r.ID, id, why); err != nil {
				return Run{}, nil, problem.Internal("runs.end", err)
			}
			continue
		}
		if next.ID == "" {
			if _, err := tx.Exec(ctx, `UPDATE run_followups SET state = 'promoted' WHERE run_id = $1 AND message_id = $2`, r.ID, id); err != nil {
				return Run{}, nil, problem.Internal("runs.end", err)
			}
			// The next run stays in r's thread even where auto_thread is on
			// now: the follow-up belongs to the conversation it was written in.
			more, err := s.startRunFor(ctx, r.AgentID, d.Guest, thread, channel.ID, trigger{m.ID, m.ThreadID, m.ThreadSeq}, m.Author.ID)
			if err != nil {
				return Run{}, nil, err
			}
			evs = append(evs, more...)
			if next, err = s.activeRunOf(ctx, r.ThreadID); err != nil {
				return Run{}, nil, problem.Internal("runs.end", fmt.Errorf("next run: %w", err))
			}
			continue
		}
		if _, err := tx.Exec(ctx, `UPDATE run_followups SET run_id = $3 WHERE run_id = $1 AND message_id = $2`, r.ID, id, next.ID); err != nil {
			return Run{}, nil, problem.Internal("runs.end", err)
		}
		evs = append(evs, followupEvent(next, id))
	}
	return r, evs, nil
}

// Path implements authz.Source for runs: the run's thread, reserved to the
// run's agent for agent-self actions.
func (s *Service) Path(ctx context.Context, kind authz.ResourceKind, id string) (authz.Path, error) {
	var threadID, agentID string
	err := db.Q(ctx, s.pool).QueryRow(ctx, `SELECT thread_id::text, agent_id::text FROM runs WHERE id = $1`, id).Scan(&threadID, &agentID)
	if errors.Is(err, pgx.ErrNoRows) {
		return authz.Path{Kind: kind, ID: id}, nil
	}
	if err != nil {
		return authz.Path{}, err
	}
	p, err := s.chat.ThreadPath(ctx, threadID)
	if err != nil {
		return authz.Path{}, err
	}
	p.OwnerID = agentID
	return p, nil
}

// ackedSeq returns the agent's acknowledged position (0 before its first ack).
func (s *Service) ackedSeq(ctx context.Context, agentID string) (int64, error) {
	var seq int64
	err := db.Q(ctx, s.pool).QueryRow(ctx, `SELECT acked_seq FROM agent_cursors WHERE agent_id = $1`, agentID).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return seq, err
}

// Ack stores that actor processed its stream up to upTo
// (agent.events.ack) and returns the stored position. Acknowledging
// backwards changes nothing; a position beyond the end of the stream answers
// invalid_cursor. Every agent.followup event acknowledged now delivers its
// follow-up (pending -> delivered, with the time).
func (s *Service) Ack(ctx context.Context, actor identity.Principal, upTo string) (string, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.AgentEventsAck, authz.Own(authz.KindAgent, actor.ID)); err != nil {
		return "", err
	}
	if upTo == "" || upTo == CursorNow {
		return "", problem.Invalid(problem.FieldError{Pointer: "/up_to", Code: "invalid_cursor"})
	}
	to, err := s.resolveCursor(ctx, actor.ID, upTo, "/up_to")
	if err != nil {
		return "", err
	}
	var stored int64
	err = s.db.InTx(ctx, func(ctx context.Context) error {
		tx := s.db.Q(ctx)
		now := s.clock.Now()
		if _, err := tx.Exec(ctx, `INSERT INTO agent_cursors (agent_id, acked_seq, updated_at) VALUES ($1, 0, $2) ON CONFLICT (agent_id) DO NOTHING`,
			actor.ID, now); err != nil {
			return problem.Internal("runs.ack", err)
		}
		var from int64
		if err := tx.QueryRow(ctx, `SELECT acked_seq FROM agent_cursors WHERE agent_id = $1 FOR UPDATE`, actor.ID).Scan(&from); err != nil {
			return problem.Internal("runs.ack", err)
		}
		stored = from
		if to <= from {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE run_followups f SET state = 'delivered', delivered_at = $4
			FROM `+events.AgentEventsSQL+` e WHERE e.agent_id = $1 AND e.seq > $2 AND e.seq <= $3 AND e.type = $5
			AND f.run_id = e.run_id AND f.message_id = e.message_id AND f.state = 'pending'`,
			actor.ID, from, to, now, events.AgentFollowup); err != nil {
			return problem.Internal("runs.ack", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE agent_cursors SET acked_seq = $2, updated_at = $3 WHERE agent_id = $1`, actor.ID, to, now); err != nil {
			return problem.Internal("runs.ack", err)
		}
		stored = to
		return nil
	})
	if err != nil {
		return "", err
	}
	return strconv.FormatInt(stored, 10), nil
}

// addFollowup makes message a pending follow-up of run, tells the agent, and
// brings a waiting run back to running.
func (s *Service) addFollowup(ctx context.Context, run Run, messageID, channelID string) ([]events.Event, error) {
	tx := db.Q(ctx, s.pool)
	if _, err := tx.Exec(ctx, `INSERT INTO run_followups (run_id, message_id, state, created_at) VALUES ($1, $2, 'pending', $3)`,
		run.ID, messageID, s.clock.Now()); err != nil {
		return nil, problem.Internal("runs.addFollowup", fmt.Errorf("add follow-up: %w", err))
	}
	evs := []events.Event{{AgentID: run.AgentID, RunID: run.ID, MessageID: messageID, Type: events.AgentFollowup,
		Payload: map[string]any{"run_id": run.ID, "message_id": messageID}}}
	if run.State == domain.RunWaitingInput {
		r, err := s.transition(ctx, run, domain.RunRunning, "")
		if err != nil {
			return nil, err
		}
		evs = append(evs, s.stateChanged(r, channelID))
	}
	return evs, nil
}

// transition moves run to state to in the transaction of ctx, raising its version and its
// activity time. Ending states set ended_at and end_reason.
func (s *Service) transition(ctx context.Context, run Run, to domain.RunState, reason string) (Run, error) {
	tx := db.Q(ctx, s.pool)
	now := s.clock.Now()
	run.State, run.Version, run.LastActivityAt = to, run.Version+1, now
	switch to {
	case domain.RunRunning:
		if run.StartedAt == nil {
			run.StartedAt = &now
		}
	case domain.RunCompleted, domain.RunFailed, domain.RunCancelled:
		run.EndedAt, run.EndReason = &now, reason
	}
	if !to.Active() || to == domain.RunQueued {
		// A claim never survives the run's end, nor a return to queued.
		run.Holder, run.LeaseExpiresAt = "", nil
	}
	var reasonV, holderV any
	if run.EndReason != "" {
		reasonV = run.EndReason
	}
	if run.Holder != "" {
		holderV = run.Holder
	}
	_, err := tx.Exec(ctx, `UPDATE runs SET state = $2, version = $3, last_activity_at = $4, started_at = $5, ended_at = $6, end_reason = $7, cancel_requested = $8,
		holder = $9, lease_expires_at = $10, attempt = $11, trigger_lost_at = $12 WHERE id = $1`,
		run.ID, run.State, run.Version, now, run.StartedAt, run.EndedAt, reasonV, run.CancelRequested, holderV, run.LeaseExpiresAt, run.Attempt, run.TriggerLostAt)
	if err != nil {
		return Run{}, problem.Internal("runs.transition", fmt.Errorf("run transition: %w", err))
	}
	return run, nil
}

// checkAnswer checks the run an agent's message names
// (docs/design/replies.md#answer-check).
// The run row is taken FOR SHARE while messaging holds the thread row: an
// end of the run (which locks the thread, then the run) waits for this
// answer's commit or the answer sees the end state, so every answer stored
// with a run_id commits before its run's end event. The run is not changed.
func (s *Service) checkAnswer(ctx context.Context, p *messaging.Posted) error {
	tx := db.Q(ctx, s.pool)
	var run domain.AnswerRun
	found := true
	if !ids.Valid(p.RunID) {
		found = false
	} else {
		err := tx.QueryRow(ctx, `SELECT id::text, thread_id::text, agent_id::text, state FROM runs WHERE id = $1 FOR SHARE`, p.RunID).
			Scan(&run.ID, &run.ThreadID, &run.AgentID, &run.State)
		if errors.Is(err, pgx.ErrNoRows) {
			found = false
		} else if err != nil {
			return problem.Internal("runs.checkAnswer", err)
		}
	}
	switch err := domain.AnswerVerdict(run, found, p.Author.ID, p.Thread.ID); {
	case err == nil:
		// An answer is a call of the holder on the run: it renews the lease
		// (the run row is locked FOR SHARE; this unit holds the thread row,
		// so no other unit waits on it for the upgrade).
		if _, err := tx.Exec(ctx, `UPDATE runs SET lease_expires_at = $2 WHERE id = $1 AND lease_expires_at IS NOT NULL AND state IN ('running', 'waiting_input')`,
			run.ID, s.clock.Now().Add(s.timeouts.Lease)); err != nil {
			return problem.Internal("runs.checkAnswer", err)
		}
		return nil
	case errors.Is(err, domain.ErrAnswerRunNotActive):
		return problem.Newf(problem.Conflict, "run_not_active", "the run has ended; send the message again without run_id")
	default:
		return problem.Invalid(problem.FieldError{Pointer: "/run_id", Code: "run_mismatch", Detail: messaging.RunMismatchDetail})
	}
}

func (s *Service) replaceSession(ctx context.Context, actor identity.Principal, action authz.Action, threadID string, started bool, ref string) (Session, error) {
	_, path, err := s.authz.Authorize(ctx, actor, action, authz.Resource{Kind: authz.KindThread, ID: threadID})
	if err != nil {
		return Session{}, err
	}
	agent, err := s.sessionAgent(ctx, threadID, path)
	if err != nil {
		return Session{}, err
	}
	out := Session{ID: ids.New(), ThreadID: threadID, AgentID: agent, IsCurrent: true, Started: started, ExternalRef: ref, CreatedAt: s.clock.Now()}
	err = s.db.InTx(ctx, func(ctx context.Context) error {
		tx := s.db.Q(ctx)
		if _, err := s.chat.LockThread(ctx, threadID); err != nil {
			return problem.Internal("runs.replaceSession", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE agent_sessions SET is_current = false WHERE thread_id = $1 AND agent_id = $2 AND is_current`, threadID, agent); err != nil {
			return problem.Internal("runs.replaceSession", err)
		}
		if err := s.insertSession(ctx, out); err != nil {
			return problem.Internal("runs.replaceSession", err)
		}
		return nil
	})
	return out, err
}

// sweepOnce is SweepOnce that also says how many runs timed out.
func (s *Service) sweepOnce(ctx context.Context) (changed, ended int, err error) {
	now := s.clock.Now()
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT id::text, thread_id::text FROM runs
		WHERE (state = 'queued' AND last_activity_at < $1)
		   OR (state IN ('running', 'waiting_input') AND (last_activity_at < $2 OR lease_expires_at <= $3))
		   OR (state IN (`+domain.ActiveRunStatesSQL+`) AND trigger_lost_at <= $4)
		ORDER BY queued_at LIMIT 100`, now.Add(-s.timeouts.Start), now.Add(-s.timeouts.Stall), now, now.Add(-s.timeouts.CancelGrace))
	if err != nil {
		return 0, 0, err
	}
	type due struct{ run, thread string }
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (due, error) {
		var d due
		err := r.Scan(&d.run, &d.thread)
		return d, err
	})
	if err != nil {
		return 0, 0, err
	}
	for _, d := range list {
		timedOut := false
		err := s.db.InTx(ctx, func(ctx context.Context) error {
			timedOut = false
			// The thread first, then the run: the lock order of every unit.
			if locked, err := s.chat.TryLockThread(ctx, d.thread); err != nil || !locked {
				return err // not locked: another unit holds the thread; the next sweep retries
			}
			r, err := s.getRun(ctx, d.run, "FOR UPDATE SKIP LOCKED")
			if err == ErrNotFound {
				return nil
			}
			if err != nil {
				return err
			}
			action := SweepVerdict(r, s.clock.Now(), s.timeouts)
			if action == SweepNone {
				return nil
			}
			t, err := s.chat.GetThread(ctx, r.ThreadID)
			if err != nil {
				return err
			}
			var evs []events.Event
			switch action {
			case SweepTimeout:
				_, evs, err = s.end(ctx, r, domain.RunFailed, "timeout", t.ChannelID)
			case SweepRevoked:
				_, evs, err = s.end(ctx, r, domain.RunCancelled, ReasonTriggerRevoked, t.ChannelID)
			case SweepLeaseExpired:
				_, evs, err = s.end(ctx, r, domain.RunFailed, ReasonLeaseExpired, t.ChannelID)
			case SweepRequeue:
				r.Attempt++
				r, err = s.transition(ctx, r, domain.RunQueued, "")
				evs = []events.Event{s.stateChanged(r, t.ChannelID), invocationEvent(r, t.ChannelID)}
			}
			if err != nil {
				return problem.From(err)
			}
			changed++
			timedOut = action == SweepTimeout
			return s.events.Append(ctx, evs...)
		})
		if err != nil {
			return changed, ended, err
		}
		if timedOut {
			ended++
			// Ids only: an operator follows the run through the API.
			s.log.InfoContext(ctx, "run timed out", "run_id", d.run, "thread_id", d.thread)
		}
	}
	n, err := s.RecheckTriggers(ctx, TriggerScope{})
	return changed + n, ended, err
}

// RecheckTriggers applies loss of trigger
// (docs/design/runs.md#loss-of-trigger) to the active
// runs in scope: when the person who triggered a run no longer has trigger
// on its channel (grant revoked or expired, person disabled, channel or
// space archived), a queued run is cancelled at once (trigger_revoked) and a
// running or waiting run gets cancel_requested, loses its context, and ends
// cancelled after run.cancel_grace unless the adapter confirms earlier.
// Pending and delivered follow-ups of people who lost trigger are dropped.
// Call it after any change that can take trigger away (the admin module
// after revoking grants, disabling principals, archiving channels or
// spaces); the sweeper calls it with the zero scope on every sweep, which
// also catches grants that expired. It returns how many runs it changed.
func (s *Service) RecheckTriggers(ctx context.Context, scope TriggerScope) (int, error) {
	const inScope = `($1 = '' OR %s::text = $1) AND ($2 = '' OR t.channel_id::text = $2) AND ($3 = '' OR t.space_id::text = $3)`
	runRows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT r.id::text, '', r.thread_id::text, r.triggered_by::text FROM runs r
		JOIN `+chat.ThreadPlacesSQL+` t ON t.id = r.thread_id
		WHERE r.state IN (`+domain.ActiveRunStatesSQL+`) AND r.trigger_lost_at IS NULL AND r.triggered_by IS NOT NULL AND `+
		fmt.Sprintf(inScope, "r.triggered_by"), scope.PrincipalID, scope.ChannelID, scope.SpaceID)
	if err != nil {
		return 0, fmt.Errorf("recheck runs: %w", err)
	}
	runList, err := pgx.CollectRows(runRows, scanHeld)
	if err != nil {
		return 0, fmt.Errorf("recheck runs: %w", err)
	}
	fRows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT f.run_id::text, f.message_id::text, r.thread_id::text, m.author_principal_id::text FROM run_followups f
		JOIN runs r ON r.id = f.run_id JOIN `+messaging.FactsSQL+` m ON m.id = f.message_id
		JOIN `+chat.ThreadPlacesSQL+` t ON t.id = r.thread_id
		WHERE r.state IN (`+domain.ActiveRunStatesSQL+`) AND f.state IN ('pending', 'delivered') AND `+
		fmt.Sprintf(inScope, "m.author_principal_id"), scope.PrincipalID, scope.ChannelID, scope.SpaceID)
	if err != nil {
		return 0, fmt.Errorf("recheck follow-ups: %w", err)
	}
	fList, err := pgx.CollectRows(fRows, scanHeld)
	if err != nil {
		return 0, fmt.Errorf("recheck follow-ups: %w", err)
	}
	if len(runList) == 0 && len(fList) == 0 {
		return 0, nil
	}
	lost, err := s.lostTrigger(ctx, append(append([]heldBy{}, runList...), fList...))
	if err != nil {
		return 0, err
	}
	changed := 0
	for _, h := range runList {
		if !lost[h] {
			continue
		}
		ok, err := s.revokeRun(ctx, h)
		if err != nil {
			return changed, err
		}
		if ok {
			changed++
		}
	}
	for _, h := range fList {
		if !lost[h] {
			continue
		}
		err := s.db.InTx(ctx, func(ctx context.Context) error {
			tx := s.db.Q(ctx)
			if _, err := s.chat.LockThread(ctx, h.threadID); err != nil {
				return problem.Internal("runs.recheckTriggers", err)
			}
			_, err := tx.Exec(ctx, `UPDATE run_followups SET state = 'dropped', drop_reason = $3 WHERE run_id = $1 AND message_id = $2 AND state IN ('pending', 'delivered')`,
				h.runID, h.messageID, ReasonTriggerRevoked)
			return err
		})
		if err != nil {
			return changed, err
		}
	}
	return changed, nil
}
