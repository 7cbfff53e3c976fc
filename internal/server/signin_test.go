package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/oauth2-proxy/mockoidc"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
)

// provider is an in-process OpenID Connect provider (mockoidc) for the
// sign-in tests; it signs in whichever user the test queued last.
func provider(t *testing.T) *mockoidc.MockOIDC {
	t.Helper()
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Shutdown() })
	return m
}

// signInEnv starts a server whose people sign in at m, with extra config.
func signInEnv(t *testing.T, m *mockoidc.MockOIDC, extra map[string]string) *apitest.Env {
	t.Helper()
	cfg := map[string]string{
		config.AuthOIDCIssuer: m.Issuer(), config.AuthOIDCClientID: m.Config().ClientID,
		config.AuthOIDCClientSecret: m.Config().ClientSecret, config.HTTPPublicURL: "https://chat.example.com",
	}
	for k, v := range extra {
		cfg[k] = v
	}
	return apitest.Start(t, apitest.Options{Config: cfg})
}

// noRedirects is a client that hands back every redirect instead of
// following it: the test plays the browser.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// signIn plays a browser's sign-in as user: /auth/login, the provider's
// authorization endpoint, then /auth/callback with the code and state the
// provider redirected with (to http.public_url, which the test server does
// not listen on). It returns the callback's response.
func signIn(t *testing.T, env *apitest.Env, m *mockoidc.MockOIDC, user *mockoidc.MockUser) *http.Response {
	t.Helper()
	login := browse(t, env.URL+"/auth/login")
	if login.StatusCode != http.StatusFound {
		t.Fatalf("/auth/login: %d %s", login.StatusCode, body(t, login))
	}
	auth, err := url.Parse(login.Header.Get("Location"))
	if err != nil || !strings.HasPrefix(auth.String(), m.AuthorizationEndpoint()) {
		t.Fatalf("/auth/login sent the browser to %q, want the provider", login.Header.Get("Location"))
	}
	q := auth.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("nonce") == "" || q.Get("state") == "" ||
		q.Get("redirect_uri") != "https://chat.example.com/auth/callback" {
		t.Fatalf("authorization request %v: want PKCE (S256), a nonce, a state and the public callback", q)
	}
	m.QueueUser(user)
	back := browse(t, auth.String())
	cb, err := url.Parse(back.Header.Get("Location"))
	if err != nil || back.StatusCode != http.StatusFound {
		t.Fatalf("the provider answered %d, Location %q", back.StatusCode, back.Header.Get("Location"))
	}
	return browse(t, env.URL+"/auth/callback?"+cb.RawQuery)
}

func browse(t *testing.T, u string) *http.Response {
	t.Helper()
	resp, err := noRedirects.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, _ := io.ReadAll(r.Body)
	return string(b)
}

// sessionOf returns the session token a successful callback hands the
// playground in the fragment.
func sessionOf(t *testing.T, r *http.Response) string {
	t.Helper()
	loc := r.Header.Get("Location")
	if r.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/playground#session=bothy_s_") {
		t.Fatalf("callback: %d, Location %q, %s; want 303 to the playground with a session token", r.StatusCode, loc, body(t, r))
	}
	return strings.TrimPrefix(loc, "/playground#session=")
}

// wantRefusal fails unless r is a problem with status and reason.
func wantRefusal(t *testing.T, what string, r *http.Response, status int, reason string) {
	t.Helper()
	var p apitest.Problem
	b := body(t, r)
	if r.StatusCode != status || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/problem+json") || json.Unmarshal([]byte(b), &p) != nil || p.Reason != reason {
		t.Fatalf("%s: %d %s, want %d with reason %s", what, r.StatusCode, b, status, reason)
	}
	if strings.Contains(b, "bothy_s_") {
		t.Fatalf("%s: a refusal carries a token: %s", what, b)
	}
}

// viewer returns the handle the token authenticates as.
func viewer(t *testing.T, env *apitest.Env, tok string) string {
	t.Helper()
	r := env.REST(http.MethodGet, "/api/v1/me", tok, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("viewer: %d %s", r.Status, r.Body)
	}
	var v struct{ Handle string }
	r.JSON(t, &v)
	return v.Handle
}

