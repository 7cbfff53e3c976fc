package identity_test

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
)

// issue creates a token of p with ttl and fails the test when it cannot.
func issue(t *testing.T, env *moduletest.Env, p identity.Principal, label string, ttl time.Duration) identity.IssuedToken {
	t.Helper()
	it, err := env.Writers.Identity.CreateToken(t.Context(), p, label, ttl)
	if err != nil {
		t.Fatalf("token %q of %s: %v", label, p.Handle, err)
	}
	return it
}

// wantAuth fails the test unless tok authenticates as the principal with
// id.
func wantAuth(t *testing.T, env *moduletest.Env, what, tok, id string) identity.Principal {
	t.Helper()
	p, err := env.Identity.Authenticate(t.Context(), tok)
	if err != nil || p.ID != id {
		t.Fatalf("%s: authenticates as %q (%v), want %s", what, p.ID, err, id)
	}
	return p
}

// TestTokens proves the rules of tokens and authentication on one
// database, one rule a subtest, in order; each subtest reads the clock as
// it finds it and changes only principals and tokens of its own.
func TestTokens(t *testing.T) {
	t.Parallel()
	counter := &batchCounter{}
	env := moduletest.Build(t, moduletest.Options{Tracer: counter})
	t.Run("kind follows the principal", func(t *testing.T) { tokenKindFollowsPrincipalKind(t, env) })
	t.Run("refusals are alike", func(t *testing.T) { refusalsAreAlike(t, env) })
	t.Run("expiry", func(t *testing.T) { tokenExpiry(t, env) })
	t.Run("last use", func(t *testing.T) { lastUsedGranularity(t, env) })
	t.Run("many", func(t *testing.T) { authenticateMany(t, env) })
	t.Run("bookkeeping", func(t *testing.T) { tokenBookkeeping(t, env) })
	t.Run("live tokens", func(t *testing.T) { liveTokens(t, env, counter) })
}

// person creates an active person with handle h and a token for them.
func person(t *testing.T, env *moduletest.Env, h string) (identity.Principal, string) {
	t.Helper()
	p, err := env.Writers.Identity.CreatePrincipal(t.Context(), identity.NewPrincipal{Kind: identity.KindUser, Handle: h, DisplayName: "Somebody"})
	if err != nil {
		t.Fatal(err)
	}
	return p, issue(t, env, p, h, 0).Token
}

// setStatus sets the status of principal id.
func setStatus(t *testing.T, env *moduletest.Env, id string, st identity.Status) {
	t.Helper()
	if err := env.Writers.Identity.SetStatus(t.Context(), id, st); err != nil {
		t.Fatal(err)
	}
}

// tokenKindFollowsPrincipalKind: a person's token is a session token
// (bothy_s_), an agent's an agent token (bothy_a_), an app's an app token
// (bothy_p_); each authenticates as its principal, has 32 random bytes
// after its prefix, and is stored only as its SHA-256 hash. A negative
// lifetime is refused and stores nothing.
func tokenKindFollowsPrincipalKind(t *testing.T, env *moduletest.Env) {
	ctx := t.Context()
	cases := []struct {
		handle string
		kind   identity.TokenKind
		prefix string
	}{
		{"alex", identity.TokenSession, identity.PrefixSession},
		{"lotse", identity.TokenAgent, identity.PrefixAgent},
		{"feedbot", identity.TokenApp, identity.PrefixApp},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		p := env.Principal(c.handle)
		it := issue(t, env, p, "laptop of "+c.handle, 0)
		if it.Kind != c.kind || !strings.HasPrefix(it.Token, c.prefix) || len(it.Token) != len(c.prefix)+43 ||
			it.Label != "laptop of "+c.handle || it.ExpiresAt != nil || !it.CreatedAt.Equal(env.Clock.Now()) || seen[it.Token] {
			t.Fatalf("%s: issued %+v", c.handle, it)
		}
		seen[it.Token] = true
		wantAuth(t, env, c.handle, it.Token, p.ID)
		wantTokenStored(t, env, c.handle, it, c.kind, p.ID)
	}
	before := env.Count(`SELECT count(*) FROM tokens`)
	_, err := env.Writers.Identity.CreateToken(ctx, env.Principal("alex"), "", -time.Second)
	moduletest.WantProblem(t, "a negative lifetime", err, problem.ValidationFailed, "")
	if env.Count(`SELECT count(*) FROM tokens`) != before {
		t.Fatal("a refused token was stored")
	}
}

