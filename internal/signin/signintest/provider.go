// Package signintest is an in-process OpenID Connect provider for tests of
// the sign-in: oauth2-proxy/mockoidc (code flow with PKCE, refresh grant,
// queued errors) with the OAuth 2.0 device authorization grant (RFC 8628)
// added, which mockoidc lacks. The device grant's answers follow RFC 8628
// sections 3.2 and 3.5: the device authorization response, and the token
// endpoint's authorization_pending, slow_down, access_denied and
// expired_token errors; its tokens are mockoidc's, signed with its key.
package signintest

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"
)

// DevicePath is the device authorization endpoint's path.
const DevicePath = mockoidc.IssuerBase + "/device_authorization"

// deviceTTL is how long a device code is valid.
const deviceTTL = 10 * time.Minute

// Provider is mockoidc with the device grant.
type Provider struct {
	*mockoidc.MockOIDC
	// Interval is the polling interval in seconds the device
	// authorization response names (1 unless a test changes it before
	// the first device sign-in).
	Interval int

	mu      sync.Mutex
	devices map[string]*device // by device code
}

// device is one device sign-in.
type device struct {
	userCode string
	expires  time.Time
	lastPoll time.Time
	user     mockoidc.User // set when the person approved
	denied   bool
}

// Start runs a provider until the test ends.
func Start(t testing.TB) *Provider {
	t.Helper()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{MockOIDC: m, Interval: 1, devices: map[string]*device{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(mockoidc.AuthorizationEndpoint, m.Authorize)
	mux.HandleFunc(mockoidc.TokenEndpoint, p.token)
	mux.HandleFunc(mockoidc.UserinfoEndpoint, m.Userinfo)
	mux.HandleFunc(mockoidc.JWKSEndpoint, m.JWKS)
	mux.HandleFunc(mockoidc.DiscoveryEndpoint, p.discovery)
	mux.HandleFunc(DevicePath, p.deviceAuthorization)
	m.Server = &http.Server{Addr: ln.Addr().String(), Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.Server.Serve(ln) }()
	t.Cleanup(func() { _ = m.Shutdown() })
	return p
}

// Approve plays the person who opens the verification URL, enters
// userCode and signs in as user. It reports whether the code was known.
func (p *Provider) Approve(userCode string, user mockoidc.User) bool {
	return p.decide(userCode, func(d *device) { d.user = user })
}

// Deny plays the person who declines the device sign-in userCode.
func (p *Provider) Deny(userCode string) bool {
	return p.decide(userCode, func(d *device) { d.denied = true })
}

func (p *Provider) decide(userCode string, f func(*device)) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range p.devices {
		if d.userCode == userCode {
			f(d)
			return true
		}
	}
	return false
}

// discovery is mockoidc's discovery document with the device
// authorization endpoint and grant.
func (p *Provider) discovery(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	p.Discovery(rec, r)
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	doc["device_authorization_endpoint"] = p.Addr() + DevicePath
	if g, ok := doc["grant_types_supported"].([]any); ok {
		doc["grant_types_supported"] = append(g, "urn:ietf:params:oauth:grant-type:device_code")
	}
	writeJSON(w, http.StatusOK, doc)
}

// client reports whether the request authenticates as the client, by
// HTTP Basic or client_secret_post.
func (p *Provider) client(r *http.Request) bool {
	id, secret, ok := r.BasicAuth()
	if ok {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostFormValue("client_id"), r.PostFormValue("client_secret")
	}
	return id == p.ClientID && secret == p.ClientSecret
}

// deviceAuthorization starts a device sign-in (RFC 8628 section 3.1).
func (p *Provider) deviceAuthorization(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	if !p.client(r) {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	code, user := random(24), strings.ToUpper(random(4)+"-"+random(4))
	p.mu.Lock()
	p.devices[code] = &device{userCode: user, expires: time.Now().Add(deviceTTL)}
	interval := p.Interval
	p.mu.Unlock()
	verify := p.Addr() + mockoidc.IssuerBase + "/device"
	writeJSON(w, http.StatusOK, map[string]any{"device_code": code, "user_code": user, "verification_uri": verify,
		"verification_uri_complete": verify + "?user_code=" + user, "expires_in": int(deviceTTL.Seconds()), "interval": interval})
}

// token is mockoidc's token endpoint with the device grant; errors queued
// with QueueError answer first, as mockoidc's own endpoints do.
func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	if se := p.ErrorQueue.Pop(); se != nil {
		writeJSON(w, se.Code, map[string]string{"error": se.Error, "error_description": se.Description})
		return
	}
	if r.PostFormValue("grant_type") != "urn:ietf:params:oauth:grant-type:device_code" {
		// mockoidc reads the client from the form only; a provider must
		// take HTTP Basic too (RFC 6749 section 2.3.1).
		if id, secret, ok := r.BasicAuth(); ok {
			id, _ = url.QueryUnescape(id)
			secret, _ = url.QueryUnescape(secret)
			r.PostForm.Set("client_id", id)
			r.PostForm.Set("client_secret", secret)
			r.Form.Set("client_id", id)
			r.Form.Set("client_secret", secret)
		}
		p.Token(w, r)
		return
	}
	if !p.client(r) {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	user, oerr := p.poll(r.PostFormValue("device_code"))
	if oerr != "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": oerr})
		return
	}
	s, err := p.SessionStore.NewSession("openid email profile", "", user, "", "")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	cfg, now := p.Config(), p.Now()
	access, err1 := s.AccessToken(cfg, p.Keypair, now)
	id, err2 := s.IDToken(cfg, p.Keypair, now)
	refresh, err3 := s.RefreshToken(cfg, p.Keypair, now)
	if err1 != nil || err2 != nil || err3 != nil {
		http.Error(w, fmt.Sprint(err1, err2, err3), http.StatusInternalServerError)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"access_token": access, "id_token": id, "refresh_token": refresh,
		"token_type": "Bearer", "expires_in": int(cfg.AccessTTL.Seconds())})
}

// poll decides a device-code token request: the approving user, or the
// RFC 8628 error. An approved or denied code works once.
func (p *Provider) poll(code string) (mockoidc.User, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.devices[code]
	now := time.Now()
	switch {
	case d == nil:
		return nil, "invalid_grant"
	case now.After(d.expires):
		delete(p.devices, code)
		return nil, "expired_token"
	case d.denied:
		delete(p.devices, code)
		return nil, "access_denied"
	case d.user != nil:
		delete(p.devices, code)
		return d.user, ""
	}
	// Polled faster than the interval: slow down (section 3.5); the
	// interval stays, so a client that honours it is not slowed further.
	early := !d.lastPoll.IsZero() && now.Sub(d.lastPoll) < time.Duration(p.Interval)*time.Second-100*time.Millisecond
	d.lastPoll = now
	if early {
		return nil, "slow_down"
	}
	return nil, "authorization_pending"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// random returns n random letters.
func random(n int) string {
	const letters = "bcdfghjklmnpqrstvwxz"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = letters[int(b[i])%len(letters)]
	}
	return string(b)
}
