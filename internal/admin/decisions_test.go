package admin_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
)

// decisionCall is one administration action of the admin service, as one
// actor would call it.
type decisionCall struct {
	name   string
	action authz.Action
	call   func(actor identity.Principal) error
	// seen: Alex can read the target (Support, or an instance-level
	// target), so his refusal is forbidden level_insufficient; false: the
	// target is hidden from him (Marketing, somebody else's token), so he
	// gets the bare not_found of a missing one.
	seen bool
	// agentsSee: Lotse and Feed Bot can read the target too (they hold no
	// grant on the space Support, only on channels of it).
	agentsSee bool
}

// decisionCalls lists every administration action of the admin service
// once, each with a valid body, so that an owner succeeds; fresh groups
// and a token of Sam's are made for the destructive ones.
func decisionCalls(t *testing.T, env *moduletest.Env) []decisionCall {
	t.Helper()
	ctx := t.Context()
	robin := env.Principal("robin")
	group, err := env.Admin.CreateGroup(ctx, robin, "Night shift")
	if err != nil {
		t.Fatal(err)
	}
	group2, err := env.Admin.CreateGroup(ctx, robin, "Day shift")
	if err != nil {
		t.Fatal(err)
	}
	samID, writerID := env.World.ID("sam"), env.World.ID("writer")
	tok, err := env.Admin.CreateToken(ctx, robin, samID, "laptop", nil)
	if err != nil {
		t.Fatal(err)
	}
	support, marketing := env.World.Spaces["Support"], env.World.Spaces["Marketing"]
	allg, kamp := env.World.Channel("Support/Allgemein").ID, env.World.Channel("Marketing/Kampagnen").ID
	str := func(s string) *string { return &s }
	a := env.Admin
	return []decisionCall{
		{"createPrincipal", authz.PrincipalCreate, func(p identity.Principal) error {
			_, err := a.CreatePrincipal(ctx, p, admin.PrincipalInput{Kind: identity.KindUser, Handle: "casey", DisplayName: "Casey", Email: "casey@example.com"})
			return err
		}, true, true},
		{"listPrincipals", authz.PrincipalList, func(p identity.Principal) error { _, err := a.ListPrincipals(ctx, p, "", nil); return err }, true, true},
		{"updatePrincipal", authz.PrincipalUpdate, func(p identity.Principal) error {
			_, err := a.UpdatePrincipal(ctx, p, writerID, identity.PrincipalPatch{DisplayName: str("Writer Two")})
			return err
		}, true, true},
		{"createGroup", authz.GroupCreate, func(p identity.Principal) error { _, err := a.CreateGroup(ctx, p, "Weekend"); return err }, true, true},
		{"getGroup", authz.GroupRead, func(p identity.Principal) error { _, err := a.Group(ctx, p, group.ID); return err }, true, true},
		{"updateGroup", authz.GroupUpdate, func(p identity.Principal) error { _, err := a.RenameGroup(ctx, p, group.ID, "Night crew"); return err }, true, true},
		{"addGroupMember", authz.GroupMemberAdd, func(p identity.Principal) error { _, err := a.AddMember(ctx, p, group.ID, writerID); return err }, true, true},
		{"removeGroupMember", authz.GroupMemberRemove, func(p identity.Principal) error { _, err := a.RemoveMember(ctx, p, group.ID, writerID); return err }, true, true},
		{"deleteGroup", authz.GroupDelete, func(p identity.Principal) error { _, err := a.DeleteGroup(ctx, p, group2.ID); return err }, true, true},
		{"createSpace", authz.SpaceCreate, func(p identity.Principal) error { _, err := a.CreateSpace(ctx, p, "Operations", ""); return err }, true, true},
		{"updateSpace/seen", authz.SpaceUpdate, func(p identity.Principal) error {
			_, err := a.UpdateSpace(ctx, p, support, admin.SpacePatch{Name: str("Support Desk")})
			return err
		}, true, false},
		{"updateSpace/hidden", authz.SpaceUpdate, func(p identity.Principal) error {
			_, err := a.UpdateSpace(ctx, p, marketing, admin.SpacePatch{Name: str("Marketing Team")})
			return err
		}, false, false},
		{"unarchiveSpace/seen", authz.SpaceUnarchive, func(p identity.Principal) error { _, err := a.UnarchiveSpace(ctx, p, support); return err }, true, false},
		{"unarchiveSpace/hidden", authz.SpaceUnarchive, func(p identity.Principal) error { _, err := a.UnarchiveSpace(ctx, p, marketing); return err }, false, false},
		{"createChannel/seen", authz.ChannelCreate, func(p identity.Principal) error {
			_, err := a.CreateChannel(ctx, p, support, admin.ChannelInput{Name: "Billing", Kind: chat.ChannelText})
			return err
		}, true, false},
		{"createChannel/hidden", authz.ChannelCreate, func(p identity.Principal) error {
			_, err := a.CreateChannel(ctx, p, marketing, admin.ChannelInput{Name: "Launch", Kind: chat.ChannelForum})
			return err
		}, false, false},
		{"updateChannel/seen", authz.ChannelUpdate, func(p identity.Principal) error { _, err := a.RenameChannel(ctx, p, allg, "General"); return err }, true, true},
		{"updateChannel/hidden", authz.ChannelUpdate, func(p identity.Principal) error { _, err := a.RenameChannel(ctx, p, kamp, "Campaigns"); return err }, false, false},
		{"unarchiveChannel/seen", authz.ChannelUnarchive, func(p identity.Principal) error { _, err := a.UnarchiveChannel(ctx, p, allg); return err }, true, true},
		{"unarchiveChannel/hidden", authz.ChannelUnarchive, func(p identity.Principal) error { _, err := a.UnarchiveChannel(ctx, p, kamp); return err }, false, false},
		// Sam's token: another person's, hidden from everybody but Sam and
		// the owners.
		{"revokeToken", authz.TokenRevoke, func(p identity.Principal) error { _, err := a.RevokeToken(ctx, p, tok.ID); return err }, false, false},
		{"listTokens", authz.TokenList, func(p identity.Principal) error { _, err := a.ListTokens(ctx, p, samID); return err }, true, true},
		{"createToken", authz.TokenCreate, func(p identity.Principal) error { _, err := a.CreateToken(ctx, p, samID, "phone", nil); return err }, true, true},
	}
}