// wantTokenStored checks how the token it, just issued to principalID
// (handle), is stored: GetToken finds it live with its kind, principal
// and label, and the table holds its SHA-256 hash, never its clear text.
func wantTokenStored(t *testing.T, env *moduletest.Env, handle string, it identity.IssuedToken, kind identity.TokenKind, principalID string) {
	t.Helper()
	info, err := env.Identity.GetToken(t.Context(), it.ID)
	if err != nil || info.Kind != kind || info.PrincipalID != principalID || info.Label != it.Label || info.ExpiresAt != nil || info.RevokedAt != nil {
		t.Fatalf("%s: stored %+v %v", handle, info, err)
	}
	hash := sha256.Sum256([]byte(it.Token))
	if n := env.Count(`SELECT count(*) FROM tokens WHERE id = $1 AND hash = $2`, it.ID, hash[:]); n != 1 {
		t.Fatalf("%s: the token is not stored as its hash", handle)
	}
	if n := env.Count(`SELECT count(*) FROM tokens WHERE row_to_json(tokens)::text LIKE '%' || $1 || '%'`, it.Token); n != 0 {
		t.Fatalf("%s: the clear text is stored", handle)
	}
}

// refusalsAreAlike: an unknown, revoked, expired or malformed token, and
// the token of a disabled, pending or deleted principal, are all refused
// with the same bare unauthorized, so the answer never says which it was;
// disabling a principal revokes nothing, so its token authenticates again
// once it is active.
func refusalsAreAlike(t *testing.T, env *moduletest.Env) {
	ctx := t.Context()
	alex := env.Principal("alex")
	revoked := issue(t, env, alex, "revoked", 0)
	if err := env.Writers.Identity.RevokeToken(ctx, revoked.Token); err != nil {
		t.Fatal(err)
	}
	expiring := issue(t, env, alex, "expiring", time.Minute)
	pendingP, err := env.Writers.Identity.CreatePrincipal(ctx, identity.NewPrincipal{Kind: identity.KindUser, Handle: "sam-pending", DisplayName: "Sam", Status: identity.StatusPending})
	if err != nil {
		t.Fatal(err)
	}
	pending := issue(t, env, pendingP, "pending", 0).Token
	deletedP, deleted := person(t, env, "sam-deleted")
	setStatus(t, env, deletedP.ID, identity.StatusDeleted)
	disabledP, disabled := person(t, env, "sam-disabled")
	setStatus(t, env, disabledP.ID, identity.StatusDisabled)
	env.Clock.Advance(time.Minute)

	refused := []struct{ what, tok string }{
		{"unknown", identity.PrefixSession + strings.Repeat("A", 43)},
		{"revoked", revoked.Token},
		{"expired", expiring.Token},
		{"malformed", "bothy_s"},
		{"a disabled person's", disabled},
		{"a pending person's", pending},
		{"a deleted person's", deleted},
	}
	var first string
	for _, r := range refused {
		_, until, err := env.Identity.AuthenticateUntil(ctx, r.tok)
		p := problem.From("identity.refusalsAreAlike", err)
		if err == nil || p.Code != problem.Unauthorized || p.Reason != "" || p.Detail != "" || len(p.Fields) != 0 || until != nil {
			t.Fatalf("%s token: %#v (until %v), want a bare unauthorized", r.what, p, until)
		}
		if first == "" {
			first = p.Error()
		} else if p.Error() != first {
			t.Fatalf("%s token answers %q, the unknown one %q", r.what, p.Error(), first)
		}
	}
	setStatus(t, env, disabledP.ID, identity.StatusActive)
	wantAuth(t, env, "enabled again", disabled, disabledP.ID)
}

