package server_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/signin/signintest"
)

// deviceStart starts a device sign-in at the server (POST /auth/device)
// and returns its answer.
func deviceStart(t *testing.T, env *apitest.Env) map[string]any {
	t.Helper()
	resp, err := http.Post(env.URL+"/auth/device", "application/x-www-form-urlencoded", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
		t.Fatalf("POST /auth/device: %d", resp.StatusCode)
	}
	for _, k := range []string{"device_code", "user_code", "verification_uri"} {
		if s, _ := out[k].(string); s == "" {
			t.Fatalf("POST /auth/device answered no %s: %v", k, out)
		}
	}
	if out["interval"] != 1.0 || out["expires_in"] == nil {
		t.Fatalf("POST /auth/device: interval %v, expires_in %v; want the provider's", out["interval"], out["expires_in"])
	}
	return out
}

// devicePoll asks the server once for the device sign-in's token.
func devicePoll(t *testing.T, env *apitest.Env, code string) *http.Response {
	t.Helper()
	resp, err := http.PostForm(env.URL+"/auth/device/token", url.Values{"device_code": {code}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// wantOAuthError fails unless r is an RFC 8628 error answer with code.
func wantOAuthError(t *testing.T, what string, r *http.Response, code string) {
	t.Helper()
	var e struct{ Error string }
	b := body(t, r)
	if r.StatusCode != http.StatusBadRequest || json.Unmarshal([]byte(b), &e) != nil || e.Error != code {
		t.Fatalf("%s: %d %s, want 400 with error %s", what, r.StatusCode, b, code)
	}
}

// deviceSignIn signs user in through the device grant and returns the
// session token.
func deviceSignIn(t *testing.T, env *apitest.Env, p *signintest.Provider, user *mockoidc.MockUser) string {
	t.Helper()
	d := deviceStart(t, env)
	if !p.Approve(d["user_code"].(string), user) {
		t.Fatal("the provider does not know the user code")
	}
	return deviceToken(t, devicePoll(t, env, d["device_code"].(string)))
}

// deviceToken returns the session token of a successful token answer.
func deviceToken(t *testing.T, r *http.Response) string {
	t.Helper()
	var tr struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
	}
	b := body(t, r)
	if r.StatusCode != http.StatusOK || json.Unmarshal([]byte(b), &tr) != nil || !strings.HasPrefix(tr.AccessToken, "bothy_s_") || tr.TokenType != "Bearer" {
		t.Fatalf("device token: %d %s, want a session token", r.StatusCode, b)
	}
	return tr.AccessToken
}

// testLoginDevice: the command line's sign-in through the device grant.
// The server starts it at the provider, passes the provider's pending
// answers through (authorization_pending, slow_down, access_denied) and,
// once the person approved, answers a session token (source oidc) of the
// person found as the browser sign-in finds them; a code works once;
// POST /auth/logout revokes the session it carries.
func testLoginDevice(t *testing.T) {
	t.Parallel()
	p := signintest.Start(t)
	env := signInEnv(t, p.MockOIDC, map[string]string{config.AuthOIDCAllowedDomains: "example.com"})
	alex := &mockoidc.MockUser{Subject: "idp-alex", Email: "alex@example.com", EmailVerified: true}

	d := deviceStart(t, env)
	code := d["device_code"].(string)
	wantOAuthError(t, "before the approval", devicePoll(t, env, code), "authorization_pending")
	wantOAuthError(t, "polled at once again", devicePoll(t, env, code), "slow_down")
	p.Approve(d["user_code"].(string), alex)
	time.Sleep(time.Second)
	tok := deviceToken(t, devicePoll(t, env, code))
	if h := viewer(t, env, tok); h != "alex" {
		t.Fatalf("the device session signs in as %q, want alex", h)
	}
	if n := env.Count(`SELECT count(*) FROM tokens t JOIN principals p ON p.id = t.principal_id
		WHERE p.handle = 'alex' AND t.kind = 'session' AND t.source = 'oidc' AND t.label = 'bothy login'`); n != 1 {
		t.Fatalf("%d device sessions of alex, want 1", n)
	}
	wantRefusal(t, "a used device code", devicePoll(t, env, code), http.StatusForbidden, "signin_failed")
	wantOAuthError(t, "no device code", devicePoll(t, env, ""), "invalid_request")

	denied := deviceStart(t, env)
	p.Deny(denied["user_code"].(string))
	wantOAuthError(t, "declined", devicePoll(t, env, denied["device_code"].(string)), "access_denied")

	unknown := deviceStart(t, env)
	p.Approve(unknown["user_code"].(string), &mockoidc.MockUser{Subject: "idp-x", Email: "nobody@example.com", EmailVerified: true})
	wantRefusal(t, "unknown person", devicePoll(t, env, unknown["device_code"].(string)), http.StatusForbidden, "person_unknown")

	// Logout ends the session; an owner's token is not the command's to end.
	req, _ := http.NewRequest(http.MethodPost, env.URL+"/auth/logout", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("logout: %v %v", err, resp)
	}
	resp.Body.Close()
	if r := env.REST(http.MethodGet, "/api/v1/me", tok, nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("a session after logout: %d", r.Status)
	}
	req.Header.Set("Authorization", "Bearer "+env.World.Token("alex"))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("logout with an owner's token: %v %v, want 401", err, resp)
	}
	viewer(t, env, env.World.Token("alex"))
}

// testSignInLeavers: every auth.oidc.recheck_interval the server refreshes
// each live sign-in session at the provider. A provider that fails
// changes nothing; a refusal (invalid_grant) revokes all the person's
// sign-in sessions, browser and command line, and disables the person, so
// the token an owner made for them answers 401 too.
func testSignInLeavers(t *testing.T) {
	t.Parallel()
	p := signintest.Start(t)
	env := signInEnv(t, p.MockOIDC, map[string]string{config.AuthOIDCRecheckInterval: "1s"})
	alex := &mockoidc.MockUser{Subject: "idp-alex", Email: "alex@example.com", EmailVerified: true}
	browser := sessionOf(t, signIn(t, env, p.MockOIDC, alex))
	cli := deviceSignIn(t, env, p, alex)
	if n := env.Count(`SELECT count(*) FROM signin_refresh`); n != 2 {
		t.Fatalf("%d refresh tokens kept, want one per session (2)", n)
	}

	// A pass that succeeds records the check; both sessions work on.
	start := env.Clock.Now()
	env.Clock.Advance(2 * time.Second)
	waitFor(t, "a recheck pass", func() bool {
		return env.Count(`SELECT count(*) FROM signin_refresh WHERE checked_at > '`+start.Format(time.RFC3339Nano)+`'`) == 2
	})
	// The provider fails (not a refusal): nothing is revoked.
	p.QueueError(&mockoidc.ServerError{Code: http.StatusInternalServerError, Error: "server_error", Description: "down"})
	env.Clock.Advance(2 * time.Second)
	waitFor(t, "the queued failure to be served", func() bool {
		p.ErrorQueue.Lock()
		defer p.ErrorQueue.Unlock()
		return len(p.ErrorQueue.Queue) == 0
	})
	for _, tok := range []string{browser, cli} {
		if h := viewer(t, env, tok); h != "alex" {
			t.Fatalf("after a failing provider a session signs in as %q", h)
		}
	}

	// The provider refuses Alex: both sessions end, the owner's token not.
	p.QueueError(&mockoidc.ServerError{Code: http.StatusBadRequest, Error: "invalid_grant", Description: "the account is disabled"})
	env.Clock.Advance(2 * time.Second)
	// The pass disables Alex, then forgets the refresh tokens: wait for
	// the end of both.
	waitFor(t, "the sessions' revocation and the refresh tokens' removal", func() bool {
		return env.Count(`SELECT count(*) FROM tokens t JOIN principals p ON p.id = t.principal_id
			WHERE p.handle = 'alex' AND t.source = 'oidc' AND t.revoked_at IS NULL`) == 0 &&
			env.Count(`SELECT count(*) FROM signin_refresh`) == 0
	})
	for _, tok := range []string{browser, cli} {
		if r := env.REST(http.MethodGet, "/api/v1/me", tok, nil); r.Status != http.StatusUnauthorized {
			t.Fatalf("a session of a leaver answers %d, want 401", r.Status)
		}
	}
	if r := env.REST(http.MethodGet, "/api/v1/me", env.World.Token("alex"), nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("the owner-made token of a leaver answers %d, want 401", r.Status)
	}
}

// waitFor polls cond for up to 15 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("waited 15 s for %s", what)
}

// TestLogin runs the tests of the command line's login and leavers as subtests: one
// top-level test per area keeps internal/server's list short enough to
// read (fewer than 80 top-level tests, issue 48).
func TestLogin(t *testing.T) {
	t.Run("LoginDevice", testLoginDevice)
	t.Run("SignInLeavers", testSignInLeavers)
}
