package server_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/apitest"
)

// TestRateLimitHoldsAcrossReplicas: two servers on one database spend
// from one rl.message bucket per principal (burst 20, 60 a minute), so a
// client alternating between them gets its budget once, not twice.
func TestRateLimitHoldsAcrossReplicas(t *testing.T) {
	env := apitest.Start(t, apitest.Options{})
	peer := env.Peer()
	main := env.Main("Support/Allgemein")
	replicas := []*apitest.Env{env, peer}
	for i := range 20 {
		if r := replicas[i%2].Post("alex", main, fmt.Sprintf("rl-%d", i), "within the burst"); r.Status != http.StatusCreated {
			t.Fatalf("post %d: %d %s", i, r.Status, r.Body)
		}
	}
	for i, rep := range replicas {
		r := rep.Post("alex", main, fmt.Sprintf("rl-over-%d", i), "over the burst")
		wantProblem(t, fmt.Sprintf("replica %d after the burst", i), r, http.StatusTooManyRequests, "rate_limited", "")
		if r.Header.Get("Retry-After") != "1" {
			t.Fatalf("replica %d: Retry-After %q, want 1 (one token a second)", i, r.Header.Get("Retry-After"))
		}
	}
	// Another principal has its own bucket.
	if r := peer.Post("sam", main, "rl-sam", "mine"); r.Status != http.StatusCreated {
		t.Fatalf("sam: %d %s", r.Status, r.Body)
	}
	// One second refills one token, which either replica may spend once.
	env.Clock.Advance(time.Second)
	if r := peer.Post("alex", main, "rl-refill", "refilled"); r.Status != http.StatusCreated {
		t.Fatalf("after refill: %d %s", r.Status, r.Body)
	}
	if r := env.Post("alex", main, "rl-refill-2", "again"); r.Status != http.StatusTooManyRequests {
		t.Fatalf("second after refill: %d %s", r.Status, r.Body)
	}
	if n := env.Count(`SELECT count(*) FROM messages WHERE author_principal_id = $1`, env.World.ID("alex")); n != 21 {
		t.Fatalf("alex has %d messages, want 21", n)
	}
}