// tokenExpiry: a token with a lifetime authenticates until the moment
// it expires and not at that moment, and AuthenticateUntil names that
// moment; a token without a lifetime never expires.
func tokenExpiry(t *testing.T, env *moduletest.Env) {
	ctx := t.Context()
	alex := env.Principal("alex")
	short := issue(t, env, alex, "short", time.Minute)
	forever := issue(t, env, alex, "forever", 0)
	if want := env.Clock.Now().Add(time.Minute); short.ExpiresAt == nil || !short.ExpiresAt.Equal(want) {
		t.Fatalf("expires at %v, want %v", short.ExpiresAt, want)
	}
	env.Clock.Advance(time.Minute - time.Microsecond)
	p, until, err := env.Identity.AuthenticateUntil(ctx, short.Token)
	if err != nil || p.ID != alex.ID || until == nil || !until.Equal(*short.ExpiresAt) {
		t.Fatalf("just before its end: %+v until %v (%v)", p, until, err)
	}
	if _, until, err := env.Identity.AuthenticateUntil(ctx, forever.Token); err != nil || until != nil {
		t.Fatalf("a token without lifetime: until %v (%v)", until, err)
	}
	env.Clock.Advance(time.Microsecond)
	_, err = env.Identity.Authenticate(ctx, short.Token)
	moduletest.WantProblem(t, "at its end", err, problem.Unauthorized, "")
	env.Clock.Advance(10 * 365 * 24 * time.Hour)
	wantAuth(t, env, "ten years on", forever.Token, alex.ID)
}

// lastUsedGranularity: authenticating writes last_used_at, then again
// only once LastUsedGranularity has passed since the stored use (at that
// moment exactly, not a second before); AuthenticateMany records no use.
func lastUsedGranularity(t *testing.T, env *moduletest.Env) {
	ctx := t.Context()
	tok := issue(t, env, env.Principal("alex"), "laptop", 0)
	start := env.Clock.Now()
	lastUsed := func() *time.Time {
		t.Helper()
		info, err := env.Identity.GetToken(ctx, tok.ID)
		if err != nil {
			t.Fatal(err)
		}
		return info.LastUsedAt
	}
	if lastUsed() != nil {
		t.Fatal("a new token has a last use")
	}
	steps := []struct {
		advance time.Duration
		want    time.Time // the stored last use after authenticating
	}{
		{0, start},
		{identity.LastUsedGranularity - time.Second, start},
		{time.Second, start.Add(identity.LastUsedGranularity)},
		{time.Second, start.Add(identity.LastUsedGranularity)},
		{identity.LastUsedGranularity, start.Add(2*identity.LastUsedGranularity + time.Second)},
	}
	for i, s := range steps {
		env.Clock.Advance(s.advance)
		wantAuth(t, env, "alex", tok.Token, env.World.ID("alex"))
		if got := lastUsed(); got == nil || !got.Equal(s.want) {
			t.Fatalf("step %d (clock %s): last used %v, want %s", i, env.Clock.Now().Format(time.TimeOnly), got, s.want.Format(time.TimeOnly))
		}
	}
	env.Clock.Advance(time.Hour)
	if held, err := env.Identity.AuthenticateMany(ctx, []string{tok.Token}); err != nil || len(held) != 1 {
		t.Fatalf("AuthenticateMany %v %v", held, err)
	}
	if got := lastUsed(); !got.Equal(steps[len(steps)-1].want) {
		t.Fatalf("AuthenticateMany recorded a use: %v", got)
	}
}

