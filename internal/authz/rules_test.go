package authz_test

import (
	"slices"
	"testing"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
)

var (
	person = authz.Actor{ID: "p", Kind: identity.KindUser, Active: true}
	owner  = authz.Actor{ID: "o", Kind: identity.KindUser, Active: true, Owner: true}
	agent  = authz.Actor{ID: "a", Kind: identity.KindAgent, Active: true}
	app    = authz.Actor{ID: "x", Kind: identity.KindApp, Active: true}
	thread = authz.Path{Exists: true, Kind: authz.KindThread, SpaceID: "s", ChannelID: "c", ThreadID: "t"}
)

func with(p authz.Path, f func(*authz.Path)) authz.Path { f(&p); return p }

func TestEffectiveLevel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		actor authz.Actor
		grant authz.Level
		path  authz.Path
		want  authz.Level
	}{
		{"no grant", person, authz.None, thread, authz.None},
		{"grant read", person, authz.Read, thread, authz.Read},
		{"grant trigger", person, authz.Trigger, thread, authz.Trigger},
		{"inactive person with grant", authz.Actor{ID: "p", Kind: identity.KindUser}, authz.Trigger, thread, authz.None},
		{"owner without grant", owner, authz.None, thread, authz.Trigger},
		{"inactive owner", authz.Actor{ID: "o", Kind: identity.KindUser, Owner: true}, authz.None, thread, authz.None},
		{"agent grant write", agent, authz.Write, thread, authz.Write},
		{"agent capped at write", agent, authz.Trigger, thread, authz.Write},
		{"app capped at write", app, authz.Trigger, thread, authz.Write},
		{"channel operator", agent, authz.None, with(thread, func(p *authz.Path) { p.ChannelOperator = "a" }), authz.Write},
		{"fixed thread operator", agent, authz.None, with(thread, func(p *authz.Path) { p.ThreadOperator = "a" }), authz.Write},
		{"old operator lost main thread", agent, authz.None, with(thread, func(p *authz.Path) { p.ChannelOperator = "b" }), authz.None},
		{"operator rule not for persons", person, authz.None, with(thread, func(p *authz.Path) { p.ChannelOperator = "p" }), authz.None},
		{"operator with read grant", agent, authz.Read, with(thread, func(p *authz.Path) { p.ChannelOperator = "a" }), authz.Write},
		{"inactive operator", authz.Actor{ID: "a", Kind: identity.KindAgent}, authz.None, with(thread, func(p *authz.Path) { p.ChannelOperator = "a" }), authz.None},
		{"channel operator on space", agent, authz.None, authz.Path{Exists: true, Kind: authz.KindSpace, SpaceID: "s", ChannelOperator: "a"}, authz.None},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := authz.EffectiveLevel(tc.actor, tc.grant, tc.path); got != tc.want {
				t.Fatalf("EffectiveLevel = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestCapped(t *testing.T) {
	t.Parallel()
	arch := with(thread, func(p *authz.Path) { p.ChannelArchived = true })
	sp := with(thread, func(p *authz.Path) { p.SpaceArchived = true })
	for _, tc := range []struct {
		l    authz.Level
		p    authz.Path
		want authz.Level
	}{
		{authz.Trigger, thread, authz.Trigger},
		{authz.Trigger, arch, authz.Read},
		{authz.Write, sp, authz.Read},
		{authz.Read, arch, authz.Read},
		{authz.None, arch, authz.None},
	} {
		if got := authz.Capped(tc.l, tc.p); got != tc.want {
			t.Errorf("Capped(%s, archived=%v) = %s, want %s", tc.l, tc.p.Archived(), got, tc.want)
		}
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	f := newDecideFixtures()
	tests := slices.Concat(decideRuleCases(f), decideTriggerCases(f), decideOwnCases(f), decideRunTokenCases(f))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := authz.Decide(tc.action, tc.actor, tc.grant, tc.path)
			if d.Allow != tc.allow || d.Code != tc.code || d.Reason != tc.reason {
				t.Fatalf("Decide = %+v, want allow=%v code=%s reason=%s", d, tc.allow, tc.code, tc.reason)
			}
			if !d.Allow && d.Code == problem.NotFound {
				if p := problem.From("authz.testDecide", d.Err()); p.Reason != "" || p.Code != problem.NotFound {
					t.Fatalf("404 error carries %+v", p)
				}
			}
		})
	}
}

