// Package signin signs people in through the organisation's OpenID Connect
// provider (docs/operations.md#sign-in): the authorization code flow with
// PKCE at GET /auth/login and /auth/callback, which ends in a session token
// of the person (source oidc) that the playground keeps. A person is found
// by the provider's account (issuer, subject) once linked, and linked at
// the first sign-in by the verified e-mail address the provider vouches
// for; auth.oidc.create_people lets unknown people of the allowed domains
// in as new people without grants.
//
// The package owns the table signin_attempts: a sign-in between its two
// requests, in the database so that the callback may reach any replica.
package signin

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/httpx"
	"bothy.example.com/bothy/internal/platform/problem"
)

// attemptTTL is how long a sign-in may take between /auth/login and the
// provider's redirect to /auth/callback.
const attemptTTL = 10 * time.Minute

// Config is the sign-in's configuration (the keys auth.oidc.* and
// auth.session_ttl).
type Config struct {
	// Issuer is the provider's issuer URL; ClientID and ClientSecret are
	// Bothy's client there.
	Issuer, ClientID, ClientSecret string
	// RedirectURL is the callback registered at the provider
	// (http.public_url + /auth/callback by default).
	RedirectURL string
	// Scopes are asked for besides openid.
	Scopes []string
	// NameClaim is the ID token's claim holding the person's e-mail
	// address (email by default).
	NameClaim string
	// AllowedDomains are the e-mail domains that may sign in; empty allows
	// every domain.
	AllowedDomains []string
	// CreatePeople lets unknown people of an allowed domain in as new
	// people without grants.
	CreatePeople bool
	// SessionTTL is the lifetime of the session token a sign-in gives.
	SessionTTL time.Duration
	// AfterSignIn is where the browser goes with its token in the
	// fragment (#session=...): the playground.
	AfterSignIn string
	// HTTPClient reaches the provider (nil: a client with a 10 s timeout).
	HTTPClient *http.Client
	// RecheckInterval is how often Recheck asks the provider about the
	// people with live sessions (auth.oidc.recheck_interval).
	RecheckInterval time.Duration
	// OnLeaver, when set, handles a person the provider refused at a
	// recheck instead of a bare revocation of their sign-in sessions: it
	// disables the person as an owner's disable does and revokes their
	// sessions in one unit of work (admin.Service.DisableRefused). An
	// error leaves everything as it was, so the next pass asks again. Nil
	// only revokes the sessions.
	OnLeaver func(ctx context.Context, principalID string) error
}

// Service runs the browser sign-in. It is safe for concurrent use.
type Service struct {
	cfg   Config
	ident *identity.Service
	w     *identity.Writer
	pool  db.Querier
	clock clock.Clock
	log   *slog.Logger

	// The provider's discovery document is read at the first sign-in,
	// not at start: a provider that is down must not keep the server
	// from serving everything else. A failed read is tried again at the
	// next sign-in.
	mu       sync.Mutex
	provider *oidc.Provider
}

// New checks cfg and returns the sign-in of the people of ident.
func New(cfg Config, ident *identity.Service, w *identity.Writer, pool db.Querier, c clock.Clock, log *slog.Logger) (*Service, error) {
	switch {
	case cfg.Issuer == "" || cfg.ClientID == "":
		return nil, errors.New("signin: auth.oidc.issuer and auth.oidc.client_id are both needed")
	case cfg.RedirectURL == "":
		return nil, errors.New("signin: no redirect URL (set http.public_url or auth.oidc.redirect_url)")
	case cfg.SessionTTL <= 0:
		return nil, errors.New("signin: auth.session_ttl must be positive")
	}
	if cfg.NameClaim == "" {
		cfg.NameClaim = "email"
	}
	if cfg.AfterSignIn == "" {
		cfg.AfterSignIn = "/playground"
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	for i, d := range cfg.AllowedDomains {
		cfg.AllowedDomains[i] = strings.ToLower(strings.TrimSpace(d))
	}
	return &Service{cfg: cfg, ident: ident, w: w, pool: pool, clock: c, log: log}, nil
}

// Register serves GET /auth/login and GET /auth/callback on mux.
func (s *Service) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /auth/login", s.login)
	mux.HandleFunc("GET /auth/callback", s.callback)
	s.registerDevice(mux)
}

// discover returns the provider, reading its discovery document once.
func (s *Service) discover(ctx context.Context) (*oidc.Provider, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.provider != nil {
		return s.provider, nil
	}
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, s.cfg.HTTPClient), s.cfg.Issuer)
	if err != nil {
		return nil, err
	}
	s.provider = p
	return p, nil
}

// oauth is the OAuth 2 client of provider p.
func (s *Service) oauth(p *oidc.Provider) *oauth2.Config {
	scopes := []string{oidc.ScopeOpenID}
	for _, sc := range s.cfg.Scopes {
		if sc = strings.TrimSpace(sc); sc != "" && sc != oidc.ScopeOpenID {
			scopes = append(scopes, sc)
		}
	}
	return &oauth2.Config{ClientID: s.cfg.ClientID, ClientSecret: s.cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: s.cfg.RedirectURL, Scopes: scopes}
}

