package identity_test

import (
	"reflect"
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/identity"
)

// TestPrincipalFacts: identity's shared view principal_facts
// (migrations/00015_module_views.sql), which authz reads beside grants
// (SELECT p.* scanned with identity.PrincipalRow, matched on p.id), holds
// every principal as identity reads it: each column by its name, in the
// order PrincipalRow scans, for a person with an address and an agent
// without one. A renamed or reordered column fails here.
func TestPrincipalFacts(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	for _, h := range []string{"robin", "lotse"} {
		want := env.Principal(h)
		var named, star identity.PrincipalRow
		if err := env.Pool.QueryRow(ctx, `SELECT p.id, p.kind, p.handle, p.display_name, p.email, p.status, p.is_owner, p.created_at
			FROM principal_facts p WHERE p.id = $1`, want.ID).Scan(named.Dest()...); err != nil {
			t.Fatalf("%s by column names: %v", h, err)
		}
		if err := env.Pool.QueryRow(ctx, `SELECT p.* FROM principal_facts p WHERE p.id = $1`, want.ID).Scan(star.Dest()...); err != nil {
			t.Fatalf("%s by p.*: %v", h, err)
		}
		for _, got := range []identity.Principal{named.Principal(), star.Principal()} {
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("principal_facts holds %+v for %s, identity reads %+v", got, h, want)
			}
		}
	}
	robin := env.Principal("robin")
	if robin.Email == "" || !robin.IsOwner || env.Principal("lotse").Email != "" {
		t.Fatalf("the world no longer has an owner with an address and an agent without: %+v", robin)
	}
}
