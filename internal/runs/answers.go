package runs

import (
	"context"

	"bothy.example.com/bothy/internal/platform/problem"
)

// Answer is one answer of a run: a text message its agent posted naming
// the run in run_id (the anchor and cards are not answers).
type Answer struct {
	MessageID   string
	ClientMsgID string
}

// Answers returns the answers of the runs runIDs, each run's oldest first
// (a run without answers has none in the map). It decides nothing: the
// caller read the runs with the reader's rights.
func (s *Service) Answers(ctx context.Context, runIDs []string) (map[string][]Answer, error) {
	out, err := s.st.answersOf(ctx, runIDs)
	if err != nil {
		return nil, problem.Internal("runs.Answers", err)
	}
	return out, nil
}