// unreachable is the answer while the provider cannot be asked.
func unreachable() error {
	return problem.Newf(problem.Unavailable, "provider_unreachable", "the identity provider does not answer; try again later")
}

// login starts a sign-in: it stores the attempt and sends the browser to
// the provider with the state, the PKCE challenge and the nonce.
func (s *Service) login(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	p, err := s.discover(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "sign-in: the provider's discovery failed", "error", err.Error())
		httpx.WriteProblem(w, r, unreachable())
		return
	}
	state, nonce := random(), random()
	verifier := oauth2.GenerateVerifier()
	if err := s.saveAttempt(ctx, state, verifier, nonce); err != nil {
		httpx.WriteProblem(w, r, problem.Internal("signin.login", err))
		return
	}
	u := s.oauth(p).AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce))
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, u, http.StatusFound)
}

// callback ends a sign-in: it takes the attempt its state names (once),
// exchanges the code with the PKCE verifier, verifies the ID token and its
// nonce, finds (or links, or creates) the person, and sends the browser to
// the playground with a new session token in the URL's fragment, which
// never reaches a server or an access log.
func (s *Service) callback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	if q.Get("error") != "" {
		// The provider refused (the person declined, or is not allowed
		// there): its words are not repeated, they may name the account.
		httpx.WriteProblem(w, r, problem.Newf(problem.Forbidden, "signin_refused", "the identity provider did not sign you in"))
		return
	}
	a, err := s.takeAttempt(ctx, q.Get("state"))
	if err != nil {
		httpx.WriteProblem(w, r, err)
		return
	}
	p, err := s.discover(ctx)
	if err != nil {
		httpx.WriteProblem(w, r, unreachable())
		return
	}
	claims, err := s.verify(ctx, p, q.Get("code"), a)
	if err != nil {
		httpx.WriteProblem(w, r, err)
		return
	}
	person, err := s.person(ctx, claims)
	if err != nil {
		httpx.WriteProblem(w, r, err)
		return
	}
	tok, err := s.w.CreateSession(ctx, person, "sign-in", s.cfg.SessionTTL)
	if err != nil {
		httpx.WriteProblem(w, r, problem.Internal("signin.callback", err))
		return
	}
	s.log.InfoContext(ctx, "sign-in", "principal_id", person.ID, "token_id", tok.ID)
	s.keepRefresh(ctx, tok.ID, person.ID, claims.refresh)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, s.cfg.AfterSignIn+"#session="+tok.Token, http.StatusSeeOther)
}

// claims is what a verified ID token says about the person.
type claims struct {
	issuer, subject string
	email           string
	verified        bool
	name            string
	// refresh is the provider's refresh token, kept for the recheck of
	// leavers; empty when the provider gave none.
	refresh string
}

// verify exchanges code for tokens with a's verifier and verifies the ID
// token: signature, issuer, audience, expiry and a's nonce.
func (s *Service) verify(ctx context.Context, p *oidc.Provider, code string, a attempt) (claims, error) {
	refused := problem.Newf(problem.Forbidden, "signin_failed", "the sign-in could not be completed; start again")
	octx := oidc.ClientContext(ctx, s.cfg.HTTPClient)
	tok, err := s.oauth(p).Exchange(octx, code, oauth2.VerifierOption(a.verifier))
	if err != nil {
		s.log.WarnContext(ctx, "sign-in: the code exchange failed", "error", err.Error())
		return claims{}, refused
	}
	c, err := s.idClaims(ctx, p, tok, a.nonce)
	if err != nil {
		return claims{}, refused
	}
	return c, nil
}

// idClaims verifies the ID token of the provider's answer tok (signature,
// issuer, audience, expiry, and nonce when the flow sent one) and returns
// what it says, with tok's refresh token.
func (s *Service) idClaims(ctx context.Context, p *oidc.Provider, tok *oauth2.Token, nonce string) (claims, error) {
	octx := oidc.ClientContext(ctx, s.cfg.HTTPClient)
	raw, _ := tok.Extra("id_token").(string)
	// The token's times are the provider's: checked against the wall
	// clock, not the server's clock of record (which tests replace).
	idt, err := p.Verifier(&oidc.Config{ClientID: s.cfg.ClientID}).Verify(octx, raw)
	if err != nil || idt.Nonce != nonce {
		s.log.WarnContext(ctx, "sign-in: the ID token did not verify", "error", fmt.Sprint(err), "nonce_matches", err == nil && idt.Nonce == nonce)
		return claims{}, errors.New("signin: the ID token did not verify")
	}
	refused := errors.New("signin: the ID token's claims do not decode")
	var all map[string]any
	if err := idt.Claims(&all); err != nil {
		return claims{}, refused
	}
	c := claims{issuer: idt.Issuer, subject: idt.Subject, refresh: tok.RefreshToken}
	c.email, _ = all[s.cfg.NameClaim].(string)
	c.verified, _ = all["email_verified"].(bool)
	c.name, _ = all["name"].(string)
	return c, nil
}

// random returns 32 random bytes, URL-safe.
func random() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("signin: randomness: %v", err)) // crypto/rand does not fail on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}
