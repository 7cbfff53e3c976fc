package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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
