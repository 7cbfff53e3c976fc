package ratelimit

import (
	"context"
	"math"
	"sync"
	"time"
)

// Usage is what one spend left in the bucket that decided it, so that a
// client can pace itself before it is refused (the RateLimit and
// RateLimit-Policy header fields of the answer carry it).
type Usage struct {
	Class Class
	// Burst is the size of the bucket (ratelimit.<class>.burst).
	Burst int
	// Window is the time an empty bucket takes to fill again: Burst tokens
	// over Window is the class's sustained rate (per_minute).
	Window time.Duration
	// Remaining is the number of whole tokens left after the spend; 0 when
	// the spend was refused.
	Remaining int
	// Reset is the time until the bucket holds one whole token more than
	// Remaining; for a refusal, the wait of its Retry-After.
	Reset time.Duration
}

// lower reports whether u tells a client less room than v: fewer tokens
// left, or as few and a longer wait for the next one.
func (u Usage) lower(v Usage) bool {
	if u.Remaining != v.Remaining {
		return u.Remaining < v.Remaining
	}
	return u.Reset > v.Reset
}

// perSecond is the refill of the class's bucket.
func (l limits) perSecond() float64 { return float64(l.perMinute) / 60 }

// refill returns the time the bucket takes to gain n tokens.
func (l limits) refill(n float64) time.Duration {
	return time.Duration(n / l.perSecond() * float64(time.Second))
}

// granted is the usage of a bucket holding tokens after a spend it granted.
// The small allowance keeps a whole number that floating point arithmetic
// brought a hair below itself (3.9999999 tokens are 4).
func (l limits) granted(class Class, tokens float64) Usage {
	whole := math.Floor(max(tokens, 0) + 1e-9)
	return Usage{Class: class, Burst: l.burst, Window: l.refill(float64(l.burst)),
		Remaining: int(whole), Reset: l.refill(max(1-(tokens-whole), 0))}
}

// refused is the usage of a bucket that refused a spend: nothing left until
// wait has passed.
func (l limits) refused(class Class, wait time.Duration) Usage {
	return Usage{Class: class, Burst: l.burst, Window: l.refill(float64(l.burst)), Reset: wait}
}

// Meter collects the usage of the spends of one request and keeps the one
// that leaves the least room: a GraphQL document with several root fields
// spends a token per field (possibly of several classes, on several
// goroutines), and its answer reports the bucket the client must watch.
type Meter struct {
	mu     sync.Mutex
	usage  Usage
	set    bool
	parent *Meter
}

type meterKey struct{}

// WithMeter returns ctx carrying a new Meter for the spends of the request
// of ctx, and the Meter. When ctx already carries one (a request made
// in-process on behalf of another, as an MCP tool's API calls are), the
// new Meter passes every usage on to it as well: the outer answer is the
// one the client reads, and it must name the bucket its inner calls
// drained.
func WithMeter(ctx context.Context) (context.Context, *Meter) {
	parent, _ := ctx.Value(meterKey{}).(*Meter)
	m := &Meter{parent: parent}
	return context.WithValue(ctx, meterKey{}, m), m
}

// Observe records the usage of the answered spend s in the Meter of ctx.
// Without a Meter (a subscription's later pages, the command line) or
// without a usage it does nothing.
func Observe(ctx context.Context, s *Spend) {
	m, ok := ctx.Value(meterKey{}).(*Meter)
	if !ok {
		return
	}
	u, ok := s.Usage()
	if !ok {
		return
	}
	for ; m != nil; m = m.parent {
		m.observe(u)
	}
}

// observe keeps u when it leaves less room than what m holds.
func (m *Meter) observe(u Usage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.set || u.lower(m.usage) {
		m.usage, m.set = u, true
	}
}

// Lowest returns the recorded usage that leaves the least room; false when
// the request spent no token.
func (m *Meter) Lowest() (Usage, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.usage, m.set
}
