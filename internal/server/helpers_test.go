package server_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"
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
func metricValue(t *testing.T, env *apitest.Env, series string) float64 {
	t.Helper()
	resp, err := http.Get(env.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, series+" ") {
			v, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, series)), 64)
			return v
		}
	}
	return 0
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func problemCode(err error) problem.Code { return problem.From(err).Code }
