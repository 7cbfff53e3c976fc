// Package mcpface is Bothy's Model Context Protocol face (docs/mcp.md): a
// Streamable HTTP MCP server on /mcp, authenticated by Bothy bearer
// tokens, whose tools run the API's own GraphQL operations as the caller
// through the same door as every request (rights, rate classes, audit,
// non-disclosure). An agent's token gets the run tools (wait for a run,
// claim it, read its trust-marked context, answer, stream into the live
// box, ask for approval, finish); a run token (createRunToken) gets the
// six tools of its claimed run; a person's or an app's token gets the
// people's tools, with exactly that principal's rights.
package mcpface

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/httpx"
	"bothy.example.com/bothy/internal/platform/version"
	"bothy.example.com/bothy/internal/runs"
	"bothy.example.com/bothy/sdk/agent"
)

// Path is where the MCP server answers; MetadataPath the protected
// resource metadata (RFC 9728) that a 401 names.
const (
	Path         = "/mcp"
	MetadataPath = "/.well-known/oauth-protected-resource"
)

// Deps are what the face needs of the server.
type Deps struct {
	// API answers the API's own requests in-process (the server's handler
	// chain: authentication, rate limits, the door); the tools call
	// /graphql through it with the caller's token.
	API http.Handler
	// Authenticate resolves a bearer token to its principal.
	Authenticate func(ctx context.Context, token string) (identity.Principal, error)
	// MaxWait bounds wait_for_run (events.poll_max_wait).
	MaxWait time.Duration
	// MaxBody bounds a request's body (http.max_body_bytes).
	MaxBody int64
	// Client names the address a request came from (the trusted proxies'
	// rule of the access log), so that the API calls a tool makes
	// in-process are logged and limited as the client's, not as
	// 127.0.0.1; nil takes the peer's address.
	Client func(r *http.Request) string
	// PublicURL is the URL clients use to reach the server
	// (http.public_url, or the listen address): the protected resource the
	// metadata and a 401 name. Never the request's Host, which a client
	// chooses. nil takes the request's scheme and Host (tests of the face
	// alone).
	PublicURL func() string
	// Admit wraps every authenticated request to /mcp, whose context
	// carries its principal (identity.FromContext), before its body is
	// read: the server's meter of rate-limit tokens and its per-principal
	// in-flight cap (http.max_concurrent_per_principal). A request is one
	// request against the cap however many API calls its tools make; the
	// server lets those calls, whose contexts derive from the request's,
	// through without a slot of their own. Its refusals answer with
	// WriteProblem. nil admits every request (tests of the face alone).
	Admit func(http.Handler) http.Handler
	// Provider is the organisation's OpenID Connect provider when
	// sign-in is configured (auth.oidc.issuer), nil otherwise: the
	// metadata names it as authorization server and /mcp takes its
	// access tokens for the resource (providertoken.go).
	Provider Provider
}

// Register mounts /mcp and the protected resource metadata on mux.
func Register(mux *http.ServeMux, d Deps) {
	agents := newServer("bothy-agent")
	addAgentTools(agents, d)
	addFileTools(agents, d)
	runners := newServer("bothy-run")
	addRunTools(runners, d)
	addFileTools(runners, d)
	people := newServer("bothy")
	addPeopleTools(people, d)
	addFileTools(people, d)
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		ti := auth.TokenInfoFromContext(r.Context())
		if ti == nil {
			return people
		}
		switch run, _ := ti.Extra["run"].(string); {
		case run != "":
			return runners
		case ti.Extra["kind"] == string(identity.KindAgent):
			return agents
		}
		return people
	}, &mcp.StreamableHTTPOptions{
		// One request, one answer: any replica serves any call, and no
		// session outlives a request.
		Stateless:    true,
		JSONResponse: true,
		// Every call needs a bearer token (no cookie rides along), so a
		// rebound DNS name gains nothing; requests through the
		// documented reverse proxy carry its Host.
		DisableLocalhostProtection: true,
	})
	verify := func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		p, expires, provider, err := authenticate(ctx, d, token, baseURL(d, r)+Path)
		if err != nil {
			return nil, fmt.Errorf("%w: the token is unknown, revoked or expired", auth.ErrInvalidToken)
		}
		httpx.NotePrincipal(ctx, p.ID)
		return &auth.TokenInfo{UserID: p.ID, Expiration: expires, Extra: map[string]any{"token": token, "kind": string(p.Kind), "run": p.RunID,
			"holder": p.RunHolder, "client": clientOf(d, r), "principal": p, "provider": provider}}, nil
	}
	admitted := guard(h)
	if d.Admit != nil {
		admitted = d.Admit(admitted)
	}
	// The principal rides in the context from here on, as on every other
	// authenticated request, for Admit and the tools' API calls.
	withPrincipal := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
			if p, ok := ti.Extra["principal"].(identity.Principal); ok {
				r = r.WithContext(identity.WithPrincipal(r.Context(), p))
			}
			if provider, _ := ti.Extra["provider"].(bool); provider {
				tok, _ := ti.Extra["token"].(string)
				r = r.WithContext(withProviderToken(r.Context(), tok))
			}
		}
		admitted.ServeHTTP(w, r)
	})
	mux.Handle(Path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.MaxBody > 0 {
			r.Body = http.MaxBytesReader(w, r.Body, d.MaxBody)
		}
		auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: baseURL(d, r) + MetadataPath,
			AllowMissingExpiration: true})(withPrincipal).ServeHTTP(w, r)
	}))
	// The metadata answers at the bare path, which a 401 names, and at
	// the path RFC 9728 section 3.1 derives from the resource's
	// (/.well-known/oauth-protected-resource/mcp), which clients of the
	// 2025-11-25 specification try first when they start without a 401.
	metadata := metadataHandler(d)
	mux.Handle("GET "+MetadataPath, metadata)
	mux.Handle("GET "+MetadataPath+Path, metadata)
}

