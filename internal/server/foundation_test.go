package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/config"
)

type viewerData struct {
	Viewer struct {
		ID          string  `json:"id"`
		Kind        string  `json:"kind"`
		Handle      string  `json:"handle"`
		DisplayName string  `json:"displayName"`
		Email       *string `json:"email"`
		Status      string  `json:"status"`
		IsOwner     bool    `json:"isOwner"`
		CreatedAt   string  `json:"createdAt"`
	} `json:"viewer"`
}

const viewerQuery = `{ viewer { id kind handle displayName email status isOwner createdAt } }`

func testViewerSameInBothFaces(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	for _, h := range []string{"alex", "lotse", "feedbot", "robin"} {
		var g viewerData
		res := env.GraphQL(env.World.Token(h), viewerQuery, nil, &g)
		if len(res.Errors) > 0 {
			t.Fatalf("%s: graphql errors %+v", h, res.Errors)
		}
		r := env.REST(http.MethodGet, "/api/v1/me", env.World.Token(h), nil)
		if r.Status != http.StatusOK {
			t.Fatalf("%s: GET /api/v1/me = %d %s", h, r.Status, r.Body)
		}
		var m map[string]any
		r.JSON(t, &m)
		wantSameViewer(t, h, env.World.ID(h), m, g)
	}
}

// wantSameViewer checks that m, GET /api/v1/me of h (whose id is id), and
// g, GraphQL's viewer of h, name the same principal with the same members,
// each in its face's spelling; only a person has an e-mail address.
func wantSameViewer(t *testing.T, h, id string, m map[string]any, g viewerData) {
	t.Helper()
	if m["id"] != id || g.Viewer.ID != id {
		t.Fatalf("%s: ids differ: rest %v graphql %v want %s", h, m["id"], g.Viewer.ID, id)
	}
	if m["handle"] != h || g.Viewer.Handle != h {
		t.Fatalf("%s: handle rest %v graphql %v", h, m["handle"], g.Viewer.Handle)
	}
	if m["kind"] != strings.ToLower(g.Viewer.Kind) || m["status"] != "active" || g.Viewer.Status != "ACTIVE" {
		t.Fatalf("%s: enums differ: rest %v/%v graphql %v/%v", h, m["kind"], m["status"], g.Viewer.Kind, g.Viewer.Status)
	}
	if m["created_at"] != g.Viewer.CreatedAt || m["display_name"] != g.Viewer.DisplayName || m["is_owner"] != g.Viewer.IsOwner {
		t.Fatalf("%s: members differ: rest %v graphql %+v", h, m, g.Viewer)
	}
	_, hasEmail := m["email"]
	if wantEmail := g.Viewer.Kind == "USER"; hasEmail != wantEmail || (g.Viewer.Email != nil) != wantEmail {
		t.Fatalf("%s: email present rest=%v graphql=%v, want %v", h, hasEmail, g.Viewer.Email != nil, wantEmail)
	}
}

func testUnauthorizedInBothFaces(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	revoked := env.World.Token("sam")
	if err := env.Server.Modules().Writers.Identity.RevokeToken(context.Background(), revoked); err != nil {
		t.Fatal(err)
	}
	disabled := env.World.Token("writer")
	if err := env.Server.Modules().Writers.Identity.SetStatus(context.Background(), env.World.ID("writer"), identity.StatusDisabled); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"missing":   "",
		"unknown":   "bothy_s_" + strings.Repeat("A", 43),
		"malformed": "not-a-token",
		"revoked":   revoked,
		"disabled":  disabled,
	}
	for name, tok := range cases {
		t.Run(name, func(t *testing.T) {
			r := env.REST(http.MethodGet, "/api/v1/me", tok, nil)
			if r.Status != http.StatusUnauthorized {
				t.Fatalf("REST status %d, want 401", r.Status)
			}
			if p := r.Problem(t); p.Code != "unauthorized" || p.Status != 401 {
				t.Fatalf("REST problem %+v", p)
			}
			g := env.GraphQL(tok, viewerQuery, nil, nil)
			if g.Status != http.StatusUnauthorized || len(g.Errors) != 1 || g.Errors[0].Extensions.Code != "unauthorized" {
				t.Fatalf("GraphQL status %d errors %+v", g.Status, g.Errors)
			}
		})
	}
}

