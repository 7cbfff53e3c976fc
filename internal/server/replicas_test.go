package server_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// TestRateLimitHoldsAcrossReplicas: two servers on one database spend
// from one rl.message bucket per principal (burst 20, 60 a minute), so a
// client alternating between them gets its budget once, not twice.
func TestRateLimitHoldsAcrossReplicas(t *testing.T) {
	t.Parallel()
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
		apitest.WantProblem(t, fmt.Sprintf("replica %d after the burst", i), r, http.StatusTooManyRequests, "rate_limited", "")
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

// TestRateLimitBucketsAreUnlogged: the shared buckets are working state in
// an unlogged table (migration 00008), so a spend writes no WAL and its
// commit waits for no disk; a crash of PostgreSQL empties the table, which
// leaves every bucket full, as a first request finds it.
func TestRateLimitBucketsAreUnlogged(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	var persistence string
	if err := env.Pool.QueryRow(t.Context(), `SELECT relpersistence::text FROM pg_class WHERE relname = 'ratelimit_buckets'`).Scan(&persistence); err != nil {
		t.Fatal(err)
	}
	if persistence != "u" {
		t.Fatalf("ratelimit_buckets has persistence %q, want u (unlogged)", persistence)
	}
	main := env.Main("Support/Allgemein")
	env.Exec(`TRUNCATE ratelimit_buckets`)
	if r := env.Post("sam", main, "rl-empty", "an empty table is a full bucket"); r.Status != http.StatusCreated {
		t.Fatalf("post on an empty table: %d %s", r.Status, r.Body)
	}
	if n := env.Count(`SELECT count(*) FROM ratelimit_buckets WHERE key = $1`, "rl.message|"+env.World.ID("sam")); n != 1 {
		t.Fatalf("%d bucket rows for sam, want 1", n)
	}
}
