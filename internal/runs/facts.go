package runs

import (
	"context"

	"bothy.example.com/bothy/internal/runs/domain"
)

// The facts below are reads for the faces' loaders and the operations
// gauges, over runs a use case already let its caller see. They decide no
// right.

// OwnRuns returns those of runs ids that belong to agent agentID, in one
// statement: an agent reads the runs named in its own stream without a
// thread right (ids and states only; every nested field decides anew).
func (s *Service) OwnRuns(ctx context.Context, agentID string, idList []string) (map[string]Run, error) {
	return s.st.OwnRuns(ctx, agentID, idList)
}

// CountByState counts the runs of the whole database by state, for the
// bothy_runs gauge (one indexed GROUP BY).
func (s *Service) CountByState(ctx context.Context) (map[domain.RunState]int64, error) {
	return s.st.CountByState(ctx)
}

// Delivered returns which of messageIDs were delivered (acknowledged by
// the agent) as follow-ups to session sessionID, or, for a guest run
// without session, to run runID: the fact outlives the follow-up's state.
// One statement.
func (s *Service) Delivered(ctx context.Context, sessionID, runID string, messageIDs []string) (map[string]bool, error) {
	return s.st.Delivered(ctx, sessionID, runID, messageIDs)
}

// FollowUpFacts answers, in one statement, what a context read needs to
// know about follow-ups: which of messageIDs and of the run's own
// follow-ups were delivered (acknowledged by the agent) to session
// sessionID or, for a guest run without session, to run runID (Delivered's
// rule), and the ids of run runID's follow-ups still in play (pending or
// delivered), oldest first (FollowUps' rule).
func (s *Service) FollowUpFacts(ctx context.Context, sessionID, runID string, messageIDs []string) (map[string]bool, []string, error) {
	return s.st.FollowUpFacts(ctx, sessionID, runID, messageIDs)
}

// TriggeringMessage returns the message that triggered run runID of agent
// agentID ("" for another agent's run, an unknown one, or one without a
// triggering message): a run token reads the files of its context's
// trigger (the files module asks).
func (s *Service) TriggeringMessage(ctx context.Context, agentID, runID string) (string, error) {
	runs, err := s.st.OwnRuns(ctx, agentID, []string{runID})
	if err != nil {
		return "", err
	}
	return runs[runID].TriggeringMessageID, nil
}
