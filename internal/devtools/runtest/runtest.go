// Package runtest holds the steps that the tests of the runs module and of
// its subpackages (approvals, runcontext, stream) take on a module
// harness: find the run a message triggered, start and finish it as an
// adapter, read it as a person, and compare the problems it answers. Test
// packages share no unexported helpers, so without it each subpackage's
// tests carried copies of the same steps.
package runtest

import (
	"reflect"
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs"
	"bothy.example.com/bothy/internal/runs/domain"
)

// Holder is the adapter process that claims runs in these tests.
const Holder = "adapter-test"

// RunOf returns the id of the run that message m triggered.
func RunOf(t testing.TB, env *moduletest.Env, m messaging.Message) string {
	t.Helper()
	var id string
	if err := env.Pool.QueryRow(t.Context(), `SELECT id::text FROM runs WHERE triggering_message_id = $1`, m.ID).Scan(&id); err != nil {
		t.Fatalf("run of %q: %v", m.ContentMD, err)
	}
	return id
}

// ActiveRunIn returns the id of the active run of thread.
func ActiveRunIn(t testing.TB, env *moduletest.Env, thread string) string {
	t.Helper()
	var id string
	if err := env.Pool.QueryRow(t.Context(), `SELECT id::text FROM runs WHERE thread_id = $1 AND state IN ('queued', 'running', 'waiting_input')`, thread).Scan(&id); err != nil {
		t.Fatalf("active run of thread %s: %v", thread, err)
	}
	return id
}

// NewThread creates a thread in channel key as who with the first message
// first and returns its id.
func NewThread(t testing.TB, env *moduletest.Env, who, channel, first string) string {
	t.Helper()
	th, _, _, err := env.Messaging.CreateThread(t.Context(), env.Principal(who), env.World.Channel(channel).ID,
		messaging.ThreadInput{Title: "Thread " + first, First: messaging.Input{ClientMsgID: "first-" + first, ContentMD: first}})
	if err != nil {
		t.Fatalf("create thread: %v", err)
	}
	return th.ID
}

// ReadRun returns run id as who reads it.
func ReadRun(t testing.TB, env *moduletest.Env, who, id string) runs.Run {
	t.Helper()
	rd, err := env.Runs.Read(t.Context(), env.Principal(who), id)
	if err != nil {
		t.Fatalf("run %s as %s: %v", id, who, err)
	}
	return rd.Run
}

// StartAs starts run id as agent with Holder and returns the started run.
func StartAs(t testing.TB, env *moduletest.Env, agent, id string) runs.Run {
	t.Helper()
	r, err := env.Runs.Start(t.Context(), env.Principal(agent), id, Holder)
	if err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
	return r
}

// FinishAs ends run id in state to as agent with Holder.
func FinishAs(t testing.TB, env *moduletest.Env, agent, id string, to domain.RunState) {
	t.Helper()
	if _, err := env.Runs.Finish(t.Context(), env.Principal(agent), id, Holder, to, ""); err != nil {
		t.Fatalf("finish %s %s: %v", id, to, err)
	}
}

// WantClaimed fails the test unless err is the conflict run_claimed.
func WantClaimed(t testing.TB, what string, err error) {
	t.Helper()
	if p := problem.From("runtest.WantClaimed", err); p == nil || p.Code != problem.Conflict || p.Reason != "run_claimed" {
		t.Fatalf("%s: %v, want conflict run_claimed", what, err)
	}
}

// SameProblem fails the test unless err is the problem want: the same
// code, reason, detail and fields.
func SameProblem(t testing.TB, what string, err error, want *problem.Error) {
	t.Helper()
	p := problem.From("runtest.SameProblem", err)
	if err == nil || p == nil || p.Code != want.Code || p.Reason != want.Reason || p.Detail != want.Detail || !reflect.DeepEqual(p.Fields, want.Fields) {
		t.Fatalf("%s: %#v, want the answer %#v", what, p, want)
	}
}

// Context is a run context as the runs module hands it to its reader:
// built (Service.Context), finished (Service.FinishContext) and with its
// follow-ups (Service.ContextFollowUps), every element finished by the
// module's own rule. It is what the faces only map.
type Context struct {
	RC        runs.RunContext
	Trigger   runs.FinishedElement
	Thread    []runs.FinishedElement
	Channel   []runs.FinishedElement // nil when not built
	FollowUps []runs.FinishedElement
}

// DefaultLimits are the context limits of env's configuration, as the
// server passes them.
func DefaultLimits(env *moduletest.Env) runs.ContextLimits {
	return runs.ContextLimits{MaxBytes: env.Config.Int(config.AgentContextMaxBytes), MessageMaxBytes: env.Config.Int(config.AgentContextMessageMaxBytes)}
}

// ContextOf reads the context of run id as who with the configured limits.
func ContextOf(t testing.TB, env *moduletest.Env, who, id string) (Context, error) {
	t.Helper()
	return ContextWith(t, env, who, id, DefaultLimits(env))
}

// ContextWith reads the context of run id as who with limits, the way
// getRunContext does (ReadForContext, then the context of that read).
func ContextWith(t testing.TB, env *moduletest.Env, who, id string, limits runs.ContextLimits) (Context, error) {
	t.Helper()
	ctx := t.Context()
	p := env.Principal(who)
	rd, err := env.Runs.ReadForContext(ctx, p, id)
	if err != nil {
		return Context{}, err
	}
	rc, err := env.Runs.Context(ctx, p, rd, limits)
	if err != nil {
		return Context{}, err
	}
	fc, err := env.Runs.FinishContext(ctx, p, &rc)
	if err != nil {
		return Context{}, err
	}
	fups, err := env.Runs.ContextFollowUps(ctx, fc)
	if err != nil {
		return Context{}, err
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
	return Context{RC: rc, Trigger: fc.Finish(rc.Trigger), Thread: finish(rc.Thread), Channel: finish(rc.Channel), FollowUps: finish(fups)}, nil
}

// MustContext reads the context of run id as who and fails the test when
// it is refused.
func MustContext(t testing.TB, env *moduletest.Env, who, id string) Context {
	t.Helper()
	c, err := ContextOf(t, env, who, id)
	if err != nil {
		t.Fatalf("context of %s as %s: %v", id, who, err)
	}
	return c
}

// ChannelGrant returns the id of the live grant of who on channel key.
func ChannelGrant(t testing.TB, env *moduletest.Env, who, key string) string {
	t.Helper()
	var id string
	if err := env.Pool.QueryRow(t.Context(), `SELECT id::text FROM grants WHERE subject_principal_id = $1 AND target_channel_id = $2 AND revoked_at IS NULL`,
		env.World.ID(who), env.World.Channel(key).ID).Scan(&id); err != nil {
		t.Fatalf("grant of %s on %s: %v", who, key, err)
	}
	return id
}

// AgentRunOf returns the id of agent's run that message m triggered.
func AgentRunOf(t testing.TB, env *moduletest.Env, m messaging.Message, agent string) string {
	t.Helper()
	var id string
	if err := env.Pool.QueryRow(t.Context(), `SELECT id::text FROM runs WHERE triggering_message_id = $1 AND agent_id = $2`,
		m.ID, env.World.ID(agent)).Scan(&id); err != nil {
		t.Fatalf("run of %s for %q: %v", agent, m.ContentMD, err)
	}
	return id
}
