package authz_test

import (
	"errors"
	"maps"
	"slices"
	"sort"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/modules"
	"bothy.example.com/bothy/internal/platform/ids"
)

// holders asks WithTrigger on channel key about people and fails the test on
// an error.
func holders(t *testing.T, env *moduletest.Env, key string, people []identity.Principal) map[string]bool {
	t.Helper()
	got, err := env.Authz.WithTrigger(t.Context(), env.ChannelPath(key), people)
	if err != nil {
		t.Fatalf("WithTrigger: %v", err)
	}
	return got
}

// load reads the principals with the given handles through identity, so
// their status is the stored one.
func load(t *testing.T, env *moduletest.Env, handles ...string) []identity.Principal {
	t.Helper()
	out := make([]identity.Principal, 0, len(handles))
	for _, h := range handles {
		p, err := env.Identity.Get(t.Context(), env.World.ID(h))
		if err != nil {
			t.Fatalf("principal %s: %v", h, err)
		}
		out = append(out, p)
	}
	return out
}

// newPerson stores an active person (no grants) and returns it.
func newPerson(t *testing.T, env *moduletest.Env, handle string) identity.Principal {
	t.Helper()
	p, err := env.Writers.Identity.CreatePrincipal(t.Context(), identity.NewPrincipal{Kind: identity.KindUser,
		Handle: handle, DisplayName: handle, Email: handle + "@example.com"})
	if err != nil {
		t.Fatalf("create %s: %v", handle, err)
	}
	return p
}

// sortedKeys returns the ids of m that map to true, sorted; an id mapped to
// false fails the test (the result is a set).
func sortedKeys(t *testing.T, m map[string]bool) []string {
	t.Helper()
	out := make([]string, 0, len(m))
	for id, in := range m {
		if !in {
			t.Errorf("id %s is in the result with false; the result must hold only holders", id)
		}
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

func sorted(list []string) []string {
	out := append([]string{}, list...)
	sort.Strings(out)
	return out
}

// TestTriggerHolders checks authz.WithTrigger against the rights of
// docs/design/rights.md#trigger-holders over the real database: who counts as
// a person with effective
// trigger on a channel right now (the trust marker authorized of the run
// context), and that a failing source fails without a result.
func TestTriggerHolders(t *testing.T) {
	t.Parallel()
	for _, tc := range slices.Concat(grantHolderCases(), statusHolderCases()) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkHolders(t, tc)
		})
	}

	t.Run("people with trigger asked about some", peopleWithTriggerAskedAboutSome)
	t.Run("source error", holdersOnASourceError)
	t.Run("path of a space is refused", holdersOfASpaceRefused)
}

// samePeopleWithTrigger checks that PeopleWithTrigger, asked about people
// on channel key, reads each stored one as identity does and finds the
// holders want, and leaves unknown ids out.
func samePeopleWithTrigger(t *testing.T, env *moduletest.Env, key string, people []identity.Principal, want []string) {
	t.Helper()
	idList := make([]string, len(people))
	for i, p := range people {
		idList[i] = p.ID
	}
	got, holders, err := env.Authz.PeopleWithTrigger(t.Context(), env.ChannelPath(key), idList, idList)
	if err != nil {
		t.Fatalf("PeopleWithTrigger: %v", err)
	}
	if ids := sortedKeys(t, holders); len(ids) != len(want) || !slices.Equal(ids, want) {
		t.Fatalf("PeopleWithTrigger holders %v, want %v", ids, want)
	}
	for _, p := range people {
		stored, err := env.Identity.Get(t.Context(), p.ID)
		switch {
		case errors.Is(err, identity.ErrNotFound):
			if _, ok := got[p.ID]; ok {
				t.Errorf("PeopleWithTrigger read %s, which is not stored", p.Handle)
			}
		case err != nil:
			t.Fatal(err)
		case got[p.ID] != stored:
			t.Errorf("PeopleWithTrigger read %+v, identity reads %+v", got[p.ID], stored)
		}
	}
	if len(got) > len(people) {
		t.Errorf("PeopleWithTrigger read %d principals for %d ids", len(got), len(people))
	}
	// The same people named by a relation instead of a list give the same
	// answers.
	in, inHolders, err := env.Authz.PeopleWithTriggerIn(t.Context(), env.ChannelPath(key), idRelation(t, env, idList))
	if err != nil {
		t.Fatalf("PeopleWithTriggerIn: %v", err)
	}
	if !maps.Equal(in, got) || !maps.Equal(inHolders, holders) {
		t.Errorf("PeopleWithTriggerIn read %v with holders %v; PeopleWithTrigger %v and %v", in, inHolders, got, holders)
	}
}

