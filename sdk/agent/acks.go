package agent

import (
	"context"
	"strconv"
	"sync"
	"time"
)

// The acknowledgement of the agent stream (ackAgentEvents) is positional:
// acknowledging a seq acknowledges every event up to it, and acknowledging
// an agent.followup event delivers its follow-up, which is the promise that
// the run's answer covers it (the server absorbs delivered follow-ups when
// the run completes and starts a next run from the pending ones:
// the runs design: follow-ups). So the adapter may acknowledge up to an
// event only when every event up to it is dealt with, and an agent.followup
// is dealt with only when
//
//   - the model of the run this process holds has seen the follow-up (or an
//     answer of the run already covers it: cover), or
//   - the run has ended (release): the server settled the follow-up with
//     the end (promoted, moved to the next run with an event of its own,
//     or dropped), and acknowledging the old event delivers nothing, or
//   - for a run this process does not hold (another process holds it, or
//     nobody does until a takeover), the server's acknowledged position
//     has passed the event (the holder acknowledged it) or a read of the
//     run shows it ended.
//
// The position therefore stops in front of the first follow-up the model
// has not seen; events behind it wait, also resolved ones, and are read
// again after a restart (every handler tolerates that). A run may only
// complete once the follow-ups its answer covers are delivered
// (awaitDelivered), else they would be promoted too and answered twice.
// This cannot deadlock: the follow-ups a run's model has seen are a prefix,
// in stream order, of the run's follow-ups (a context read lists every
// follow-up committed before it, and seqs commit in order), so a run that
// waits for its seen follow-ups waits only for events of other runs, whose
// models see them in their next round or whose end releases them.
type acks struct {
	mu sync.Mutex
	// pending are the events read and not yet acknowledged, in stream order.
	pending []ackEntry
	// stored is the acknowledged position the server last answered
	// (storedOK false until an answer was a number).
	stored   int64
	storedOK bool
	// lastAcked is the position of this process's last successful
	// acknowledgement; sending it again learns the stored position.
	lastAcked string
	// runs are the runs this process holds.
	runs map[string]*runAcks
	// kick asks the acknowledger to act; changed is closed (and replaced)
	// whenever a delivery is recorded.
	kick    chan struct{}
	changed chan struct{}
}

// ackEntry is one event read from the stream.
type ackEntry struct {
	seq      string
	n        int64
	numeric  bool
	followup bool
	runID    string
	message  string
	resolved bool
	// reported is set once the log said that the position waits here.
	reported bool
	// since is when the entry was read or the run of an unresolved
	// follow-up was last checked.
	since time.Time
}

// runAcks is what the ledger knows of a run this process holds.
type runAcks struct {
	// covered are the follow-ups (message ids) the run's answer covers.
	covered map[string]bool
	// delivered are the follow-ups whose event an acknowledgement passed
	// while this process held the run.
	delivered map[string]bool
}

func newAcks() *acks {
	return &acks{runs: map[string]*runAcks{}, kick: make(chan struct{}, 1), changed: make(chan struct{})}
}

// poke asks the acknowledger to act soon.
func (l *acks) poke() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// track starts the record of a run this process now holds.
func (l *acks) track(runID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.runs[runID] == nil {
		l.runs[runID] = &runAcks{covered: map[string]bool{}, delivered: map[string]bool{}}
	}
}