func testQueryLimits(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{
		config.GraphQLComplexityLimit: "10",
		config.GraphQLDepthLimit:      "2",
	}})
	tok := env.World.Token("alex")
	ok := env.GraphQL(tok, `{ viewer { id } }`, nil, &struct {
		Viewer struct {
			ID string `json:"id"`
		} `json:"viewer"`
	}{})
	if len(ok.Errors) > 0 {
		t.Fatalf("a small query was refused: %+v", ok.Errors)
	}
	complex := `{ a: viewer { id handle } b: viewer { id handle } c: viewer { id handle } d: viewer { id handle } }`
	res := env.GraphQL(tok, complex, nil, nil)
	if len(res.Errors) != 1 || res.Errors[0].Extensions.Code != "validation_failed" || res.Errors[0].Extensions.Reason != "complexity_limit_exceeded" {
		t.Fatalf("over-complex query: %+v", res.Errors)
	}
	// Deep but cheap (no list that multiplies the cost): the depth limit
	// refuses it, not the complexity limit.
	deep := `query($m: ID!) { message(id: $m) { author { id } } }`
	res = env.GraphQL(tok, deep, map[string]any{"m": env.Main("Support/Allgemein")}, nil)
	if len(res.Errors) != 1 || res.Errors[0].Extensions.Reason != "depth_limit_exceeded" {
		t.Fatalf("over-deep query: %+v", res.Errors)
	}
	if string(res.Data) != "" && string(res.Data) != "null" {
		t.Fatalf("a refused query returned data: %s", res.Data)
	}
}

func testParserTokenLimit(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{config.GraphQLParserTokenLimit: "100"}})
	q := "{ " + strings.Repeat("viewer { id } ", 40) + "}"
	res := env.GraphQL(env.World.Token("alex"), q, nil, nil)
	if len(res.Errors) == 0 || res.Errors[0].Extensions.Code != "validation_failed" {
		t.Fatalf("an over-long document was not refused: %+v", res.Errors)
	}
}

func testBodyCap(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{config.HTTPMaxBodyBytes: "2048"}})
	big := `{"query":"{ viewer { id } }","pad":"` + strings.Repeat("x", 4096) + `"}`
	r := env.REST(http.MethodGet, "/api/v1/me", env.World.Token("alex"), big)
	if r.Status != http.StatusRequestEntityTooLarge || r.Problem(t).Code != "payload_too_large" {
		t.Fatalf("REST over-size body: %d %s", r.Status, r.Body)
	}
	req, _ := http.NewRequest(http.MethodPost, env.URL+"/graphql", strings.NewReader(big))
	req.Header.Set("Authorization", "Bearer "+env.World.Token("alex"))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("GraphQL over-size body: %d", resp.StatusCode)
	}
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{
		config.RateReadBurst:     "2",
		config.RateReadPerMinute: "1",
	}})
	alex := env.World.Token("alex")
	for i := 0; i < 2; i++ {
		if r := env.REST(http.MethodGet, "/api/v1/me", alex, nil); r.Status != http.StatusOK {
			t.Fatalf("request %d within the burst: %d", i, r.Status)
		}
	}
	r := env.REST(http.MethodGet, "/api/v1/me", alex, nil)
	if r.Status != http.StatusTooManyRequests || r.Problem(t).Code != "rate_limited" {
		t.Fatalf("beyond the burst: %d %s", r.Status, r.Body)
	}
	if ra := r.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Fatalf("Retry-After = %q", ra)
	}
	g := env.GraphQL(alex, `{ viewer { id } }`, nil, nil)
	if len(g.Errors) != 1 || g.Errors[0].Extensions.Code != "rate_limited" || g.Header.Get("Retry-After") == "" {
		t.Fatalf("GraphQL beyond the burst: %+v header %q", g.Errors, g.Header.Get("Retry-After"))
	}
	// Another principal has its own bucket.
	if r := env.REST(http.MethodGet, "/api/v1/me", env.World.Token("sam"), nil); r.Status != http.StatusOK {
		t.Fatalf("sam shares alex's bucket: %d", r.Status)
	}
}