// testSignIn: a person signs in through the provider (code flow with PKCE
// and a nonce) and gets a session token of their own, source oidc; the
// first sign-in links the account by the verified address, later ones
// find the person by the account alone; the state works once; whoever
// the server does not know, or the provider does not vouch for, is
// refused without a token.
func testSignIn(t *testing.T) {
	t.Parallel()
	m := provider(t)
	env := signInEnv(t, m, map[string]string{config.AuthOIDCAllowedDomains: "example.com"})
	alex := &mockoidc.MockUser{Subject: "idp-alex", Email: "Alex@example.com", EmailVerified: true}

	tok := sessionOf(t, signIn(t, env, m, alex))
	if h := viewer(t, env, tok); h != "alex" {
		t.Fatalf("the session signs in as %q, want alex", h)
	}
	if n := env.Count(`SELECT count(*) FROM tokens t JOIN principals p ON p.id = t.principal_id
		WHERE p.handle = 'alex' AND t.kind = 'session' AND t.source = 'oidc' AND t.expires_at IS NOT NULL`); n != 1 {
		t.Fatalf("%d oidc sessions of alex with an expiry, want 1", n)
	}
	// Linked: the account signs in as Alex even with another address.
	moved := &mockoidc.MockUser{Subject: "idp-alex", Email: "alex.renamed@example.com", EmailVerified: true}
	if h := viewer(t, env, sessionOf(t, signIn(t, env, m, moved))); h != "alex" {
		t.Fatalf("a linked account signed in as %q", h)
	}

	for _, c := range []struct {
		name   string
		user   *mockoidc.MockUser
		status int
		reason string
	}{
		{"unknown person", &mockoidc.MockUser{Subject: "idp-x", Email: "nobody@example.com", EmailVerified: true}, http.StatusForbidden, "person_unknown"},
		{"address not verified", &mockoidc.MockUser{Subject: "idp-sam", Email: "sam@example.com"}, http.StatusForbidden, "email_not_allowed"},
		{"domain not allowed", &mockoidc.MockUser{Subject: "idp-y", Email: "sam@elsewhere.example.org", EmailVerified: true}, http.StatusForbidden, "email_not_allowed"},
	} {
		wantRefusal(t, c.name, signIn(t, env, m, c.user), c.status, c.reason)
	}

	// A disabled person is refused like an unknown one.
	env.MustREST(t, http.MethodPatch, "/api/v1/principals/"+env.World.ID("writer"), env.World.Token("robin"), map[string]any{"status": "disabled"}, 200)
	wantRefusal(t, "disabled person", signIn(t, env, m, &mockoidc.MockUser{Subject: "idp-writer", Email: "writer@example.com", EmailVerified: true}),
		http.StatusForbidden, "person_unknown")

	// The state works once, and only a state the server gave out.
	login := browse(t, env.URL+"/auth/login")
	auth, _ := url.Parse(login.Header.Get("Location"))
	m.QueueUser(&mockoidc.MockUser{Subject: "idp-sam", Email: "sam@example.com", EmailVerified: true})
	cb, _ := url.Parse(browse(t, auth.String()).Header.Get("Location"))
	sessionOf(t, browse(t, env.URL+"/auth/callback?"+cb.RawQuery))
	wantRefusal(t, "a used state", browse(t, env.URL+"/auth/callback?"+cb.RawQuery), http.StatusBadRequest, "")
	wantRefusal(t, "a made-up state", browse(t, env.URL+"/auth/callback?code=x&state=forged"), http.StatusBadRequest, "")
	wantRefusal(t, "the provider's refusal", browse(t, env.URL+"/auth/callback?error=access_denied&state=x"), http.StatusForbidden, "signin_refused")
	if n := env.Count(`SELECT count(*) FROM principals`); n != len(env.World.Principals) {
		t.Fatalf("%d principals after refused sign-ins, want the world's %d", n, len(env.World.Principals))
	}
}

// testSignInCreatesPeople: with auth.oidc.create_people, an unknown person
// of an allowed domain comes in as a new person without grants, the
// handle from the address (with a number when taken); another domain is
// still refused.
func testSignInCreatesPeople(t *testing.T) {
	t.Parallel()
	m := provider(t)
	env := signInEnv(t, m, map[string]string{config.AuthOIDCCreatePeople: "true", config.AuthOIDCAllowedDomains: "example.com, Example.org"})
	tok := sessionOf(t, signIn(t, env, m, &mockoidc.MockUser{Subject: "idp-kim", Email: "kim@example.com", EmailVerified: true}))
	if h := viewer(t, env, tok); h != "kim" {
		t.Fatalf("the new person is %q, want kim", h)
	}
	// The handle sam is taken: another person whose address starts so
	// gets sam2.
	other := &mockoidc.MockUser{Subject: "idp-sam-org", Email: "sam@example.org", EmailVerified: true}
	if h := viewer(t, env, sessionOf(t, signIn(t, env, m, other))); h != "sam2" {
		t.Fatalf("a new person with the address sam@example.org is %q, want sam2", h)
	}
	tok = sessionOf(t, signIn(t, env, m, &mockoidc.MockUser{Subject: "idp-kim-2", Email: "Kim@Example.com", EmailVerified: true}))
	if h := viewer(t, env, tok); h != "kim" {
		t.Fatalf("kim's address from another account signed in as %q, want kim", h)
	}
	if n := env.Count(`SELECT count(*) FROM grants g JOIN principals p ON p.id = g.subject_principal_id WHERE p.handle = 'kim'`); n != 0 {
		t.Fatalf("a created person has %d grants", n)
	}
	wantRefusal(t, "another domain", signIn(t, env, m, &mockoidc.MockUser{Subject: "idp-z", Email: "z@elsewhere.example.net", EmailVerified: true}),
		http.StatusForbidden, "email_not_allowed")
}

// TestSignInFlow runs the tests of sign-in through the provider as subtests: one
// top-level test per area keeps internal/server's list short enough to
// read (fewer than 80 top-level tests, issue 48).
func TestSignInFlow(t *testing.T) {
	t.Run("SignIn", testSignIn)
	t.Run("SignInCreatesPeople", testSignInCreatesPeople)
}
