package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/apitest"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
)

func mustPrincipal(t *testing.T, env *apitest.Env, handle string) identity.Principal {
	t.Helper()
	p, err := env.Server.Identity.ByHandle(t.Context(), handle)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// metricValue reads one sample of /metrics (0 when absent).
func metricValue(t *testing.T, env *apitest.Env, series string) float64 { return env.Metric(series) }

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func problemCode(err error) problem.Code { return problem.From(err).Code }
