package mcpface

import (
	"context"
	"strings"
	"time"

	"bothy.example.com/bothy/internal/identity"
)

// Provider is the organisation's OpenID Connect provider as the MCP face
// needs it (signin.Service): an MCP client logs in there by itself, as
// the protected resource metadata tells it, and brings the provider's
// access token for the resource.
type Provider interface {
	// Issuer is the provider's issuer URL, the authorization server the
	// metadata names.
	Issuer() string
	// AccessToken returns the person token, an access token of the
	// provider for resource, stands for, and when it expires; any
	// refusal is an error that says nothing of the person.
	AccessToken(ctx context.Context, token, resource string) (identity.Principal, time.Time, error)
}

// authenticate resolves the bearer token of a request to /mcp: a Bothy
// token first (it keeps working whatever the provider does), else, when a
// provider is configured and token has the shape of a JWT, the provider's
// access token for resource. provider reports the second kind, whose
// expiry is the token's own (a Bothy token's expiry is checked by
// Authenticate, so it is zero here).
func authenticate(ctx context.Context, d Deps, token, resource string) (p identity.Principal, expires time.Time, provider bool, err error) {
	p, err = d.Authenticate(ctx, token)
	if err == nil || d.Provider == nil || !looksLikeJWT(token) {
		return p, time.Time{}, false, err
	}
	p, expires, err = d.Provider.AccessToken(ctx, token, resource)
	return p, expires, err == nil, err
}

// looksLikeJWT reports whether token has the compact form of a JWS
// (header.payload.signature); a Bothy token never does, so a mistyped
// Bothy token costs no trip to the provider.
func looksLikeJWT(token string) bool {
	return strings.Count(token, ".") == 2 && !strings.HasPrefix(token, "bothy_")
}

// providerTokenKey carries, in the context of an MCP request that the
// provider's access token authenticated, that token.
type providerTokenKey struct{}

// withProviderToken marks ctx, the context of a request to /mcp and of
// every API call its tools make in-process, as authenticated by the
// provider's access token tok.
func withProviderToken(ctx context.Context, tok string) context.Context {
	return context.WithValue(ctx, providerTokenKey{}, tok)
}

// ProviderTokenOf returns the provider's access token that authenticated
// the MCP request ctx derives from. The server's authentication takes a
// provider token on an in-process API call of an MCP tool only when it is
// this token: a context value no client can set, so that REST and GraphQL
// from outside keep taking Bothy tokens alone (the provider's token is
// meant for the MCP resource, its audience).
func ProviderTokenOf(ctx context.Context) (string, bool) {
	tok, ok := ctx.Value(providerTokenKey{}).(string)
	return tok, ok && tok != ""
}
