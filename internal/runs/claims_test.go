package runs_test

import (
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/runs"
	"bothy.example.com/bothy/internal/runs/domain"
)

func TestValidHolder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		holder string
		ok     bool
	}{
		{"adapter-1f2e", true},
		{"host.example.com:4711_a", true},
		{strings.Repeat("a", 128), true},
		{"", false},
		{strings.Repeat("a", 129), false},
		{"with space", false},
		{"slash/not", false},
		{"ümlaut", false},
		{"new\nline", false},
	}
	for _, tc := range tests {
		if got := runs.ValidHolder(tc.holder); got != tc.ok {
			t.Errorf("ValidHolder(%q) = %v, want %v", tc.holder, got, tc.ok)
		}
	}
}

func TestSweepVerdict(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	to := runs.Timeouts{Start: 5 * time.Minute, Stall: 30 * time.Minute, Lease: time.Minute, MaxAttempts: 3, CancelGrace: 30 * time.Second}
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }
	base := func(f func(*runs.Run)) runs.Run {
		r := runs.Run{State: domain.RunRunning, Attempt: 1, LastActivityAt: now.Add(-time.Minute), LeaseExpiresAt: at(30 * time.Second)}
		f(&r)
		return r
	}
	tests := []struct {
		name string
		run  runs.Run
		want runs.SweepAction
	}{
		{"running within its lease", base(func(*runs.Run) {}), runs.SweepNone},
		{"lease lapsed", base(func(r *runs.Run) { r.LeaseExpiresAt = at(-time.Second) }), runs.SweepRequeue},
		{"lease lapses exactly now", base(func(r *runs.Run) { r.LeaseExpiresAt = at(0) }), runs.SweepRequeue},
		{"waiting run's lease lapsed", base(func(r *runs.Run) { r.State = domain.RunWaitingInput; r.LeaseExpiresAt = at(-time.Second) }), runs.SweepRequeue},
		{"last attempt lapsed", base(func(r *runs.Run) { r.Attempt = 3; r.LeaseExpiresAt = at(-time.Second) }), runs.SweepLeaseExpired},
		{"stalled although renewed", base(func(r *runs.Run) { r.LastActivityAt = now.Add(-31 * time.Minute) }), runs.SweepTimeout},
		{"stall before lease", base(func(r *runs.Run) { r.LastActivityAt = now.Add(-31 * time.Minute); r.LeaseExpiresAt = at(-time.Hour) }), runs.SweepTimeout},
		{"queued in time", base(func(r *runs.Run) { r.State = domain.RunQueued; r.LeaseExpiresAt = nil }), runs.SweepNone},
		{"queued too long", base(func(r *runs.Run) {
			r.State = domain.RunQueued
			r.LeaseExpiresAt = nil
			r.LastActivityAt = now.Add(-6 * time.Minute)
		}), runs.SweepTimeout},
		{"trigger lost within the grace", base(func(r *runs.Run) { r.TriggerLostAt = at(-10 * time.Second) }), runs.SweepNone},
		{"trigger lost, grace over", base(func(r *runs.Run) { r.TriggerLostAt = at(-30 * time.Second) }), runs.SweepRevoked},
		{"revocation before lease", base(func(r *runs.Run) { r.TriggerLostAt = at(-time.Minute); r.LeaseExpiresAt = at(-time.Second) }), runs.SweepRevoked},
		{"ended", base(func(r *runs.Run) { r.State = domain.RunCompleted; r.LeaseExpiresAt = at(-time.Hour) }), runs.SweepNone},
		{"cancel requested, lease lapsed: never back to queued", base(func(r *runs.Run) { r.CancelRequested = true; r.LeaseExpiresAt = at(-time.Second) }), runs.SweepCancelled},
		{"cancel requested on the last attempt", base(func(r *runs.Run) {
			r.CancelRequested, r.Attempt = true, 3
			r.LeaseExpiresAt = at(-time.Second)
		}), runs.SweepCancelled},
		{"cancel requested within the lease", base(func(r *runs.Run) { r.CancelRequested = true }), runs.SweepNone},
		{"trigger lost, lease lapsed within the grace", base(func(r *runs.Run) {
			r.TriggerLostAt, r.CancelRequested = at(-5*time.Second), true
			r.LeaseExpiresAt = at(-time.Second)
		}), runs.SweepRevoked},
	}
	for _, tc := range tests {
		if got := runs.SweepVerdict(tc.run, now, to); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
