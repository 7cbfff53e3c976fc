package identity_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/identity"
)

// batchCounter counts the statements that authenticate many tokens at once
// (AuthenticateMany).
type batchCounter struct{ n atomic.Int64 }

func (c *batchCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, "t.hash = ANY(") {
		c.n.Add(1)
	}
	return ctx
}

func (c *batchCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// liveTokens: the first question of a generation authenticates every
// registered token (and the one asked about) in one statement, and the
// other questions of that generation are answered from the batch, so a
// token revoked or a principal disabled within the generation still holds
// until the next generation or until VerdictTTL has passed; a token is
// registered until as many Remove calls as Add calls.
func liveTokens(t *testing.T, env *moduletest.Env, counter *batchCounter) {
	ctx := t.Context()
	alexP, alexTok := person(t, env, "alex-live")
	samP, samTok := person(t, env, "sam-live")
	robinP, robinTok := person(t, env, "robin-live")
	id := map[string]string{"alex": alexP.ID, "sam": samP.ID, "robin": robinP.ID}
	counter.n.Store(0)
	live := env.Identity.NewLiveTokens()
	live.Add(alexTok)
	live.Add(samTok)
	live.Add(samTok)

	check := func(gen <-chan struct{}, tok, handle string, want bool) {
		t.Helper()
		p, ok, err := live.Check(ctx, gen, tok)
		if err != nil || ok != want || (want && p.ID != id[handle]) {
			t.Fatalf("%s: %+v %v (%v), want %v", handle, p, ok, err, want)
		}
	}
	statements := func(want int64) {
		t.Helper()
		if got := counter.n.Swap(0); got != want {
			t.Fatalf("%d batch statements, want %d", got, want)
		}
	}

	gen1 := make(chan struct{})
	check(gen1, alexTok, "alex", true)
	statements(1)
	// Sam's token was in the batch: revoked now, it holds for gen1.
	if err := env.Writers.Identity.RevokeToken(ctx, samTok); err != nil {
		t.Fatal(err)
	}
	setStatus(t, env, alexP.ID, identity.StatusDisabled)
	check(gen1, samTok, "sam", true)
	check(gen1, alexTok, "alex", true)
	statements(0)
	// Robin's token is not registered: asked about, with the registered ones.
	check(gen1, robinTok, "robin", true)
	statements(1)
	check(gen1, robinTok, "robin", true)
	statements(0)

	// The next generation sees the revocation and the disabled principal.
	gen2 := make(chan struct{})
	check(gen2, samTok, "sam", false)
	check(gen2, alexTok, "alex", false)
	check(gen2, robinTok, "robin", true)
	statements(2) // robin was not registered: the first batch did not ask about it

	// Within a generation a verdict lives VerdictTTL of the clock at most.
	setStatus(t, env, alexP.ID, identity.StatusActive)
	check(gen2, alexTok, "alex", false)
	env.Clock.Advance(identity.VerdictTTL)
	check(gen2, alexTok, "alex", true)
	statements(1)

	// Registered twice, removed once: still asked in every batch.
	live.Remove(samTok)
	live.Remove(alexTok)
	gen3 := make(chan struct{})
	check(gen3, robinTok, "robin", true)
	check(gen3, samTok, "sam", false)
	statements(1)
	check(gen3, alexTok, "alex", true) // no longer registered: asked anew
	statements(1)
	live.Remove(samTok)
	gen4 := make(chan struct{})
	check(gen4, robinTok, "robin", true)
	check(gen4, samTok, "sam", false)
	statements(2)
}
