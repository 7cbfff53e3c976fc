// Package clock owns the one source of time of the server, so that tests can
// drive windows and timeouts with a fake clock instead of sleeping.
package clock

import (
	"sync"
	"time"
)

// Clock tells the current time.
type Clock interface {
	// Now returns the current time in UTC.
	Now() time.Time
}

// Real is the wall clock.
type Real struct{}

// Now returns the wall-clock time in UTC.
func (Real) Now() time.Time { return time.Now().UTC() }

// At returns a channel that receives once c reaches t: a timer of the wall
// clock for Real (and any other clock), and for a Fake the moment Advance
// moves it to t or beyond. A t already reached fires at once.
func At(c Clock, t time.Time) <-chan time.Time {
	if f, ok := c.(*Fake); ok {
		return f.at(t)
	}
	return time.After(t.Sub(c.Now()))
}

// Fake is a clock that moves only when told to. It is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
}

// waiter is a channel of At waiting for the fake clock to reach its time.
type waiter struct {
	t  time.Time
	ch chan time.Time
}

// at registers a waiter for t, firing it at once when t is reached.
func (f *Fake) at(t time.Time) <-chan time.Time {
	ch := make(chan time.Time, 1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.now.Before(t) {
		ch <- f.now
		return ch
	}
	f.waiters = append(f.waiters, waiter{t: t, ch: ch})
	return ch
}

// NewFake returns a Fake clock standing at start.
func NewFake(start time.Time) *Fake { return &Fake{now: start.UTC()} }

// Now returns the fake clock's time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the fake clock forward by d.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if f.now.Before(w.t) {
			kept = append(kept, w)
			continue
		}
		w.ch <- f.now
	}
	f.waiters = kept
	f.mu.Unlock()
}
