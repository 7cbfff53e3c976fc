package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
)

// someID is a well-formed id that names nothing: the method decides before
// any route looks its id up.
const someID = "00000000-0000-4000-8000-000000000000"

// plainDo sends method to url with a plain client and no token. The
// operational endpoints, /graphql and the playground are outside the OpenAPI
// document, so apitest's REST helper has nothing to validate them against.
func plainDo(t *testing.T, method, url string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rawDo(t, req)
}

// wantMethodNotAllowed checks a 405 answer: the problem shape of every REST
// error with code method_not_allowed, and Allow naming the path's methods.
func wantMethodNotAllowed(t *testing.T, what string, status int, h http.Header, body []byte, allow string) {
	t.Helper()
	if status != http.StatusMethodNotAllowed || !strings.HasPrefix(h.Get("Content-Type"), "application/problem+json") {
		t.Fatalf("%s: %d %s %s, want 405 problem+json", what, status, h.Get("Content-Type"), body)
	}
	if got := h.Get("Allow"); got != allow {
		t.Fatalf("%s: Allow %q, want %q", what, got, allow)
	}
	var p apitest.Problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("%s: %v: %s", what, err, body)
	}
	if p.Code != "method_not_allowed" || p.Status != http.StatusMethodNotAllowed ||
		p.Type != "https://bothy.example.com/problems/method_not_allowed" || p.Title == "" || p.CorrelationID == "" {
		t.Fatalf("%s: problem %s", what, body)
	}
	if h.Get("Correlation-Id") != p.CorrelationID {
		t.Fatalf("%s: Correlation-Id %q, problem says %q", what, h.Get("Correlation-Id"), p.CorrelationID)
	}
}

// testMethodNotAllowed: a method a known path does not serve answers 405
// method_not_allowed with Allow listing the methods it does serve, on the
// REST routes, the REST index, the contract, /graphql and the operational
// endpoints, before any token is asked for; unknown paths stay 404.
func testMethodNotAllowed(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})

	t.Run("REST routes", func(t *testing.T) { restRoutesRefuseMethods(t, env) })

	t.Run("other endpoints", func(t *testing.T) {
		for _, tc := range []struct{ method, path, allow string }{
			{http.MethodPut, "/api/v1", "GET"},
			{http.MethodPost, "/api/v1", "GET"},
			{http.MethodDelete, "/api/openapi.yaml", "GET"},
			{http.MethodPost, "/healthz", "GET"},
			{http.MethodPut, "/readyz", "GET"},
			{http.MethodPost, "/metrics", "GET"},
			{http.MethodPut, "/graphql", "GET, POST, OPTIONS"},
			{http.MethodDelete, "/graphql", "GET, POST, OPTIONS"},
			{http.MethodPost, "/", "GET"},
			{http.MethodPost, "/playground", "GET"},
		} {
			st, h, body := plainDo(t, tc.method, env.URL+tc.path)
			wantMethodNotAllowed(t, tc.method+" "+tc.path, st, h, body, tc.allow)
		}
	})

	t.Run("served methods still answer", func(t *testing.T) {
		for _, tc := range []struct {
			method, path string
			want         int
		}{
			{http.MethodGet, "/api/v1", http.StatusOK},
			{http.MethodGet, "/healthz", http.StatusOK},
			{http.MethodGet, "/metrics", http.StatusOK},
			{http.MethodGet, "/api/openapi.yaml", http.StatusOK},
			// HEAD is served wherever GET is (net/http), so Allow leaves it out.
			{http.MethodHead, "/api/v1", http.StatusOK},
			{http.MethodGet, "/api/v1/me", http.StatusUnauthorized},
		} {
			if st, _, body := plainDo(t, tc.method, env.URL+tc.path); st != tc.want {
				t.Fatalf("%s %s: %d %s, want %d", tc.method, tc.path, st, body, tc.want)
			}
		}
	})

	t.Run("unknown paths stay 404", func(t *testing.T) { unknownPathsStay404(t, env) })
}

