package signin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/httpx"
	"bothy.example.com/bothy/internal/platform/problem"
)

// The command line's sign-in (bothy login) is the OAuth 2.0 device
// authorization grant (RFC 8628) at the provider, with Bothy's client: the
// command line holds no client secret, so the server asks the provider for
// it. POST /auth/device starts a device sign-in and answers the provider's
// device authorization response as it is (RFC 8628 section 3.2); POST
// /auth/device/token, polled with the device_code, asks the provider once
// per call and answers its pending errors as they are (authorization_pending,
// slow_down, expired_token, access_denied: section 3.5), or, once the person
// approved, a session token of the person (source oidc) as a token response.
// docs/DECISIONS.md has the reasons.

// grantDeviceCode is the device grant's grant_type (RFC 8628 section 3.4).
const grantDeviceCode = "urn:ietf:params:oauth:grant-type:device_code"

// pending are the provider's token errors that the command line handles
// itself (RFC 8628 section 3.5), passed on unchanged.
var pending = map[string]bool{"authorization_pending": true, "slow_down": true, "expired_token": true, "access_denied": true}

// registerDevice serves the command line's sign-in and sign-out.
func (s *Service) registerDevice(mux *http.ServeMux) {
	mux.HandleFunc("POST /auth/device", s.deviceStart)
	mux.HandleFunc("POST /auth/device/token", s.deviceToken)
	mux.HandleFunc("POST /auth/logout", s.logout)
}

// deviceStart starts a device sign-in at the provider.
func (s *Service) deviceStart(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	p, err := s.discover(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "sign-in: the provider's discovery failed", "error", err.Error())
		httpx.WriteProblem(w, r, unreachable())
		return
	}
	if p.Endpoint().DeviceAuthURL == "" {
		httpx.WriteProblem(w, r, problem.Newf(problem.Unavailable, "device_grant_unsupported",
			"the identity provider offers no device sign-in (device_authorization_endpoint); sign in in the browser"))
		return
	}
	// The provider's answer goes to the command line as it is (RFC 8628
	// section 3.2): it names nothing of Bothy's client but its ID.
	status, body, err := s.postProvider(ctx, p.Endpoint().DeviceAuthURL, url.Values{"client_id": {s.cfg.ClientID}, "scope": {strings.Join(s.oauth(p).Scopes, " ")}})
	var da struct {
		DeviceCode              string `json:"device_code"`
		UserCode                string `json:"user_code"`
		VerificationURI         string `json:"verification_uri"`
		VerificationURIComplete string `json:"verification_uri_complete,omitempty"`
		ExpiresIn               int    `json:"expires_in"`
		Interval                int    `json:"interval"`
	}
	if err == nil && (status != http.StatusOK || json.Unmarshal(body, &da) != nil || da.DeviceCode == "" || da.UserCode == "") {
		err = fmt.Errorf("device authorization answered %d", status)
	}
	if err != nil {
		s.log.WarnContext(ctx, "sign-in: the device authorization failed", "error", err.Error())
		httpx.WriteProblem(w, r, unreachable())
		return
	}
	if da.Interval <= 0 {
		da.Interval = 5 // RFC 8628 section 3.2: the default when the provider names none
	}
	writeJSON(w, http.StatusOK, da)
}

