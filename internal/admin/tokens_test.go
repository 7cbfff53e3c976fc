package admin_test

import (
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
)

// TestTokenRules covers createToken, listTokens and revokeToken at the
// service: self-service for people, refusals for somebody else's tokens
// (their token not found like a missing one), a refused negative TTL and a
// TTL of zero that never expires, revocation and expiry ending the token
// at once, revoking twice answering it unchanged, last_used_at written at
// most once a minute, and no secret stored outside its hash. The answers
// on the wire (REST shape, same 404 bodies, GraphQL types, logs) are
// TestAdminTokens in internal/server.
func TestTokenRules(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	ctx := t.Context()
	alex := env.Principal("alex")
	alexID := env.World.ID("alex")
	ttl := func(d time.Duration) *time.Duration { return &d }

	made, err := env.Admin.CreateToken(ctx, alex, alexID, "laptop", ttl(time.Hour))
	if err != nil || !strings.HasPrefix(made.Token, "bothy_s_") || made.Kind != identity.TokenSession || made.Label != "laptop" || made.ExpiresAt == nil {
		t.Fatalf("createToken %+v %v", made, err)
	}
	wantAlexAuth(t, env, "the new token", made.Token, true)
	list, err := env.Admin.ListTokens(ctx, alex, alexID)
	if err != nil || len(list) != 2 || list[0].ID != made.ID || list[0].LastUsedAt == nil {
		t.Fatalf("tokens %+v %v", list, err)
	}
	firstUse := *list[0].LastUsedAt

	checkLastUsedOncePerMinute(t, env, made, firstUse)

	samTok := checkOthersTokens(t, env)

	// A negative TTL is refused; ttl 0 never expires.
	_, err = env.Admin.CreateToken(ctx, alex, alexID, "", ttl(-5*time.Second))
	moduletest.WantProblem(t, "negative ttl", err, problem.ValidationFailed, "")
	forever, err := env.Admin.CreateToken(ctx, alex, alexID, "", ttl(0))
	if err != nil || forever.ExpiresAt != nil {
		t.Fatalf("ttl 0 expires: %+v %v", forever, err)
	}

	// Revoked: refused at once; revoking twice answers it unchanged.
	checkRevokeTwice(t, env, made)
	// Expired: refused once its time has passed.
	short, err := env.Admin.CreateToken(ctx, alex, alexID, "", ttl(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	wantAlexAuth(t, env, "a fresh short token", short.Token, true)
	env.Clock.Advance(61 * time.Second)
	wantAlexAuth(t, env, "an expired token", short.Token, false)
	// Agents have no self-service: subject_kind_not_allowed.
	lotseID := env.World.ID("lotse")
	_, err = env.Admin.ListTokens(ctx, env.Principal("lotse"), lotseID)
	moduletest.WantProblem(t, "agent lists", err, problem.Forbidden, "subject_kind_not_allowed")

	wantNoSecretStored(t, env, made.Token, samTok.Token, forever.Token, short.Token)
}

// checkRevokeTwice revokes alex's token made: it is refused at once, and
// revoking it again answers it unchanged (the same revoked_at).
func checkRevokeTwice(t *testing.T, env *moduletest.Env, made identity.IssuedToken) {
	t.Helper()
	ctx, alex := t.Context(), env.Principal("alex")
	rev, err := env.Admin.RevokeToken(ctx, alex, made.ID)
	if err != nil || rev.RevokedAt == nil || rev.ID != made.ID {
		t.Fatalf("revokeToken %+v %v", rev, err)
	}
	wantAlexAuth(t, env, "a revoked token", made.Token, false)
	again, err := env.Admin.RevokeToken(ctx, alex, made.ID)
	if err != nil || again.RevokedAt == nil || !again.RevokedAt.Equal(*rev.RevokedAt) {
		t.Fatalf("second revoke changed the token: %+v %v", again, err)
	}
}

// wantAlexAuth fails the test unless secret authenticates alex (ok) or is
// refused unauthorized (not ok).
func wantAlexAuth(t *testing.T, env *moduletest.Env, what, secret string, ok bool) {
	t.Helper()
	p, err := env.Identity.Authenticate(t.Context(), secret)
	if ok && (err != nil || p.ID != env.World.ID("alex")) {
		t.Fatalf("%s: %+v %v", what, p, err)
	}
	if !ok {
		moduletest.WantProblem(t, what, err, problem.Unauthorized, "")
	}
}

// checkLastUsedOncePerMinute checks that authenticating with alex's token
// made moves its last_used_at (firstUse until now) at most once a minute.
func checkLastUsedOncePerMinute(t *testing.T, env *moduletest.Env, made identity.IssuedToken, firstUse time.Time) {
	t.Helper()
	ctx, alex, alexID := t.Context(), env.Principal("alex"), env.World.ID("alex")
	lastUsed := func() time.Time {
		t.Helper()
		list, err := env.Admin.ListTokens(ctx, alex, alexID)
		if err != nil || list[0].ID != made.ID || list[0].LastUsedAt == nil {
			t.Fatalf("tokens %+v %v", list, err)
		}
		return *list[0].LastUsedAt
	}
	env.Clock.Advance(30 * time.Second)
	wantAlexAuth(t, env, "half a minute later", made.Token, true)
	if got := lastUsed(); !got.Equal(firstUse) {
		t.Fatalf("last_used_at moved within a minute: %s -> %s", firstUse, got)
	}
	env.Clock.Advance(31 * time.Second)
	wantAlexAuth(t, env, "a minute later", made.Token, true)
	if got := lastUsed(); got.Equal(firstUse) {
		t.Fatalf("last_used_at did not move after a minute: %s", got)
	}
}

// checkOthersTokens checks somebody else's tokens: alex may neither list
// nor create sam's tokens, and sam's token is not found for alex like a
// missing one; an owner may create one. It returns the token robin made
// for sam.
func checkOthersTokens(t *testing.T, env *moduletest.Env) identity.IssuedToken {
	t.Helper()
	ctx, alex, robin, samID := t.Context(), env.Principal("alex"), env.Principal("robin"), env.World.ID("sam")
	_, err := env.Admin.ListTokens(ctx, alex, samID)
	moduletest.WantProblem(t, "alex lists sam's", err, problem.Forbidden, "level_insufficient")
	_, err = env.Admin.CreateToken(ctx, alex, samID, "", nil)
	moduletest.WantProblem(t, "alex creates for sam", err, problem.Forbidden, "level_insufficient")
	samTok, err := env.Admin.CreateToken(ctx, robin, samID, "by robin", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, hidden := env.Admin.RevokeToken(ctx, alex, samTok.ID)
	moduletest.WantProblem(t, "alex revokes sam's", hidden, problem.NotFound, "")
	_, missing := env.Admin.RevokeToken(ctx, alex, "01a22de8-0000-7000-8000-000000000000")
	moduletest.WantProblem(t, "alex revokes a missing token", missing, problem.NotFound, "")
	if h, m := problem.From("admin.testTokenRules", hidden), problem.From("admin.testTokenRules", missing); h.Reason != m.Reason || h.Detail != m.Detail {
		t.Fatalf("another's token and a missing one differ: %v / %v", hidden, missing)
	}
	return samTok
}

// wantNoSecretStored fails the test when any of secrets is stored outside
// its hash, in the event log or the audit log.
func wantNoSecretStored(t *testing.T, env *moduletest.Env, secrets ...string) {
	t.Helper()
	// No secret is stored outside its hash.
	for _, s := range secrets {
		if env.Count(`SELECT count(*) FROM event_log WHERE payload::text LIKE '%' || $1 || '%'`, s) != 0 ||
			env.Count(`SELECT count(*) FROM audit_log WHERE row_to_json(audit_log)::text LIKE '%' || $1 || '%'`, s) != 0 {
			t.Fatal("a token secret was stored outside its hash")
		}
	}
}
