package runs_test

import (
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/runs/domain"
)

// TestSharedRunViews: the runs module's shared views divide the runs by
// domain.ActiveRunStates, read by the columns their readers use, for a
// run in every state. active_runs (migrations/00012_run_tokens.sql; id,
// thread_id, agent_id), which identity reads to authenticate a run token,
// holds exactly the active runs with their thread and agent; ended_runs
// (migrations/00015_module_views.sql; id), which events reads to purge
// agent events, holds exactly the others. A renamed or dropped column, or
// a state list that drifts from Go, fails here.
func TestSharedRunViews(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	lotse := env.World.ID("lotse")
	// One thread per active run (at most one is active in a thread).
	threads := map[domain.RunState]string{
		domain.RunQueued:       env.Main("Support/Allgemein"),
		domain.RunRunning:      env.Main("Support/Eskalation"),
		domain.RunWaitingInput: env.Main("Marketing/Kampagnen"),
		domain.RunCompleted:    env.Main("Support/Allgemein"),
		domain.RunFailed:       env.Main("Support/Allgemein"),
		domain.RunCancelled:    env.Main("Support/Eskalation"),
	}
	runOf := map[domain.RunState]string{}
	for state, thread := range threads {
		runOf[state] = ids.New()
		env.Exec(`INSERT INTO runs (id, thread_id, agent_id, session_mode, trigger_kind, state, queued_at, last_activity_at)
			VALUES ($1, $2, $3, 'guest', 'message', $4, $5, $5)`, runOf[state], thread, lotse, state, env.Clock.Now())
	}
	for state, run := range runOf {
		var activeThread, activeAgent *string
		if err := env.Pool.QueryRow(ctx, `SELECT (SELECT a.thread_id::text FROM active_runs a WHERE a.id = $1), (SELECT a.agent_id::text FROM active_runs a WHERE a.id = $1)`,
			run).Scan(&activeThread, &activeAgent); err != nil {
			t.Fatal(err)
		}
		var ended bool
		if err := env.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM ended_runs e WHERE e.id = $1)`, run).Scan(&ended); err != nil {
			t.Fatal(err)
		}
		if state.Active() {
			if activeThread == nil || *activeThread != threads[state] || activeAgent == nil || *activeAgent != lotse || ended {
				t.Errorf("%s run: active_runs holds (%v, %v), ended_runs %v; want (%s, %s), false", state, activeThread, activeAgent, ended, threads[state], lotse)
			}
		} else if activeThread != nil || !ended {
			t.Errorf("%s run: active_runs holds thread %v, ended_runs %v; want none, true", state, activeThread, ended)
		}
	}
	if len(runOf) != 6 || len(domain.ActiveRunStates()) != 3 {
		t.Fatalf("the states changed (%d runs, %d active states): cover every state here", len(runOf), len(domain.ActiveRunStates()))
	}
}