// decideCase is a case of TestDecide: actor takes action holding grant
// on the resource at path, and the decision allows or refuses with code
// and reason.
type decideCase struct {
	name   string
	action authz.Action
	actor  authz.Actor
	grant  authz.Level
	path   authz.Path
	allow  bool
	code   problem.Code
	reason string
}

// decideFixtures are the resources and the run token the cases of
// TestDecide decide on, beside the actors and the thread of the file.
type decideFixtures struct {
	missing, archived, run, msg, runR authz.Path
	runToken                          authz.Actor
}

// newDecideFixtures builds the fixtures: a missing thread, an archived
// one, agent a's run in thread t, a message of person p, and a token of
// run r1 of agent a in thread t.
func newDecideFixtures() decideFixtures {
	run := with(thread, func(p *authz.Path) { p.Kind = authz.KindRun; p.OwnerID = "a" })
	return decideFixtures{
		missing:  authz.Path{Kind: authz.KindThread},
		archived: with(thread, func(p *authz.Path) { p.ChannelArchived = true }),
		run:      run,
		msg:      with(thread, func(p *authz.Path) { p.Kind = authz.KindMessage; p.AuthorID = "p" }),
		runR:     with(run, func(p *authz.Path) { p.ID = "r1" }),
		runToken: authz.Actor{ID: "a", Kind: identity.KindAgent, Active: true, Run: "r1", RunThread: "t"},
	}
}

// decideRuleCases are the cases of the rule table proper: missing
// resources, levels, the archive cap, agent-self actions, own messages,
// administration.
func decideRuleCases(f decideFixtures) []decideCase {
	missing, archived, run, msg := f.missing, f.archived, f.run, f.msg
	return []decideCase{
		{"missing resource", authz.ThreadRead, owner, authz.None, missing, false, problem.NotFound, authz.ReasonNotFound},
		{"no read", authz.ThreadRead, person, authz.None, thread, false, problem.NotFound, authz.ReasonNoGrant},
		{"read ok", authz.ThreadRead, person, authz.Read, thread, true, "", ""},
		{"write needs write", authz.MessageCreate, person, authz.Read, thread, false, problem.Forbidden, authz.ReasonLevel},
		{"write ok", authz.MessageCreate, person, authz.Write, thread, true, "", ""},
		{"archived write", authz.MessageCreate, person, authz.Write, archived, false, problem.ChannelReadOnly, authz.ReasonChannelArchived},
		{"archived read only grant", authz.MessageCreate, person, authz.Read, archived, false, problem.Forbidden, authz.ReasonLevel},
		{"archived operator", authz.MessageCreate, agent, authz.None, with(archived, func(p *authz.Path) { p.ChannelOperator = "a" }), false, problem.ChannelReadOnly, authz.ReasonChannelArchived},
		{"archived still readable", authz.ThreadRead, person, authz.Write, archived, true, "", ""},
		{"move needs trigger", authz.ThreadMove, person, authz.Write, thread, false, problem.Forbidden, authz.ReasonLevel},
		{"move with trigger", authz.ThreadMove, person, authz.Trigger, thread, true, "", ""},
		{"agent-self by person", authz.RunStart, person, authz.Trigger, run, false, problem.Forbidden, authz.ReasonSubjectKind},
		{"agent-self by app", authz.RunStart, app, authz.Write, run, false, problem.Forbidden, authz.ReasonSubjectKind},
		{"agent-self by other agent", authz.RunStart, authz.Actor{ID: "b", Kind: identity.KindAgent, Active: true}, authz.Read, run, false, problem.Forbidden, authz.ReasonNotSelf},
		{"agent-self without read", authz.RunStart, agent, authz.None, run, false, problem.NotFound, authz.ReasonNoGrant},
		{"agent-self ok", authz.RunStart, agent, authz.Read, run, true, "", ""},
		{"cancel by person with trigger", authz.RunCancel, person, authz.Trigger, run, true, "", ""},
		{"cancel by person with write", authz.RunCancel, person, authz.Write, run, false, problem.Forbidden, authz.ReasonLevel},
		{"cancel by own agent", authz.RunCancel, agent, authz.Read, run, true, "", ""},
		{"delete own", authz.MessageDelete, person, authz.Write, msg, true, "", ""},
		{"delete own with read only", authz.MessageDelete, person, authz.Read, msg, false, problem.Forbidden, authz.ReasonLevel},
		{"delete other's", authz.MessageDelete, authz.Actor{ID: "q", Kind: identity.KindUser, Active: true}, authz.Trigger, msg, false, problem.Forbidden, authz.ReasonLevel},
		{"delete by owner", authz.MessageDelete, owner, authz.None, msg, true, "", ""},
		{"admin by non-owner", authz.GrantCreate, person, authz.Trigger, thread, false, problem.Forbidden, authz.ReasonLevel},
		{"admin by owner", authz.ChannelArchive, owner, authz.None, thread, true, "", ""},
		{"admin without read", authz.ChannelArchive, person, authz.None, thread, false, problem.NotFound, authz.ReasonNoGrant},
		{"poll by person", authz.AgentEventsPoll, person, authz.Read, thread, false, problem.Forbidden, authz.ReasonSubjectKind},
		{"unknown action", authz.Action("nope"), owner, authz.Trigger, thread, false, problem.Forbidden, authz.ReasonLevel},
	}
}

