package domain_test

import (
	"errors"
	"testing"

	"bothy.example.com/bothy/internal/runs/domain"
)

func TestAnswerVerdict(t *testing.T) {
	own := func(state domain.RunState) domain.AnswerRun {
		return domain.AnswerRun{ID: "r", ThreadID: "t", AgentID: "lotse", State: state}
	}
	tests := []struct {
		name  string
		run   domain.AnswerRun
		found bool
		want  error
	}{
		{"not found", domain.AnswerRun{}, false, domain.ErrAnswerRunMismatch},
		{"another thread", domain.AnswerRun{ID: "r", ThreadID: "other", AgentID: "lotse", State: "running"}, true, domain.ErrAnswerRunMismatch},
		{"another agent", domain.AnswerRun{ID: "r", ThreadID: "t", AgentID: "texter", State: "running"}, true, domain.ErrAnswerRunMismatch},
		{"own queued", own("queued"), true, nil},
		{"own running", own("running"), true, nil},
		{"own waiting_input", own("waiting_input"), true, nil},
		{"own completed", own("completed"), true, domain.ErrAnswerRunNotActive},
		{"own failed", own("failed"), true, domain.ErrAnswerRunNotActive},
		{"own cancelled", own("cancelled"), true, domain.ErrAnswerRunNotActive},
		{"ended run of another agent: ownership before state", domain.AnswerRun{ID: "r", ThreadID: "t", AgentID: "texter", State: "completed"}, true, domain.ErrAnswerRunMismatch},
		{"ended run in another thread", domain.AnswerRun{ID: "r", ThreadID: "other", AgentID: "lotse", State: "failed"}, true, domain.ErrAnswerRunMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := domain.AnswerVerdict(tc.run, tc.found, "lotse", "t"); !errors.Is(got, tc.want) || (tc.want == nil && got != nil) {
				t.Fatalf("AnswerVerdict = %v, want %v", got, tc.want)
			}
		})
	}
}