func testOperationalEndpoints(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	waitReady(t, env) // the LISTEN connection opens just after the start
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 200, "/api/openapi.yaml": 200} {
		resp, err := http.Get(env.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s = %d, want %d", path, resp.StatusCode, want)
		}
		if resp.Header.Get("Correlation-Id") == "" {
			t.Fatalf("%s: no Correlation-Id", path)
		}
	}
	r := env.REST(http.MethodGet, "/api/v1/nowhere", env.World.Token("alex"), nil)
	if r.Status != http.StatusNotFound || r.Problem(t).Code != "not_found" {
		t.Fatalf("unknown route: %d %s", r.Status, r.Body)
	}
}

// testIntrospectionSwitch: graphql.introspection switches introspection
// and the schema document (GET /api/schema.graphql, for client
// generators) on and off together. The document is the schema served: it
// loads, has what introspection shows, and no @defer.
func testIntrospectionSwitch(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		env := apitest.Start(t, apitest.Options{Config: map[string]string{config.GraphQLIntrospection: fmt.Sprint(on)}})
		res := env.GraphQL(env.World.Token("alex"), `{ __schema { queryType { name } } }`, nil, nil)
		if on && len(res.Errors) > 0 {
			t.Fatalf("introspection on: %+v", res.Errors)
		}
		if !on && (len(res.Errors) == 0 || res.Errors[0].Extensions.Code != "forbidden" || res.Errors[0].Extensions.Reason != "introspection_disabled") {
			t.Fatalf("introspection off: %+v %s", res.Errors, res.Data)
		}
		checkSchemaDocument(t, env, on)
	}
}

// checkSchemaDocument checks GET /api/schema.graphql of env, whose
// introspection is on or off: off, it is 404; on, it is the schema served,
// as GraphQL, loading, with what introspection shows and no @defer.
func checkSchemaDocument(t *testing.T, env *apitest.Env, on bool) {
	t.Helper()
	resp, err := http.Get(env.URL + "/api/schema.graphql")
	if err != nil {
		t.Fatal(err)
	}
	sdl, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !on {
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("schema document with introspection off: %d", resp.StatusCode)
		}
		return
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/graphql") {
		t.Fatalf("schema document: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	schema, gerr := gqlparser.LoadSchema(&ast.Source{Name: "schema.graphql", Input: string(sdl)})
	if gerr != nil {
		t.Fatalf("the schema document does not load: %v", gerr)
	}
	if schema.Query.Fields.ForName("node") == nil || schema.Types["Thread"].Fields.ForName("history") == nil || strings.Contains(string(sdl), "@defer") {
		t.Fatalf("the schema document is not the served schema")
	}
}

// TestFoundation runs the tests of the foundation: both faces, limits, operational endpoints as subtests: one
// top-level test per area keeps internal/server's list short enough to
// read (fewer than 80 top-level tests, issue 48).
func TestFoundation(t *testing.T) {
	t.Run("ViewerSameInBothFaces", testViewerSameInBothFaces)
	t.Run("UnauthorizedInBothFaces", testUnauthorizedInBothFaces)
	t.Run("QueryLimits", testQueryLimits)
	t.Run("ParserTokenLimit", testParserTokenLimit)
	t.Run("BodyCap", testBodyCap)
	t.Run("OperationalEndpoints", testOperationalEndpoints)
	t.Run("IntrospectionSwitch", testIntrospectionSwitch)
}
