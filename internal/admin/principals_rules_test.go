package admin_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
)

// wantFields fails the test unless err is a validation problem whose field
// errors are, in order, want ("pointer code" each).
func wantFields(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	p := problem.From("admin.wantFields", err)
	if p == nil || p.Code != problem.ValidationFailed {
		t.Fatalf("%s: %v, want validation_failed %v", what, err, want)
	}
	got := make([]string, len(p.Fields))
	for i, f := range p.Fields {
		got[i] = f.Pointer + " " + f.Code
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: fields %v, want %v", what, got, want)
	}
}

// TestCreatePrincipalRules pins createPrincipal at the admin service: a
// person is created active, not an owner unless asked, with the e-mail
// given and no token; an agent and an app get their first token (agent
// and app prefix and kind) in the same unit, which authenticates as them
// at once and lives token.default_ttl; a taken handle is a conflict
// handle_taken; the handle rule (lowercase letters, digits, - and _, 2 to
// 32), the kinds, the display name rule, e-mail only for people and
// owners only among people are validation errors naming each broken
// field; nothing refused is stored. The answers on the wire are
// TestAdmin/Principals in internal/server.
func TestCreatePrincipalRules(t *testing.T) {
	t.Parallel()
	env := moduletest.Build(t, moduletest.Options{Config: map[string]string{"ratelimit.rl.admin.burst": "1000", "token.default_ttl": "2h"}})
	ctx := t.Context()
	robin := env.Principal("robin")
	create := func(in admin.PrincipalInput) (admin.CreatedPrincipal, error) {
		return env.Admin.CreatePrincipal(ctx, robin, in)
	}

	checkCreatePerson(t, env)
	owner, err := create(admin.PrincipalInput{Kind: identity.KindUser, Handle: "dana", DisplayName: "Dana", IsOwner: true})
	if err != nil || !owner.Principal.IsOwner || owner.Token != nil {
		t.Fatalf("owner %+v %v", owner, err)
	}

	for _, c := range []struct {
		kind   identity.Kind
		handle string
		prefix string
		tk     identity.TokenKind
	}{
		{identity.KindAgent, "pilot", identity.PrefixAgent, identity.TokenAgent},
		{identity.KindApp, "hook", identity.PrefixApp, identity.TokenApp},
	} {
		checkFirstToken(t, env, c.kind, c.handle, c.prefix, c.tk)
	}

	principals := env.Count(`SELECT count(*) FROM principals`)
	_, err = create(admin.PrincipalInput{Kind: identity.KindUser, Handle: "alex", DisplayName: "Alex Two"})
	moduletest.WantProblem(t, "taken handle", err, problem.Conflict, "handle_taken")
	for _, c := range []struct {
		in   admin.PrincipalInput
		want []string
	}{
		{admin.PrincipalInput{Kind: identity.KindUser, Handle: "Casey!", DisplayName: "C"}, []string{"/handle invalid_format"}},
		{admin.PrincipalInput{Kind: identity.KindUser, Handle: "x", DisplayName: "X"}, []string{"/handle invalid_format"}},
		{admin.PrincipalInput{Kind: identity.KindUser, Handle: strings.Repeat("a", 33), DisplayName: "A"}, []string{"/handle invalid_format"}},
		{admin.PrincipalInput{Kind: identity.KindUser, Handle: "-dash", DisplayName: "Dash"}, []string{"/handle invalid_format"}},
		{admin.PrincipalInput{Kind: identity.KindAgent, Handle: "bot2", DisplayName: "Bot", Email: "bot@example.com"}, []string{"/email not_allowed"}},
		{admin.PrincipalInput{Kind: identity.KindUser, Handle: "erin", DisplayName: "Erin", Email: "not-an-address"}, []string{"/email invalid_format"}},
		{admin.PrincipalInput{Kind: identity.KindApp, Handle: "app2", DisplayName: "App", IsOwner: true}, []string{"/is_owner not_allowed"}},
		{admin.PrincipalInput{Kind: identity.KindUser, Handle: "fay", DisplayName: " padded"}, []string{"/display_name invalid_format"}},
		{admin.PrincipalInput{Kind: identity.KindUser, Handle: "fay", DisplayName: ""}, []string{"/display_name invalid_format"}},
		{admin.PrincipalInput{Kind: "robot", Handle: "fay", DisplayName: "Fay"}, []string{"/kind invalid_enum"}},
		{admin.PrincipalInput{Kind: "robot", Handle: "Fay", DisplayName: ""}, []string{"/handle invalid_format", "/kind invalid_enum", "/display_name invalid_format"}},
	} {
		_, err := create(c.in)
		wantFields(t, fmt.Sprintf("%+v", c.in), err, c.want...)
	}
	if n := env.Count(`SELECT count(*) FROM principals`); n != principals {
		t.Fatalf("refused principals were stored: %d, want %d", n, principals)
	}
}