// idRelation names idList as a relation of one uuid column, as
// PeopleWithTriggerIn takes it: a set-returning function of the test's own
// database (the shape of a module's shared function such as messaging's
// context_authors) with the list as its argument.
func idRelation(t *testing.T, env *moduletest.Env, idList []string) authz.Relation {
	t.Helper()
	if _, err := env.Pool.Exec(t.Context(), `CREATE OR REPLACE FUNCTION test_principal_ids(wanted uuid[])
		RETURNS TABLE (id uuid) LANGUAGE sql STABLE AS 'SELECT unnest(wanted)'`); err != nil {
		t.Fatal(err)
	}
	return authz.Relation{Func: "test_principal_ids", Args: []any{idList}}
}

func handlesOf(idList []string, names map[string]string) []string {
	out := make([]string, len(idList))
	for i, id := range idList {
		if n, ok := names[id]; ok {
			out[i] = n
		} else {
			out[i] = id
		}
	}
	return out
}

// TestPeopleWithTriggerInTakesOnlyFunctionNames: a relation is a shared
// function's name, never SQL text; anything else fails before a statement.
func TestPeopleWithTriggerInTakesOnlyFunctionNames(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	for _, fn := range []string{"", "Context_authors", "1fn", "context_authors(1); DROP TABLE grants; --", "unnest ", "x.y"} {
		people, holders, err := env.Authz.PeopleWithTriggerIn(t.Context(), env.ChannelPath("Support/Allgemein"), authz.Relation{Func: fn})
		if err == nil || people != nil || holders != nil {
			t.Errorf("relation %q: %v %v %v, want an error and nothing read", fn, people, holders, err)
		}
	}
	if _, err := env.Pool.Exec(t.Context(), `SELECT 1 FROM grants LIMIT 1`); err != nil {
		t.Fatalf("grants are gone: %v", err)
	}
}

// peopleWithTriggerAskedAboutSome checks that PeopleWithTrigger reads every
// principal it is given but answers holders only among those it is asked
// about.
func peopleWithTriggerAskedAboutSome(t *testing.T) {
	const allgemein = "Support/Allgemein"
	t.Parallel()
	env := moduletest.New(t)
	all := load(t, env, "robin", "alex", "sam", "writer", "lotse")
	idList := make([]string, len(all))
	for i, p := range all {
		idList[i] = p.ID
	}
	people, got, err := env.Authz.PeopleWithTrigger(t.Context(), env.ChannelPath(allgemein), idList, []string{env.World.ID("sam"), env.World.ID("writer")})
	if err != nil {
		t.Fatal(err)
	}
	if ids := sortedKeys(t, got); len(ids) != 1 || ids[0] != env.World.ID("sam") {
		t.Fatalf("holders %v, want only Sam (Robin and Alex were not asked about)", ids)
	}
	if len(people) != len(all) {
		t.Fatalf("%d principals, want %d", len(people), len(all))
	}
}

