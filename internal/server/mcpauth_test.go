package server_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/oauth2-proxy/mockoidc"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
)

// The resource the test server's metadata names (http.public_url of
// signInEnv + /mcp): the audience of the provider's access tokens.
const (
	mcpResource = "https://chat.example.com/mcp"
	mcpMetadata = "https://chat.example.com/.well-known/oauth-protected-resource"
)

// accessToken mints an access token of m's key with claims over a valid
// base (m's issuer, the Bothy resource as audience, five minutes to live);
// a claim set to nil is left out.
func accessToken(t *testing.T, m *mockoidc.MockOIDC, claims jwt.MapClaims) string {
	t.Helper()
	now := time.Now()
	all := jwt.MapClaims{"iss": m.Issuer(), "aud": mcpResource, "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix()}
	for k, v := range claims {
		if v == nil {
			delete(all, k)
			continue
		}
		all[k] = v
	}
	tok, err := m.Keypair.SignJWT(all)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// withBearer adds a token to every request of an MCP client.
type withBearer struct{ token string }

func (b withBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession opens an MCP session (the official Go SDK over Streamable
// HTTP) to env's /mcp with token.
func mcpSession(t *testing.T, env *apitest.Env, token string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "bothy-test", Version: "1"}, nil)
	s, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: env.URL + "/mcp",
		HTTPClient: &http.Client{Transport: withBearer{token}}}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// mcpTool calls tool and returns its structured content, text and whether
// it is a tool error.
func mcpTool(t *testing.T, s *mcp.ClientSession, tool string, args map[string]any) (map[string]any, string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	text := ""
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &out)
	return out, text, res.IsError
}

// mcpToolNames lists the tools s offers, by name.
func mcpToolNames(t *testing.T, s *mcp.ClientSession) string {
	t.Helper()
	res, err := s.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return strings.Join(names, ",")
}

// postMCPRaw posts tools/list to env's /mcp with token and returns the
// status, WWW-Authenticate and body.
func postMCPRaw(t *testing.T, env *apitest.Env, token string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, env.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(b)
}

// testMCPProviderAccessTokens: with OIDC configured, an MCP client logs in
// at the provider by itself: the protected resource metadata names the
// provider, and /mcp takes the provider's access tokens for the Bothy
// resource as the person they name (linked account, else verified
// address), with exactly that person's rights; a Bothy token keeps
// working.
func testMCPProviderAccessTokens(t *testing.T) {
	t.Parallel()
	m := provider(t)
	env := signInEnv(t, m, map[string]string{})

	wantResourceMetadata(t, env, m)

	// Alex's first token links the account by the verified address.
	alex := mcpSession(t, env, accessToken(t, m, jwt.MapClaims{"sub": "idp-alex", "email": "alex@example.com", "email_verified": true}))
	if got := mcpToolNames(t, alex); got != "get_run,list_channels,list_runs,mention_agent,post_message,read_file,read_thread" {
		t.Fatalf("people's tools: %s", got)
	}
	// Later tokens name the account alone.
	alex = mcpSession(t, env, accessToken(t, m, jwt.MapClaims{"sub": "idp-alex"}))
	sam := mcpSession(t, env, accessToken(t, m, jwt.MapClaims{"sub": "idp-sam", "email": "sam@example.com", "email_verified": true}))
	esk := env.Main("Support/Eskalation")
	if out, text, isErr := mcpTool(t, alex, "read_thread", map[string]any{"thread_id": esk}); isErr || out["id"] != esk {
		t.Fatalf("alex reads Support/Eskalation: %s", text)
	}
	if _, text, isErr := mcpTool(t, sam, "read_thread", map[string]any{"thread_id": esk}); !isErr || !strings.Contains(text, "not_found") {
		t.Fatalf("sam reads Support/Eskalation: %s", text)
	}
	out, text, isErr := mcpTool(t, alex, "mention_agent", map[string]any{"thread_id": esk, "text": "@lotse how full is the toner?"})
	if isErr || out["run_id"] == nil {
		t.Fatalf("mention_agent: %s", text)
	}
	if n := env.Count(`SELECT count(*) FROM runs r JOIN principals p ON p.id = r.triggered_by WHERE p.handle = 'alex'`); n != 1 {
		t.Fatalf("%d runs requested by alex, want the one her token started", n)
	}
	// A Bothy token keeps working.
	if got := mcpToolNames(t, mcpSession(t, env, env.World.Token("alex"))); !strings.Contains(got, "read_thread") {
		t.Fatalf("a Bothy token's tools: %s", got)
	}
}

// wantResourceMetadata checks env's protected resource metadata: it names
// the Bothy resource and the provider m as its one authorization server.
func wantResourceMetadata(t *testing.T, env *apitest.Env, m *mockoidc.MockOIDC) {
	t.Helper()
	// At the path a 401 names and at the one RFC 9728 derives from /mcp.
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		resp, err := http.Get(env.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var meta struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
		}
		err = json.NewDecoder(resp.Body).Decode(&meta)
		resp.Body.Close()
		if err != nil || meta.Resource != mcpResource || len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != m.Issuer() {
			t.Fatalf("%s: %+v (%v), want the resource %s and the provider %s", path, meta, err, mcpResource, m.Issuer())
		}
	}
}

