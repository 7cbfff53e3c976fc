package domain_test

import (
	"os"
	"path/filepath"
	"strings"
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

// TestActiveRunStatesMatchIndexes: the partial indexes on active runs list
// the same states in the same order as ActiveRunStatesSQL, so that the
// statements built from it can use them (a migration cannot import Go).
func TestActiveRunStatesMatchIndexes(t *testing.T) {
	for _, tc := range []struct{ file, index string }{
		{"00003_runs.sql", "runs_one_active ON runs (thread_id)"},
		{"00003_runs.sql", "runs_active_sweep ON runs (state, last_activity_at)"},
		{"00005_runtime.sql", "runs_active_by ON runs (triggered_by)"},
	} {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", "migrations", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		if want := tc.index + " WHERE state IN (" + domain.ActiveRunStatesSQL + ")"; !strings.Contains(string(b), want) {
			t.Errorf("%s has no %q", tc.file, want)
		}
	}
}