// holdersOnASourceError checks that a failing trust source fails
// WithTrigger, PeopleWithTrigger and PeopleWithTriggerIn without a result,
// and that they answer again once it is back.
func holdersOnASourceError(t *testing.T) {
	const allgemein = "Support/Allgemein"
	sw := &moduletest.TriggerFault{}
	env := moduletest.Build(t, moduletest.Options{Hooks: modules.Hooks{Authz: sw}})
	fault := errors.New("trust source down")
	sw.Set(fault)
	got, err := env.Authz.WithTrigger(t.Context(), env.ChannelPath(allgemein), load(t, env, "robin", "alex", "sam"))
	if !errors.Is(err, fault) {
		t.Fatalf("error %v, want %v", err, fault)
	}
	if got != nil {
		t.Fatalf("result %v with an error, want nil", got)
	}
	if people, got, err := env.Authz.PeopleWithTrigger(t.Context(), env.ChannelPath(allgemein), []string{env.World.ID("sam")}, []string{env.World.ID("sam")}); !errors.Is(err, fault) || got != nil || people != nil {
		t.Fatalf("PeopleWithTrigger: %v %v %v, want the fault and no result", people, got, err)
	}
	if people, got, err := env.Authz.PeopleWithTriggerIn(t.Context(), env.ChannelPath(allgemein), idRelation(t, env, []string{env.World.ID("sam")})); !errors.Is(err, fault) || got != nil || people != nil {
		t.Fatalf("PeopleWithTriggerIn: %v %v %v, want the fault and no result", people, got, err)
	}
	sw.Set(nil)
	if got := sortedKeys(t, holders(t, env, allgemein, load(t, env, "sam"))); len(got) != 1 || got[0] != env.World.ID("sam") {
		t.Fatalf("after the fault is cleared: %v", got)
	}
}

// holdersOfASpaceRefused checks that WithTrigger refuses the path of a
// space: trigger holders are asked on a channel.
func holdersOfASpaceRefused(t *testing.T) {
	const allgemein = "Support/Allgemein"
	t.Parallel()
	env := moduletest.New(t)
	p := env.ChannelPath(allgemein)
	p.Kind, p.ID, p.ChannelID = authz.KindSpace, p.SpaceID, ""
	got, err := env.Authz.WithTrigger(t.Context(), p, load(t, env, "robin"))
	if err == nil || got != nil {
		t.Fatalf("got %v, %v; want an error and no result", got, err)
	}
}

// holderCase is a case of TestTriggerHolders: WithTrigger asked on
// channel, after setup.
type holderCase struct {
	name    string
	channel string
	// setup shapes the world and returns the principals to ask and the
	// ids expected back.
	setup func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string)
}