// adminState is a fingerprint of everything an administration action can
// change.
func adminState(env *moduletest.Env) string {
	var out []string
	for _, q := range []string{
		`SELECT count(*) FROM principals`, `SELECT count(*) FROM tokens WHERE revoked_at IS NULL`,
		`SELECT count(*) FROM groups WHERE deleted_at IS NULL`, `SELECT count(*) FROM group_members`,
		`SELECT count(*) FROM spaces`, `SELECT count(*) FROM channels`,
		`SELECT count(*) FROM principals WHERE display_name = 'Writer'`,
		`SELECT count(*) FROM groups WHERE name = 'Night shift'`,
		`SELECT count(*) FROM spaces WHERE name IN ('Support', 'Marketing')`,
		`SELECT count(*) FROM channels WHERE name IN ('Allgemein', 'Kampagnen')`,
		`SELECT count(*) FROM event_log`,
	} {
		out = append(out, fmt.Sprint(env.Count(q)))
	}
	return strings.Join(out, ",")
}

// deniedReasons returns, per action, the sorted reasons of the audited
// denials of the principal with handle h.
func deniedReasons(env *moduletest.Env, h string) map[string][]string {
	got := map[string][]string{}
	for _, r := range env.AuditRows(h) {
		if r.Decision == "deny" && !slices.Contains(got[r.Action], r.Reason) {
			got[r.Action] = append(got[r.Action], r.Reason)
			slices.Sort(got[r.Action])
		}
	}
	return got
}

