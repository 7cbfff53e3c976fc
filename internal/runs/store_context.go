package runs

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/runs/domain"
)

// earlierRuns returns the earlier runs of session sessionID before run id
// (queued at queuedAt), newest first, with where their triggering messages
// lie (one statement).
func (s *store) earlierRuns(ctx context.Context, sessionID, id string, queuedAt time.Time) ([]domain.EarlierRun, error) {
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT triggering_message_id IS NOT NULL, coalesce(trigger_thread_id::text, ''), coalesce(trigger_seq, 0)
		FROM runs WHERE agent_session_id = $1 AND (queued_at, id) < ($3, $2) ORDER BY queued_at DESC, id DESC`,
		sessionID, id, queuedAt)
	if err != nil {
		return nil, fmt.Errorf("earlier runs: %w", err)
	}
	defer rows.Close()
	var out []domain.EarlierRun
	for rows.Next() {
		var e domain.EarlierRun
		if err := rows.Scan(&e.HasTrigger, &e.TriggerThreadID, &e.TriggerSeq); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// Delivered returns which of messageIDs were delivered (acknowledged by
// the agent) as follow-ups to session sessionID, or, for a guest run
// without session, to run runID: the fact outlives the follow-up's state.
// One statement.
func (s *store) Delivered(ctx context.Context, sessionID, runID string, messageIDs []string) (map[string]bool, error) {
	var session, run any
	if sessionID != "" {
		session = sessionID
	}
	if runID != "" {
		run = runID
	}
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT DISTINCT f.message_id::text FROM run_followups f JOIN runs r ON r.id = f.run_id
		WHERE (r.agent_session_id = $1::uuid OR r.id = $2::uuid) AND f.message_id = ANY($3::uuid[]) AND f.delivered_at IS NOT NULL`, session, run, messageIDs)
	if err != nil {
		return nil, fmt.Errorf("delivered follow-ups: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out[id] = true
	}
	return out, rows.Err()
}

// FollowUpFacts answers, in one statement, what a context read needs to
// know about follow-ups: which of messageIDs and of the run's own
// follow-ups were delivered (acknowledged by the agent) to session
// sessionID or, for a guest run without session, to run runID (Delivered's
// rule), and the ids of run runID's follow-ups still in play (pending or
// delivered), oldest first (FollowUps' rule).
func (s *store) FollowUpFacts(ctx context.Context, sessionID, runID string, messageIDs []string) (map[string]bool, []string, error) {
	var session, run any
	if sessionID != "" {
		session = sessionID
	}
	if runID != "" {
		run = runID
	}
	messages, err := ids.ArrayText(messageIDs)
	if err != nil {
		return nil, nil, fmt.Errorf("follow-up facts: %w", err)
	}
	// The one store read that bypasses db.Q on purpose: the context read
	// runs it beside the people lookups, on its own connection of the pool
	// (db.OnPool, bounded like any statement of a request), so it never
	// joins a transaction of ctx (a transaction's connection cannot serve
	// two statements at once).
	rows, err := db.OnPool(ctx, s.pool).Query(ctx, `WITH fu AS (SELECT f.message_id, m.thread_seq FROM run_followups f JOIN message_facts m ON m.id = f.message_id
			WHERE f.run_id = $2::uuid AND f.state IN ('pending', 'delivered'))
		SELECT false, fu.message_id::text, fu.thread_seq FROM fu
		UNION ALL
		SELECT DISTINCT true, f.message_id::text, 0::bigint FROM run_followups f JOIN runs r ON r.id = f.run_id
			WHERE (r.agent_session_id = $1::uuid OR r.id = $2::uuid) AND f.delivered_at IS NOT NULL
			AND (f.message_id = ANY($3::uuid[]) OR f.message_id IN (SELECT message_id FROM fu))`, session, run, messages)
	if err != nil {
		return nil, nil, fmt.Errorf("follow-up facts: %w", err)
	}
	defer rows.Close()
	delivered := map[string]bool{}
	type item struct {
		id  string
		seq int64
	}
	var own []item
	for rows.Next() {
		var isDelivered bool
		var it item
		if err := rows.Scan(&isDelivered, &it.id, &it.seq); err != nil {
			return nil, nil, fmt.Errorf("follow-up facts: %w", err)
		}
		if isDelivered {
			delivered[it.id] = true
		} else {
			own = append(own, it)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("follow-up facts: %w", err)
	}
	sort.SliceStable(own, func(i, j int) bool { return own[i].seq < own[j].seq })
	ids := make([]string, len(own))
	for i, it := range own {
		ids[i] = it.id
	}
	return delivered, ids, nil
}

// followUpPair is a follow-up: its run and message.
type followUpPair struct{ run, message string }

// followUpPairs lists the follow-ups still in play (pending or delivered)
// of the runs in runIDs, in thread order.
func (s *store) followUpPairs(ctx context.Context, runIDs []string) ([]followUpPair, error) {
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT f.run_id::text, f.message_id::text FROM run_followups f JOIN message_facts m ON m.id = f.message_id
		WHERE f.run_id = ANY($1::uuid[]) AND f.state IN ('pending', 'delivered') ORDER BY m.thread_seq`, runIDs)
	if err != nil {
		return nil, fmt.Errorf("follow-ups: %w", err)
	}
	pairs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (followUpPair, error) {
		var p followUpPair
		err := r.Scan(&p.run, &p.message)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("follow-ups: %w", err)
	}
	return pairs, nil
}