// testMCPProviderAccessTokensRefused: a token that is not the provider's
// for the Bothy resource, or names no active person of the server, gets
// the same 401 as a made-up token, naming the resource metadata; no
// refusal tells whether a person exists.
func testMCPProviderAccessTokensRefused(t *testing.T) {
	t.Parallel()
	m := provider(t)
	env := signInEnv(t, m, map[string]string{})
	env.MustREST(t, http.MethodPatch, "/api/v1/principals/"+env.World.ID("writer"), env.World.Token("robin"), map[string]any{"status": "disabled"}, 200)
	other, err := mockoidc.RandomKeypair(2048)
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := other.SignJWT(jwt.MapClaims{"iss": m.Issuer(), "aud": mcpResource, "sub": "idp-alex", "email": "alex@example.com",
		"email_verified": true, "exp": time.Now().Add(time.Minute).Unix()})
	seg := func(v any) string { b, _ := json.Marshal(v); return base64.RawURLEncoding.EncodeToString(b) }
	alex := jwt.MapClaims{"sub": "idp-alex", "email": "alex@example.com", "email_verified": true}
	with := func(extra jwt.MapClaims) jwt.MapClaims {
		c := jwt.MapClaims{}
		for k, v := range alex {
			c[k] = v
		}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	_, _, want := postMCPRaw(t, env, "made-up")
	for name, tok := range map[string]string{
		"wrong audience":     accessToken(t, m, with(jwt.MapClaims{"aud": m.Config().ClientID})),
		"another resource":   accessToken(t, m, with(jwt.MapClaims{"aud": "https://chat.example.com/api"})),
		"no audience":        accessToken(t, m, with(jwt.MapClaims{"aud": nil})),
		"wrong issuer":       accessToken(t, m, with(jwt.MapClaims{"iss": "https://idp.example.com"})),
		"expired":            accessToken(t, m, with(jwt.MapClaims{"exp": time.Now().Add(-time.Minute).Unix()})),
		"another key":        forged,
		"alg none":           seg(map[string]string{"alg": "none", "typ": "JWT"}) + "." + seg(map[string]any{"iss": m.Issuer(), "aud": mcpResource, "sub": "idp-alex", "email": "alex@example.com", "email_verified": true, "exp": time.Now().Add(time.Minute).Unix()}) + ".",
		"unknown person":     accessToken(t, m, jwt.MapClaims{"sub": "idp-x", "email": "nobody@example.com", "email_verified": true}),
		"address unverified": accessToken(t, m, jwt.MapClaims{"sub": "idp-sam", "email": "sam@example.com"}),
		"disabled person":    accessToken(t, m, jwt.MapClaims{"sub": "idp-writer", "email": "writer@example.com", "email_verified": true}),
	} {
		status, auth, body := postMCPRaw(t, env, tok)
		if status != http.StatusUnauthorized || !strings.Contains(auth, `resource_metadata="`+mcpMetadata+`"`) || body != want {
			t.Errorf("%s: %d %q %q, want 401 naming the metadata, as for a made-up token (%q)", name, status, auth, body, want)
		}
	}
	if n := env.Count(`SELECT count(*) FROM principal_identities`); n != 0 {
		t.Fatalf("refused tokens linked %d accounts", n)
	}
	if n := env.Count(`SELECT count(*) FROM principals`); n != len(env.World.Principals) {
		t.Fatalf("%d principals after refused tokens, want the world's %d", n, len(env.World.Principals))
	}
	// The provider's token opens /mcp only: REST and GraphQL take Bothy
	// tokens alone, since its audience is the MCP resource.
	if r := env.REST(http.MethodGet, "/api/v1/me", accessToken(t, m, alex), nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("REST with a provider token: %d", r.Status)
	}
}

// toServer sends the requests for http.public_url (chat.example.com, on
// which the test server does not listen) to env, and every other request
// on unchanged: the MCP client sees the URLs the metadata names.
type toServer struct{ env *apitest.Env }

func (t toServer) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host == "chat.example.com" {
		u, _ := url.Parse(t.env.URL)
		r = r.Clone(r.Context())
		r.URL.Scheme, r.URL.Host, r.Host = u.Scheme, u.Host, u.Host
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPClientLogsInByItself: the official Go SDK's MCP client, given
// only the URL, logs Alex in with its OAuth support: the 401 names the
// metadata, the metadata the provider, the client runs the code flow with
// PKCE there (as a client registered in advance: mockoidc registers none
// dynamically) and calls the tools with the access token it got.
// mockoidc puts its client ID in the audience of its access tokens, so the
// provider's client here is named by the resource URL; and no address in
// them, so Alex's account is linked by a browser sign-in first.
func TestMCPClientLogsInByItself(t *testing.T) {
	t.Parallel()
	m := provider(t)
	m.ClientID = mcpResource
	env := signInEnv(t, m, map[string]string{})
	sessionOf(t, signIn(t, env, m, &mockoidc.MockUser{Subject: "idp-alex", Email: "alex@example.com", EmailVerified: true}))
	client := &http.Client{Transport: toServer{env}}
	var asked url.Values
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		PreregisteredClient: &oauthex.ClientCredentials{ClientID: m.ClientID,
			ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: m.ClientSecret}},
		RedirectURL: "http://127.0.0.1:1/callback",
		ScopeFilter: func([]string) []string { return []string{"openid", "email"} },
		// The browser: the provider signs Alex in and redirects with the code.
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			u, _ := url.Parse(args.URL)
			asked = u.Query()
			m.QueueUser(&mockoidc.MockUser{Subject: "idp-alex", Email: "alex@example.com", EmailVerified: true})
			back, err := url.Parse(browse(t, args.URL).Header.Get("Location"))
			if err != nil {
				return nil, err
			}
			return &auth.AuthorizationResult{Code: back.Query().Get("code"), State: back.Query().Get("state")}, nil
		},
		AcceptUnadvertisedIss: true,
		Client:                client,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "bothy-test", Version: "1"}, nil)
	s, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: mcpResource, HTTPClient: client, OAuthHandler: h}, nil)
	if err != nil {
		t.Fatalf("connect with the SDK's OAuth: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if asked.Get("resource") != mcpResource || asked.Get("code_challenge_method") != "S256" {
		t.Fatalf("the client asked the provider with %v: want the resource %s and PKCE", asked, mcpResource)
	}
	esk := env.Main("Support/Eskalation")
	if out, text, isErr := mcpTool(t, s, "read_thread", map[string]any{"thread_id": esk}); isErr || out["id"] != esk {
		t.Fatalf("alex reads Support/Eskalation: %s", text)
	}
}

