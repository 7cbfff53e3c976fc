package authz_test

import (
	"fmt"
	"testing"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
)

// TestDoors checks the doors of authz over the real database: Filter
// decides the action it is given, Authorize audits the denials of the
// actor's own resources and carries the scope of events.list, Allowed
// decides by the rule table without a trace.
func TestDoors(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	allgemein := env.ChannelPath("Support/Allgemein")
	eskalation := env.ChannelPath("Support/Eskalation")
	writer, sam, alex, lotse, robin := load(t, env, "writer")[0], load(t, env, "sam")[0], load(t, env, "alex")[0], load(t, env, "lotse")[0], load(t, env, "robin")[0]

	t.Run("Filter decides its action", func(t *testing.T) {
		checkFilterDecidesItsAction(t, env, writer, allgemein, eskalation)
	})

	t.Run("Authorize audits a denial on an own resource", func(t *testing.T) {
		checkAuthorizeAuditsOwnDenial(t, env, sam, lotse, writer)
	})

	t.Run("events.list carries the scope", func(t *testing.T) {
		checkEventsListScope(t, env, robin, lotse, alex)
	})

	t.Run("Allowed decides by the table without a trace", func(t *testing.T) {
		checkAllowedLeavesNoTrace(t, env, allgemein, eskalation, writer, sam, alex, lotse, robin)
	})
}

// checkFilterDecidesItsAction checks that Filter decides the action it is
// given for writer, who reads and writes in allgemein and reaches nothing
// in eskalation, and takes a known grant as it is.
func checkFilterDecidesItsAction(t *testing.T, env *moduletest.Env, writer identity.Principal, allgemein, eskalation authz.Path) {
	ctx := t.Context()
	targets := []authz.Facts{{Path: allgemein}, {Path: eskalation}}
	for _, tc := range []struct {
		name   string
		action authz.Action
		want   string
	}{
		{"read", authz.MessageRead, "[true false]"},
		{"write", authz.MessageCreate, "[true false]"},
		{"trigger", authz.ThreadMove, "[false false]"},
	} {
		got, err := env.Authz.Filter(ctx, writer, tc.action, targets)
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("%s: Filter = %v, %v, want %s", tc.name, got, err, tc.want)
		}
	}
	// A known grant is taken as it is: the decision reads no grant.
	got, err := env.Authz.Filter(ctx, writer, authz.ThreadMove, []authz.Facts{authz.Known(allgemein, authz.Trigger), authz.Known(eskalation, authz.None)})
	if err != nil || fmt.Sprint(got) != "[true false]" {
		t.Errorf("known grants: Filter = %v, %v", got, err)
	}
}

// checkAuthorizeAuditsOwnDenial checks that Authorize audits the denial
// of sam's poll of its own agent stream (a person may not poll), and that
// the allows of lotse's poll and writer's viewer read write no audit row.
func checkAuthorizeAuditsOwnDenial(t *testing.T, env *moduletest.Env, sam, lotse, writer identity.Principal) {
	t.Helper()
	ctx := t.Context()
	before := env.Count(`SELECT count(*) FROM audit_log WHERE actor_id = $1 AND action = 'agent.events.poll' AND reason = 'subject_kind_not_allowed' AND resource_kind = 'agent_stream'`, sam.ID)
	d, _, err := env.Authz.Authorize(ctx, sam, authz.AgentEventsPoll, authz.Own(authz.KindAgent, sam.ID))
	if p := problem.From("authz.testDoors", err); d.Allow || p.Code != problem.Forbidden || p.Reason != authz.ReasonSubjectKind {
		t.Fatalf("poll by a person: %+v, %v", d, err)
	}
	if n := env.Count(`SELECT count(*) FROM audit_log WHERE actor_id = $1 AND action = 'agent.events.poll' AND reason = 'subject_kind_not_allowed' AND resource_kind = 'agent_stream'`, sam.ID); n != before+1 {
		t.Fatalf("audit rows %d, want %d", n, before+1)
	}
	rows := env.Count(`SELECT count(*) FROM audit_log`)
	if _, _, err := env.Authz.Authorize(ctx, lotse, authz.AgentEventsPoll, authz.Own(authz.KindAgent, lotse.ID)); err != nil {
		t.Fatalf("poll by the agent: %v", err)
	}
	if _, _, err := env.Authz.Authorize(ctx, writer, authz.ViewerRead, authz.Own(authz.KindPrincipal, writer.ID)); err != nil {
		t.Fatalf("viewer: %v", err)
	}
	if n := env.Count(`SELECT count(*) FROM audit_log`); n != rows {
		t.Fatalf("allows wrote %d audit rows", n-rows)
	}
}

// checkEventsListScope checks the scope Authorize carries for
// events.list: all for the owner robin, its operator's for the agent
// lotse, the spaces of the person alex.
func checkEventsListScope(t *testing.T, env *moduletest.Env, robin, lotse, alex identity.Principal) {
	t.Helper()
	ctx := t.Context()
	d, _, err := env.Authz.Authorize(ctx, robin, authz.EventsList, authz.Instance())
	if err != nil || d.Scope == nil || !d.Scope.All {
		t.Fatalf("owner: %+v, %v", d, err)
	}
	d, _, err = env.Authz.Authorize(ctx, lotse, authz.EventsList, authz.Instance())
	if err != nil || d.Scope == nil || d.Scope.All || d.Scope.Operator != lotse.ID {
		t.Fatalf("agent: %+v, %v", d, err)
	}
	d, _, err = env.Authz.Authorize(ctx, alex, authz.EventsList, authz.Instance())
	if err != nil || d.Scope == nil || d.Scope.Operator != "" || fmt.Sprint(d.Scope.Spaces) != "["+env.World.Spaces["Support"]+"]" {
		t.Fatalf("person: %+v, %v", d.Scope, err)
	}
}

// checkAllowedLeavesNoTrace checks that Allowed picks who may trigger in
// allgemein and read in eskalation by the rule table, and writes no audit
// row.
func checkAllowedLeavesNoTrace(t *testing.T, env *moduletest.Env, allgemein, eskalation authz.Path, writer, sam, alex, lotse, robin identity.Principal) {
	t.Helper()
	ctx := t.Context()
	rows := env.Count(`SELECT count(*) FROM audit_log`)
	got, err := env.Authz.Allowed(ctx, authz.MessageTrigger, authz.Facts{Path: allgemein}, writer, sam, alex, lotse, robin)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{alex.ID, robin.ID, sam.ID}; fmt.Sprint(sortedKeys(t, got)) != fmt.Sprint(sorted(want)) {
		t.Errorf("message.trigger on Allgemein: %v, want %v", sortedKeys(t, got), sorted(want))
	}
	got, err = env.Authz.Allowed(ctx, authz.ThreadRead, authz.Facts{Path: eskalation}, writer, lotse)
	if err != nil || fmt.Sprint(sortedKeys(t, got)) != "["+lotse.ID+"]" {
		t.Errorf("thread.read on Eskalation: %v, %v, want only lotse (its operator)", got, err)
	}
	if n := env.Count(`SELECT count(*) FROM audit_log`); n != rows {
		t.Fatalf("Allowed wrote %d audit rows", n-rows)
	}
}