// grantHolderCases are the cases of TestTriggerHolders about grants:
// direct and through a group, on the channel, its space or elsewhere,
// expired and revoked.
func grantHolderCases() []holderCase {
	const allgemein = "Support/Allgemein"
	return []holderCase{
		{"trigger grant on the channel", allgemein, func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			return load(t, env, "sam"), []string{env.World.ID("sam")}
		}},
		{"trigger grant on the space", allgemein, func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			return load(t, env, "alex"), []string{env.World.ID("alex")}
		}},
		{"trigger grant on the space reaches a forum of the space", "Support/Reports", func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			return load(t, env, "alex", "sam"), []string{env.World.ID("alex")}
		}},
		{"write only", allgemein, func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			return load(t, env, "writer"), nil
		}},
		{"group grant trigger on the channel", allgemein, func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			m := newPerson(t, env, "member")
			group := ids.New()
			env.Exec(`INSERT INTO groups (id, name, created_at) VALUES ($1, 'support-team', now())`, group)
			env.Exec(`INSERT INTO group_members (group_id, principal_id) VALUES ($1, $2)`, group, m.ID)
			env.Exec(`INSERT INTO grants (id, subject_group_id, target_channel_id, level, created_by, created_at) VALUES ($1, $2, $3, 'trigger', $4, $5)`,
				ids.New(), group, env.World.Channel(allgemein).ID, env.World.ID("robin"), env.Clock.Now())
			return []identity.Principal{m}, []string{m.ID}
		}},
		{"group grant write on the channel", allgemein, func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			m := newPerson(t, env, "member")
			group := ids.New()
			env.Exec(`INSERT INTO groups (id, name, created_at) VALUES ($1, 'support-writers', now())`, group)
			env.Exec(`INSERT INTO group_members (group_id, principal_id) VALUES ($1, $2)`, group, m.ID)
			env.Exec(`INSERT INTO grants (id, subject_group_id, target_channel_id, level, created_by, created_at) VALUES ($1, $2, $3, 'write', $4, $5)`,
				ids.New(), group, env.World.Channel(allgemein).ID, env.World.ID("robin"), env.Clock.Now())
			return []identity.Principal{m}, nil
		}},
		{"group grant trigger on another channel", allgemein, func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			m := newPerson(t, env, "member")
			group := ids.New()
			env.Exec(`INSERT INTO groups (id, name, created_at) VALUES ($1, 'campaigns', now())`, group)
			env.Exec(`INSERT INTO group_members (group_id, principal_id) VALUES ($1, $2)`, group, m.ID)
			env.Exec(`INSERT INTO grants (id, subject_group_id, target_channel_id, level, created_by, created_at) VALUES ($1, $2, $3, 'trigger', $4, $5)`,
				ids.New(), group, env.World.Channel("Marketing/Kampagnen").ID, env.World.ID("robin"), env.Clock.Now())
			return []identity.Principal{m}, nil
		}},
		{"expired grant", allgemein, func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			m := newPerson(t, env, "temp")
			env.Exec(`INSERT INTO grants (id, subject_principal_id, target_channel_id, level, expires_at, created_by, created_at) VALUES ($1, $2, $3, 'trigger', $4, $5, $6)`,
				ids.New(), m.ID, env.World.Channel(allgemein).ID, env.Clock.Now().Add(time.Hour), env.World.ID("robin"), env.Clock.Now())
			// Before expiry the grant counts, so the row below proves expiry
			// and not a broken grant.
			if got := sortedKeys(t, holders(t, env, allgemein, []identity.Principal{m})); len(got) != 1 || got[0] != m.ID {
				t.Fatalf("before expiry: got %v, want [%s]", got, m.ID)
			}
			env.Clock.Advance(2 * time.Hour)
			return []identity.Principal{m}, nil
		}},
		{"revoked grant", allgemein, func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			env.Exec(`UPDATE grants SET revoked_at = now() WHERE subject_principal_id = $1 AND target_channel_id = $2`,
				env.World.ID("sam"), env.World.Channel(allgemein).ID)
			return load(t, env, "sam"), nil
		}},
	}
}

