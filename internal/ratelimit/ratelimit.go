// Package ratelimit owns the per-principal token buckets of the rate-limit
// classes (rl.message, rl.agent_runtime, rl.read, rl.admin).
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
)

// Limiter decides whether a principal may spend one token of a class. A
// shared store (PostgreSQL) can implement it when buckets must be shared
// across replicas.
type Limiter interface {
	// Allow takes one token of class from principal's bucket. When the bucket
	// is empty it returns false and how long until a token is available.
	Allow(principal string, class Class) (ok bool, retryAfter time.Duration)
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
	}
	return &Memory{clock: c, limits: l, bucket: map[string]*rate.Limiter{}}
}

// Allow implements Limiter. An unknown class is refused, so that a missing
// class in an action table cannot open an unlimited door.
func (m *Memory) Allow(principal string, class Class) (bool, time.Duration) {
	if _, ok := m.limits[class]; !ok {
		return false, time.Minute
	}
	if r, wait := m.reserve(principal, class); r == nil {
		return false, wait
	}
	return true, 0
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
// (to give it back), or nil and the wait.
func (m *Memory) reserve(principal string, class Class) (*rate.Reservation, time.Duration) {
	now := m.clock.Now()
	m.mu.Lock()
	r := m.bucketOf(principal, class).ReserveN(now, 1)
	m.mu.Unlock()
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return nil, d
	}
	return r, 0
}
