// Package ratelimit owns the per-principal token buckets of the rate-limit
// classes (rl.message, rl.agent_runtime, rl.read, rl.admin, rl.file).
package ratelimit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/config"
)

// Class is a rate-limit class; every action belongs to one.
type Class string

// The classes of docs/design/rights.md#rate-limits.
const (
	Message      Class = "rl.message"
	AgentRuntime Class = "rl.agent_runtime"
	Read         Class = "rl.read"
	Admin        Class = "rl.admin"
	// File is spent by uploads: a file is up to files.max_bytes, so its
	// budget is its own and does not eat the messages' tokens.
	File Class = "rl.file"
)

// Limiter decides whether a principal may spend one token of a class. A
// shared store (PostgreSQL) can implement it when buckets must be shared
// across replicas.
type Limiter interface {
	// Begin starts taking one token of class from principal's bucket and
	// returns at once: a refusal this process can decide alone is already
	// in the Spend; a spend that must ask a shared store runs meanwhile, so
	// that the caller can read what its decision needs at the same time.
	// Spend.Wait gives the answer.
	Begin(principal string, class Class) *Spend
}

// Spend is one token being taken (Limiter.Begin).
type Spend struct {
	done    chan struct{} // nil when the answer was known at Begin
	ok      bool
	after   time.Duration
	refused func()
	// usage is what the deciding bucket holds after the spend, when
	// hasUsage (a value, not a pointer: no extra allocation per spend).
	usage    Usage
	hasUsage bool
}

// Decided returns a Spend whose answer is known: ok, or refused with a
// wait of retryAfter.
func Decided(ok bool, retryAfter time.Duration) *Spend {
	return &Spend{ok: ok, after: retryAfter}
}

// Pending returns a Spend whose answer comes later, and the function that
// gives it (call it once): what a Limiter that asks a shared store returns
// from Begin.
func Pending() (*Spend, func(ok bool, retryAfter time.Duration)) {
	s := &Spend{done: make(chan struct{})}
	return s, func(ok bool, after time.Duration) {
		s.ok, s.after = ok, after
		close(s.done)
	}
}

// OnRefusal makes Wait call f once when the token is refused (a counter of
// refusals, for example) and returns s. Call it before Wait.
func (s *Spend) OnRefusal(f func()) *Spend {
	s.refused = f
	return s
}

// WithUsage records what the bucket that decides s holds after it and
// returns s. A Limiter calls it before it hands s out, or, for a pending
// Spend, before it calls the function that gives the answer: Wait's
// channel then publishes it to the waiter.
func (s *Spend) WithUsage(u Usage) *Spend {
	s.usage, s.hasUsage = u, true
	return s
}

// Usage returns what the bucket that decided the spend holds after it, for
// the RateLimit header fields of the answer; false when the Limiter did not
// say (an action without a class). Call it after Wait.
func (s *Spend) Usage() (Usage, bool) { return s.usage, s.hasUsage }

// Known reports whether the answer was known at Begin (Wait does not
// block).
func (s *Spend) Known() bool { return s.done == nil }

// Wait blocks until the token is taken or refused and returns whether it
// was taken and, when not, how long until one is available. Call it once.
func (s *Spend) Wait() (ok bool, retryAfter time.Duration) {
	if s.done != nil {
		<-s.done
	}
	if !s.ok && s.refused != nil {
		s.refused()
	}
	return s.ok, s.after
}

type limits struct {
	perMinute, burst int
}

// Memory is a Limiter that keeps the buckets in this process.
type Memory struct {
	clock  clock.Clock
	limits map[Class]limits
	mu     sync.Mutex
	bucket map[string]*rate.Limiter
}

// NewMemory returns an in-process Limiter whose classes are sized by the
// ratelimit.<class>.per_minute and .burst keys of cfg, timed by c.
func NewMemory(cfg *config.Config, c clock.Clock) *Memory {
	l := map[Class]limits{
		Message:      {cfg.Int(config.RateMessagePerMinute), cfg.Int(config.RateMessageBurst)},
		AgentRuntime: {cfg.Int(config.RateAgentRuntimePerMinute), cfg.Int(config.RateAgentRuntimeBurst)},
		Read:         {cfg.Int(config.RateReadPerMinute), cfg.Int(config.RateReadBurst)},
		Admin:        {cfg.Int(config.RateAdminPerMinute), cfg.Int(config.RateAdminBurst)},
		File:         {cfg.Int(config.RateFilePerMinute), cfg.Int(config.RateFileBurst)},
	}
	return &Memory{clock: c, limits: l, bucket: map[string]*rate.Limiter{}}
}

// Begin implements Limiter; the answer is always known at once. An unknown
// class is refused, so that a missing class in an action table cannot open
// an unlimited door.
func (m *Memory) Begin(principal string, class Class) *Spend {
	if _, ok := m.limits[class]; !ok {
		return Decided(false, time.Minute)
	}
	r, wait, u := m.reserve(principal, class)
	return Decided(r != nil, wait).WithUsage(u)
}

// bucketOf returns the bucket of principal and class, making it full.
func (m *Memory) bucketOf(principal string, class Class) *rate.Limiter {
	lim := m.limits[class]
	key := string(class) + "|" + principal
	b, ok := m.bucket[key]
	if !ok {
		b = rate.NewLimiter(rate.Limit(float64(lim.perMinute)/60.0), lim.burst)
		m.bucket[key] = b
	}
	return b
}

// reserve takes one token of a known class and returns its reservation
// (to give it back), or nil and the wait, with what the bucket holds
// afterwards.
func (m *Memory) reserve(principal string, class Class) (*rate.Reservation, time.Duration, Usage) {
	lim := m.limits[class]
	now := m.clock.Now()
	m.mu.Lock()
	b := m.bucketOf(principal, class)
	r := b.ReserveN(now, 1)
	m.mu.Unlock()
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return nil, d, lim.refused(class, d)
	}
	return r, 0, lim.granted(class, b.TokensAt(now))
}
