package authz_test

import (
	"errors"
	"sort"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/problem"
)

// TestOneTokenPerOperation: for every action of the action table, the
// decisions of one operation (authz.Operation) take one token of the
// action's class however many there are, while decisions outside an
// operation take one each. Every bucket holds two tokens: three decisions
// in one operation leave one, the next decision outside takes it, and the
// one after is refused.
func TestOneTokenPerOperation(t *testing.T) {
	t.Parallel()
	cfg := map[string]string{config.RateLimitStore: "memory"}
	for _, k := range []string{config.RateMessageBurst, config.RateAgentRuntimeBurst, config.RateReadBurst, config.RateAdminBurst, config.RateFileBurst} {
		cfg[k] = "2"
	}
	for _, k := range []string{config.RateMessagePerMinute, config.RateAgentRuntimePerMinute, config.RateReadPerMinute, config.RateAdminPerMinute, config.RateFilePerMinute} {
		cfg[k] = "1"
	}
	env := moduletest.Build(t, moduletest.Options{Config: cfg})
	alex := env.Principal("alex")
	actions := make([]authz.Action, 0, len(authz.Table()))
	for a := range authz.Table() {
		actions = append(actions, a)
	}
	sort.Slice(actions, func(i, j int) bool { return actions[i] < actions[j] })
	// A target that needs no statement: the decision (a 404) does not
	// matter here, the token does.
	target := authz.Facts{Path: authz.Path{Kind: authz.KindThread, ID: "01a22d00-0000-7000-8000-000000000000"}}
	limited := func(err error) bool {
		var p *problem.Error
		return errors.As(err, &p) && p.Code == problem.RateLimited
	}
	for _, a := range actions {
		op := authz.Operation(t.Context())
		for i := range 3 {
			if _, _, err := env.Authz.Authorize(op, alex, a, target); limited(err) {
				t.Fatalf("%s: decision %d of one operation was rate limited", a, i+1)
			}
		}
		if _, _, err := env.Authz.Authorize(t.Context(), alex, a, target); limited(err) {
			t.Fatalf("%s: the operation took more than one token", a)
		}
		if _, _, err := env.Authz.Authorize(t.Context(), alex, a, target); !limited(err) {
			t.Fatalf("%s: a decision outside an operation took no token (%v)", a, err)
		}
		env.Clock.Advance(24 * time.Hour) // every bucket full again
	}
}
