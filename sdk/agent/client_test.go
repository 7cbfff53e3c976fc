package agent_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/sdk/agent"
)

// answer serves one fixed response to every request.
func answer(t *testing.T, status int, contentType, body string, header map[string]string) *agent.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		for k, v := range header {
			w.Header().Set(k, v)
		}
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	c, err := agent.NewClient(srv.URL, "bothy_a_secret", agent.ClientOptions{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClientDecodesStrictly(t *testing.T) {
	t.Parallel()
	c := answer(t, 200, "application/json", `{"data":{"startRun":{"id":"r1","surprise":1}}}`, nil)
	_, err := c.StartRun(t.Context(), "r1", "h1")
	if err == nil || !strings.Contains(err.Error(), "surprise") {
		t.Fatalf("an unknown member must fail the decode: %v", err)
	}
	c = answer(t, 200, "application/json", `{"data":{"startRun":null},"unexpected":true}`, nil)
	if _, err := c.StartRun(t.Context(), "r1", "h1"); err == nil {
		t.Fatal("an unknown envelope member must fail the decode")
	}
	c = answer(t, 200, "application/json", `{"data":null}`, nil)
	if _, err := c.StartRun(t.Context(), "r1", "h1"); err == nil {
		t.Fatal("data null without errors must fail")
	}
}

func TestClientErrorsCarryExtensions(t *testing.T) {
	t.Parallel()
	c := answer(t, 200, "application/graphql-response+json",
		`{"errors":[{"message":"Conflict","path":["createMessage"],"locations":[{"line":1,"column":2}],"extensions":{"code":"conflict","reason":"run_not_active","status":409,"fieldErrors":[{"field":"input.runId","pointer":"/run_id","code":"run_mismatch","detail":"d"}],"retryAfterSeconds":3,"later":true}}],"data":null}`,
		nil)
	_, err := c.CreateMessage(t.Context(), "t1", "", agent.MessageCreate{ClientMsgID: "a", ContentMD: "x", RunID: "r1"})
	var e *agent.Error
	if !errors.As(err, &e) {
		t.Fatalf("want *agent.Error, got %T %v", err, err)
	}
	if e.Code() != "conflict" || e.Reason() != "run_not_active" || e.Status() != 409 || e.HTTPStatus != 200 || e.Op != "CreateMessage" ||
		len(e.Errors[0].Extensions.FieldErrors) != 1 || e.Errors[0].Extensions.FieldErrors[0].Code != "run_mismatch" || e.RetryAfter != 3*time.Second {
		t.Fatalf("error %+v", e)
	}
	if agent.ErrorCode(err) != "conflict" || agent.ErrorReason(err) != "run_not_active" || agent.IsTemporary(err) {
		t.Fatalf("helpers on %v", err)
	}
	if strings.Contains(err.Error(), "bothy_a_secret") {
		t.Fatal("the token leaked into an error")
	}
}

// TestRefusalsByReason: a refusal is errors.Is the value of its reason,
// also wrapped, and no other; an answer without a reason is none of them.
func TestRefusalsByReason(t *testing.T) {
	t.Parallel()
	reasons := map[string]*agent.ReasonError{
		"run_claimed": agent.ErrRunClaimed, "run_not_active": agent.ErrRunNotActive, "run_not_started": agent.ErrRunNotStarted,
		"trigger_revoked": agent.ErrTriggerRevoked, "idempotency_key_reused": agent.ErrIdempotencyKeyReused,
		"live_version": agent.ErrLiveVersion, "approval_pending": agent.ErrApprovalPending, "already_decided": agent.ErrAlreadyDecided,
	}
	for reason, want := range reasons {
		c := answer(t, 200, "application/graphql-response+json",
			`{"errors":[{"message":"Conflict","extensions":{"code":"conflict","reason":"`+reason+`","status":409}}],"data":null}`, nil)
		_, err := c.StartRun(t.Context(), "r1", "h1")
		wrapped := fmt.Errorf("claiming: %w", err)
		if !errors.Is(err, want) || !errors.Is(wrapped, want) {
			t.Errorf("%s: %v is not %v", reason, err, want)
		}
		if r := want.Reason(); r != reason {
			t.Errorf("%v has reason %q, want %q", want, r, reason)
		}
		for other, value := range reasons {
			if other != reason && errors.Is(err, value) {
				t.Errorf("%s: %v is also %v", reason, err, value)
			}
		}
	}
	c := answer(t, 200, "application/graphql-response+json", `{"errors":[{"message":"Conflict","extensions":{"code":"conflict","status":409}}],"data":null}`, nil)
	if _, err := c.StartRun(t.Context(), "r1", "h1"); errors.Is(err, agent.ErrRunClaimed) || errors.Is(err, agent.ErrRunNotActive) {
		t.Errorf("a refusal without a reason matched one: %v", err)
	}
}

func TestClientHTTPFailures(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, contentType, body string
		status                  int
		header                  map[string]string
		code                    string
		temporary               bool
	}{
		{"401 in GraphQL shape", "application/json", `{"errors":[{"message":"Unauthorized","extensions":{"code":"unauthorized","status":401}}]}`, 401, nil, "unauthorized", false},
		{"502 from a proxy", "text/html", "<html>bad gateway</html>", 502, nil, "unavailable", true},
		{"500 without body", "", "", 500, nil, "internal_error", true},
		{"429 with Retry-After", "text/plain", "slow down", 429, map[string]string{"Retry-After": "7"}, "rate_limited", true},
		{"200 not JSON", "text/plain", "hello", 200, nil, "invalid_response", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl := answer(t, c.status, c.contentType, c.body, c.header)
			_, err := cl.Run(t.Context(), "r1")
			var e *agent.Error
			if !errors.As(err, &e) || e.Code() != c.code || e.HTTPStatus != c.status || agent.IsTemporary(err) != c.temporary {
				t.Fatalf("got %T %v (%+v)", err, err, e)
			}
			if c.header != nil && e.RetryAfter != 7*time.Second {
				t.Fatalf("RetryAfter %s", e.RetryAfter)
			}
		})
	}
}

