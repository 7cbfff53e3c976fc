package signin

import (
	"context"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
)

// Issuer is the provider's issuer URL (auth.oidc.issuer): the
// authorization server the MCP face's protected resource metadata names.
func (s *Service) Issuer() string { return s.cfg.Issuer }

// AccessToken returns the person an access token of the provider stands
// for, and when the token expires: the token an MCP client got from the
// provider by itself (docs/mcp.md#logging-in-without-a-pasted-token).
//
// raw must be a JWT signed with one of the provider's keys (its JWKS, from
// discovery; "none" and keys of others are refused), issued by the
// provider, not expired, and meant for resource: its aud holds resource,
// the URL the MCP face's metadata names (RFC 8707; the MCP authorization
// specification has clients ask for exactly that). A token for another
// audience, even Bothy's own client ID (an ID token), is refused, so that
// a token minted for another service cannot be replayed here.
//
// The person is found exactly as a browser sign-in finds them: the
// account (iss, sub) once linked; else the one active person with the
// verified address of the name claim, then linked; else, with
// auth.oidc.create_people, a new person of an allowed domain. An MCP
// login is a sign-in at the provider like any other, and a person who may
// sign in in the browser may log in an MCP client.
//
// Errors: unauthorized for every refusal alike (a bad token, an unknown,
// disabled or ambiguous person), so that the answer never tells whether
// a person exists; unavailable while the provider's discovery fails;
// internal_error for a database error.
func (s *Service) AccessToken(ctx context.Context, raw, resource string) (identity.Principal, time.Time, error) {
	p, err := s.discover(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "access token: the provider's discovery failed", "error", err.Error())
		return identity.Principal{}, time.Time{}, unreachable()
	}
	// The token's times are the provider's: checked against the wall
	// clock, as the ID token of a sign-in is.
	tok, err := p.Verifier(&oidc.Config{ClientID: resource}).Verify(oidc.ClientContext(ctx, s.cfg.HTTPClient), raw)
	if err != nil {
		// Not logged with the token or its claims: the error of go-oidc
		// names only what failed (audience, expiry, signature).
		s.log.InfoContext(ctx, "access token refused", "error", err.Error())
		return identity.Principal{}, time.Time{}, problem.New(problem.Unauthorized, "")
	}
	var all map[string]any
	if err := tok.Claims(&all); err != nil {
		return identity.Principal{}, time.Time{}, problem.New(problem.Unauthorized, "")
	}
	c := claims{issuer: tok.Issuer, subject: tok.Subject}
	c.email, _ = all[s.cfg.NameClaim].(string)
	c.verified, _ = all["email_verified"].(bool)
	c.name, _ = all["name"].(string)
	if c.subject == "" {
		return identity.Principal{}, time.Time{}, problem.New(problem.Unauthorized, "")
	}
	person, err := s.person(ctx, c)
	if err != nil {
		pe := problem.From("signin.accessToken", err)
		if pe.Code == problem.InternalError {
			return identity.Principal{}, time.Time{}, pe
		}
		s.log.InfoContext(ctx, "access token names no person of this server", "reason", pe.Reason)
		return identity.Principal{}, time.Time{}, problem.New(problem.Unauthorized, "")
	}
	return person, tok.Expiry, nil
}
