package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// The checks below stand for the long chains of comparisons the answers of
// both faces need, so that a test reads as the list of what it expects.

// wantStatus fails the test unless r answered status; what names the
// request in the message, which shows the answer.
func wantStatus(t *testing.T, what string, r *apitest.Response, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("%s: %d %s", what, r.Status, r.Body)
	}
}

// wantBytes fails the test unless r answered 200 with exactly body: a
// file's bytes as its reader downloads them.
func wantBytes(t *testing.T, what string, r *apitest.Response, body []byte) {
	t.Helper()
	if r.Status != http.StatusOK || !bytes.Equal(r.Body, body) {
		t.Fatalf("%s: %d %s", what, r.Status, r.Body)
	}
}

// wantMembers fails the test unless the decoded JSON object got has every
// member of want with that value (as JSON decodes it: string, float64,
// bool) and a value other than null for every name in present; what names
// the object in the message.
func wantMembers(t *testing.T, what string, got, want map[string]any, present ...string) {
	t.Helper()
	if k, ok := sameMembers(got, want, present); !ok {
		t.Fatalf("%s %v (member %s)", what, got, k)
	}
}

// wantAnswer fails the test unless r answered status with a JSON object
// that has the members want and present (as wantMembers checks them), and
// returns the object.
func wantAnswer(t *testing.T, what string, r *apitest.Response, status int, want map[string]any, present ...string) map[string]any {
	t.Helper()
	var got map[string]any
	if r.Status != status || json.Unmarshal(r.Body, &got) != nil {
		t.Fatalf("%s: %d %s", what, r.Status, r.Body)
	}
	if k, ok := sameMembers(got, want, present); !ok {
		t.Fatalf("%s: %d %s (member %s)", what, r.Status, r.Body, k)
	}
	return got
}

// sameMembers reports whether got has the members of want with their
// values and a value other than null for the names in present; if not, it
// returns the first member that differs.
func sameMembers(got, want map[string]any, present []string) (string, bool) {
	for k, v := range want {
		if got[k] != v {
			return k, false
		}
	}
	for _, k := range present {
		if got[k] == nil {
			return k, false
		}
	}
	return "", true
}

// wantCount fails the test unless query (with args) counts want rows;
// what names the rows in the message.
func wantCount(t *testing.T, env *apitest.Env, want int, what, query string, args ...any) {
	t.Helper()
	if n := env.Count(query, args...); n != want {
		t.Fatalf("%d %s, want %d", n, what, want)
	}
}

// storedOutsideHash reports whether secret, a token's secret, appears in
// the event log or the audit log, where only its hash may be kept.
func storedOutsideHash(env *apitest.Env, secret string) bool {
	return env.Count(`SELECT count(*) FROM event_log WHERE payload::text LIKE '%' || $1 || '%'`, secret) != 0 ||
		env.Count(`SELECT count(*) FROM audit_log WHERE row_to_json(audit_log)::text LIKE '%' || $1 || '%'`, secret) != 0
}
