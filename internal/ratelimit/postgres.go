package ratelimit

import (
	"context"
	"errors"
	"math"
	"time"

	"golang.org/x/time/rate"

	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/db"
)

// Postgres is a Limiter whose buckets live in the table ratelimit_buckets,
// so every replica on the database spends from the same bucket. An
// in-process bucket of the same size runs in front of it as a fast path
// that can only refuse: it is charged only for tokens the shared bucket
// granted, so it always holds at least as many tokens as the shared one,
// and when it is empty the shared one is too.
type Postgres struct {
	st    store
	clock clock.Clock
	local *Memory
}

// NewPostgres returns the shared Limiter over pool, sized like NewMemory.
func NewPostgres(pool *db.Pool, cfg *config.Config, c clock.Clock) *Postgres {
	return &Postgres{st: store{pool: pool}, clock: c, local: NewMemory(cfg, c)}
}

// Begin implements Limiter. The in-process bucket answers at once: its
// refusal costs no statement (a flood beyond the limit never reaches the
// database). A token it grants is then taken from the shared bucket on its
// own goroutine, on the pool (never the caller's transaction), while the
// caller goes on; Spend.Wait gives the shared bucket's answer. When the
// database does not answer, the in-process bucket decides alone: the
// request fails on the database anyway, and a limiter must not turn an
// outage into errors of its own.
func (p *Postgres) Begin(principal string, class Class) *Spend {
	lim, ok := p.local.limits[class]
	if !ok {
		return Decided(false, time.Minute)
	}
	res, wait, local := p.local.reserve(principal, class)
	if res == nil {
		return Decided(false, wait).WithUsage(local)
	}
	s, finish := Pending()
	go func() {
		ok, after, u := p.takeShared(res, principal, class, lim, local)
		s.WithUsage(u)
		finish(ok, after)
	}()
	return s
}

// takeShared takes the token that res took locally from the shared bucket
// and gives res back when the shared bucket is empty. The usage is the
// shared bucket's, which decided; local is the in-process bucket's, which
// decides alone when the database does not answer.
func (p *Postgres) takeShared(res *rate.Reservation, principal string, class Class, lim limits, local Usage) (bool, time.Duration, Usage) {
	perSecond := lim.perSecond()
	key := string(class) + "|" + principal
	now := p.clock.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	left, err := p.st.take(ctx, key, float64(lim.burst), now, perSecond)
	if err == nil {
		return true, 0, lim.granted(class, left)
	}
	if !errors.Is(err, errBucketEmpty) {
		return true, 0, local // the local token stays taken
	}
	res.CancelAt(now)
	level, err := p.st.level(ctx, key, float64(lim.burst), now, perSecond)
	if err != nil {
		level = 0
	}
	after := max(time.Duration(math.Ceil((1-level)/perSecond*1000))*time.Millisecond, time.Millisecond)
	return false, after, lim.refused(class, after)
}
