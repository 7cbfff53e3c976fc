package ratelimit

import (
	"context"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/config"
)

// allow takes one token of class from principal's bucket in l and waits
// for the answer.
func allow(l Limiter, principal string, class Class) (bool, time.Duration) {
	return l.Begin(principal, class).Wait()
}

func TestMemoryBuckets(t *testing.T) {
	cfg := config.Defaults().MustWith(config.RateMessageBurst, "2").MustWith(config.RateMessagePerMinute, "60")
	fc := clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	m := NewMemory(cfg, fc)
	for i := range 2 {
		if ok, _ := allow(m, "alex", Message); !ok {
			t.Fatalf("token %d refused within the burst", i)
		}
	}
	ok, wait := allow(m, "alex", Message)
	if ok || wait != time.Second {
		t.Fatalf("over the burst: %v %v, want refused with 1s", ok, wait)
	}
	if ok, _ := allow(m, "sam", Message); !ok {
		t.Fatal("another principal shares the bucket")
	}
	// A refusal takes nothing: one second later exactly one token is there.
	fc.Advance(time.Second)
	if ok, _ := allow(m, "alex", Message); !ok {
		t.Fatal("no token after the refill")
	}
	if ok, _ := allow(m, "alex", Message); ok {
		t.Fatal("two tokens after one second")
	}
	if ok, wait := allow(m, "alex", Class("rl.unknown")); ok || wait != time.Minute {
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
	r, _, _ := m.reserve("alex", Message)
	if r == nil {
		t.Fatal("first reservation refused")
	}
	r.CancelAt(fc.Now())
	if ok, _ := allow(m, "alex", Message); !ok {
		t.Fatal("the given-back token is not there")
	}
}

// TestSpend checks the answers of a Spend: known at Begin or given later,
// with the refusal hook called only for a refusal.
func TestSpend(t *testing.T) {
	for _, tc := range []struct {
		name      string
		later     bool
		ok        bool
		after     time.Duration
		wantKnown bool
	}{
		{"taken at once", false, true, 0, true},
		{"refused at once", false, false, 3 * time.Second, true},
		{"taken later", true, true, 0, false},
		{"refused later", true, false, time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s *Spend
			if tc.later {
				var finish func(bool, time.Duration)
				s, finish = Pending()
				go finish(tc.ok, tc.after)
			} else {
				s = Decided(tc.ok, tc.after)
			}
			if s.Known() != tc.wantKnown {
				t.Fatalf("Known = %v, want %v", s.Known(), tc.wantKnown)
			}
			refusals := 0
			ok, after := s.OnRefusal(func() { refusals++ }).Wait()
			if ok != tc.ok || after != tc.after {
				t.Fatalf("Wait = %v %v, want %v %v", ok, after, tc.ok, tc.after)
			}
			if want := map[bool]int{true: 0, false: 1}[tc.ok]; refusals != want {
				t.Fatalf("refusal hook called %d times, want %d", refusals, want)
			}
		})
	}
}

// TestMemoryAnswersAtOnce: the in-process buckets never leave a spend
// pending, so the door never waits on them.
func TestMemoryAnswersAtOnce(t *testing.T) {
	cfg := config.Defaults().MustWith(config.RateMessageBurst, "1")
	m := NewMemory(cfg, clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)))
	for i, want := range []bool{true, false} {
		s := m.Begin("alex", Message)
		if !s.Known() {
			t.Fatalf("spend %d pending", i)
		}
		if ok, _ := s.Wait(); ok != want {
			t.Fatalf("spend %d: %v, want %v", i, ok, want)
		}
	}
}

