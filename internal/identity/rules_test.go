package identity_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/problem"
)

// fieldsOf renders the field errors of a validation problem as
// "pointer code" items, in their order ("" for no error).
func fieldsOf(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	p := problem.From("identity.fieldsOf", err)
	if p.Code != problem.ValidationFailed {
		t.Fatalf("%v: want validation_failed", err)
	}
	items := make([]string, 0, len(p.Fields))
	for _, f := range p.Fields {
		items = append(items, f.Pointer+" "+f.Code)
	}
	return strings.Join(items, ", ")
}

// TestValidHandle: a handle is 2 to 32 lowercase letters, digits, - and _,
// starting with a letter or a digit; nothing else passes, not even a
// trailing newline.
func TestValidHandle(t *testing.T) {
	t.Parallel()
	cases := []struct {
		handle string
		ok     bool
	}{
		{"alex", true},
		{"sam", true},
		{"r2", true},
		{"0robin", true},
		{"robin_2", true},
		{"robin-2", true},
		{strings.Repeat("s", 32), true},
		{"", false},
		{"a", false},
		{strings.Repeat("s", 33), false},
		{"Alex", false},
		{"_alex", false},
		{"-alex", false},
		{"alex.sam", false},
		{"alex sam", false},
		{"alex@example.com", false},
		{"röbin", false},
		{"alex\n", false},
	}
	for _, c := range cases {
		if got := identity.ValidHandle(c.handle); got != c.ok {
			t.Errorf("ValidHandle(%q) = %v, want %v", c.handle, got, c.ok)
		}
	}
}

// TestCheckNew: a new principal needs a valid handle, a known kind and a
// one-line display name of 1 to 80 characters; only people have an e-mail
// address (a plain one) and only people own the instance; every fault is
// named with its pointer, in field order.
func TestCheckNew(t *testing.T) {
	t.Parallel()
	person := identity.NewPrincipal{Kind: identity.KindUser, Handle: "alex", DisplayName: "Alex", Email: "alex@example.com"}
	with := func(f func(*identity.NewPrincipal)) identity.NewPrincipal {
		np := person
		f(&np)
		return np
	}
	cases := []struct {
		name string
		np   identity.NewPrincipal
		want string
	}{
		{"a person", person, ""},
		{"an owner", with(func(np *identity.NewPrincipal) { np.IsOwner = true }), ""},
		{"a person without address", with(func(np *identity.NewPrincipal) { np.Email = "" }), ""},
		{"an agent", identity.NewPrincipal{Kind: identity.KindAgent, Handle: "lotse", DisplayName: "Lotse"}, ""},
		{"an app", identity.NewPrincipal{Kind: identity.KindApp, Handle: "feedbot", DisplayName: "Feed Bot"}, ""},
		{"80 characters", with(func(np *identity.NewPrincipal) { np.DisplayName = strings.Repeat("ä", 80) }), ""},
		{"bad handle", with(func(np *identity.NewPrincipal) { np.Handle = "Alex" }), "/handle invalid_format"},
		{"unknown kind", with(func(np *identity.NewPrincipal) { np.Kind = "robot"; np.Email = "" }), "/kind invalid_enum"},
		{"empty name", with(func(np *identity.NewPrincipal) { np.DisplayName = "" }), "/display_name invalid_format"},
		{"padded name", with(func(np *identity.NewPrincipal) { np.DisplayName = " Alex" }), "/display_name invalid_format"},
		{"two-line name", with(func(np *identity.NewPrincipal) { np.DisplayName = "Alex\nSam" }), "/display_name invalid_format"},
		{"81 characters", with(func(np *identity.NewPrincipal) { np.DisplayName = strings.Repeat("a", 81) }), "/display_name invalid_format"},
		{"no address", with(func(np *identity.NewPrincipal) { np.Email = "alex" }), "/email invalid_format"},
		{"address with a name", with(func(np *identity.NewPrincipal) { np.Email = "Alex <alex@example.com>" }), "/email invalid_format"},
		{"too long an address", with(func(np *identity.NewPrincipal) { np.Email = strings.Repeat("a", 243) + "@example.com" }), "/email invalid_format"},
		{"an agent's address", identity.NewPrincipal{Kind: identity.KindAgent, Handle: "lotse", DisplayName: "Lotse", Email: "lotse@example.com"}, "/email not_allowed"},
		{"an owning app", identity.NewPrincipal{Kind: identity.KindApp, Handle: "feedbot", DisplayName: "Feed Bot", IsOwner: true}, "/is_owner not_allowed"},
		{"everything wrong", identity.NewPrincipal{Kind: identity.KindAgent, Handle: "x", Email: "x@example.com", IsOwner: true},
			"/handle invalid_format, /display_name invalid_format, /email not_allowed, /is_owner not_allowed"},
	}
	for _, c := range cases {
		if got := fieldsOf(t, identity.CheckNew(c.np)); got != c.want {
			t.Errorf("%s: CheckNew gives %q, want %q", c.name, got, c.want)
		}
	}
}