// decideTriggerCases are the cases of message.trigger, the runtime's
// "may this person trigger here".
func decideTriggerCases(f decideFixtures) []decideCase {
	archived := f.archived
	return []decideCase{
		{"trigger with trigger", authz.MessageTrigger, person, authz.Trigger, thread, true, "", ""},
		{"trigger with write", authz.MessageTrigger, person, authz.Write, thread, false, problem.Forbidden, authz.ReasonLevel},
		{"trigger by owner without grant", authz.MessageTrigger, owner, authz.None, thread, true, "", ""},
		{"trigger by inactive person", authz.MessageTrigger, authz.Actor{ID: "p", Kind: identity.KindUser}, authz.Trigger, thread, false, problem.NotFound, authz.ReasonNoGrant},
		{"trigger by agent with a stored trigger grant", authz.MessageTrigger, agent, authz.Trigger, thread, false, problem.Forbidden, authz.ReasonLevel},
		{"trigger by operator agent", authz.MessageTrigger, agent, authz.None, with(thread, func(p *authz.Path) { p.ChannelOperator = "a" }), false, problem.Forbidden, authz.ReasonLevel},
		{"trigger by app", authz.MessageTrigger, app, authz.Trigger, thread, false, problem.Forbidden, authz.ReasonLevel},
		{"trigger in archived channel", authz.MessageTrigger, person, authz.Trigger, archived, false, problem.ChannelReadOnly, authz.ReasonChannelArchived},
		{"trigger in archived space", authz.MessageTrigger, owner, authz.None, with(thread, func(p *authz.Path) { p.SpaceArchived = true }), false, problem.ChannelReadOnly, authz.ReasonChannelArchived},
		{"trigger without read", authz.MessageTrigger, person, authz.None, thread, false, problem.NotFound, authz.ReasonNoGrant},
	}
}

// decideOwnCases are the cases of the actor's own resources: an agent's
// own stream, the viewer, and the events list.
func decideOwnCases(f decideFixtures) []decideCase {
	return []decideCase{
		{"poll own stream", authz.AgentEventsPoll, agent, authz.None, authz.Own(authz.KindAgent, "a").Path, true, "", ""},
		{"ack own stream", authz.AgentEventsAck, agent, authz.None, authz.Own(authz.KindAgent, "a").Path, true, "", ""},
		{"poll by person", authz.AgentEventsPoll, person, authz.None, authz.Own(authz.KindAgent, "p").Path, false, problem.Forbidden, authz.ReasonSubjectKind},
		{"poll by app", authz.AgentEventsPoll, app, authz.None, authz.Own(authz.KindAgent, "x").Path, false, problem.Forbidden, authz.ReasonSubjectKind},
		{"poll by owner", authz.AgentEventsPoll, owner, authz.None, authz.Own(authz.KindAgent, "o").Path, false, problem.Forbidden, authz.ReasonSubjectKind},
		{"poll another agent's stream", authz.AgentEventsPoll, agent, authz.None, authz.Own(authz.KindAgent, "b").Path, false, problem.NotFound, authz.ReasonNoGrant},
		{"poll by inactive agent", authz.AgentEventsPoll, authz.Actor{ID: "a", Kind: identity.KindAgent}, authz.None, authz.Own(authz.KindAgent, "a").Path, false, problem.NotFound, authz.ReasonNoGrant},
		{"viewer reads itself", authz.ViewerRead, app, authz.None, authz.Own(authz.KindPrincipal, "x").Path, true, "", ""},
		{"viewer of another", authz.ViewerRead, person, authz.None, authz.Own(authz.KindPrincipal, "q").Path, false, problem.NotFound, authz.ReasonNoGrant},
		{"events list by agent", authz.EventsList, agent, authz.None, authz.Instance().Path, true, "", ""},
		{"events list by person", authz.EventsList, person, authz.None, authz.Instance().Path, true, "", ""},
		{"events list by inactive person", authz.EventsList, authz.Actor{ID: "p", Kind: identity.KindUser}, authz.None, authz.Instance().Path, false, problem.NotFound, authz.ReasonNoGrant},
	}
}

