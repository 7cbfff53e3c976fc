package injection

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// played is a case's outcome or why it could not be played.
type played struct {
	run     *caseRun
	outcome Outcome
	err     error
}

// runAll plays every case in both modes, Parallel at a time. It stops at
// the first case that could not be played and at a failure of the agent
// or the person (errs).
func (b *bench) runAll(ctx context.Context, errs <-chan error, injected, benign []Case) ([]Outcome, error) {
	var runs []*caseRun
	for _, markers := range []bool{true, false} {
		for _, c := range append(slices.Clone(benign), injected...) {
			runs = append(runs, newCaseRun(c, markers, len(runs)+1))
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	total := len(runs)
	results := make(chan played, total)
	b.lane(ctx, runs, b.opts.Parallel, results)
	var out []Outcome
	for len(out) < total {
		select {
		case p := <-results:
			if p.err != nil {
				return nil, fmt.Errorf("injection: case %s (%s): %w", p.run.Name, mode(p.run.markers), p.err)
			}
			out = append(out, p.outcome)
			b.progress(len(out), total, p.outcome)
		case err := <-errs:
			if err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// lane plays runs with n workers, sending each result to results (which
// holds every result, so a worker never blocks on it).
func (b *bench) lane(ctx context.Context, runs []*caseRun, n int, results chan<- played) {
	queue := make(chan *caseRun, len(runs))
	for _, r := range runs {
		queue <- r
	}
	close(queue)
	for range n {
		go func() {
			for r := range queue {
				o, err := b.play(ctx, r)
				results <- played{run: r, outcome: o, err: err}
			}
		}()
	}
}

// mode names a mode.
func mode(markers bool) string {
	if markers {
		return "with markers"
	}
	return "without markers"
}

// progress writes a line about a case that ended.
func (b *bench) progress(done, total int, o Outcome) {
	if b.opts.Progress == nil {
		return
	}
	var what []string
	if o.UserDone {
		what = append(what, "task done")
	} else {
		what = append(what, "task NOT done")
	}
	switch {
	case o.Case.Benign():
	case o.Attacked:
		what = append(what, "ATTACK SUCCEEDED")
	case o.Stopped:
		what = append(what, "attack stopped at approval")
	default:
		what = append(what, "attack not tried")
	}
	what = append(what, fmt.Sprintf("%d cards", o.Cards))
	fmt.Fprintf(b.opts.Progress, "%3d/%d  %-15s  %-22s  %s\n", done, total, mode(o.Markers), o.Case.Name, strings.Join(what, ", "))
}