// statusHolderCases are the cases of TestTriggerHolders about who asks
// and where: owners, the status of a person, agents and apps, archives,
// and the input itself (duplicates, unknown ids, nobody, the whole world).
func statusHolderCases() []holderCase {
	const allgemein = "Support/Allgemein"
	return []holderCase{
		{"active owner without grant", allgemein, func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			if n := env.Count(`SELECT count(*) FROM grants WHERE subject_principal_id = $1`, env.World.ID("robin")); n != 0 {
				t.Fatalf("robin has %d grants; the row needs none", n)
			}
			return load(t, env, "robin"), []string{env.World.ID("robin")}
		}},
		{"disabled person", allgemein, func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			env.Exec(`UPDATE principals SET status = 'disabled' WHERE id = $1`, env.World.ID("sam"))
			return load(t, env, "sam"), nil
		}},
		{"pending person", allgemein, func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			env.Exec(`UPDATE principals SET status = 'pending' WHERE id = $1`, env.World.ID("alex"))
			return load(t, env, "alex"), nil
		}},
		{"disabled owner", allgemein, func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			env.Exec(`UPDATE principals SET status = 'disabled' WHERE id = $1`, env.World.ID("robin"))
			return load(t, env, "robin"), nil
		}},
		{"agent operator of the channel", allgemein, func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			return load(t, env, "lotse"), nil
		}},
		{"agent with a write grant", allgemein, func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			return load(t, env, "texter"), nil
		}},
		{"agent with a stored trigger grant", allgemein, func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			// The API refuses trigger for agents; a row written past it must
			// still not make an agent a holder (only people trigger).
			env.Exec(`INSERT INTO grants (id, subject_principal_id, target_channel_id, level, created_by, created_at) VALUES ($1, $2, $3, 'trigger', $4, $5)`,
				ids.New(), env.World.ID("lotse"), env.World.Channel(allgemein).ID, env.World.ID("robin"), env.Clock.Now())
			return load(t, env, "lotse"), nil
		}},
		{"app", allgemein, func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			return load(t, env, "feedbot"), nil
		}},
		{"archived channel", allgemein, func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			env.Exec(`UPDATE channels SET archived_at = now() WHERE id = $1`, env.World.Channel(allgemein).ID)
			return load(t, env, "robin", "alex", "sam", "writer", "lotse", "feedbot"), nil
		}},
		{"archived space", allgemein, func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			env.Exec(`UPDATE spaces SET archived_at = now() WHERE id = $1`, env.World.Spaces["Support"])
			return load(t, env, "robin", "alex", "sam", "writer", "lotse", "feedbot"), nil
		}},
		{"other space archived", allgemein, func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			env.Exec(`UPDATE spaces SET archived_at = now() WHERE id = $1`, env.World.Spaces["Marketing"])
			return load(t, env, "robin", "sam"), []string{env.World.ID("robin"), env.World.ID("sam")}
		}},
		{"duplicates in the input", allgemein, func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			return load(t, env, "sam", "sam", "alex", "writer", "sam", "writer", "alex"), []string{env.World.ID("sam"), env.World.ID("alex")}
		}},
		{"unknown id", allgemein, func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			ghost := identity.Principal{ID: ids.New(), Kind: identity.KindUser, Handle: "ghost", Status: identity.StatusActive}
			return []identity.Principal{ghost}, nil
		}},
		{"no people", allgemein, func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			return nil, nil
		}},
		{"whole world on Allgemein", allgemein, func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			return load(t, env, "robin", "alex", "sam", "writer", "lotse", "texter", "feedbot"),
				[]string{env.World.ID("robin"), env.World.ID("alex"), env.World.ID("sam")}
		}},
		{"whole world on Kampagnen", "Marketing/Kampagnen", func(t *testing.T, env *moduletest.Env) ([]identity.Principal, []string) {
			return load(t, env, "robin", "alex", "sam", "writer", "lotse", "texter", "feedbot"),
				[]string{env.World.ID("robin"), env.World.ID("sam")}
		}},
	}
}

// checkHolders runs tc in a world of its own: WithTrigger answers exactly
// the holders tc wants, writes no audit row, and PeopleWithTrigger agrees.
func checkHolders(t *testing.T, tc holderCase) {
	env := moduletest.New(t)
	people, wantIDs := tc.setup(t, env)
	audits := env.Count(`SELECT count(*) FROM audit_log`)
	got := holders(t, env, tc.channel, people)
	if got == nil {
		t.Fatalf("WithTrigger returned a nil map without an error")
	}
	names := map[string]string{}
	for _, p := range people {
		names[p.ID] = p.Handle
	}
	gotIDs, want := sortedKeys(t, got), sorted(wantIDs)
	if len(gotIDs) != len(want) {
		t.Fatalf("got %v (%v), want %v", gotIDs, handlesOf(gotIDs, names), handlesOf(want, names))
	}
	for i := range want {
		if gotIDs[i] != want[i] {
			t.Fatalf("got %v, want %v", handlesOf(gotIDs, names), handlesOf(want, names))
		}
	}
	if n := env.Count(`SELECT count(*) FROM audit_log`); n != audits {
		t.Errorf("WithTrigger wrote %d audit rows; it must write none", n-audits)
	}
	samePeopleWithTrigger(t, env, tc.channel, people, want)
}
