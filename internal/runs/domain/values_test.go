package domain_test

import (
	"testing"

	"bothy.example.com/bothy/internal/runs/domain"
)

func TestRunStateActive(t *testing.T) {
	tests := []struct {
		state domain.RunState
		want  bool
	}{
		{domain.RunQueued, true},
		{domain.RunRunning, true},
		{domain.RunWaitingInput, true},
		{domain.RunCompleted, false},
		{domain.RunFailed, false},
		{domain.RunCancelled, false},
		{"", false},
		{"QUEUED", false},
	}
	for _, tc := range tests {
		if got := tc.state.Active(); got != tc.want {
			t.Errorf("RunState(%q).Active() = %v, want %v", tc.state, got, tc.want)
		}
	}
}

func TestActiveRunStatesSQL(t *testing.T) {
	if want := "'queued', 'running', 'waiting_input'"; domain.ActiveRunStatesSQL != want {
		t.Fatalf("ActiveRunStatesSQL = %s, want %s", domain.ActiveRunStatesSQL, want)
	}
}