func TestClientTimeoutAndCancellation(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	c, _ := agent.NewClient(srv.URL, "tok", agent.ClientOptions{Timeout: 200 * time.Millisecond})
	start := time.Now()
	_, err := c.Run(t.Context(), "r1")
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !agent.IsTemporary(err) || time.Since(start) > 2*time.Second {
		t.Fatalf("timeout: %v after %s", err, time.Since(start))
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	c, _ = agent.NewClient(srv.URL, "tok", agent.ClientOptions{Timeout: time.Minute})
	_, err = c.Run(ctx, "r1")
	if !errors.Is(err, context.Canceled) || agent.IsTemporary(err) {
		t.Fatalf("cancel: %v", err)
	}
	// A long poll may take its wait on top of the timeout.
	c, _ = agent.NewClient(srv.URL, "tok", agent.ClientOptions{Timeout: 200 * time.Millisecond})
	start = time.Now()
	_, err = c.AgentEvents(t.Context(), "", time.Second)
	if d := time.Since(start); err == nil || d < time.Second {
		t.Fatalf("poll ended after %s: %v", d, err)
	}
}

func TestNewClientValidates(t *testing.T) {
	t.Parallel()
	for _, bad := range []struct{ url, token string }{
		{"", "t"}, {"ftp://example.com", "t"}, {"http://example.com", ""}, {"http://example.com", "a b"}, {"http://example.com", "a\nb"}, {"http://example.com?x=1", "t"},
	} {
		if _, err := agent.NewClient(bad.url, bad.token, agent.ClientOptions{}); err == nil {
			t.Fatalf("NewClient(%q, %q) accepted", bad.url, bad.token)
		}
	}
	for _, good := range []string{"http://127.0.0.1:8080", "https://chat.example.com/", "https://chat.example.com/graphql"} {
		c, err := agent.NewClient(good, "t", agent.ClientOptions{})
		if err != nil || !strings.HasSuffix(c.Endpoint(), "/graphql") || strings.HasSuffix(c.Endpoint(), "/graphql/graphql") {
			t.Fatalf("NewClient(%q): %v %v", good, c, err)
		}
	}
}

// TestClientSendsTraceparent: a call whose context carries a run's trace
// context sends it as the traceparent header; a call without one, and one
// whose value is no version-00 traceparent, sends none.
func TestClientSendsTraceparent(t *testing.T) {
	t.Parallel()
	got := make(chan []string, 3)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		got <- r.Header.Values("Traceparent")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"data":{"viewer":{"id":"a1","kind":"AGENT","handle":"lotse","displayName":"Lotse","status":"ACTIVE"}}}`)
	}))
	t.Cleanup(srv.Close)
	c, err := agent.NewClient(srv.URL, "bothy_a_secret", agent.ClientOptions{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	cases := []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"the run's trace", agent.WithTraceparent(t.Context(), tp), tp},
		{"no trace", t.Context(), ""},
		{"not a traceparent", agent.WithTraceparent(t.Context(), "01-"+tp[3:]+"\r\nX-Injected: 1"), ""},
	}
	for _, tc := range cases {
		if _, err := c.Viewer(tc.ctx); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		h := <-got
		if (tc.want == "" && len(h) != 0) || (tc.want != "" && (len(h) != 1 || h[0] != tc.want)) {
			t.Errorf("%s: traceparent headers %q, want %q", tc.name, h, tc.want)
		}
	}
}
