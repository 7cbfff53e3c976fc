package clock

import (
	"testing"
	"time"
)

// fired reports whether ch has fired.
func fired(ch <-chan time.Time) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestAtFake: a fake clock's At fires when Advance reaches its time, not
// before, and at once for a time already reached.
func TestAtFake(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	f := NewFake(start)
	past, soon, later := At(f, start), At(f, start.Add(time.Minute)), At(f, start.Add(time.Hour))
	if !fired(past) || fired(soon) || fired(later) {
		t.Fatal("before any Advance: want only the reached time fired")
	}
	f.Advance(59 * time.Second)
	if fired(soon) {
		t.Fatal("fired a second early")
	}
	f.Advance(time.Second)
	if !fired(soon) || fired(later) {
		t.Fatal("at one minute: want the minute fired, the hour not")
	}
	f.Advance(2 * time.Hour)
	if !fired(later) {
		t.Fatal("past the hour: not fired")
	}
}

// TestAtReal: the wall clock's At is a timer for the time left.
func TestAtReal(t *testing.T) {
	t.Parallel()
	select {
	case <-At(Real{}, time.Now().Add(-time.Second)):
	case <-time.After(10 * time.Second):
		t.Fatal("a time already past did not fire")
	}
}