// deviceToken asks the provider once whether the device sign-in
// device_code was approved, and answers a session token when it was.
func (s *Service) deviceToken(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	code := r.PostFormValue("device_code")
	if code == "" || len(code) > 1000 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
		return
	}
	p, err := s.discover(ctx)
	if err != nil {
		httpx.WriteProblem(w, r, unreachable())
		return
	}
	tok, oerr, err := s.pollProvider(ctx, p, code)
	switch {
	case err != nil:
		s.log.WarnContext(ctx, "sign-in: the device token request failed", "error", err.Error())
		httpx.WriteProblem(w, r, unreachable())
		return
	case pending[oerr]:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": oerr})
		return
	case oerr != "":
		s.log.WarnContext(ctx, "sign-in: the provider refused the device code", "error", oerr)
		httpx.WriteProblem(w, r, problem.Newf(problem.Forbidden, "signin_failed", "the sign-in could not be completed; start again"))
		return
	}
	c, err := s.idClaims(ctx, p, tok, "")
	if err != nil {
		httpx.WriteProblem(w, r, problem.Newf(problem.Forbidden, "signin_failed", "the sign-in could not be completed; start again"))
		return
	}
	person, err := s.person(ctx, c)
	if err != nil {
		httpx.WriteProblem(w, r, err)
		return
	}
	it, err := s.w.CreateSession(ctx, person, "bothy login", s.cfg.SessionTTL)
	if err != nil {
		httpx.WriteProblem(w, r, problem.Internal("signin.deviceToken", err))
		return
	}
	s.log.InfoContext(ctx, "sign-in (device)", "principal_id", person.ID, "token_id", it.ID)
	s.keepRefresh(ctx, it.ID, person.ID, c.refresh)
	writeJSON(w, http.StatusOK, map[string]any{"access_token": it.Token, "token_type": "Bearer",
		"expires_in": int(s.cfg.SessionTTL.Seconds())})
}

// pollProvider makes one device-code token request at the provider with
// Bothy's client (golang.org/x/oauth2 only offers a loop that waits for
// the approval, which would hold the command line's request open). It
// returns the tokens, or the provider's OAuth error code, or an error when
// the provider could not be asked.
func (s *Service) pollProvider(ctx context.Context, p *oidc.Provider, code string) (*oauth2.Token, string, error) {
	status, body, err := s.postProvider(ctx, p.Endpoint().TokenURL, url.Values{"grant_type": {grantDeviceCode}, "device_code": {code}, "client_id": {s.cfg.ClientID}})
	if err != nil {
		return nil, "", err
	}
	var tr struct {
		Error        string `json:"error"`
		AccessToken  string `json:"access_token"`
		TokenType    string `json:"token_type"`
		RefreshToken string `json:"refresh_token"`
		IDToken      string `json:"id_token"`
	}
	if err := json.Unmarshal(body, &tr); err != nil {
		return nil, "", fmt.Errorf("token response (%d): %w", status, err)
	}
	if tr.Error != "" || status != http.StatusOK {
		if tr.Error == "" {
			return nil, "", fmt.Errorf("token response %d without an error code", status)
		}
		return nil, tr.Error, nil
	}
	tok := &oauth2.Token{AccessToken: tr.AccessToken, TokenType: tr.TokenType, RefreshToken: tr.RefreshToken}
	return tok.WithExtra(map[string]any{"id_token": tr.IDToken}), "", nil
}

// postProvider posts form to the provider's endpoint u as Bothy's client
// and returns the answer's status and body (at most 1 MiB).
// golang.org/x/oauth2 authenticates no client at the device authorization
// endpoint, which confidential clients must (RFC 8628 section 3.1).
func (s *Service) postProvider(ctx context.Context, u string, form url.Values) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if s.cfg.ClientSecret != "" {
		// client_secret_basic, the method every provider must take
		// (RFC 6749 section 2.3.1: both parts form-encoded first).
		req.SetBasicAuth(url.QueryEscape(s.cfg.ClientID), url.QueryEscape(s.cfg.ClientSecret))
	}
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, err
}

// logout revokes the sign-in session the request carries (bothy logout).
// Only sessions a sign-in made: other tokens are revoked by their holder or
// an owner through the API, where they can be listed.
func (s *Service) logout(w http.ResponseWriter, r *http.Request) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || !strings.HasPrefix(tok, identity.PrefixSession) {
		httpx.WriteProblem(w, r, problem.Newf(problem.Unauthorized, "", "bothy logout needs the session token to end"))
		return
	}
	err := s.w.RevokeSignInSession(r.Context(), tok)
	switch {
	case errors.Is(err, identity.ErrNotFound):
		httpx.WriteProblem(w, r, problem.Newf(problem.Unauthorized, "", "no sign-in session has this token, or it already ended"))
		return
	case err != nil:
		httpx.WriteProblem(w, r, problem.Internal("signin.logout", err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// writeJSON answers v with status, never cached: the answers carry codes
// and tokens.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
