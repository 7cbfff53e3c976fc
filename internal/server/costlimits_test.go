package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
)

// testGraphQLCostExtension: every GraphQL answer over HTTP reports the
// operation's cost as ComplexityLimit counts it and the limit
// (extensions.cost), a refusal for the cost too; subscription events over
// WebSocket and REST bodies carry no cost (issue 24 item 4).
func testGraphQLCostExtension(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{config.GraphQLComplexityLimit: "100"}})
	alex := env.World.Token("alex")
	main := env.Main("Support/Allgemein")
	env.MustPost("alex", main, "cost-1", "a message to read back")

	// The rule of complexity.go: a field costs one plus its selection, a
	// list with a limit its item times the limit plus one.
	//   viewer { id handle }                      1 + (1 + 1)               = 3
	//   MessagePage { messages { id author { handle } } nextAfter }
	//     messages: 1 + (id 1 + author (1 + handle 1))                      = 4
	//     nextAfter                                                         = 1
	//   Thread.messages(limit: n)                 1 + 5·n
	//   thread(id) { id messages(limit: n) {…} }  1 + (1 + 1 + 5·n)        = 3 + 5·n
	const page = `messages { id author { handle } } nextAfter`
	threadQuery := func(n int) string {
		return fmt.Sprintf(`query($t: ID!) { thread(id: $t) { id messages(limit: %d) { %s } } }`, n, page)
	}
	for _, c := range []struct {
		name  string
		query string
		want  int
	}{
		{"viewer", `{ viewer { id handle } }`, 3},
		{"thread with 7 messages", threadQuery(7), 38},
		{"two root fields add up", `query($t: ID!) { viewer { id handle } thread(id: $t) { id messages(limit: 7) { ` + page + ` } } }`, 41},
	} {
		res := env.GraphQL(alex, c.query, map[string]any{"t": main}, nil)
		if len(res.Errors) > 0 {
			t.Fatalf("%s: %+v", c.name, res.Errors)
		}
		if res.Extensions == nil || res.Extensions.Cost == nil || *res.Extensions.Cost != (apitest.GQLCost{Requested: c.want, Limit: 100}) {
			t.Fatalf("%s: extensions %+v, want cost %d of 100", c.name, res.Extensions, c.want)
		}
	}
	// Over the limit (3 + 5·20 = 103): refused before it runs, without
	// data, and the answer says by how much.
	over := env.GraphQL(alex, threadQuery(20), map[string]any{"t": main}, nil)
	if len(over.Errors) != 1 || over.Errors[0].Extensions.Reason != "complexity_limit_exceeded" || over.Data != nil {
		t.Fatalf("over the limit: %+v %s", over.Errors, over.Data)
	}
	if over.Extensions == nil || over.Extensions.Cost == nil || *over.Extensions.Cost != (apitest.GQLCost{Requested: 103, Limit: 100}) {
		t.Fatalf("over the limit: extensions %+v, want cost 103 of 100", over.Extensions)
	}
	// A document that does not parse has no cost to report.
	if bad := env.GraphQL(alex, `{ viewer { id `, nil, nil); bad.Extensions != nil {
		t.Fatalf("parse error: extensions %+v", bad.Extensions)
	}

	wantRESTWithoutCost(t, env, alex, main)
	wantWebSocketWithoutCost(t, env, alex, main)
}

// wantRESTWithoutCost checks that REST bodies, answers and refusals
// alike, carry no cost: REST runs the same executor, and its bodies never
// show the envelope.
func wantRESTWithoutCost(t *testing.T, env *apitest.Env, alex, main string) {
	t.Helper()
	for _, path := range []string{"/api/v1/threads/" + main + "/messages?limit=7", "/api/v1/me", "/api/v1/threads/not-a-thread"} {
		r := env.REST(http.MethodGet, path, alex, nil)
		var top map[string]json.RawMessage
		r.JSON(t, &top)
		for _, member := range []string{"extensions", "cost"} {
			if _, has := top[member]; has {
				t.Fatalf("GET %s: the REST body has %q: %s", path, member, r.Body)
			}
		}
	}
}

// wantWebSocketWithoutCost checks that over WebSocket neither a
// subscription's events nor a query's answer carry a cost.
func wantWebSocketWithoutCost(t *testing.T, env *apitest.Env, alex, main string) {
	t.Helper()
	w := dialRaw(t, env, nil)
	w.init(alex)
	w.send(subscribeAfter("s", `subscription($a: String) { events(after: $a) { seq type } }`, logEnd(env)))
	env.MustPost("alex", main, "cost-2", "a live message")
	w.send(subscribeMsg("q", `{ viewer { id } }`))
	for seen := map[string]bool{}; !seen["s"] || !seen["q"]; {
		m, code := w.read(10 * time.Second)
		if code != 0 {
			t.Fatalf("closed with %d", code)
		}
		if m.Type == "complete" {
			continue
		}
		if m.Type != "next" {
			t.Fatalf("want next, got %+v", m)
		}
		var payload map[string]json.RawMessage
		if err := json.Unmarshal(m.Payload, &payload); err != nil {
			t.Fatalf("next %s: %v", m.Payload, err)
		}
		if _, has := payload["extensions"]; has {
			t.Fatalf("a WebSocket answer for %s has extensions: %s", m.ID, m.Payload)
		}
		seen[m.ID] = true
	}
}