// add records an event the loop has handled; dealt is false for an event
// this process leaves for a later one (an invocation --once does not take):
// it is never acknowledged, and neither is anything behind it.
func (l *acks) add(ev AgentEvent, dealt bool, ref RunRef, now time.Time) {
	e := ackEntry{seq: ev.Seq, resolved: dealt, since: now}
	e.n, e.numeric = parseSeq(ev.Seq)
	if dealt && ev.Type == EventFollowup && ref.RunID != "" && ref.MessageID != "" {
		e.followup, e.runID, e.message = true, ref.RunID, ref.MessageID
		e.resolved = false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.followup {
		if r := l.runs[e.runID]; r != nil && r.covered[e.message] {
			e.resolved = true
		}
		if l.storedOK && e.numeric && e.n <= l.stored {
			// Another process acknowledged it already: it is delivered.
			e.resolved = true
			l.noteDelivered(e)
		}
	}
	l.pending = append(l.pending, e)
}

// cover records that the answer of run runID covers the follow-ups
// messageIDs (its model saw them, or an answer of the run already covers
// them): their events may be acknowledged now.
func (l *acks) cover(runID string, messageIDs []string) {
	l.mu.Lock()
	r := l.runs[runID]
	if r != nil {
		for _, m := range messageIDs {
			r.covered[m] = true
		}
		for i := range l.pending {
			if e := &l.pending[i]; e.followup && e.runID == runID && r.covered[e.message] {
				e.resolved = true
			}
		}
	}
	l.mu.Unlock()
	l.poke()
}

// release ends the record of a run this process no longer holds. ended
// says the run has ended: its follow-ups' events are dealt with. Otherwise
// (the claim was lost to another process) they wait like those of any run
// this process does not hold.
func (l *acks) release(runID string, ended bool) {
	l.mu.Lock()
	delete(l.runs, runID)
	if ended {
		l.resolveRun(runID)
	}
	l.mu.Unlock()
	l.poke()
}

// resolveRun marks every pending follow-up of runID dealt with; l.mu is held.
func (l *acks) resolveRun(runID string) {
	for i := range l.pending {
		if e := &l.pending[i]; e.followup && e.runID == runID {
			e.resolved = true
		}
	}
}

// target returns the position to acknowledge: the last event of the
// longest prefix of dealt-with events ("" when the first is not).
func (l *acks) target() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	seq := ""
	for _, e := range l.pending {
		if !e.resolved {
			break
		}
		seq = e.seq
	}
	return seq
}

// head returns the first event not dealt with. report is true the first
// time it is a follow-up (the log says where the position waits); due is
// true when it is the follow-up of a run this process does not hold and
// that run is due for a check (every interval), which marks it checked.
func (l *acks) head(now time.Time, interval time.Duration) (e ackEntry, report, due bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.pending {
		h := &l.pending[i]
		if h.resolved {
			continue
		}
		if !h.followup {
			return *h, false, false
		}
		report = !h.reported
		h.reported = true
		if l.runs[h.runID] == nil && now.Sub(h.since) >= interval {
			h.since, due = now, true
		}
		return *h, report, due
	}
	return ackEntry{}, false, false
}

// last returns the position of this process's last successful
// acknowledgement ("" before the first).
func (l *acks) last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastAcked
}

// runEnded resolves the follow-ups of a run this process does not hold
// once a read showed it ended.
func (l *acks) runEnded(runID string) {
	l.mu.Lock()
	if l.runs[runID] == nil {
		l.resolveRun(runID)
	}
	l.mu.Unlock()
}

// acked records a successful acknowledgement up to upTo with the position
// the server answered: the events up to upTo leave the ledger, and so do
// those the stored position passed (another process acknowledged them), a
// follow-up of a run this process holds being delivered either way.
func (l *acks) acked(upTo, position string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastAcked = upTo
	if n, ok := parseSeq(position); ok && (!l.storedOK || n > l.stored) {
		l.stored, l.storedOK = n, true
	}
	cut := 0
	for i, e := range l.pending {
		if e.seq == upTo {
			cut = i + 1
			break
		}
	}
	for i := range l.pending {
		e := &l.pending[i]
		passed := l.storedOK && e.numeric && e.n <= l.stored
		if i > cut || (i == cut && !passed) {
			break
		}
		l.noteDelivered(*e)
		cut = max(cut, i+1)
	}
	l.pending = append([]ackEntry(nil), l.pending[cut:]...)
	close(l.changed)
	l.changed = make(chan struct{})
}

// noteDelivered records the delivery of e's follow-up for a run this
// process holds; l.mu is held.
func (l *acks) noteDelivered(e ackEntry) {
	if !e.followup {
		return
	}
	if r := l.runs[e.runID]; r != nil {
		r.delivered[e.message] = true
	}
}

// awaitDelivered waits until the follow-ups messageIDs of run runID are
// delivered by an acknowledgement, or ctx ends.
//
// Errors: ctx.Err() when ctx ended first.
func (l *acks) awaitDelivered(ctx context.Context, runID string, messageIDs []string) error {
	for {
		l.mu.Lock()
		done := true
		if r := l.runs[runID]; r != nil {
			for _, m := range messageIDs {
				done = done && r.delivered[m]
			}
		}
		changed := l.changed
		l.mu.Unlock()
		if done {
			return nil
		}
		l.poke()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// parseSeq reads a seq as the server writes it, a decimal position; the
// schema calls it a string, so a seq that is none is only never compared
// with the stored position.
func parseSeq(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
