package admin_test

import (
	"testing"

	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
)

// TestGroupEvents pins what the group actions tell clients and what they
// refuse (docs/design/model.md#groups): a group's name is 1 to 80
// characters without surrounding spaces (invalid_format at /name) and
// unique among live groups, also on rename (conflict name_taken); members
// are existing people (invalid_reference for an unknown id); an unknown
// group is not_found; while the group holds no grant its changes emit
// nothing; once it holds a grant on a space, adding and removing a member
// and deleting the group each emit access.changed with their change in
// every channel of that space, and renaming emits nothing; deleting answers
// the group as it was (its members included), revokes its live grants and
// empties it.
func TestGroupEvents(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	ctx := t.Context()
	robin := env.Principal("robin")
	writerID, alexID := env.World.ID("writer"), env.World.ID("alex")
	log := &eventLog{t: t, env: env}
	support := env.World.Spaces["Support"]
	channels, err := env.Chat.ChannelsOfSpace(ctx, support)
	if err != nil || len(channels) < 2 {
		t.Fatalf("channels of Support %v %v", channels, err)
	}
	n := len(channels)

	g := createGroupsWithoutGrants(t, env, log)

	grant, err := env.Admin.CreateGrant(ctx, robin, admin.GrantInput{SubjectID: g.ID, SubjectKind: authz.SubjectGroup,
		TargetKind: authz.KindSpace, TargetID: support, Level: authz.Write})
	if err != nil {
		t.Fatal(err)
	}
	wantEvents(t, "grant on the space", log.next(), map[string]int{"access.changed grant.created": n})

	added, err := env.Admin.AddMember(ctx, robin, g.ID, writerID)
	if err != nil || len(added.Members) != 2 {
		t.Fatalf("add %+v %v", added, err)
	}
	evs := log.next()
	wantEvents(t, "add a member", evs, map[string]int{"access.changed group.member_added": n})
	wantMemberAddedIn(t, evs, g.ID, channels)
	renamed, err := env.Admin.RenameGroup(ctx, robin, g.ID, "Night crew")
	if err != nil || renamed.Name != "Night crew" || len(renamed.Members) != 2 {
		t.Fatalf("rename %+v %v", renamed, err)
	}
	wantEvents(t, "rename", log.next(), nil)
	left, err := env.Admin.RemoveMember(ctx, robin, g.ID, writerID)
	if err != nil || len(left.Members) != 1 || left.Members[0] != alexID {
		t.Fatalf("remove %+v %v", left, err)
	}
	wantEvents(t, "remove a member", log.next(), map[string]int{"access.changed group.member_removed": n})

	checkGroupDelete(t, env, log, g.ID, grant.ID, n)
}

// createGroupsWithoutGrants checks the refusals of group names (format,
// taken on rename), of unknown members and groups, creates the group
// Night shift with alex as member and checks that, holding no grant, its
// changes emit nothing; it returns the group.
func createGroupsWithoutGrants(t *testing.T, env *moduletest.Env, log *eventLog) identity.Group {
	t.Helper()
	ctx := t.Context()
	robin := env.Principal("robin")
	writerID, alexID := env.World.ID("writer"), env.World.ID("alex")
	for _, name := range []string{"", " padded", "line\nbreak"} {
		_, err := env.Admin.CreateGroup(ctx, robin, name)
		wantField(t, "group name "+name, err, "/name invalid_format")
	}
	g, err := env.Admin.CreateGroup(ctx, robin, "Night shift")
	if err != nil || g.Name != "Night shift" || len(g.Members) != 0 {
		t.Fatalf("create %+v %v", g, err)
	}
	other, err := env.Admin.CreateGroup(ctx, robin, "Day shift")
	if err != nil {
		t.Fatal(err)
	}
	_, err = env.Admin.RenameGroup(ctx, robin, other.ID, "Night shift")
	moduletest.WantProblem(t, "rename to a taken name", err, problem.Conflict, "name_taken")
	_, err = env.Admin.AddMember(ctx, robin, g.ID, "01a22de8-0000-7000-8000-000000000000")
	wantField(t, "unknown member", err, "/principal_id invalid_reference")
	_, err = env.Admin.AddMember(ctx, robin, "01a22de8-0000-7000-8000-000000000000", writerID)
	moduletest.WantProblem(t, "unknown group", err, problem.NotFound, "")
	if _, err := env.Admin.AddMember(ctx, robin, g.ID, alexID); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, "changes of a group without grants", log.next(), nil)
	return g
}

// checkGroupDelete deletes group (holding the grant grantID on a space of
// n channels, alex its one member left): the answer is the group as it
// was, access.changed goes to every channel, the grant is revoked, the
// group emptied, and a second delete is not_found without events.
func checkGroupDelete(t *testing.T, env *moduletest.Env, log *eventLog, group, grantID string, n int) {
	t.Helper()
	ctx := t.Context()
	robin := env.Principal("robin")
	alexID := env.World.ID("alex")
	gone, err := env.Admin.DeleteGroup(ctx, robin, group)
	if err != nil || gone.Name != "Night crew" || len(gone.Members) != 1 || gone.Members[0] != alexID {
		t.Fatalf("delete answered %+v %v", gone, err)
	}
	wantEvents(t, "delete", log.next(), map[string]int{"access.changed group.deleted": n})
	if got, err := env.Authz.GetGrant(ctx, grantID); err != nil || got.RevokedAt == nil {
		t.Fatalf("the deleted group's grant %+v %v", got, err)
	}
	if m := env.Count(`SELECT count(*) FROM group_members WHERE group_id = $1`, group); m != 0 {
		t.Fatalf("%d members left in a deleted group", m)
	}
	_, err = env.Admin.DeleteGroup(ctx, robin, group)
	moduletest.WantProblem(t, "delete twice", err, problem.NotFound, "")
	wantEvents(t, "refused delete", log.next(), nil)
}

// wantMemberAddedIn checks that the events evs of adding a member to group
// name the group as their target and reach every channel of channels.
func wantMemberAddedIn(t *testing.T, evs []events.Event, group string, channels []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, e := range evs {
		if e.Payload["target_kind"] != "group" || e.Payload["target_id"] != group {
			t.Fatalf("member_added payload %+v", e.Payload)
		}
		seen[e.ChannelID] = true
	}
	for _, c := range channels {
		if !seen[c] {
			t.Fatalf("no access.changed in channel %s of the space", c)
		}
	}
}
