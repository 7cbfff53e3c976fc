package authz_test

import (
	"sort"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/ratelimit"
)

// TestRateLimitBucketsAtTheDoor pins docs/design/rights.md#rate-limits at
// authz.Service.Authorize with the shared (PostgreSQL) buckets the server
// uses, which TestRateLimit in internal/server shows only on the wire:
// each principal has its own bucket per class (ratelimit.<class>.burst
// decisions, then rate_limited with a positive Retry-After); once Alex's
// rl.read bucket is empty exactly the actions whose row of authz.Table
// names rl.read are refused, every other class still answers; Sam's bucket
// is untouched; work marked Prepaid or Unmetered takes no token; the
// bucket refills at ratelimit.<class>.per_minute on the clock.
func TestRateLimitBucketsAtTheDoor(t *testing.T) {
	t.Parallel()
	env := moduletest.Build(t, moduletest.Options{Config: map[string]string{
		config.RateReadBurst: "2", config.RateReadPerMinute: "1",
		// Room for one decision of every action of the other classes.
		config.RateAdminBurst: "1000", config.RateMessageBurst: "1000", config.RateAgentRuntimeBurst: "1000",
	}})
	ctx := t.Context()
	alex, sam := env.Principal("alex"), env.Principal("sam")
	// A target that needs no statement: the decision (a 404) does not
	// matter here, the token does.
	target := authz.Facts{Path: authz.Path{Kind: authz.KindThread, ID: "01a22d00-0000-7000-8000-000000000000"}}
	limited := func(err error) *problem.Error {
		if p := problem.From("authz.limited", err); p != nil && p.Code == problem.RateLimited {
			return p
		}
		return nil
	}
	for i := range 2 {
		if _, _, err := env.Authz.Authorize(ctx, alex, authz.ThreadRead, target); limited(err) != nil {
			t.Fatalf("decision %d within the burst: %v", i+1, err)
		}
	}
	_, _, err := env.Authz.Authorize(ctx, alex, authz.ThreadRead, target)
	if p := limited(err); p == nil || p.RetryAfter <= 0 {
		t.Fatalf("beyond the burst: %+v, want rate_limited with a Retry-After", err)
	}

	actions := make([]authz.Action, 0, len(authz.Table()))
	for a := range authz.Table() {
		actions = append(actions, a)
	}
	sort.Slice(actions, func(i, j int) bool { return actions[i] < actions[j] })
	for _, a := range actions {
		_, _, err := env.Authz.Authorize(ctx, alex, a, target)
		if got, want := limited(err) != nil, authz.Table()[a].Class == ratelimit.Read; got != want {
			t.Errorf("%s (class %s) with alex's rl.read bucket empty: rate limited %v, want %v (%v)", a, authz.Table()[a].Class, got, want, err)
		}
	}

	if _, _, err := env.Authz.Authorize(ctx, sam, authz.ThreadRead, target); limited(err) != nil {
		t.Fatalf("sam shares alex's bucket: %v", err)
	}
	for name, free := range map[string]func() error{
		"prepaid": func() error {
			_, _, err := env.Authz.Authorize(authz.Prepaid(ctx), alex, authz.ThreadRead, target)
			return err
		},
		"unmetered": func() error {
			_, _, err := env.Authz.Authorize(authz.Unmetered(ctx), alex, authz.ThreadRead, target)
			return err
		},
	} {
		if err := free(); limited(err) != nil {
			t.Fatalf("%s work took a token: %v", name, err)
		}
	}

	env.Clock.Advance(time.Minute)
	if _, _, err := env.Authz.Authorize(ctx, alex, authz.ThreadRead, target); limited(err) != nil {
		t.Fatalf("a minute later the refilled token was refused: %v", err)
	}
	if _, _, err := env.Authz.Authorize(ctx, alex, authz.ThreadRead, target); limited(err) == nil {
		t.Fatalf("a minute refilled more than one token: %v", err)
	}
}
