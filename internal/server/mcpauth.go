package server

import (
	"context"

	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/mcpface"
	"bothy.example.com/bothy/internal/modules"
)

// mcpProvider is the provider whose access tokens the MCP face takes: the
// sign-in's, or none without sign-in. A nil *signin.Service must not
// become a non-nil interface value.
func mcpProvider(set *modules.Set) mcpface.Provider {
	if set.SignIn == nil {
		return nil
	}
	return set.SignIn
}

// authenticateToken resolves the bearer token of an API request. A Bothy
// token, as ever; and the provider's access token with which an MCP
// client logged in by itself, only on the API calls its tools make
// in-process (mcpface.ProviderTokenOf): the token is meant for the MCP
// resource, its audience, and REST and GraphQL from outside take Bothy
// tokens alone. Such a call verifies the token again and finds its
// person again, as a Bothy token is looked up at every call, so that a
// person disabled during a long MCP request loses the calls still to
// come. provider reports the second kind.
func (s *Server) authenticateToken(ctx context.Context, tok string) (p identity.Principal, provider bool, err error) {
	if pt, ok := mcpface.ProviderTokenOf(ctx); ok && pt == tok && s.modules.SignIn != nil {
		p, _, err = s.modules.SignIn.AccessToken(ctx, tok, s.publicURL()+mcpface.Path)
		return p, true, err
	}
	p, err = s.Identity.Authenticate(ctx, tok)
	return p, false, err
}