// checkCreatePerson creates the person casey and checks the answer and
// what is stored: active, no owner, the e-mail given, and no token.
func checkCreatePerson(t *testing.T, env *moduletest.Env) {
	t.Helper()
	ctx := t.Context()
	robin := env.Principal("robin")
	person, err := env.Admin.CreatePrincipal(ctx, robin, admin.PrincipalInput{Kind: identity.KindUser, Handle: "casey", DisplayName: "Casey", Email: "casey@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if p := person.Principal; person.Token != nil || p.Handle != "casey" || p.Kind != identity.KindUser || p.Status != identity.StatusActive ||
		p.IsOwner || p.Email != "casey@example.com" || p.DisplayName != "Casey" {
		t.Fatalf("person %+v token %+v", p, person.Token)
	}
	if got, err := env.Identity.Get(ctx, person.Principal.ID); err != nil || got.Handle != "casey" || got.Status != identity.StatusActive {
		t.Fatalf("read back %+v %v", got, err)
	}
	if list, err := env.Admin.ListTokens(ctx, robin, person.Principal.ID); err != nil || len(list) != 0 {
		t.Fatalf("a new person holds tokens: %+v %v", list, err)
	}
}

// checkFirstToken creates an agent or app (kind) with handle and checks
// its first token: prefix and token kind tk, labelled "first token",
// living token.default_ttl (2h), authenticating as it at once and its
// only token.
func checkFirstToken(t *testing.T, env *moduletest.Env, kind identity.Kind, handle, prefix string, tk identity.TokenKind) {
	t.Helper()
	ctx := t.Context()
	robin := env.Principal("robin")
	made, err := env.Admin.CreatePrincipal(ctx, robin, admin.PrincipalInput{Kind: kind, Handle: handle, DisplayName: strings.ToUpper(handle[:1]) + handle[1:]})
	if err != nil {
		t.Fatalf("%s: %v", handle, err)
	}
	tok := made.Token
	if tok == nil || !strings.HasPrefix(tok.Token, prefix) || tok.Kind != tk || tok.Label != "first token" ||
		tok.ExpiresAt == nil || !tok.ExpiresAt.Equal(moduletest.Start.Add(2*time.Hour)) {
		t.Fatalf("%s's first token: %+v", handle, tok)
	}
	who, err := env.Identity.Authenticate(ctx, tok.Token)
	if err != nil || who.ID != made.Principal.ID || who.Kind != kind {
		t.Fatalf("%s's first token authenticates %+v %v", handle, who, err)
	}
	list, err := env.Admin.ListTokens(ctx, robin, made.Principal.ID)
	if err != nil || len(list) != 1 || list[0].ID != tok.ID {
		t.Fatalf("%s's tokens %+v %v", handle, list, err)
	}
}

// listen returns a connection listening on the events' notification
// channel, which wakes waiting long polls and subscriptions.
func listen(t *testing.T, env *moduletest.Env) func(what string) string {
	t.Helper()
	conn, err := env.Pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), "UNLISTEN *")
		conn.Release()
	})
	if _, err := conn.Exec(t.Context(), "LISTEN "+events.NotifyChannel); err != nil {
		t.Fatal(err)
	}
	return func(what string) string {
		t.Helper()
		// The notification is sent at commit, before the call returns; the
		// timeout only bounds a failing test.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("%s: no notification: %v", what, err)
		}
		return n.Payload
	}
}

