package identity_test

import (
	"errors"
	"reflect"
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
)

// TestPrincipals proves the rules of principals and groups on one
// database, one rule a subtest, in order (later ones change the world).
func TestPrincipals(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	t.Run("lookups", func(t *testing.T) { principalLookups(t, env) })
	t.Run("create", func(t *testing.T) { createPrincipal(t, env) })
	t.Run("groups", func(t *testing.T) { groups(t, env) })
	t.Run("update", func(t *testing.T) { updatePrincipal(t, env) })
}

// createPrincipal: a created principal is active unless told otherwise,
// stored as returned and found by id and by handle (whatever its case); a
// handle taken by any principal, of any kind, is a conflict handle_taken,
// and an invalid principal is refused before anything is stored.
func createPrincipal(t *testing.T, env *moduletest.Env) {
	ctx := t.Context()
	count := func() int { return env.Count(`SELECT count(*) FROM principals`) }
	before := count()

	p, err := env.Writers.Identity.CreatePrincipal(ctx, identity.NewPrincipal{Kind: identity.KindUser, Handle: "alex-2", DisplayName: "Alex Zwei", Email: "alex2@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if !ids.Valid(p.ID) || p.Status != identity.StatusActive || p.IsOwner || !p.CreatedAt.Equal(env.Clock.Now()) {
		t.Fatalf("created %+v", p)
	}
	got, err := env.Identity.Get(ctx, p.ID)
	if err != nil || !reflect.DeepEqual(got, p) {
		t.Fatalf("stored %+v (%v), created %+v", got, err, p)
	}
	if byHandle, err := env.Identity.ByHandle(ctx, "Alex-2"); err != nil || byHandle.ID != p.ID {
		t.Fatalf("by handle: %+v %v", byHandle, err)
	}
	pending, err := env.Writers.Identity.CreatePrincipal(ctx, identity.NewPrincipal{Kind: identity.KindAgent, Handle: "lotse-2", DisplayName: "Lotse Zwei", Status: identity.StatusPending})
	if err != nil || pending.Status != identity.StatusPending || pending.Active() {
		t.Fatalf("pending agent %+v %v", pending, err)
	}

	for _, h := range []string{"alex", "lotse", "feedbot", "alex-2"} {
		_, err := env.Writers.Identity.CreatePrincipal(ctx, identity.NewPrincipal{Kind: identity.KindUser, Handle: h, DisplayName: "Somebody"})
		moduletest.WantProblem(t, "taken handle "+h, err, problem.Conflict, "handle_taken")
	}
	_, err = env.Writers.Identity.CreatePrincipal(ctx, identity.NewPrincipal{Kind: identity.KindApp, Handle: "sam-app", DisplayName: "Sam's app", Email: "sam@example.com"})
	moduletest.WantProblem(t, "an app with an address", err, problem.ValidationFailed, "")
	if n := count(); n != before+2 {
		t.Fatalf("%d principals, want %d: a refused principal was stored", n, before+2)
	}
}

// principalLookups: Get, ByHandle, GetMany and ByHandles find the stored
// principals; an unknown or malformed id or handle is ErrNotFound for one
// and absent from the map for many, never a database error.
func principalLookups(t *testing.T, env *moduletest.Env) {
	ctx := t.Context()
	alex, sam := env.Principal("alex"), env.Principal("sam")
	if alex.Handle != "alex" || alex.Kind != identity.KindUser || alex.Email != "alex@example.com" || alex.DisplayName != "Alex" {
		t.Fatalf("alex %+v", alex)
	}
	for _, id := range []string{"", "alex", ids.New()} {
		if _, err := env.Identity.Get(ctx, id); !errors.Is(err, identity.ErrNotFound) {
			t.Errorf("Get(%q): %v, want ErrNotFound", id, err)
		}
	}
	if _, err := env.Identity.ByHandle(ctx, "nobody"); !errors.Is(err, identity.ErrNotFound) {
		t.Errorf("ByHandle(nobody): %v, want ErrNotFound", err)
	}
	principalBatchLookups(t, env, alex, sam)
}

// principalBatchLookups checks that GetMany and ByHandles find alex and
// sam, once each, and leave unknown, malformed and repeated ids and
// handles out of the map instead of failing.
func principalBatchLookups(t *testing.T, env *moduletest.Env, alex, sam identity.Principal) {
	t.Helper()
	ctx := t.Context()
	many, err := env.Identity.GetMany(ctx, []string{alex.ID, sam.ID, ids.New(), "junk", alex.ID})
	if err != nil || len(many) != 2 || !reflect.DeepEqual(many[alex.ID], alex) || !reflect.DeepEqual(many[sam.ID], sam) {
		t.Fatalf("GetMany %+v %v", many, err)
	}
	if none, err := env.Identity.GetMany(ctx, []string{"junk"}); err != nil || len(none) != 0 {
		t.Fatalf("GetMany of junk %+v %v", none, err)
	}
	byHandle, err := env.Identity.ByHandles(ctx, []string{"alex", "sam", "nobody"})
	if err != nil || len(byHandle) != 2 || byHandle["alex"].ID != alex.ID || byHandle["sam"].ID != sam.ID {
		t.Fatalf("ByHandles %+v %v", byHandle, err)
	}
}

// updatePrincipal: a patch is applied and both states are returned; the
// last active owner can be neither demoted nor disabled (conflict
// last_owner), while with a second owner either may go; an unknown id is
// ErrNotFound and an invalid patch is refused unchanged.
func updatePrincipal(t *testing.T, env *moduletest.Env) {
	ctx := t.Context()
	robinID, alexID := env.World.ID("robin"), env.World.ID("alex")
	disabled, no, yes := identity.StatusDisabled, false, true
	removed := ""

	for _, patch := range []identity.PrincipalPatch{{Status: &disabled}, {IsOwner: &no}} {
		_, _, err := env.Writers.Identity.UpdatePrincipal(ctx, robinID, patch)
		moduletest.WantProblem(t, "the last owner", err, problem.Conflict, "last_owner")
	}
	if !env.Principal("robin").Owner() {
		t.Fatal("the refused patch changed Robin")
	}

	before, after, err := env.Writers.Identity.UpdatePrincipal(ctx, alexID, identity.PrincipalPatch{IsOwner: &yes, Email: &removed})
	if err != nil || before.IsOwner || before.Email != "alex@example.com" || !after.Owner() || after.Email != "" {
		t.Fatalf("make Alex owner: before %+v after %+v %v", before, after, err)
	}
	if stored := env.Principal("alex"); !reflect.DeepEqual(stored, after) {
		t.Fatalf("stored %+v, returned %+v", stored, after)
	}
	if _, after, err := env.Writers.Identity.UpdatePrincipal(ctx, robinID, identity.PrincipalPatch{Status: &disabled}); err != nil || after.Owner() {
		t.Fatalf("disable Robin beside a second owner: %+v %v", after, err)
	}
	_, _, err = env.Writers.Identity.UpdatePrincipal(ctx, alexID, identity.PrincipalPatch{IsOwner: &no})
	moduletest.WantProblem(t, "Alex, now the last active owner", err, problem.Conflict, "last_owner")

	if _, _, err := env.Writers.Identity.UpdatePrincipal(ctx, ids.New(), identity.PrincipalPatch{Status: &disabled}); !errors.Is(err, identity.ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	if _, _, err := env.Writers.Identity.UpdatePrincipal(ctx, "junk", identity.PrincipalPatch{Status: &disabled}); !errors.Is(err, identity.ErrNotFound) {
		t.Fatalf("malformed id: %v", err)
	}
	pending := identity.StatusPending
	_, _, err = env.Writers.Identity.UpdatePrincipal(ctx, env.World.ID("sam"), identity.PrincipalPatch{Status: &pending})
	moduletest.WantProblem(t, "pending", err, problem.ValidationFailed, "")
	if env.Principal("sam").Status != identity.StatusActive {
		t.Fatal("the refused patch changed Sam")
	}
}

// TestFreeHandleSkipsReservedHandles: a person who signs in as
// operator@example.com or deleted@example.com gets a numbered handle, not
// the handle the audit log answers for the local operator or a removed
// principal (taking it would fail as handle_taken).
func TestFreeHandleSkipsReservedHandles(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	for _, h := range []string{identity.OperatorHandle, identity.DeletedHandle} {
		if got, err := env.Identity.FreeHandle(t.Context(), h); err != nil || got != h+"2" {
			t.Fatalf("FreeHandle(%q) = %q, %v; want %q", h, got, err, h+"2")
		}
	}
}