// decideRunTokenCases are the cases of a run token (Actor.Run): its run
// and thread, the run-bound actions.
func decideRunTokenCases(f decideFixtures) []decideCase {
	msg, runToken, runR := f.msg, f.runToken, f.runR
	return []decideCase{
		{"run token reads its run", authz.RunRead, runToken, authz.Read, runR, true, "", ""},
		{"run token finishes its run", authz.RunFinish, runToken, authz.Read, runR, true, "", ""},
		{"run token reads its thread", authz.ThreadRead, runToken, authz.Read, thread, true, "", ""},
		{"run token answers in its thread", authz.MessageCreate, runToken, authz.Write, thread, true, "", ""},
		{"run token reads a message of its thread", authz.MessageRead, runToken, authz.Read, msg, true, "", ""},
		{"run token reads itself", authz.ViewerRead, runToken, authz.None, authz.Own(authz.KindPrincipal, "a").Path, true, "", ""},
		{"run token claims", authz.RunStart, runToken, authz.Read, runR, false, problem.Forbidden, authz.ReasonRunToken},
		{"run token mints", authz.RunTokenCreate, runToken, authz.Read, runR, false, problem.Forbidden, authz.ReasonRunToken},
		{"run token cancels", authz.RunCancel, runToken, authz.Read, runR, false, problem.Forbidden, authz.ReasonRunToken},
		{"run token on another run", authz.RunRead, runToken, authz.Read, with(runR, func(p *authz.Path) { p.ID = "r2" }), false, problem.NotFound, authz.ReasonNoGrant},
		{"run token in another thread", authz.ThreadRead, runToken, authz.Trigger, with(thread, func(p *authz.Path) { p.ThreadID = "t2" }), false, problem.NotFound, authz.ReasonNoGrant},
		{"run token on the channel", authz.ChannelRead, runToken, authz.Trigger, with(thread, func(p *authz.Path) { p.Kind = authz.KindChannel; p.ThreadID = "" }), false, problem.NotFound, authz.ReasonNoGrant},
		{"run token on a missing run", authz.RunRead, runToken, authz.Read, authz.Path{Kind: authz.KindRun}, false, problem.NotFound, authz.ReasonNotFound},
		{"run token lists events", authz.EventsList, runToken, authz.None, authz.Instance().Path, false, problem.Forbidden, authz.ReasonRunToken},
		{"run token polls", authz.AgentEventsPoll, runToken, authz.None, authz.Own(authz.KindAgent, "a").Path, false, problem.Forbidden, authz.ReasonRunToken},
		{"run token without the grant", authz.RunRead, runToken, authz.None, runR, false, problem.NotFound, authz.ReasonNoGrant},
	}
}

// TestTargets checks the facts the doors take for the actor's own things
// and the instance: they exist, their grant level is known (no statement
// runs) and no grant applies to them.
func TestTargets(t *testing.T) {
	t.Parallel()
	for name, f := range map[string]authz.Facts{"stream": authz.Own(authz.KindAgent, "a"), "viewer": authz.Own(authz.KindPrincipal, "a"), "instance": authz.Instance()} {
		if !f.Path.Exists || !f.Path.Global || f.Grant == nil || *f.Grant != authz.None {
			t.Errorf("%s: facts %+v", name, f)
		}
	}
	if f := authz.Own(authz.KindAgent, "a"); f.Path.Kind != authz.KindAgent || f.Path.ID != "a" || f.Path.OwnerID != "a" || !f.Path.Private {
		t.Errorf("own stream %+v", f.Path)
	}
	if f := authz.Known(thread, authz.Write); f.Path != thread || *f.Grant != authz.Write {
		t.Errorf("Known = %+v", f)
	}
}

func TestEveryActionHasAClass(t *testing.T) {
	t.Parallel()
	for a, s := range authz.Table() {
		if s.Class == "" {
			t.Errorf("%s has no rate-limit class", a)
		}
	}
}
