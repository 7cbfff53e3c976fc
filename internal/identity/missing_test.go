package identity_test

import (
	"errors"
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
)

// TestAddMemberToDeletedGroup pins that a member is never written into a
// group that is not live: adding Sam to a deleted group, or to a group id
// nobody created, answers ErrGroupNotFound (identity's not-found of a
// group, a problem.ErrMissing, which admin answers as 404) and leaves group_members unchanged;
// so does removing someone from such a group.
func TestAddMemberToDeletedGroup(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	samID := env.World.ID("sam")
	g, err := env.Writers.Identity.CreateGroup(ctx, "Night shift")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Writers.Identity.DeleteGroup(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	for what, id := range map[string]string{"deleted": g.ID, "unknown": ids.New()} {
		err := env.Writers.Identity.AddMember(ctx, id, samID)
		if !errors.Is(err, identity.ErrGroupNotFound) || !errors.Is(err, problem.ErrMissing) {
			t.Errorf("add Sam to a %s group: %v, want ErrGroupNotFound", what, err)
		}
		if n := env.Count(`SELECT count(*) FROM group_members WHERE group_id = $1`, id); n != 0 {
			t.Errorf("the %s group holds %d members", what, n)
		}
		err = env.Writers.Identity.RemoveMember(ctx, id, samID)
		if !errors.Is(err, identity.ErrGroupNotFound) {
			t.Errorf("remove Sam from a %s group: %v, want ErrGroupNotFound", what, err)
		}
	}
}

// TestMalformedIDs pins that an id that is not a canonical UUID is
// answered like an id nobody holds, without a trip to the database and
// never with the database's syntax error: not found for a group (rename,
// delete, members, read), a principal (status) and a token, and no tokens
// listed for it.
func TestMalformedIDs(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	samID := env.World.ID("sam")
	w := env.Writers.Identity
	calls := []struct {
		name string
		want error
		call func(id string) error
	}{
		{"GetGroup", identity.ErrGroupNotFound, func(id string) error { _, err := env.Identity.GetGroup(ctx, id); return err }},
		{"RenameGroup", identity.ErrGroupNotFound, func(id string) error { return w.RenameGroup(ctx, id, "Day shift") }},
		{"DeleteGroup", identity.ErrGroupNotFound, func(id string) error { return w.DeleteGroup(ctx, id) }},
		{"AddMember", identity.ErrGroupNotFound, func(id string) error { return w.AddMember(ctx, id, samID) }},
		{"RemoveMember", identity.ErrGroupNotFound, func(id string) error { return w.RemoveMember(ctx, id, samID) }},
		{"SetStatus", identity.ErrNotFound, func(id string) error { return w.SetStatus(ctx, id, identity.StatusDisabled) }},
		{"Get", identity.ErrNotFound, func(id string) error { _, err := env.Identity.Get(ctx, id); return err }},
		{"GetToken", identity.ErrNotFound, func(id string) error { _, err := env.Identity.GetToken(ctx, id); return err }},
		{"RevokeTokenByID", identity.ErrNotFound, func(id string) error { _, err := w.RevokeTokenByID(ctx, id); return err }},
	}
	malformed := []string{"", "junk", "42", "' OR 1=1 --", "{" + ids.New() + "}", "00000000-0000-0000-0000-00000000000g", ids.New() + "0"}
	for _, c := range calls {
		for _, id := range malformed {
			err := c.call(id)
			if !errors.Is(err, c.want) || !errors.Is(err, problem.ErrMissing) {
				t.Errorf("%s(%q): %v, want %v", c.name, id, err, c.want)
			}
		}
	}
	for _, id := range malformed {
		if list, err := env.Identity.ListTokens(ctx, id); err != nil || len(list) != 0 {
			t.Errorf("ListTokens(%q) = %v, %v; want none, like an unknown principal's", id, list, err)
		}
	}
	if env.Principal("sam").Status != identity.StatusActive {
		t.Fatal("a malformed id changed Sam")
	}
}