// TestAdminDecisionsAtTheService pins the owner-only rule of every
// administration action at the admin service (docs/design/rights.md#decision-order):
// a person who can read the target is refused forbidden
// level_insufficient; one who cannot (a Marketing target, somebody else's
// token) gets the bare not_found of a missing one; an agent and an app are
// refused forbidden subject_kind_not_allowed where they can read the
// target and not_found where they cannot; no refusal changes anything
// (rows or events); every denial is audited under its actor, action and
// reason (no_grant for the hidden targets); the owner succeeds with each,
// and every one of the owner's allows is audited. That both faces answer
// alike is TestAdmin/Decisions in internal/server.
func TestAdminDecisionsAtTheService(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	calls := decisionCalls(t, env)
	alex, lotse, feedbot := env.Principal("alex"), env.Principal("lotse"), env.Principal("feedbot")
	for _, h := range []string{"alex", "lotse", "feedbot"} {
		env.WantAudit(h, nil)
	}
	before := adminState(env)
	wantAlex, wantAgents := map[string][]string{}, map[string][]string{}
	add := addReason
	for _, c := range calls {
		err := c.call(alex)
		if c.seen {
			moduletest.WantProblem(t, "alex "+c.name, err, problem.Forbidden, authz.ReasonLevel)
			add(wantAlex, c.action, authz.ReasonLevel)
		} else {
			moduletest.WantProblem(t, "alex "+c.name, err, problem.NotFound, "")
			if p := problem.From("admin.test", err); p.Reason != "" {
				t.Fatalf("alex %s: a hidden target's not_found names a reason: %+v", c.name, p)
			}
			add(wantAlex, c.action, authz.ReasonNoGrant)
		}
		for _, agent := range []identity.Principal{lotse, feedbot} {
			err := c.call(agent)
			if c.agentsSee {
				moduletest.WantProblem(t, agent.Handle+" "+c.name, err, problem.Forbidden, authz.ReasonSubjectKind)
				add(wantAgents, c.action, authz.ReasonSubjectKind)
			} else {
				// The table's first rows: a target the agent or app cannot
				// read is not found before anything else.
				moduletest.WantProblem(t, agent.Handle+" "+c.name, err, problem.NotFound, "")
				add(wantAgents, c.action, authz.ReasonNoGrant)
			}
		}
	}
	if after := adminState(env); after != before {
		t.Fatalf("denied administration changed the database: %s -> %s", before, after)
	}
	// Every denial is audited, aggregated per actor, action and reason.
	if got := deniedReasons(env, "alex"); fmt.Sprint(got) != fmt.Sprint(wantAlex) {
		t.Fatalf("alex's audited denials:\n got %v\nwant %v", got, wantAlex)
	}
	for _, h := range []string{"lotse", "feedbot"} {
		if got := deniedReasons(env, h); fmt.Sprint(got) != fmt.Sprint(wantAgents) {
			t.Fatalf("%s's audited denials:\n got %v\nwant %v", h, got, wantAgents)
		}
	}
	checkOwnerAllowsAudited(t, env, calls)
}

// addReason adds reason to the sorted reasons m holds for action, once,
// as deniedReasons reports the audited denials.
func addReason(m map[string][]string, action authz.Action, reason string) {
	if !slices.Contains(m[string(action)], reason) {
		m[string(action)] = append(m[string(action)], reason)
		slices.Sort(m[string(action)])
	}
}

// checkOwnerAllowsAudited checks that the owner robin succeeds with each
// of calls and that robin's audit holds exactly one allow per call, besides
// the setup's.
func checkOwnerAllowsAudited(t *testing.T, env *moduletest.Env, calls []decisionCall) {
	t.Helper()
	// The owner succeeds with each, and each allow is audited (the setup's
	// two groups and Sam's token are audited too).
	robin := env.Principal("robin")
	for _, c := range calls {
		if err := c.call(robin); err != nil {
			t.Fatalf("robin %s: %v", c.name, err)
		}
	}
	allowed := map[string]int{}
	for _, r := range env.AuditRows("robin") {
		if r.Decision != "allow" {
			t.Fatalf("robin's audit holds a denial: %+v", r)
		}
		allowed[r.Action]++
	}
	want := map[string]int{"group.create": 2, "token.create": 1}
	for _, c := range calls {
		want[string(c.action)]++
	}
	if fmt.Sprint(allowed) != fmt.Sprint(want) {
		t.Fatalf("robin's audited allows:\n got %v\nwant %v", allowed, want)
	}
}