// TestUsage: every answer of the in-process buckets says what the bucket
// holds after it: whole tokens left, the time until the next one, and for
// a refusal nothing left until its wait has passed.
func TestUsage(t *testing.T) {
	cfg := config.Defaults().MustWith(config.RateMessageBurst, "3").MustWith(config.RateMessagePerMinute, "60")
	fc := clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	m := NewMemory(cfg, fc)
	steps := []struct {
		advance time.Duration
		ok      bool
		want    Usage
	}{
		{0, true, Usage{Remaining: 2, Reset: time.Second}},
		{500 * time.Millisecond, true, Usage{Remaining: 1, Reset: 500 * time.Millisecond}},
		{0, true, Usage{Remaining: 0, Reset: 500 * time.Millisecond}},
		{0, false, Usage{Remaining: 0, Reset: 500 * time.Millisecond}},
		{500 * time.Millisecond, true, Usage{Remaining: 0, Reset: time.Second}},
	}
	for i, st := range steps {
		fc.Advance(st.advance)
		s := m.Begin("alex", Message)
		ok, wait := s.Wait()
		u, has := s.Usage()
		if !has {
			t.Fatalf("step %d: no usage", i)
		}
		st.want.Class, st.want.Burst, st.want.Window = Message, 3, 3*time.Second
		if ok != st.ok || u != st.want {
			t.Fatalf("step %d: %v %+v, want %v %+v", i, ok, u, st.ok, st.want)
		}
		if !ok && wait != u.Reset {
			t.Fatalf("step %d: refused with wait %v but reset %v", i, wait, u.Reset)
		}
	}
	if _, has := Decided(true, 0).Usage(); has {
		t.Fatal("a spend without a bucket has a usage")
	}
}

// TestMeter: a request's meter keeps the usage with the fewest tokens left
// (on a tie the longer wait), whatever the order of the spends; a context
// without a meter and a spend without a usage record nothing.
func TestMeter(t *testing.T) {
	spend := func(class Class, left int, reset time.Duration) *Spend {
		return Decided(true, 0).WithUsage(Usage{Class: class, Burst: 10, Remaining: left, Reset: reset})
	}
	ctx, m := WithMeter(context.Background())
	if _, ok := m.Lowest(); ok {
		t.Fatal("an empty meter has a usage")
	}
	Observe(ctx, Decided(true, 0))
	if _, ok := m.Lowest(); ok {
		t.Fatal("a spend without a usage was recorded")
	}
	Observe(ctx, spend(Read, 7, time.Second))
	Observe(ctx, spend(Message, 3, time.Second))
	Observe(ctx, spend(Read, 5, time.Second))
	Observe(ctx, spend(Admin, 3, 2*time.Second))
	Observe(ctx, spend(AgentRuntime, 3, time.Second))
	if u, _ := m.Lowest(); u.Class != Admin || u.Remaining != 3 {
		t.Fatalf("lowest %+v, want rl.admin with 3 left", u)
	}
	Observe(context.Background(), spend(Read, 0, time.Second)) // no meter: nothing happens
	if u, _ := m.Lowest(); u.Class != Admin {
		t.Fatalf("a spend of another request changed the meter: %+v", u)
	}
}

// TestMeterNests: a meter opened inside a request that has one (an MCP
// tool's in-process API call) keeps its own spends and passes them on to
// the outer meter, which keeps the lowest of all its inner calls; a spend
// of the outer request never reaches an inner meter.
func TestMeterNests(t *testing.T) {
	spend := func(class Class, left int) *Spend {
		return Decided(true, 0).WithUsage(Usage{Class: class, Burst: 10, Remaining: left, Reset: time.Second})
	}
	outerCtx, outer := WithMeter(context.Background())
	firstCtx, first := WithMeter(outerCtx)
	Observe(firstCtx, spend(Read, 4))
	secondCtx, second := WithMeter(outerCtx)
	Observe(secondCtx, spend(Message, 6))
	if u, _ := first.Lowest(); u.Class != Read || u.Remaining != 4 {
		t.Fatalf("first inner meter %+v", u)
	}
	if u, _ := second.Lowest(); u.Class != Message || u.Remaining != 6 {
		t.Fatalf("second inner meter %+v", u)
	}
	if u, _ := outer.Lowest(); u.Class != Read || u.Remaining != 4 {
		t.Fatalf("outer meter %+v, want rl.read with 4 left", u)
	}
	Observe(outerCtx, spend(Admin, 1))
	if u, _ := first.Lowest(); u.Class != Read {
		t.Fatalf("an outer spend reached an inner meter: %+v", u)
	}
	if u, _ := outer.Lowest(); u.Class != Admin || u.Remaining != 1 {
		t.Fatalf("outer meter %+v, want rl.admin with 1 left", u)
	}
}