// metadataHandler serves the protected resource metadata (RFC 9728) of
// /mcp: the resource at the public URL and, with sign-in configured, the
// provider as its authorization server.
func metadataHandler(d Deps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		meta := &oauthex.ProtectedResourceMetadata{
			Resource:               baseURL(d, r) + Path,
			BearerMethodsSupported: []string{"header"},
			ResourceName:           "Bothy",
			ResourceDocumentation:  baseURL(d, r) + "/api/v1",
		}
		if d.Provider != nil {
			meta.AuthorizationServers = []string{d.Provider.Issuer()}
		}
		auth.ProtectedResourceMetadataHandler(meta).ServeHTTP(w, r)
	})
}

// clientOf is the address r came from, without its port.
func clientOf(d Deps, r *http.Request) string {
	if d.Client != nil {
		return d.Client(r)
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// baseURL is the URL clients reach the server at: d.PublicURL, or without
// it the scheme and host the request came to (behind a proxy:
// X-Forwarded-Proto, which the server's chain trusts only from its
// proxies).
func baseURL(d Deps, r *http.Request) string {
	if d.PublicURL != nil {
		return d.PublicURL()
	}
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func newServer(name string) *mcp.Server {
	return mcp.NewServer(&mcp.Implementation{Name: name, Version: version.Get().Version}, &mcp.ServerOptions{
		// Which tools a list holds depends on the caller's token: no
		// intermediary may cache it for another caller.
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.TTLMs, c.CacheScope = 0, "private" },
	})
}

// callerClient returns an SDK client that speaks to the API in-process
// with the caller's token, and the holder name of the caller's claims.
func callerClient(d Deps, req *mcp.CallToolRequest) (*agent.Client, string, error) {
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return nil, "", errors.New("no bearer token")
	}
	token, _ := req.Extra.TokenInfo.Extra["token"].(string)
	client, _ := req.Extra.TokenInfo.Extra["client"].(string)
	c, err := agent.NewClient("http://bothy.internal", token, agent.ClientOptions{
		HTTPClient: &http.Client{Transport: inProcess{h: d.API, client: client}}, UserAgent: "bothy-mcp"})
	if err != nil {
		return nil, "", err
	}
	// A run token acts as the holder it was minted for (the runner that
	// claimed the run); any other token as one holder per token: an MCP
	// runtime has no process id of its own, and its calls come one request
	// at a time. Either is parsed as every face parses a holder.
	name, _ := req.Extra.TokenInfo.Extra["holder"].(string)
	if name == "" {
		sum := sha256.Sum256([]byte(token))
		name = "mcp-" + hex.EncodeToString(sum[:8])
	}
	h, err := runs.ParseHolder(&name)
	if err != nil {
		return nil, "", err
	}
	return c, string(h), nil
}

// inProcess serves a request with the server's own handler, as coming
// from client, the MCP request's client (its access log line and its
// limits are the client's).
type inProcess struct {
	h      http.Handler
	client string
}

// RoundTrip answers r in-process.
func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	r.RemoteAddr = net.JoinHostPort(t.client, "0")
	if t.client == "" {
		r.RemoteAddr = "127.0.0.1:0"
	}
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// toolError is what a tool answers for a refused or failed call: the API's
// code and reason, never content, and the same for a hidden and a missing
// thing (the API answers both not_found).
//
// A refusal that names a wait (rate_limited, unavailable) says it, in the
// seconds of Retry-After: "rate_limited; retry after 3s". A runtime reads only the
// tool result, never the API's headers, and would otherwise guess.
func toolError(err error) error {
	code := agent.ErrorCode(err)
	if code == "" {
		return errors.New("the call failed")
	}
	msg := code
	if reason := agent.ErrorReason(err); reason != "" {
		msg += " (" + reason + ")"
	}
	var e *agent.Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		msg += "; retry after " + httpx.RetrySeconds(e.RetryAfter) + "s"
	}
	return errors.New(msg)
}

// jsonText renders v as the text content of a tool result.
func jsonText(v any) *mcp.CallToolResult {
	b, _ := json.MarshalIndent(v, "", "  ")
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}
}
