package admin_test

import (
	"testing"

	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
)

// newEnv gives the tests room for many administration calls in one minute
// of the fake clock (rl.admin allows 20 at once by default).
func newEnv(t *testing.T) *moduletest.Env {
	return moduletest.Build(t, moduletest.Options{Config: map[string]string{"ratelimit.rl.admin.burst": "1000"}})
}

// TestAdminGroups covers groups: names are unique among live groups,
// members are people, the group's grants reach its members and stop when
// they leave or the group is deleted (its grants revoked).
func TestAdminGroups(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	ctx := t.Context()
	robin, writer := env.Principal("robin"), env.Principal("writer")
	writerID := env.World.ID("writer")
	g, err := env.Admin.CreateGroup(ctx, robin, "Night shift")
	if err != nil {
		t.Fatal(err)
	}
	_, err = env.Admin.CreateGroup(ctx, robin, "Night shift")
	moduletest.WantProblem(t, "taken name", err, problem.Conflict, "name_taken")
	_, err = env.Admin.AddMember(ctx, robin, g.ID, env.World.ID("lotse"))
	moduletest.WantProblem(t, "agent member", err, problem.ValidationFailed, "")
	kamp := env.World.Channel("Marketing/Kampagnen")
	if _, err := env.Admin.CreateGrant(ctx, robin, admin.GrantInput{SubjectID: g.ID, SubjectKind: authz.SubjectGroup,
		TargetKind: authz.KindChannel, TargetID: kamp.ID, Level: authz.Read}); err != nil {
		t.Fatal(err)
	}
	channels := chat.NewUseCases(env.Chat, env.Authz, env.Events, env.DB)
	readKamp := func(what string, wantSeen bool) {
		t.Helper()
		wantChannelSeen(t, channels, writer, kamp.ID, what, wantSeen)
	}
	readKamp("writer before joining", false)
	m, err := env.Admin.AddMember(ctx, robin, g.ID, writerID)
	if err != nil || len(m.Members) != 1 || m.Members[0] != writerID {
		t.Fatalf("members %+v %v", m, err)
	}
	readKamp("writer in the group", true)
	if n := env.Count(`SELECT count(*) FROM event_log WHERE type = 'access.changed' AND channel_id = $1 AND payload->>'change' = 'group.member_added'`, kamp.ID); n != 1 {
		t.Fatalf("access.changed for the new member: %d", n)
	}
	renamed, err := env.Admin.RenameGroup(ctx, robin, g.ID, "Night crew")
	if err != nil || renamed.Name != "Night crew" {
		t.Fatalf("rename %+v %v", renamed, err)
	}
	if _, err := env.Admin.RemoveMember(ctx, robin, g.ID, writerID); err != nil {
		t.Fatal(err)
	}
	readKamp("writer after leaving", false)
	if _, err := env.Admin.AddMember(ctx, robin, g.ID, writerID); err != nil {
		t.Fatal(err)
	}
	gone, err := env.Admin.DeleteGroup(ctx, robin, g.ID)
	if err != nil || gone.Name != "Night crew" {
		t.Fatalf("deleteGroup answered %+v %v", gone, err)
	}
	readKamp("writer after the group was deleted", false)
	if n := env.Count(`SELECT count(*) FROM grants WHERE subject_group_id = $1 AND revoked_at IS NULL`, g.ID); n != 0 {
		t.Fatalf("%d live grants of a deleted group", n)
	}
	_, err = env.Admin.Group(ctx, robin, g.ID)
	moduletest.WantProblem(t, "deleted group", err, problem.NotFound, "")
	// The name is free again.
	if _, err := env.Admin.CreateGroup(ctx, robin, "Night crew"); err != nil {
		t.Fatal(err)
	}
}

// wantChannelSeen checks whether who sees the channel id: with wantSeen
// reading it must succeed, without it the channel must be not found (a
// channel one may not read does not exist for one).
func wantChannelSeen(t *testing.T, channels *chat.UseCases, who identity.Principal, id, what string, wantSeen bool) {
	t.Helper()
	_, err := channels.Channel(t.Context(), who, id)
	if wantSeen && err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !wantSeen {
		moduletest.WantProblem(t, what, err, problem.NotFound, "")
	}
}

// TestLastOwner: the last active owner can be neither demoted nor
// disabled; with a second owner, the first can step down, and is then
// refused administration. That both faces answer last_owner alike is
// checked in TestAdmin/Principals in internal/server.
func TestLastOwner(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	ctx := t.Context()
	robin := env.Principal("robin")
	robinID, samID := env.World.ID("robin"), env.World.ID("sam")
	no, yes, disabled := false, true, identity.StatusDisabled
	for name, patch := range map[string]identity.PrincipalPatch{"demote": {IsOwner: &no}, "disable": {Status: &disabled}} {
		_, err := env.Admin.UpdatePrincipal(ctx, robin, robinID, patch)
		moduletest.WantProblem(t, "last owner: "+name, err, problem.Conflict, "last_owner")
	}
	if got := env.Principal("robin"); !got.IsOwner || got.Status != identity.StatusActive {
		t.Fatalf("a refused change changed robin: %+v", got)
	}
	if _, err := env.Admin.UpdatePrincipal(ctx, robin, samID, identity.PrincipalPatch{IsOwner: &yes}); err != nil {
		t.Fatal(err)
	}
	down, err := env.Admin.UpdatePrincipal(ctx, robin, robinID, identity.PrincipalPatch{IsOwner: &no})
	if err != nil || down.IsOwner {
		t.Fatalf("robin stepping down: %+v %v", down, err)
	}
	// Robin is no owner now: administration is refused to him.
	_, err = env.Admin.ListPrincipals(ctx, env.Principal("robin"), "", nil)
	moduletest.WantProblem(t, "former owner", err, problem.Forbidden, "level_insufficient")
	_, err = env.Admin.UpdatePrincipal(ctx, env.Principal("sam"), samID, identity.PrincipalPatch{IsOwner: &no})
	moduletest.WantProblem(t, "last owner sam", err, problem.Conflict, "last_owner")
}
