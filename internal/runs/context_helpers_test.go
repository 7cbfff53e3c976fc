package runs_test

import (
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/runs"
)

// The run steps and context reads that package runs' tests of the run's
// lifecycle take (the context's own rules are tested in
// internal/runs/runcontext, with their own copies: a test package shares
// no helpers with another).

// modCtx is a run context as the runs module hands it to its reader:
// built (Service.Context), finished (Service.FinishContext) and with its
// follow-ups (Service.ContextFollowUps), every element finished by the
// module's own rule. It is what the faces only map.
type modCtx struct {
	rc        runs.RunContext
	trigger   runs.FinishedElement
	thread    []runs.FinishedElement
	channel   []runs.FinishedElement // nil when not built
	followUps []runs.FinishedElement
}

// defaultLimits are the context limits of env's configuration, as the
// server passes them.
func defaultLimits(env *moduletest.Env) runs.ContextLimits {
	return runs.ContextLimits{MaxBytes: env.Config.Int(config.AgentContextMaxBytes), MessageMaxBytes: env.Config.Int(config.AgentContextMessageMaxBytes)}
}

// contextOf reads the context of run id as who with the configured limits.
func contextOf(t *testing.T, env *moduletest.Env, who, id string) (modCtx, error) {
	t.Helper()
	return contextWith(t, env, who, id, defaultLimits(env))
}

// contextWith reads the context of run id as who with limits, the way
// getRunContext does (ReadForContext, then the context of that read).
func contextWith(t *testing.T, env *moduletest.Env, who, id string, limits runs.ContextLimits) (modCtx, error) {
	t.Helper()
	ctx := t.Context()
	p := env.Principal(who)
	rd, err := env.Runs.ReadForContext(ctx, p, id)
	if err != nil {
		return modCtx{}, err
	}
	rc, err := env.Runs.Context(ctx, p, rd, limits)
	if err != nil {
		return modCtx{}, err
	}
	fc, err := env.Runs.FinishContext(ctx, p, &rc)
	if err != nil {
		return modCtx{}, err
	}
	fups, err := env.Runs.ContextFollowUps(ctx, fc)
	if err != nil {
		return modCtx{}, err
	}
	finish := func(es []runs.ContextElement) []runs.FinishedElement {
		if es == nil {
			return nil
		}
		out := make([]runs.FinishedElement, len(es))
		for i, e := range es {
			out[i] = fc.Finish(e)
		}
		return out
	}
	return modCtx{rc: rc, trigger: fc.Finish(rc.Trigger), thread: finish(rc.Thread), channel: finish(rc.Channel), followUps: finish(fups)}, nil
}

// mustContext reads the context of run id as who and fails the test when
// it is refused.
func mustContext(t *testing.T, env *moduletest.Env, who, id string) modCtx {
	t.Helper()
	c, err := contextOf(t, env, who, id)
	if err != nil {
		t.Fatalf("context of %s as %s: %v", id, who, err)
	}
	return c
}

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
