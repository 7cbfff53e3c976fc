package ratelimit

import (
	"testing"
	"time"

	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/config"
)

func TestMemoryBuckets(t *testing.T) {
	cfg := config.Defaults().MustWith(config.RateMessageBurst, "2").MustWith(config.RateMessagePerMinute, "60")
	fc := clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	m := NewMemory(cfg, fc)
	for i := range 2 {
		if ok, _ := m.Allow("alex", Message); !ok {
			t.Fatalf("token %d refused within the burst", i)
		}
	}
	ok, wait := m.Allow("alex", Message)
	if ok || wait != time.Second {
		t.Fatalf("over the burst: %v %v, want refused with 1s", ok, wait)
	}
	if ok, _ := m.Allow("sam", Message); !ok {
		t.Fatal("another principal shares the bucket")
	}
	// A refusal takes nothing: one second later exactly one token is there.
	fc.Advance(time.Second)
	if ok, _ := m.Allow("alex", Message); !ok {
		t.Fatal("no token after the refill")
	}
	if ok, _ := m.Allow("alex", Message); ok {
		t.Fatal("two tokens after one second")
	}
	if ok, wait := m.Allow("alex", Class("rl.unknown")); ok || wait != time.Minute {
		t.Fatal("an unknown class is not refused")
	}
}

// TestReservationCancel: a local token given back (the shared bucket
// refused) is available again, so the local bucket never holds fewer
// tokens than the shared one.
func TestReservationCancel(t *testing.T) {
	cfg := config.Defaults().MustWith(config.RateMessageBurst, "1")
	fc := clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	m := NewMemory(cfg, fc)
	r, _ := m.reserve("alex", Message)
	if r == nil {
		t.Fatal("first reservation refused")
	}
	r.CancelAt(fc.Now())
	if ok, _ := m.Allow("alex", Message); !ok {
		t.Fatal("the given-back token is not there")
	}
}