// rateLimitRE splits a RateLimit field value: class, r, t.
var rateLimitRE = regexp.MustCompile(`^"(rl\.[a-z_]+)";r=([0-9]+);t=([0-9]+)$`)

// testRateLimitHeaders: REST and GraphQL answers of a request that took a
// rate-limit token carry RateLimit-Policy (the class, its burst and the
// seconds to fill it) and RateLimit (tokens left, seconds until the next
// one), counting down by one per request across both faces, the lowest of
// several spends, and r=0 with t equal to Retry-After on a 429; answers
// that took no token carry neither. Both bucket stores report alike.
func testRateLimitHeaders(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"postgres", "memory"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			checkRateLimitHeaders(t, store)
		})
	}
}

// checkRateLimitHeaders runs testRateLimitHeaders with the bucket store
// store (ratelimit.store).
func checkRateLimitHeaders(t *testing.T, store string) {
	env := apitest.Start(t, apitest.Options{Config: map[string]string{
		config.RateLimitStore:    store,
		config.RateReadBurst:     "5",
		config.RateReadPerMinute: "1",
	}})
	alex := env.World.Token("alex")
	me := func() *apitest.Response {
		return env.REST(http.MethodGet, "/api/v1/me", alex, nil)
	}
	if r := me(); r.Status != http.StatusOK {
		t.Fatalf("first read: %d %s", r.Status, r.Body)
	} else {
		wantReadRateLimit(t, "REST 1", r.Header, 4)
	}
	wantReadRateLimit(t, "REST 2", me().Header, 3)
	if g := env.GraphQL(alex, `{ viewer { id } }`, nil, nil); len(g.Errors) > 0 {
		t.Fatalf("GraphQL read: %+v", g.Errors)
	} else {
		wantReadRateLimit(t, "GraphQL", g.Header, 2)
	}
	// Two root fields take two tokens; the answer reports the lower.
	if g := env.GraphQL(alex, `{ a: viewer { id } b: viewer { id } }`, nil, nil); len(g.Errors) > 0 {
		t.Fatalf("two root fields: %+v", g.Errors)
	} else {
		wantReadRateLimit(t, "two root fields", g.Header, 0)
	}
	// The bucket is empty: both faces answer 429 with r=0 and t
	// equal to Retry-After.
	r := me()
	apitest.WantProblem(t, "REST beyond the burst", r, http.StatusTooManyRequests, "rate_limited", "")
	if secs := wantReadRateLimit(t, "REST 429", r.Header, 0); strconv.Itoa(secs) != r.Header.Get("Retry-After") {
		t.Fatalf("REST 429: t=%d, Retry-After %q", secs, r.Header.Get("Retry-After"))
	}
	g := env.GraphQL(alex, `{ viewer { id } }`, nil, nil)
	if len(g.Errors) != 1 || g.Errors[0].Extensions.Code != "rate_limited" {
		t.Fatalf("GraphQL beyond the burst: %+v", g.Errors)
	}
	if secs := wantReadRateLimit(t, "GraphQL 429", g.Header, 0); strconv.Itoa(secs) != g.Header.Get("Retry-After") {
		t.Fatalf("GraphQL 429: t=%d, Retry-After %q", secs, g.Header.Get("Retry-After"))
	}
	// Another class has its own policy and bucket (the defaults: 20
	// tokens, 60 a minute, so one is back within a second).
	post := env.Post("alex", env.Main("Support/Allgemein"), "rl-headers", "counted apart")
	if post.Status != http.StatusCreated || post.Header.Get("RateLimit-Policy") != `"rl.message";q=20;w=20` ||
		post.Header.Get("RateLimit") != `"rl.message";r=19;t=1` {
		t.Fatalf("createMessage: %d RateLimit-Policy %q RateLimit %q", post.Status,
			post.Header.Get("RateLimit-Policy"), post.Header.Get("RateLimit"))
	}
	wantNoRateLimitHeaders(t, env)
}

// readPolicy is RateLimit-Policy of the read class in
// checkRateLimitHeaders: five tokens refilled at one a minute, so the
// bucket fills in 300 s.
const readPolicy = `"rl.read";q=5;w=300`

// wantReadRateLimit checks the rate-limit headers h of the answer what: the
// read class's policy, wantLeft tokens left, and a token back within a
// minute. It returns the seconds until the next token.
func wantReadRateLimit(t *testing.T, what string, h http.Header, wantLeft int) int {
	t.Helper()
	if got := h.Get("RateLimit-Policy"); got != readPolicy {
		t.Fatalf("%s: RateLimit-Policy %q, want %q", what, got, readPolicy)
	}
	m := rateLimitRE.FindStringSubmatch(h.Get("RateLimit"))
	if m == nil || m[1] != "rl.read" || m[2] != strconv.Itoa(wantLeft) {
		t.Fatalf("%s: RateLimit %q, want rl.read with r=%d", what, h.Get("RateLimit"), wantLeft)
	}
	secs, _ := strconv.Atoi(m[3])
	// One token comes back a minute after the last was taken.
	if secs < 1 || secs > 60 {
		t.Fatalf("%s: t=%d, want 1 to 60 seconds", what, secs)
	}
	return secs
}

