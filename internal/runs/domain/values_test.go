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

// activeList is domain.ActiveRunStates as the runs store writes it into
// SQL: quoted literals, comma separated, in order.
func activeList() string {
	active := domain.ActiveRunStates()
	parts := make([]string, len(active))
	for i, s := range active {
		parts[i] = "'" + string(s) + "'"
	}
	return strings.Join(parts, ", ")
}

func TestActiveRunStatesList(t *testing.T) {
	if want := "'queued', 'running', 'waiting_input'"; activeList() != want {
		t.Fatalf("active states %s, want %s", activeList(), want)
	}
}

// TestActiveRunStatesMatchIndexes: the partial indexes on active runs list
// the same states in the same order as domain.ActiveRunStates, so that the
// runs store's statements built from it can use them, and the runs
// module's shared views active_runs and ended_runs divide the runs by the
// same states (a migration cannot import Go).
func TestActiveRunStatesMatchIndexes(t *testing.T) {
	for _, tc := range []struct{ file, text string }{
		{"00003_runs.sql", "runs_one_active ON runs (thread_id) WHERE state IN "},
		{"00003_runs.sql", "runs_active_sweep ON runs (state, last_activity_at) WHERE state IN "},
		{"00005_runtime.sql", "runs_active_by ON runs (triggered_by) WHERE state IN "},
		{"00012_run_tokens.sql", "SELECT id, thread_id, agent_id FROM runs WHERE state IN "},
		{"00015_module_views.sql", "SELECT id FROM runs WHERE state NOT IN "},
	} {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", "migrations", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		if want := tc.text + "(" + activeList() + ")"; !strings.Contains(string(b), want) {
			t.Errorf("%s has no %q", tc.file, want)
		}
	}
}
