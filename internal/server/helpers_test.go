package server_test

import (
	"context"
	"net/http"
	"reflect"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/apitest"
)

// metricValue reads one sample of /metrics (0 when absent).
func metricValue(t *testing.T, env *apitest.Env, series string) float64 { return env.Metric(series) }

// sameAnswer reports whether two REST answers are equal but for what
// differs per request: the status, the body without correlation_id and
// instance, and the headers without Correlation-Id, Date and Content-Length.
func sameAnswer(t *testing.T, a, b *apitest.Response) bool {
	t.Helper()
	return a.Status == b.Status && reflect.DeepEqual(comparableProblem(t, a.Body), comparableProblem(t, b.Body)) &&
		reflect.DeepEqual(comparableHeader(a.Header), comparableHeader(b.Header))
}

// mustREST sends a REST request and fails the test unless the status is
// want; it returns the decoded body object.
func mustREST(t *testing.T, env *apitest.Env, method, path, who string, body any, want int) map[string]any {
	t.Helper()
	return env.MustREST(t, method, path, env.World.Token(who), body, want)
}

// createGrantREST creates a grant as robin and returns it.
func createGrantREST(t *testing.T, env *apitest.Env, body map[string]any) map[string]any {
	t.Helper()
	return mustREST(t, env, http.MethodPost, "/api/v1/grants", "robin", body, http.StatusCreated)
}

// awaitPolls blocks until n long polls of env's server wait for a change,
// so that a test knows a poll is parked instead of sleeping until it
// probably is.
func awaitPolls(t *testing.T, env *apitest.Env, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	if err := env.Server.LongPolls().AwaitWaiting(ctx, n); err != nil {
		t.Fatal(err)
	}
}