// TestUpdatePrincipalRules pins updatePrincipal at the admin service:
// disabling a person ends their tokens from the next authentication on and
// wakes every waiting long poll and subscription (the streams'
// notification "0"), enabling restores them; a display name change is read
// back; status is active or disabled only, owners are people only, and a
// refused patch changes nothing; an unknown principal is not found. The
// last-owner rule is TestLastOwner.
func TestUpdatePrincipalRules(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	ctx := t.Context()
	robin := env.Principal("robin")
	alexID := env.World.ID("alex")
	secret, err := env.Admin.CreateToken(ctx, env.Principal("alex"), alexID, "laptop", nil)
	if err != nil {
		t.Fatal(err)
	}
	notified := listen(t, env)
	disabled, active := identity.StatusDisabled, identity.StatusActive

	got, err := env.Admin.UpdatePrincipal(ctx, robin, alexID, identity.PrincipalPatch{Status: &disabled})
	if err != nil || got.Status != identity.StatusDisabled {
		t.Fatalf("disable: %+v %v", got, err)
	}
	if n := notified("disable"); n != "0" {
		t.Fatalf("disabling woke the streams with %q, want 0", n)
	}
	_, err = env.Identity.Authenticate(ctx, secret.Token)
	moduletest.WantProblem(t, "a disabled person's token", err, problem.Unauthorized, "")
	name := "Alex A."
	got, err = env.Admin.UpdatePrincipal(ctx, robin, alexID, identity.PrincipalPatch{Status: &active, DisplayName: &name})
	if err != nil || got.Status != identity.StatusActive || got.DisplayName != "Alex A." {
		t.Fatalf("enable: %+v %v", got, err)
	}
	if p := env.Principal("alex"); p.DisplayName != "Alex A." || p.Status != identity.StatusActive {
		t.Fatalf("read back %+v", p)
	}
	if p, err := env.Identity.Authenticate(ctx, secret.Token); err != nil || p.ID != alexID {
		t.Fatalf("an enabled person's token: %+v %v", p, err)
	}

	checkRefusedPatches(t, env, name)
	_, err = env.Admin.UpdatePrincipal(ctx, robin, "01a22de8-0000-7000-8000-000000000000", identity.PrincipalPatch{DisplayName: &name})
	moduletest.WantProblem(t, "unknown principal", err, problem.NotFound, "")
}

// checkRefusedPatches checks that patches breaking the rules (status,
// owner, e-mail, display name) are validation errors naming the field and
// change neither lotse nor alex (named name, active).
func checkRefusedPatches(t *testing.T, env *moduletest.Env, name string) {
	t.Helper()
	ctx := t.Context()
	robin := env.Principal("robin")
	alexID, lotseID := env.World.ID("alex"), env.World.ID("lotse")
	pending, yes, blank := identity.StatusPending, true, ""
	for _, c := range []struct {
		id    string
		patch identity.PrincipalPatch
		want  string
	}{
		{alexID, identity.PrincipalPatch{Status: &pending}, "/status invalid_enum"},
		{lotseID, identity.PrincipalPatch{IsOwner: &yes}, "/is_owner not_allowed"},
		{lotseID, identity.PrincipalPatch{Email: &name}, "/email not_allowed"},
		{alexID, identity.PrincipalPatch{DisplayName: &blank}, "/display_name invalid_format"},
	} {
		_, err := env.Admin.UpdatePrincipal(ctx, robin, c.id, c.patch)
		wantFields(t, c.want, err, c.want)
	}
	if p := env.Principal("lotse"); p.IsOwner || p.Email != "" {
		t.Fatalf("a refused patch changed lotse: %+v", p)
	}
	if p := env.Principal("alex"); p.DisplayName != "Alex A." || p.Status != identity.StatusActive {
		t.Fatalf("a refused patch changed alex: %+v", p)
	}
}