// testMCPProviderTokenSpendsThePersonsBucket: a tool call with the
// provider's token spends from the person's own bucket of the rate class,
// the one the person's Bothy token spends from: with a burst of three in
// rl.read, Alex's GraphQL query leaves two, her list_channels with the
// provider's token one.
func testMCPProviderTokenSpendsThePersonsBucket(t *testing.T) {
	t.Parallel()
	m := provider(t)
	env := signInEnv(t, m, map[string]string{config.RateReadBurst: "3", config.RateReadPerMinute: "1"})
	const listChannels = `query ListChannels($first: Int) { channels(first: $first) { nodes { id } } }`
	if res := env.GraphQL(env.World.Token("alex"), listChannels, map[string]any{"first": 5}, nil); len(res.Errors) != 0 ||
		!strings.HasPrefix(res.Header.Get("RateLimit"), `"rl.read";r=2;`) {
		t.Fatalf("GraphQL: %+v, RateLimit %q", res.Errors, res.Header.Get("RateLimit"))
	}
	tok := accessToken(t, m, jwt.MapClaims{"sub": "idp-alex", "email": "alex@example.com", "email_verified": true})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_channels","arguments":{"first":5}}}`
	req, _ := http.NewRequest(http.MethodPost, env.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Contains(string(b), `"isError":true`) || !strings.HasPrefix(resp.Header.Get("RateLimit"), `"rl.read";r=1;`) {
		t.Fatalf("list_channels with the provider's token: %d %s, RateLimit %q", resp.StatusCode, b, resp.Header.Get("RateLimit"))
	}
}

// testMCPProviderTokenCreatesPeople: with auth.oidc.create_people, a token
// naming an unknown person of an allowed domain brings them in as a
// browser sign-in would (a new person without grants, the handle from the
// address); another domain is still refused.
func testMCPProviderTokenCreatesPeople(t *testing.T) {
	t.Parallel()
	m := provider(t)
	env := signInEnv(t, m, map[string]string{config.AuthOIDCCreatePeople: "true", config.AuthOIDCAllowedDomains: "example.com"})
	kim := mcpSession(t, env, accessToken(t, m, jwt.MapClaims{"sub": "idp-kim", "email": "kim@example.com", "email_verified": true}))
	if out, text, isErr := mcpTool(t, kim, "list_channels", map[string]any{}); isErr || out == nil {
		t.Fatalf("kim's list_channels: %s", text)
	}
	if n := env.Count(`SELECT count(*) FROM principals p JOIN principal_identities i ON i.principal_id = p.id
		WHERE p.handle = 'kim' AND i.subject = 'idp-kim'`); n != 1 {
		t.Fatalf("%d linked people kim, want 1", n)
	}
	if n := env.Count(`SELECT count(*) FROM grants g JOIN principals p ON p.id = g.subject_principal_id WHERE p.handle = 'kim'`); n != 0 {
		t.Fatalf("a created person has %d grants", n)
	}
	if status, _, _ := postMCPRaw(t, env, accessToken(t, m, jwt.MapClaims{"sub": "idp-z", "email": "z@elsewhere.example.net", "email_verified": true})); status != http.StatusUnauthorized {
		t.Fatalf("another domain: %d", status)
	}
}

// TestMCPProviderTokens runs the tests of the MCP face with the provider's access tokens as subtests: one
// top-level test per area keeps internal/server's list short enough to
// read (fewer than 80 top-level tests, issue 48).
func TestMCPProviderTokens(t *testing.T) {
	t.Run("MCPProviderAccessTokens", testMCPProviderAccessTokens)
	t.Run("MCPProviderAccessTokensRefused", testMCPProviderAccessTokensRefused)
	t.Run("MCPProviderTokenSpendsThePersonsBucket", testMCPProviderTokenSpendsThePersonsBucket)
	t.Run("MCPProviderTokenCreatesPeople", testMCPProviderTokenCreatesPeople)
}
