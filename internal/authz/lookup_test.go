package authz_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/ratelimit"
)

// heldLimiter leaves every spend pending and hands its answer to the
// test through finish, so that a test decides when, and how, the shared
// bucket answers.
type heldLimiter struct {
	finish chan func(bool, time.Duration)
}

func (h heldLimiter) Begin(string, ratelimit.Class) *ratelimit.Spend {
	s, finish := ratelimit.Pending()
	h.finish <- finish
	return s
}

// refusingLimiter refuses every token at once, as an empty in-process
// bucket does.
type refusingLimiter struct{}

func (refusingLimiter) Begin(string, ratelimit.Class) *ratelimit.Spend {
	return ratelimit.Decided(false, 2*time.Second)
}

// TestLookupAtTheDoor checks the Lookup target: the door reads it while
// the token is being taken (the lookup below answers the spend itself, so
// a door that waited for the token first would never return), a refused
// token wins over whatever the lookup gives, a failing lookup fails the
// decision, and a refusal known at once reads nothing.
func TestLookupAtTheDoor(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	lotse := load(t, env, "lotse")[0]
	allgemein := env.ChannelPath("Support/Allgemein")
	door := func(l ratelimit.Limiter) *authz.Service {
		return authz.NewService(env.Pool, env.Clock, l, time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	}
	held := heldLimiter{finish: make(chan func(bool, time.Duration), 1)}
	lookupErr := errors.New("lookup failed")

	for _, tc := range []struct {
		name      string
		tokenOK   bool
		lookupErr error
		want      problem.Code // "" for allowed
	}{
		{"token taken, target read", true, nil, ""},
		{"token refused", false, nil, problem.RateLimited},
		{"token taken, lookup fails", true, lookupErr, problem.InternalError},
		{"token refused, lookup fails", false, lookupErr, problem.RateLimited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type answer struct {
				d   authz.Decision
				err error
			}
			got := make(chan answer, 1)
			go func() {
				d, _, err := door(held).Authorize(t.Context(), lotse, authz.MessageRead, authz.Lookup(func(context.Context) (authz.Facts, error) {
					// The token is still being taken: answer it now.
					(<-held.finish)(tc.tokenOK, time.Second)
					return authz.Known(allgemein, authz.Read), tc.lookupErr
				}))
				got <- answer{d, err}
			}()
			var a answer
			select {
			case a = <-got:
			case <-time.After(30 * time.Second):
				t.Fatal("the door waited for the token before reading the target")
			}
			if tc.want == "" {
				if a.err != nil || !a.d.Allow || a.d.Grant != authz.Read {
					t.Fatalf("Authorize = %+v, %v; want allowed with the looked-up grant", a.d, a.err)
				}
				return
			}
			if p := problem.From("authz.testLookupAtTheDoor", a.err); a.d.Allow || p.Code != tc.want {
				t.Fatalf("Authorize = %+v, %v; want %s", a.d, a.err, tc.want)
			}
		})
	}

	t.Run("a refusal known at once reads nothing", func(t *testing.T) {
		called := false
		_, _, err := door(refusingLimiter{}).Authorize(t.Context(), lotse, authz.MessageRead, authz.Lookup(func(context.Context) (authz.Facts, error) {
			called = true
			return authz.Known(allgemein, authz.Read), nil
		}))
		if p := problem.From("authz.testLookupAtTheDoor", err); p.Code != problem.RateLimited || called {
			t.Fatalf("Authorize = %v, lookup called %v; want 429 without the lookup", err, called)
		}
	})
}