// authenticateMany: many tokens are decided as Authenticate decides
// each: the answer holds exactly the live tokens of active principals,
// keyed by the token, however often a token is asked about; an empty
// question has an empty answer.
func authenticateMany(t *testing.T, env *moduletest.Env) {
	ctx := t.Context()
	alex := env.Principal("alex")
	revoked := issue(t, env, alex, "revoked", 0)
	if _, err := env.Writers.Identity.RevokeTokenByID(ctx, revoked.ID); err != nil {
		t.Fatal(err)
	}
	expired := issue(t, env, alex, "expired", time.Second)
	disabledP, disabled := person(t, env, "alex-disabled")
	setStatus(t, env, disabledP.ID, identity.StatusDisabled)
	env.Clock.Advance(time.Second)
	alexTok, robinTok, lotseTok := env.World.Token("alex"), env.World.Token("robin"), env.World.Token("lotse")
	held, err := env.Identity.AuthenticateMany(ctx, []string{
		alexTok, robinTok, lotseTok, alexTok, revoked.Token, expired.Token, disabled,
		identity.PrefixSession + strings.Repeat("A", 43), "", "junk",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{alexTok: "alex", robinTok: "robin", lotseTok: "lotse"}
	if len(held) != len(want) {
		t.Fatalf("held %d tokens, want %d: %+v", len(held), len(want), held)
	}
	for tok, h := range want {
		p := held[tok]
		if p.ID != env.World.ID(h) || p.Handle != h || !p.Active() || p.RunID != "" || !p.CreatedAt.Equal(env.Principal(h).CreatedAt) {
			t.Fatalf("%s: %+v", h, p)
		}
	}
	if none, err := env.Identity.AuthenticateMany(ctx, nil); err != nil || len(none) != 0 {
		t.Fatalf("no tokens: %v %v", none, err)
	}
}

// tokenBookkeeping: a principal's tokens are listed newest first with
// revoked and expired ones; revoking by id answers the token revoked now,
// and revoking it again answers it unchanged; revoking by clear text
// twice, or an unknown token, is ErrNotFound; GetToken of an unknown or
// malformed id is ErrNotFound.
func tokenBookkeeping(t *testing.T, env *moduletest.Env) {
	ctx := t.Context()
	sam := env.Principal("sam")
	older := issue(t, env, sam, "older", time.Minute)
	env.Clock.Advance(time.Hour)
	newer := issue(t, env, sam, "newer", 0)
	list, err := env.Identity.ListTokens(ctx, sam.ID)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, tk := range list {
		order = append(order, tk.Label)
	}
	if got := strings.Join(order, ","); got != "newer,older,example world" {
		// The world's token of Sam is the oldest.
		t.Fatalf("tokens listed %q, want newest first with the expired one", got)
	}

	wantRevokedByID(t, env, newer.ID)
	if err := env.Writers.Identity.RevokeToken(ctx, older.Token); err != nil {
		t.Fatal(err)
	}
	for what, tok := range map[string]string{"twice": older.Token, "unknown": identity.PrefixSession + "nothing"} {
		if err := env.Writers.Identity.RevokeToken(ctx, tok); !errors.Is(err, identity.ErrNotFound) {
			t.Fatalf("revoke %s: %v, want ErrNotFound", what, err)
		}
	}
	for _, id := range []string{ids.New(), "junk"} {
		if _, err := env.Identity.GetToken(ctx, id); !errors.Is(err, identity.ErrNotFound) {
			t.Fatalf("GetToken(%q): %v", id, err)
		}
	}
}

// wantRevokedByID revokes token id by its id and checks that the answer
// is the token revoked now, and that revoking it again a minute later
// answers it unchanged.
func wantRevokedByID(t *testing.T, env *moduletest.Env, id string) {
	t.Helper()
	ctx := t.Context()
	rev, err := env.Writers.Identity.RevokeTokenByID(ctx, id)
	if err != nil || rev.ID != id || rev.RevokedAt == nil || !rev.RevokedAt.Equal(env.Clock.Now()) {
		t.Fatalf("revoked %+v %v", rev, err)
	}
	env.Clock.Advance(time.Minute)
	again, err := env.Writers.Identity.RevokeTokenByID(ctx, id)
	if err != nil || again.RevokedAt == nil || !again.RevokedAt.Equal(*rev.RevokedAt) {
		t.Fatalf("revoked again %+v %v, want unchanged", again, err)
	}
}