// TestDisableEndsRuns pins the loss-of-trigger rule of updatePrincipal:
// disabling a person cancels their queued run at once (the runs module
// re-checks before the call returns), and a display name change leaves a
// run alone. The waiting long polls on the wire are
// TestAdminDisableEndsPollsAndRuns in internal/server.
func TestDisableEndsRuns(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	ctx := t.Context()
	robin := env.Principal("robin")
	runOf := func(cid, content string) string {
		t.Helper()
		m := env.Post("alex", env.Main("Support/Eskalation"), cid, content)
		if m.TriggerState != "accepted" {
			t.Fatalf("alex's question %s: %+v", cid, m)
		}
		var id string
		if err := env.Pool.QueryRow(ctx, `SELECT id::text FROM runs WHERE triggering_message_id = $1`, m.ID).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	state := func(run string) string {
		t.Helper()
		var s string
		if err := env.Pool.QueryRow(ctx, `SELECT state FROM runs WHERE id = $1`, run).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	run := runOf("q1", "@lotse please look at the printer")
	name := "Alex A."
	if _, err := env.Admin.UpdatePrincipal(ctx, robin, env.World.ID("alex"), identity.PrincipalPatch{DisplayName: &name}); err != nil {
		t.Fatal(err)
	}
	if s := state(run); s != "queued" {
		t.Fatalf("a renamed person's run is %s", s)
	}
	disabled := identity.StatusDisabled
	if _, err := env.Admin.UpdatePrincipal(ctx, robin, env.World.ID("alex"), identity.PrincipalPatch{Status: &disabled}); err != nil {
		t.Fatal(err)
	}
	if s := state(run); s != "cancelled" {
		t.Fatalf("a disabled person's queued run is %s, want cancelled", s)
	}
}

// TestListPrincipalsPaging pins listPrincipals at the admin service: pages
// of limit principals in creation order, each but the last with the cursor
// of the next, the last without; the default page is
// admin.principal_list_limit_default; a limit outside 1 to
// admin.principal_list_limit_max and a cursor that is no id are validation
// errors (limit out_of_range, after invalid_cursor).
func TestListPrincipalsPaging(t *testing.T) {
	t.Parallel()
	env := moduletest.Build(t, moduletest.Options{Config: map[string]string{"ratelimit.rl.admin.burst": "1000",
		"admin.principal_list_limit_default": "4", "admin.principal_list_limit_max": "9"}})
	ctx := t.Context()
	robin := env.Principal("robin")
	for _, h := range []string{"casey", "dana"} {
		if _, err := env.Admin.CreatePrincipal(ctx, robin, admin.PrincipalInput{Kind: identity.KindUser, Handle: h, DisplayName: h}); err != nil {
			t.Fatal(err)
		}
	}
	limit := func(n int) *int { return &n }
	all, pages := principalPages(t, env, limit(3))
	want := "robin,alex,sam,writer,lotse,texter,feedbot,casey,dana"
	if strings.Join(all, ",") != want || pages != 3 {
		t.Fatalf("principals %v in %d pages, want %s in 3", all, pages, want)
	}
	def, err := env.Admin.ListPrincipals(ctx, robin, "", nil)
	if err != nil || len(def.Principals) != 4 || def.NextAfter != def.Principals[3].ID {
		t.Fatalf("default page %+v %v", def, err)
	}
	whole, err := env.Admin.ListPrincipals(ctx, robin, "", limit(9))
	if err != nil || len(whole.Principals) != 9 || whole.NextAfter != "" {
		t.Fatalf("a page of all: %+v %v", whole, err)
	}
	for _, n := range []int{0, -1, 10} {
		_, err := env.Admin.ListPrincipals(ctx, robin, "", limit(n))
		wantFields(t, fmt.Sprint("limit ", n), err, "limit out_of_range")
	}
	for _, c := range []string{"yesterday", "robin", "1"} {
		_, err := env.Admin.ListPrincipals(ctx, robin, c, nil)
		wantFields(t, "cursor "+c, err, "after invalid_cursor")
	}
}

// principalPages lists all principals as robin in pages of limit and
// returns their handles and the number of pages; each page but the last
// must be full and carry the cursor of the next, the last must be neither
// empty nor longer than limit.
func principalPages(t *testing.T, env *moduletest.Env, limit *int) (all []string, pages int) {
	t.Helper()
	ctx := t.Context()
	robin := env.Principal("robin")
	after := ""
	for {
		page, err := env.Admin.ListPrincipals(ctx, robin, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, p := range page.Principals {
			all = append(all, p.Handle)
		}
		if page.NextAfter == "" {
			if len(page.Principals) == 0 || len(page.Principals) > *limit {
				t.Fatalf("last page %+v", page)
			}
			break
		}
		if len(page.Principals) != *limit || page.NextAfter != page.Principals[*limit-1].ID {
			t.Fatalf("page %d: %+v", pages, page)
		}
		after = page.NextAfter
	}
	return all, pages
}

// TestTokenDefaultTTLAndRunTokens pins the token rules not in
// TestTokenRules: a token created without a ttl lives token.default_ttl,
// an explicit ttl overrides it; a label is at most 100 characters without
// surrounding spaces; and a run token is nobody's to revoke by id, not
// even an owner's: revoking it is not found like a missing token, it is
// never listed, and it still authenticates afterwards.
func TestTokenDefaultTTLAndRunTokens(t *testing.T) {
	t.Parallel()
	env := moduletest.Build(t, moduletest.Options{Config: map[string]string{"ratelimit.rl.admin.burst": "1000", "token.default_ttl": "720h"}})
	ctx := t.Context()
	alex := env.Principal("alex")
	alexID := env.World.ID("alex")

	def, err := env.Admin.CreateToken(ctx, alex, alexID, "default", nil)
	if err != nil || def.ExpiresAt == nil || !def.ExpiresAt.Equal(moduletest.Start.Add(720*time.Hour)) {
		t.Fatalf("default ttl: %+v %v", def, err)
	}
	hour := time.Hour
	own, err := env.Admin.CreateToken(ctx, alex, alexID, "hour", &hour)
	if err != nil || own.ExpiresAt == nil || !own.ExpiresAt.Equal(moduletest.Start.Add(time.Hour)) {
		t.Fatalf("explicit ttl: %+v %v", own, err)
	}
	tokens := env.Count(`SELECT count(*) FROM tokens`)
	for _, label := range []string{strings.Repeat("x", admin.MaxTokenLabel+1), " padded", "line\nbreak"} {
		_, err := env.Admin.CreateToken(ctx, alex, alexID, label, nil)
		wantFields(t, "label "+label, err, "/label invalid_format")
	}
	if _, err := env.Admin.CreateToken(ctx, alex, alexID, strings.Repeat("x", admin.MaxTokenLabel), nil); err != nil {
		t.Fatalf("a label of 100 characters: %v", err)
	}
	if n := env.Count(`SELECT count(*) FROM tokens`); n != tokens+1 {
		t.Fatalf("tokens %d, want %d", n, tokens+1)
	}

	checkRunTokenNotRevocable(t, env)
}

// checkRunTokenNotRevocable mints a run token of lotse (alex asks lotse)
// and checks that robin, an owner, cannot revoke it by id (not found, as a
// missing token), that it still authenticates and is never listed.
func checkRunTokenNotRevocable(t *testing.T, env *moduletest.Env) {
	t.Helper()
	ctx := t.Context()
	robin := env.Principal("robin")
	lotseID := env.World.ID("lotse")
	// A run token: Alex asks Lotse, the run's token is minted.
	m := env.Post("alex", env.Main("Support/Eskalation"), "rt-1", "@lotse please have a look")
	var run string
	if err := env.Pool.QueryRow(ctx, `SELECT id::text FROM runs WHERE triggering_message_id = $1`, m.ID).Scan(&run); err != nil {
		t.Fatal(err)
	}
	rt, err := env.Writers.Identity.CreateRunToken(ctx, env.Principal("lotse"), run, "proc-a")
	if err != nil {
		t.Fatal(err)
	}
	_, err = env.Admin.RevokeToken(ctx, robin, rt.ID)
	moduletest.WantProblem(t, "robin revokes a run token", err, problem.NotFound, "")
	if env.Count(`SELECT count(*) FROM tokens WHERE id = $1 AND revoked_at IS NULL`, rt.ID) != 1 {
		t.Fatal("the run token was revoked")
	}
	if p, err := env.Identity.Authenticate(ctx, rt.Token); err != nil || p.ID != lotseID || p.RunID != run {
		t.Fatalf("the run token after the refused revoke: %+v %v", p, err)
	}
	list, err := env.Admin.ListTokens(ctx, robin, lotseID)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range list {
		if tok.ID == rt.ID || tok.Kind == identity.TokenRun {
			t.Fatalf("a run token is listed: %+v", tok)
		}
	}
	if _, err := env.Identity.GetToken(ctx, rt.ID); !errors.Is(err, identity.ErrNotFound) {
		t.Fatalf("GetToken of a run token: %v", err)
	}
}