// TestGrantLevels checks authz's shared SQL function grant_levels
// (migrations/00015_module_views.sql), which other modules read in their
// own statements (the runs module: its column level, aggregated and read
// with GrantLevelOf), against the door's own grant read, for every
// principal of the world on every channel. A renamed column or parameter,
// or a rule that drifts from liveGrants, fails here.
func TestGrantLevels(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := authz.Unmetered(t.Context())
	// Beside the world's grants: one through a group, one expired, one
	// revoked, one on a whole space.
	group, robin, now := ids.New(), env.World.ID("robin"), env.Clock.Now()
	env.Exec(`INSERT INTO groups (id, name, created_at) VALUES ($1, 'readers', now())`, group)
	env.Exec(`INSERT INTO group_members (group_id, principal_id) VALUES ($1, $2)`, group, env.World.ID("writer"))
	env.Exec(`INSERT INTO grants (id, subject_group_id, target_channel_id, level, created_by, created_at) VALUES ($1, $2, $3, 'read', $4, $5)`,
		ids.New(), group, env.World.Channel("Marketing/Kampagnen").ID, robin, now)
	env.Exec(`INSERT INTO grants (id, subject_principal_id, target_channel_id, level, expires_at, created_by, created_at) VALUES ($1, $2, $3, 'trigger', $4, $5, $6)`,
		ids.New(), env.World.ID("sam"), env.World.Channel("Support/Eskalation").ID, now.Add(-time.Minute), robin, now)
	env.Exec(`INSERT INTO grants (id, subject_principal_id, target_channel_id, level, revoked_at, created_by, created_at) VALUES ($1, $2, $3, 'trigger', $4, $5, $4)`,
		ids.New(), env.World.ID("alex"), env.World.Channel("Marketing/Kampagnen").ID, now, robin)
	env.Exec(`INSERT INTO grants (id, subject_principal_id, target_space_id, level, created_by, created_at) VALUES ($1, $2, $3, 'read', $4, $5)`,
		ids.New(), env.World.ID("lotse"), env.World.Spaces["Marketing"], robin, now)
	handles := make([]string, 0, len(env.World.Principals))
	for h := range env.World.Principals {
		handles = append(handles, h)
	}
	sort.Strings(handles)
	keys := make([]string, 0, len(env.World.Channels))
	for k := range env.World.Channels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// The shape of the runs module's read (runInThreadSQL).
	stmt := `SELECT (SELECT coalesce(array_agg(gl.level), '{}') FROM grant_levels($1::timestamptz, $2::uuid, $3::uuid, $4::uuid) gl)`
	seen := map[authz.Level]bool{}
	for _, p := range load(t, env, handles...) {
		for _, k := range keys {
			path := env.ChannelPath(k)
			var levels []string
			if err := env.Pool.QueryRow(ctx, stmt, env.Clock.Now(), p.ID, path.SpaceID, path.ChannelID).Scan(&levels); err != nil {
				t.Fatalf("%s on %s: %v", p.Handle, k, err)
			}
			d, _, _ := env.Authz.Authorize(ctx, p, authz.MessageRead, authz.Facts{Path: path})
			if got := authz.GrantLevelOf(p, levels); got != d.Grant {
				t.Errorf("%s on %s: grant_levels gives %v (%v), the door read %v", p.Handle, k, got, levels, d.Grant)
			}
			seen[d.Grant] = true
		}
	}
	// The world must exercise the rule: principals without a grant and
	// with each level.
	for _, l := range []authz.Level{authz.None, authz.Read, authz.Write, authz.Trigger} {
		if !seen[l] {
			t.Errorf("no principal of the world holds %v on a channel: the comparison proves little", l)
		}
	}
}

// TestGrantLevelOf is the rule that turns the levels read into one.
func TestGrantLevelOf(t *testing.T) {
	t.Parallel()
	alex := identity.Principal{ID: "01a22f15-66c5-7d35-8dc6-1e991ea5bc89", Kind: identity.KindUser, Handle: "alex", Status: identity.StatusActive}
	gone := alex
	gone.Status = identity.StatusDisabled
	for _, tc := range []struct {
		name   string
		levels []string
		actor  bool // active
		want   authz.Level
	}{
		{"no grant", nil, true, authz.None},
		{"one grant", []string{"write"}, true, authz.Write},
		{"the highest wins", []string{"read", "trigger", "write"}, true, authz.Trigger},
		{"an unknown level counts as none", []string{"owner"}, true, authz.None},
		{"an inactive actor has none", []string{"trigger"}, false, authz.None},
	} {
		actor := alex
		if !tc.actor {
			actor = gone
		}
		if got := authz.GrantLevelOf(actor, tc.levels); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
