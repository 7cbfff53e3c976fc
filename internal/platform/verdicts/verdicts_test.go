package verdicts_test

import (
	"testing"
	"time"

	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/verdicts"
)

func TestWindowFresh(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	c := clock.NewFake(start)
	taken := verdicts.Taken(uint64(3), c)
	tests := []struct {
		name string
		w    verdicts.Window[uint64]
		gen  uint64
		now  time.Time
		want bool
	}{
		{"same generation, same instant", taken, 3, start, true},
		{"same generation, just inside the bound", taken, 3, start.Add(verdicts.TTL - time.Nanosecond), true},
		{"same generation, at the bound", taken, 3, start.Add(verdicts.TTL), false},
		{"same generation, past the bound", taken, 3, start.Add(time.Minute), false},
		{"clock stepped back", taken, 3, start.Add(-time.Nanosecond), false},
		{"other generation", taken, 4, start, false},
		{"zero window", verdicts.Window[uint64]{}, 0, start, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.w.Fresh(tc.gen, tc.now); got != tc.want {
				t.Fatalf("Fresh(%d, %v) = %v, want %v", tc.gen, tc.now, got, tc.want)
			}
		})
	}
}

func TestWindowHold(t *testing.T) {
	t.Parallel()
	c := clock.NewFake(time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC))
	gen := make(chan struct{})
	var w verdicts.Window[<-chan struct{}]
	steps := []struct {
		name    string
		advance time.Duration
		gen     <-chan struct{}
		want    bool
	}{
		{"first use starts the window", 0, gen, false},
		{"within it", verdicts.TTL / 2, gen, true},
		{"time to live passed: starts again", verdicts.TTL, gen, false},
		{"new generation: starts again", 0, make(chan struct{}), false},
	}
	for _, s := range steps {
		c.Advance(s.advance)
		if got := w.Hold(s.gen, c); got != s.want {
			t.Fatalf("%s: Hold = %v, want %v", s.name, got, s.want)
		}
		if w.Gen() != s.gen {
			t.Fatalf("%s: Gen is not the generation held", s.name)
		}
	}
}
