package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"bothy.example.com/bothy/internal/platform/problem"
)

// TestInternalErrorsLogThroughTheServerLogger: the cause of an internal
// error is logged by the logger given to Chain (the one JSON logger), not
// by slog's default, and is never shown.
func TestInternalErrorsLogThroughTheServerLogger(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	h := Chain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteProblem(w, r, problem.Internal("httpx.test", errors.New("secret cause")))
	}), log, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/me", nil))
	if rec.Code != http.StatusInternalServerError || strings.Contains(rec.Body.String(), "secret cause") {
		t.Fatalf("answer %d %s", rec.Code, rec.Body)
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", l)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 || lines[0]["msg"] != "internal error" || lines[0]["error"] != "httpx.test: secret cause" || lines[1]["msg"] != "request" {
		t.Fatalf("log lines %v", lines)
	}
}

// TestExtendWriteDeadline: outside a request it does nothing; inside, the
// extender of the context gets the wait.
func TestExtendWriteDeadline(t *testing.T) {
	ExtendWriteDeadline(t.Context(), 5) // no extender: no panic
	var got int64
	ctx := WithWriteDeadlineExtender(t.Context(), func(d time.Duration) { got = int64(d) })
	ExtendWriteDeadline(ctx, 7)
	if got != 7 {
		t.Fatalf("extender got %d", got)
	}
}

// TestCorrelationID: a request's id is the client's Correlation-Id, else a
// proxy's X-Request-Id, else a new one; an id outside 8 to 64 of
// [A-Za-z0-9._-] is never kept. The answer names it in Correlation-Id.
func TestCorrelationID(t *testing.T) {
	t.Parallel()
	var seen string
	h := Chain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = CorrelationID(r.Context()) }),
		slog.New(slog.DiscardHandler), nil)
	cases := []struct {
		name          string
		corr, request string
		want          string // "" for a new id
	}{
		{"client's own", "client-id-1", "proxy-id-1", "client-id-1"},
		{"proxy's", "", "proxy-id-1", "proxy-id-1"},
		{"client's unusable, proxy's kept", "no", "proxy-id-1", "proxy-id-1"},
		{"both unusable", "x", strings.Repeat("r", 65), ""},
		{"none", "", "", ""},
		{"injection", "", "id\nforged: 1", ""},
	}
	for _, c := range cases {
		req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
		if c.corr != "" {
			req.Header.Set(CorrelationHeader, c.corr)
		}
		if c.request != "" {
			req.Header.Set(RequestIDHeader, c.request)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		got := rec.Header().Get(CorrelationHeader)
		if got != seen || (c.want != "" && got != c.want) || (c.want == "" && (got == c.corr || got == c.request || len(got) < 8)) {
			t.Errorf("%s: id %q (context %q), want %q", c.name, got, seen, c.want)
		}
	}
}

// TestProblemMessage: a refusal's message and extensions (the shape of a
// GraphQL error's and a JSON-RPC error's data), and Retry-After only for
// a problem that asks for a wait.
func TestProblemMessage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		pe       *problem.Error
		msg      string
		ext      map[string]any
		retryHdr string
	}{
		{"title when no detail", problem.Newf(problem.NotFound, "", ""), problem.NotFound.Title(),
			map[string]any{"code": "not_found", "status": 404}, ""},
		{"reason and wait", func() *problem.Error {
			pe := problem.Newf(problem.Unavailable, "database_unreachable", "the database does not answer")
			pe.RetryAfter = 2 * time.Second
			return pe
		}(), "the database does not answer", map[string]any{"code": "unavailable", "status": 503, "reason": "database_unreachable", "retryAfterSeconds": 2}, "2"},
	} {
		w := httptest.NewRecorder()
		msg, ext := ProblemMessage(w, c.pe)
		if msg != c.msg || !reflect.DeepEqual(ext, c.ext) || w.Header().Get("Retry-After") != c.retryHdr {
			t.Errorf("%s: %q %v Retry-After %q; want %q %v %q", c.name, msg, ext, w.Header().Get("Retry-After"), c.msg, c.ext, c.retryHdr)
		}
	}
}

// TestOperationLabelsKeepOnlyTheirNames: the operation label set keeps a
// copy of each name, never the parsed substring that would keep its whole
// document alive, counts a name above maxOperationLabelBytes as other and
// holds at most maxOps names.
func TestOperationLabelsKeepOnlyTheirNames(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry(), 2)
	doc := "query Short { viewer { id } } # " + strings.Repeat("x", 1<<20)
	name := doc[len("query ") : len("query ")+len("Short")]
	got := m.opLabel(name)
	start := uintptr(unsafe.Pointer(unsafe.StringData(doc)))
	if p := uintptr(unsafe.Pointer(unsafe.StringData(got))); got != "Short" || (p >= start && p < start+uintptr(len(doc))) {
		t.Fatalf("label %q shares the document's text", got)
	}
	if again := m.opLabel(name); unsafe.StringData(again) != unsafe.StringData(got) {
		t.Fatal("a name labelled again was copied again")
	}
	if got := m.opLabel(strings.Repeat("N", maxOperationLabelBytes+1)); got != otherOperation {
		t.Fatalf("a name of %d bytes is labelled %q", maxOperationLabelBytes+1, got)
	}
	if got := m.opLabel("Second"); got != "Second" {
		t.Fatalf("the second name is labelled %q", got)
	}
	if got := m.opLabel("Third"); got != otherOperation {
		t.Fatalf("a name beyond maxOps is labelled %q", got)
	}
}
