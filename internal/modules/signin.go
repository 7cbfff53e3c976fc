package modules

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/signin"
)

// signInFrom returns the sign-in through the organisation's OpenID Connect
// provider that cfg configures (auth.oidc.*), or nil when auth.oidc.issuer
// is empty. Sign-in needs http.public_url: the callback URL and the
// provider's redirect must not depend on a request's Host.
func signInFrom(cfg *config.Config, d Deps, ident *identity.Service, w *identity.Writer, onLeaver func(ctx context.Context, principalID string) error) (*signin.Service, error) {
	issuer := cfg.String(config.AuthOIDCIssuer)
	if issuer == "" {
		return nil, nil
	}
	public := strings.TrimSuffix(cfg.String(config.HTTPPublicURL), "/")
	if public == "" {
		return nil, errors.New("auth.oidc.issuer needs http.public_url: the URL people's browsers use, which the provider redirects back to")
	}
	secret := cfg.String(config.AuthOIDCClientSecret)
	if file := cfg.String(config.AuthOIDCClientSecretFile); file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("auth.oidc.client_secret_file: %w", err)
		}
		secret, _, _ = strings.Cut(strings.TrimSpace(string(b)), "\n")
	}
	redirect := cfg.String(config.AuthOIDCRedirectURL)
	if redirect == "" {
		redirect = public + "/auth/callback"
	}
	return signin.New(signin.Config{Issuer: issuer, ClientID: cfg.String(config.AuthOIDCClientID), ClientSecret: secret,
		RedirectURL: redirect, Scopes: commaList(cfg.String(config.AuthOIDCScopes)), NameClaim: cfg.String(config.AuthOIDCNameClaim),
		AllowedDomains: commaList(cfg.String(config.AuthOIDCAllowedDomains)), CreatePeople: cfg.Bool(config.AuthOIDCCreatePeople),
		SessionTTL: cfg.Duration(config.AuthSessionTTL), AfterSignIn: "/playground",
		RecheckInterval: cfg.Duration(config.AuthOIDCRecheckInterval), OnLeaver: onLeaver},
		ident, w, d.Pool, d.Clock, d.Logger)
}

// commaList splits a comma-separated setting into its non-empty items.
func commaList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
