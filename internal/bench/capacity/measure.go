package capacity

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// step holds level k for the step's duration and measures it.
func (b *bench) step(ctx context.Context, k int) (StepResult, stepProfile, error) {
	o := b.opts
	r := StepResult{Level: k, Target: o.Base.Scale(k)}
	// A level whose listeners cannot all connect and receive is a failed
	// level, not the end of the search: the server is what is measured.
	if err := b.resize(ctx, r.Target.Listeners); err != nil {
		r.Failures, r.FirstFailure = 1, err.Error()
		return r, stepProfile{}, ctx.Err()
	}
	if err := b.warm(ctx); err != nil {
		r.Failures, r.FirstFailure = 1, err.Error()
		return r, stepProfile{}, ctx.Err()
	}
	b.takeFailures() // the ramp's own (none expected) are not the step's
	var prof stepProfile
	profDone := make(chan struct{})
	go func() {
		defer close(profDone)
		if o.PprofURL != "" {
			prof.p, prof.path, prof.err = fetchProfile(ctx, o.PprofURL, o.StepDuration, o.ProfileDir)
		}
	}()
	smp := sampler{serverPid: o.ServerPid, databasePid: o.DatabasePid}
	asked0, answered0 := b.asked.Load(), b.answered.Load()
	cpu0 := smp.sample()
	var mu sync.Mutex
	committed := map[string]time.Time{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		ticking(r.Target.Messages, stop, func() {
			if id, ok := b.post(ctx, fmt.Sprintf("capacity step %d", k)); ok {
				mu.Lock()
				committed[id] = time.Now()
				mu.Unlock()
			}
		})
	}()
	go func() { defer wg.Done(); ticking(r.Target.Runs, stop, func() { b.ask(ctx) }) }()
	go func() { defer wg.Done(); <-profDone }()
	time.Sleep(o.StepDuration)
	close(stop)
	cpu1 := smp.sample()
	wg.Wait()
	b.drain(&r, committed, asked0, answered0)
	r.CPU = between(cpu0, cpu1)
	r.Failures, r.FirstFailure = b.takeFailures()
	return r, prof, nil
}

// drain waits (up to the grace) for the step's messages at every
// listener and its runs' answers, then fills in the figures.
func (b *bench) drain(r *StepResult, committed map[string]time.Time, asked0, answered0 int64) {
	o := b.opts
	deadline := time.Now().Add(o.Grace)
	ids := make([]string, 0, len(committed))
	for id := range committed {
		ids = append(ids, id)
	}
	subs := len(b.conns) * o.SubsPerConn
	r.Lost = b.arr.wait(ids, subs, deadline)
	for b.answered.Load()-answered0 < b.asked.Load()-asked0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	r.RunsAsked, r.RunsAnswered = int(b.asked.Load()-asked0), int(b.answered.Load()-answered0)
	secs := o.StepDuration.Seconds()
	r.Posted, r.Messages, r.Runs = len(ids), float64(len(ids))/secs, float64(r.RunsAnswered)/secs
	var lat []time.Duration
	b.arr.mu.Lock()
	for id, at := range committed {
		r.Deliveries += b.arr.seen[id]
		if b.arr.seen[id] >= subs {
			lat = append(lat, b.arr.last[id].Sub(at))
		}
	}
	b.arr.mu.Unlock()
	r.P50, r.P99 = Percentile(lat, 50), Percentile(lat, 99)
}

// conclude picks the highest held step and names the bottleneck from the
// first failing step (or the highest step when none failed).
func conclude(steps []StepResult, s Search, profiles map[int]stepProfile) (*StepResult, Bottleneck) {
	var best, at *StepResult
	for i := range steps {
		if steps[i].Level == s.Best() {
			best = &steps[i]
		}
		if steps[i].Level == s.FirstFailure() {
			at = &steps[i]
		}
	}
	if at == nil {
		at = best
	}
	if at == nil {
		return nil, Bottleneck{Summary: "no step ran"}
	}
	bn := Bottleneck{Level: at.Level, Summary: Summarize(at.CPU)}
	if !at.Passed {
		bn.Summary = at.Why + "; " + bn.Summary
	}
	switch p := profiles[at.Level]; {
	case p.p != nil:
		bn.Packages, bn.Top = shares(p.p, 6)
		bn.Profile = p.path
	case p.err != nil:
		bn.Profile = "not taken: " + p.err.Error()
	}
	return best, bn
}