// restRoutesRefuseMethods checks the 405 of a method a REST route does not
// serve, with and without a token.
func restRoutesRefuseMethods(t *testing.T, env *apitest.Env) {
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodPut, "/api/v1/me", "GET"},
		{http.MethodPost, "/api/v1/me", "GET"},
		{http.MethodDelete, "/api/v1/principals", "GET, POST"},
		{http.MethodPut, "/api/v1/messages/" + someID, "GET, DELETE"},
		{http.MethodPost, "/api/v1/channels/" + someID, "GET, PATCH"},
		{http.MethodGet, "/api/v1/runs/" + someID + "/start", "POST"},
		{http.MethodPatch, "/api/v1/channels/" + someID + "/operator", "PUT"},
		{http.MethodGet, "/api/v1/groups/" + someID + "/members/" + someID, "DELETE"},
		// Without a CORS origin list an OPTIONS request is no preflight.
		{http.MethodOptions, "/api/v1/me", "GET"},
	} {
		what := tc.method + " " + tc.path
		// The harness validates an answer on a known path with a
		// method outside the document as a Problem.
		r := env.RESTWith(tc.method, tc.path, "", nil, nil)
		wantMethodNotAllowed(t, what, r.Status, r.Header, r.Body, tc.allow)
		// A token changes nothing: the method is refused before
		// authentication.
		r = env.REST(tc.method, tc.path, env.World.Token("alex"), nil)
		wantMethodNotAllowed(t, what+" with a token", r.Status, r.Header, r.Body, tc.allow)
	}
}

// unknownPathsStay404 checks that a path no route knows answers 404
// without Allow, whatever the method.
func unknownPathsStay404(t *testing.T, env *apitest.Env) {
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/api/v1/nothing"},
		{http.MethodPut, "/api/v1/nothing"},
		{http.MethodGet, "/api/v1/"},
		{http.MethodDelete, "/api/v1/me/more"},
		{http.MethodPost, "/api/v1/principals/" + someID + "/nothing"},
		{http.MethodGet, "/nothing"},
		{http.MethodPut, "/nothing"},
		{http.MethodPost, "/healthz/more"},
	} {
		what := tc.method + " " + tc.path
		var (
			st   int
			h    http.Header
			body []byte
		)
		if strings.HasPrefix(tc.path, "/api/v1/") {
			r := env.REST(tc.method, tc.path, "", nil)
			st, h, body = r.Status, r.Header, r.Body
		} else {
			st, h, body = plainDo(t, tc.method, env.URL+tc.path)
		}
		if st != http.StatusNotFound || h.Get("Allow") != "" || !strings.HasPrefix(h.Get("Content-Type"), "application/problem+json") {
			t.Fatalf("%s: %d Allow %q %s, want 404 problem without Allow", what, st, h.Get("Allow"), body)
		}
		var p apitest.Problem
		if err := json.Unmarshal(body, &p); err != nil || p.Code != "not_found" {
			t.Fatalf("%s: %s", what, body)
		}
	}
}

// testMethodNotAllowedOnTheMetricsListener: the separate metrics listener
// (metrics.addr) refuses other methods than GET the same way, and still
// serves the metrics on GET.
func testMethodNotAllowedOnTheMetricsListener(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{config.MetricsAddr: "127.0.0.1:0"}})
	base := metricsBase(t, env)
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		st, h, body := plainDo(t, m, base+"/metrics")
		wantMethodNotAllowed(t, m+" /metrics on metrics.addr", st, h, body, "GET")
	}
	if text := metricsText(t, base); !strings.Contains(text, "bothy_build_info") {
		t.Fatal("the metrics listener serves no bothy metrics")
	}
	// On the API port /metrics is an unknown path now, whatever the method.
	if st, h, _ := plainDo(t, http.MethodPost, env.URL+"/metrics"); st != http.StatusNotFound || h.Get("Allow") != "" {
		t.Fatalf("POST /metrics on the API port with metrics.addr: %d Allow %q, want 404", st, h.Get("Allow"))
	}
}

// TestMethodNotAllowed runs the cases of unsupported methods on known paths.
func TestMethodNotAllowed(t *testing.T) {
	t.Parallel()
	t.Run("api listener", testMethodNotAllowed)
	t.Run("metrics listener", testMethodNotAllowedOnTheMetricsListener)
}
