package runs_test

import (
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/messaging"
)

// The run steps and context reads that package runs' tests of the run's
// lifecycle take (the context's own rules are tested in
// internal/runs/runcontext, with their own copies: a test package shares
// no helpers with another).

// channelGrant returns the id of the live grant of who on channel key.
func channelGrant(t *testing.T, env *moduletest.Env, who, key string) string {
	t.Helper()
	var id string
	if err := env.Pool.QueryRow(t.Context(), `SELECT id::text FROM grants WHERE subject_principal_id = $1 AND target_channel_id = $2 AND revoked_at IS NULL`,
		env.World.ID(who), env.World.Channel(key).ID).Scan(&id); err != nil {
		t.Fatalf("grant of %s on %s: %v", who, key, err)
	}
	return id
}

// agentRunOf returns the id of agent's run that message m triggered.
func agentRunOf(t *testing.T, env *moduletest.Env, m messaging.Message, agent string) string {
	t.Helper()
	var id string
	if err := env.Pool.QueryRow(t.Context(), `SELECT id::text FROM runs WHERE triggering_message_id = $1 AND agent_id = $2`,
		m.ID, env.World.ID(agent)).Scan(&id); err != nil {
		t.Fatalf("run of %s for %q: %v", agent, m.ContentMD, err)
	}
	return id
}