// TestPrincipalPatchCheck: a patch may set only active or disabled, gives
// an address or the owner flag only to people (removing an address or the
// flag is always allowed), and checks the display name as creation does;
// Empty tells a patch that changes nothing.
func TestPrincipalPatchCheck(t *testing.T) {
	t.Parallel()
	alex := identity.Principal{Kind: identity.KindUser, Handle: "alex", DisplayName: "Alex", Status: identity.StatusActive}
	lotse := identity.Principal{Kind: identity.KindAgent, Handle: "lotse", DisplayName: "Lotse", Status: identity.StatusActive}
	str := func(s string) *string { return &s }
	st := func(s identity.Status) *identity.Status { return &s }
	yes, no := true, false
	cases := []struct {
		name  string
		cur   identity.Principal
		patch identity.PrincipalPatch
		want  string
	}{
		{"nothing", alex, identity.PrincipalPatch{}, ""},
		{"rename", alex, identity.PrincipalPatch{DisplayName: str("Alex M.")}, ""},
		{"disable", lotse, identity.PrincipalPatch{Status: st(identity.StatusDisabled)}, ""},
		{"enable", lotse, identity.PrincipalPatch{Status: st(identity.StatusActive)}, ""},
		{"a person's address", alex, identity.PrincipalPatch{Email: str("alex@example.com")}, ""},
		{"remove an agent's address", lotse, identity.PrincipalPatch{Email: str("")}, ""},
		{"an agent is no owner", lotse, identity.PrincipalPatch{IsOwner: &no}, ""},
		{"pending", alex, identity.PrincipalPatch{Status: st(identity.StatusPending)}, "/status invalid_enum"},
		{"deleted", alex, identity.PrincipalPatch{Status: st(identity.StatusDeleted)}, "/status invalid_enum"},
		{"empty name", alex, identity.PrincipalPatch{DisplayName: str("")}, "/display_name invalid_format"},
		{"bad address", alex, identity.PrincipalPatch{Email: str("alex at example.com")}, "/email invalid_format"},
		{"an agent's address", lotse, identity.PrincipalPatch{Email: str("lotse@example.com")}, "/email not_allowed"},
		{"an owning agent", lotse, identity.PrincipalPatch{IsOwner: &yes}, "/is_owner not_allowed"},
	}
	for _, c := range cases {
		if got := fieldsOf(t, c.patch.Check(c.cur)); got != c.want {
			t.Errorf("%s: Check gives %q, want %q", c.name, got, c.want)
		}
	}
	if !(identity.PrincipalPatch{}).Empty() || (identity.PrincipalPatch{IsOwner: &no}).Empty() || (identity.PrincipalPatch{Email: str("")}).Empty() {
		t.Error("Empty: want true only for a patch without members")
	}
}

