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
	held := func(state domain.RunState, holder string) domain.AnswerRun {
		r := own(state)
		r.Holder = holder
		return r
	}
	tests := []struct {
		name   string
		run    domain.AnswerRun
		found  bool
		holder string
		want   error
	}{
		{"not found", domain.AnswerRun{}, false, "", domain.ErrAnswerRunMismatch},
		{"another thread", domain.AnswerRun{ID: "r", ThreadID: "other", AgentID: "lotse", State: "running"}, true, "", domain.ErrAnswerRunMismatch},
		{"another agent", domain.AnswerRun{ID: "r", ThreadID: "t", AgentID: "texter", State: "running"}, true, "", domain.ErrAnswerRunMismatch},
		{"own queued", own("queued"), true, "", nil},
		{"own running", own("running"), true, "", nil},
		{"own waiting_input", own("waiting_input"), true, "", nil},
		{"own completed", own("completed"), true, "", domain.ErrAnswerRunNotActive},
		{"own failed", own("failed"), true, "", domain.ErrAnswerRunNotActive},
		{"own cancelled", own("cancelled"), true, "", domain.ErrAnswerRunNotActive},
		{"ended run of another agent: ownership before state", domain.AnswerRun{ID: "r", ThreadID: "t", AgentID: "texter", State: "completed"}, true, "", domain.ErrAnswerRunMismatch},
		{"ended run in another thread", domain.AnswerRun{ID: "r", ThreadID: "other", AgentID: "lotse", State: "failed"}, true, "", domain.ErrAnswerRunMismatch},
		{"held, by its holder", held("running", "proc-a"), true, "proc-a", nil},
		{"waiting, by its holder", held("waiting_input", "proc-a"), true, "proc-a", nil},
		{"held, by another holder", held("running", "proc-a"), true, "proc-b", domain.ErrAnswerRunClaimed},
		{"held, without a holder", held("running", "proc-a"), true, "", domain.ErrAnswerRunClaimed},
		{"anonymous run, by a holder", own("running"), true, "proc-a", domain.ErrAnswerRunClaimed},
		{"queued, by a holder that lost it", own("queued"), true, "proc-a", domain.ErrAnswerRunClaimed},
		{"ended, by another holder: state before claim", held("completed", ""), true, "proc-b", domain.ErrAnswerRunNotActive},
		{"another agent's held run: ownership before claim", domain.AnswerRun{ID: "r", ThreadID: "t", AgentID: "texter", State: "running", Holder: "x"}, true, "y", domain.ErrAnswerRunMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := domain.AnswerVerdict(tc.run, tc.found, "lotse", "t", tc.holder); !errors.Is(got, tc.want) || (tc.want == nil && got != nil) {
				t.Fatalf("AnswerVerdict = %v, want %v", got, tc.want)
			}
		})
	}
}