// wantNoRateLimitHeaders checks that requests that took no token carry no
// rate-limit headers: without a token, refused before execution, the
// index, the playground, the operational endpoints.
func wantNoRateLimitHeaders(t *testing.T, env *apitest.Env) {
	t.Helper()
	none := map[string]http.Header{
		"REST without token":    env.REST(http.MethodGet, "/api/v1/me", "", nil).Header,
		"GraphQL without token": env.GraphQL("", `{ viewer { id } }`, nil, nil).Header,
		"GraphQL parse error":   env.GraphQL(env.World.Token("sam"), `{ viewer { id `, nil, nil).Header,
		"REST index":            env.REST(http.MethodGet, "/api/v1", "", nil).Header,
	}
	for _, path := range []string{"/", "/healthz", "/readyz", "/api/openapi.yaml"} {
		resp, err := http.Get(env.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		none["GET "+path] = resp.Header
	}
	for what, h := range none {
		if h.Get("RateLimit") != "" || h.Get("RateLimit-Policy") != "" {
			t.Errorf("%s: RateLimit %q, RateLimit-Policy %q, want neither", what, h.Get("RateLimit"), h.Get("RateLimit-Policy"))
		}
	}
}

// TestCostsAndLimitsVisible runs the cases of costs and rate limits reported to clients.
func TestCostsAndLimitsVisible(t *testing.T) {
	t.Parallel()
	t.Run("cost extension", testGraphQLCostExtension)
	t.Run("RateLimit headers", testRateLimitHeaders)
	t.Run("aliased mutations answer partial data", testAliasedMutationsPartialData)
}

// aliasedToken is the answer of one aliased createToken.
type aliasedToken struct {
	Token string `json:"token"`
}

// aliasOutcomes checks that every error of the aliased createTokens a to d
// is rate_limited at the path of its alias, and that each alias either
// answered a token and no error or null and an error; it returns the
// tokens answered and the aliases refused.
func aliasOutcomes(t *testing.T, errs []apitest.GQLError, data map[string]*aliasedToken) ([]string, map[string]bool) {
	t.Helper()
	var made []string
	refused := map[string]bool{}
	for _, e := range errs {
		if e.Extensions.Code != "rate_limited" || len(e.Path) != 1 {
			t.Fatalf("error %+v", e)
		}
		refused[fmt.Sprint(e.Path[0])] = true
	}
	for _, alias := range []string{"a", "b", "c", "d"} {
		switch {
		case data[alias] != nil && data[alias].Token != "" && !refused[alias]:
			made = append(made, data[alias].Token)
		case data[alias] == nil && refused[alias]:
		default:
			t.Fatalf("%s: data %+v, refused %v", alias, data[alias], refused[alias])
		}
	}
	return made, refused
}

// testAliasedMutationsPartialData: four aliased createToken in one request
// against a bucket of two: the two that ran answer their tokens, secrets
// included, and the two refused answer null with one rate_limited error
// each at their path; exactly the two answered tokens were stored, and
// their secrets work (issue 25 point 6).
func testAliasedMutationsPartialData(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{config.RateAdminBurst: "2", config.RateAdminPerMinute: "1"}})
	alex, alexID := env.World.Token("alex"), env.World.ID("alex")
	before := env.Count(`SELECT count(*) FROM tokens WHERE principal_id = $1`, alexID)
	var data map[string]*aliasedToken
	q := `mutation($p: ID!) {
		a: createToken(principalId: $p, input: {label: "a"}) { token }
		b: createToken(principalId: $p, input: {label: "b"}) { token }
		c: createToken(principalId: $p, input: {label: "c"}) { token }
		d: createToken(principalId: $p, input: {label: "d"}) { token }
	}`
	res := env.GraphQL(alex, q, map[string]any{"p": alexID}, &data)
	made, refused := aliasOutcomes(t, res.Errors, data)
	if len(made) != 2 || len(refused) != 2 {
		t.Fatalf("%d tokens answered, %d refused; want 2 and 2 (data %s)", len(made), len(refused), res.Data)
	}
	if n := env.Count(`SELECT count(*) FROM tokens WHERE principal_id = $1`, alexID); n != before+2 {
		t.Fatalf("%d tokens stored, want %d", n-before, 2)
	}
	for _, tok := range made {
		var v struct {
			Viewer struct {
				Handle string `json:"handle"`
			} `json:"viewer"`
		}
		if r := env.GraphQL(tok, `{ viewer { handle } }`, nil, &v); len(r.Errors) != 0 || v.Viewer.Handle != "alex" {
			t.Fatalf("an answered secret does not work: %+v %+v", r.Errors, v)
		}
	}
}