// TestPrincipalView: only an active principal acts; only an active person
// with the owner flag owns the instance; the public view (Ref) carries no
// address and no status.
func TestPrincipalView(t *testing.T) {
	t.Parallel()
	cases := []struct {
		kind         identity.Kind
		status       identity.Status
		owner        bool
		active, owns bool
	}{
		{identity.KindUser, identity.StatusActive, true, true, true},
		{identity.KindUser, identity.StatusActive, false, true, false},
		{identity.KindUser, identity.StatusDisabled, true, false, false},
		{identity.KindUser, identity.StatusPending, true, false, false},
		{identity.KindUser, identity.StatusDeleted, true, false, false},
		{identity.KindAgent, identity.StatusActive, true, true, false},
		{identity.KindApp, identity.StatusActive, false, true, false},
	}
	for _, c := range cases {
		p := identity.Principal{ID: "id", Kind: c.kind, Handle: "robin", DisplayName: "Robin", Email: "robin@example.com", Status: c.status, IsOwner: c.owner}
		if p.Active() != c.active || p.Owner() != c.owns {
			t.Errorf("%s %s owner=%v: Active %v Owner %v, want %v %v", c.kind, c.status, c.owner, p.Active(), p.Owner(), c.active, c.owns)
		}
		if want := (identity.Ref{ID: "id", Kind: c.kind, Handle: "robin", DisplayName: "Robin"}); p.Ref() != want {
			t.Errorf("Ref %+v, want %+v", p.Ref(), want)
		}
	}
}

// TestValidTTL: a token lifetime of zero means no expiry and a positive one
// is kept; a negative one is refused at the caller's pointer, never turned
// into a token that lives for ever.
func TestValidTTL(t *testing.T) {
	t.Parallel()
	for _, ttl := range []time.Duration{0, time.Nanosecond, time.Hour, 365 * 24 * time.Hour} {
		if err := identity.ValidTTL(ttl, "/ttl"); err != nil {
			t.Errorf("ValidTTL(%s): %v", ttl, err)
		}
	}
	for _, ttl := range []time.Duration{-time.Nanosecond, -time.Hour} {
		if got := fieldsOf(t, identity.ValidTTL(ttl, "/expires_in")); got != "/expires_in out_of_range" {
			t.Errorf("ValidTTL(%s) gives %q", ttl, got)
		}
	}
}

// TestTokenForm: the four token prefixes are distinct and name the kind;
// IsRunToken reads only the form; a string without one of the prefixes is
// refused as unauthorized before the database is asked (the service here
// has no database: asking it would panic).
func TestTokenForm(t *testing.T) {
	t.Parallel()
	prefixes := []string{identity.PrefixSession, identity.PrefixAgent, identity.PrefixApp, identity.PrefixRun}
	for i, a := range prefixes {
		for _, b := range prefixes[i+1:] {
			if strings.HasPrefix(a, b) || strings.HasPrefix(b, a) {
				t.Errorf("prefixes %q and %q overlap", a, b)
			}
		}
	}
	for tok, run := range map[string]bool{
		identity.PrefixRun + "abc":     true,
		identity.PrefixRun:             true,
		identity.PrefixAgent + "x":     false,
		strings.ToUpper("bothy_r_abc"): false,
		"x" + identity.PrefixRun:       false,
		"":                             false,
	} {
		if identity.IsRunToken(tok) != run {
			t.Errorf("IsRunToken(%q) = %v, want %v", tok, !run, run)
		}
	}
	svc := identity.NewService(nil, clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)))
	for _, tok := range []string{"", "secret", "Bearer bothy_s_abc", strings.ToUpper("bothy_s_abc"), "bothy_x_abc", "bothy_s", " bothy_s_abc"} {
		_, err := svc.Authenticate(context.Background(), tok)
		moduletest.WantProblem(t, fmt.Sprintf("token %q", tok), err, problem.Unauthorized, "")
	}
}

// TestContextCarriesPrincipalAndToken: the principal and the clear-text
// token of a request travel in its context, and a context without them
// says so.
func TestContextCarriesPrincipalAndToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, ok := identity.FromContext(ctx); ok {
		t.Fatal("an empty context carries a principal")
	}
	if _, ok := identity.TokenFromContext(ctx); ok {
		t.Fatal("an empty context carries a token")
	}
	sam := identity.Principal{ID: "sam-id", Kind: identity.KindUser, Handle: "sam"}
	ctx = identity.WithToken(identity.WithPrincipal(ctx, sam), identity.PrefixSession+"sam")
	if p, ok := identity.FromContext(ctx); !ok || p.ID != sam.ID {
		t.Fatalf("principal %+v %v", p, ok)
	}
	if tok, ok := identity.TokenFromContext(ctx); !ok || tok != identity.PrefixSession+"sam" {
		t.Fatalf("token %q %v", tok, ok)
	}
}
