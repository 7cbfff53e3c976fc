package identity_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
)

// groups (TestPrincipals): a group is created empty with a one-line name unique among
// live groups; only people become members (adding twice changes nothing,
// removing a non-member too), members are listed in id order and are what
// group_memberships, identity's shared view that other modules join, holds; renaming keeps the
// rule on names; a deleted group loses its members, is not found any more
// and frees its name.
func groups(t *testing.T, env *moduletest.Env) {
	g := groupCreated(t, env)
	groupMembership(t, env, g.ID)
	groupRenamed(t, env, g.ID)
	groupDeleted(t, env, g.ID)
}

// groupCreated creates the group "Support team" and checks it is created
// empty, that names that are not one line or too long are invalid and
// that a live group's name is taken.
func groupCreated(t *testing.T, env *moduletest.Env) identity.Group {
	t.Helper()
	ctx := t.Context()
	g, err := env.Writers.Identity.CreateGroup(ctx, "Support team")
	if err != nil || !ids.Valid(g.ID) || g.Name != "Support team" || g.Members == nil || len(g.Members) != 0 || !g.CreatedAt.Equal(env.Clock.Now()) {
		t.Fatalf("created %+v %v", g, err)
	}
	for _, name := range []string{"", " Support", "Support\tteam", strings.Repeat("g", identity.MaxGroupName+1)} {
		_, err := env.Writers.Identity.CreateGroup(ctx, name)
		moduletest.WantProblem(t, "name "+name, err, problem.ValidationFailed, "")
	}
	_, err = env.Writers.Identity.CreateGroup(ctx, "Support team")
	moduletest.WantProblem(t, "a taken name", err, problem.Conflict, "name_taken")
	return g
}

// groupMembership checks the members of group gID: only people become
// members, adding twice or removing a non-member changes nothing, and
// members are listed in id order, as group_memberships holds them.
func groupMembership(t *testing.T, env *moduletest.Env, gID string) {
	t.Helper()
	ctx := t.Context()
	alexID, samID, robinID := env.World.ID("alex"), env.World.ID("sam"), env.World.ID("robin")
	for _, id := range []string{samID, alexID, alexID, robinID} {
		if err := env.Writers.Identity.AddMember(ctx, gID, id); err != nil {
			t.Fatalf("add %s: %v", id, err)
		}
	}
	want := []string{alexID, samID, robinID}
	slices.Sort(want)
	if got := groupMembers(t, env, gID); !slices.Equal(got, want) {
		t.Fatalf("members %v, want %v", got, want)
	}
	for _, who := range []string{"lotse", "feedbot"} {
		if got := fieldsOf(t, env.Writers.Identity.AddMember(ctx, gID, env.World.ID(who))); got != "/principal_id not_allowed" {
			t.Fatalf("%s as a member: %q", who, got)
		}
	}
	for _, id := range []string{ids.New(), "junk"} {
		if got := fieldsOf(t, env.Writers.Identity.AddMember(ctx, gID, id)); got != "/principal_id invalid_reference" {
			t.Fatalf("unknown member %q: %q", id, got)
		}
	}
	for _, id := range []string{samID, samID, env.World.ID("lotse"), "junk"} {
		if err := env.Writers.Identity.RemoveMember(ctx, gID, id); err != nil {
			t.Fatalf("remove %s: %v", id, err)
		}
	}
	want = slices.DeleteFunc(want, func(id string) bool { return id == samID })
	if got := groupMembers(t, env, gID); !slices.Equal(got, want) {
		t.Fatalf("members after removing Sam %v, want %v", got, want)
	}
}

// groupRenamed renames group gID, "Support team", to "Support" and checks
// that a rename keeps the rule on names and an unknown group is not found.
func groupRenamed(t *testing.T, env *moduletest.Env, gID string) {
	t.Helper()
	ctx := t.Context()
	other, err := env.Writers.Identity.CreateGroup(ctx, "Owners")
	if err != nil {
		t.Fatal(err)
	}
	moduletest.WantProblem(t, "rename to a taken name", env.Writers.Identity.RenameGroup(ctx, other.ID, "Support team"), problem.Conflict, "name_taken")
	moduletest.WantProblem(t, "rename to an empty name", env.Writers.Identity.RenameGroup(ctx, other.ID, ""), problem.ValidationFailed, "")
	if err := env.Writers.Identity.RenameGroup(ctx, gID, "Support"); err != nil {
		t.Fatal(err)
	}
	if got, err := env.Identity.GetGroup(ctx, gID); err != nil || got.Name != "Support" {
		t.Fatalf("renamed %+v %v", got, err)
	}
	if err := env.Writers.Identity.RenameGroup(ctx, ids.New(), "Nobody"); !errors.Is(err, identity.ErrGroupNotFound) {
		t.Fatalf("rename an unknown group: %v", err)
	}
}

// groupDeleted deletes group gID, "Support", and checks that it loses
// its members, is not found any more and frees its name.
func groupDeleted(t *testing.T, env *moduletest.Env, gID string) {
	t.Helper()
	ctx := t.Context()
	if err := env.Writers.Identity.DeleteGroup(ctx, gID); err != nil {
		t.Fatal(err)
	}
	if n := env.Count(`SELECT count(*) FROM group_members WHERE group_id = $1`, gID); n != 0 {
		t.Fatalf("a deleted group keeps %d members", n)
	}
	for what, err := range map[string]error{
		"get":          func() error { _, err := env.Identity.GetGroup(ctx, gID); return err }(),
		"get junk":     func() error { _, err := env.Identity.GetGroup(ctx, "junk"); return err }(),
		"delete again": env.Writers.Identity.DeleteGroup(ctx, gID),
		"rename":       env.Writers.Identity.RenameGroup(ctx, gID, "Support again"),
	} {
		if !errors.Is(err, identity.ErrGroupNotFound) {
			t.Fatalf("%s a deleted group: %v, want ErrGroupNotFound", what, err)
		}
	}
	if again, err := env.Writers.Identity.CreateGroup(ctx, "Support"); err != nil || again.ID == gID {
		t.Fatalf("the deleted group's name is not free: %+v %v", again, err)
	}
}

// groupMembers returns the members of group id as GetGroup reads them,
// and fails the test unless the shared view group_memberships holds the
// same.
func groupMembers(t *testing.T, env *moduletest.Env, id string) []string {
	t.Helper()
	ctx := t.Context()
	g, err := env.Identity.GetGroup(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// The shared view group_memberships (group_id, principal_id)
	// holds the same members.
	var joined []string
	rows, err := env.Pool.Query(ctx, `SELECT m.principal_id::text FROM group_memberships m WHERE m.group_id = $1 ORDER BY 1`, id)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		joined = append(joined, p)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(joined, g.Members) {
		t.Fatalf("group_memberships holds %v, GetGroup %v", joined, g.Members)
	}
	return g.Members
}
