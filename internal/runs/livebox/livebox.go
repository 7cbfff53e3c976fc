// Package livebox holds the rule of a run's live box: the text, status and
// version readers see while an agent writes its answer
// (docs/design/runs.md#live-box). The rule is pure: every replica applies
// the same operations in the same order (PostgreSQL's notification order)
// with Apply and so holds the same box without a database write per update.
package livebox

import (
	"errors"
	"time"
)

// StatusMaxBytes bounds a box's status line.
const StatusMaxBytes = 200

// Box is a live box as readers see it.
type Box struct {
	// Version is 0 for an empty box and one more per applied change.
	Version int
	// Text is the markdown shown so far (at most run.live_max_bytes).
	Text string
	// Status is a short line such as "searching the wiki".
	Status string
	// Done says the writer finished the box (an answer was posted, the
	// run ended, or the holder marked it done).
	Done bool
	// Ended says the run ended: the box takes no update any more.
	Ended bool
	// UpdatedAt is the time of the last applied change (zero while empty).
	UpdatedAt time.Time
}

// Kind is the kind of an operation.
type Kind string

// The operations that change a box.
const (
	// Update is a holder's updateRunLive.
	Update Kind = "update"
	// Answered is an answer posted naming the run: the box is done and
	// drops its text (the answer holds it), keeping its status.
	Answered Kind = "answered"
	// Ended is the run's end: the box keeps its text, marked done, and
	// takes no update any more.
	Ended Kind = "ended"
	// Takeover is a new attempt's claim of the run after the last
	// holder's lease lapsed: what the lost attempt wrote is not the
	// answer any more, so the box is emptied (text and status). A done
	// box keeps what it shows (an answer's status, a person's stop).
	Takeover Kind = "takeover"
)

// Op is one operation on a box, as a replica receives it.
type Op struct {
	Kind Kind
	// Base is the version an update was written against.
	Base int
	// Append is added after the text (after Replace when both are set).
	Append string
	// Replace, when set, replaces the text.
	Replace *string
	// Status, when set, replaces the status line.
	Status *string
	// Done marks the box done; an update without it opens a done box
	// again (a follow-up round of an active run).
	Done bool
	// At is when the operation was sent (the sender's clock).
	At time.Time
}

// The refusals of Apply.
var (
	// ErrVersion: the update's base version is not the box's version.
	ErrVersion = errors.New("live box: base version is not the current version")
	// ErrEnded: the run ended; the box takes no update.
	ErrEnded = errors.New("live box: the run has ended")
	// ErrTooLong: the text would exceed the box's maximum.
	ErrTooLong = errors.New("live box: text too long")
)

// Delta is what readers receive of an applied operation: the change, not
// the whole box, except when Replace is set.
type Delta struct {
	Version int
	// Append is the text added at the end.
	Append string
	// Replace, when set, is the whole text before Append.
	Replace *string
	Status  string
	Done    bool
	At      time.Time
}

// Apply applies op to b with maxBytes as the text's bound and returns the
// new box and the delta readers receive. changed is false when the box
// stays as it is (an end of an ended box, an answer on an ended box). A
// refused update returns b unchanged with ErrVersion, ErrEnded or
// ErrTooLong.
func Apply(b Box, op Op, maxBytes int) (out Box, d Delta, changed bool, err error) {
	switch op.Kind {
	case Update:
		if b, d, err = applyUpdate(b, op, maxBytes); err != nil {
			return b, Delta{}, false, err
		}
	case Answered:
		if b.Ended {
			return b, Delta{}, false, nil
		}
		empty := ""
		b.Text, b.Done = "", true
		d = Delta{Replace: &empty}
	case Takeover:
		if b.Ended || b.Done || (b.Text == "" && b.Status == "") {
			return b, Delta{}, false, nil
		}
		empty := ""
		b.Text, b.Status = "", ""
		d = Delta{Replace: &empty}
	case Ended:
		if b.Ended {
			return b, Delta{}, false, nil
		}
		b.Ended = true
		if b.Done {
			// Nothing a reader sees changes.
			return b, Delta{}, false, nil
		}
		b.Done = true
	default:
		return b, Delta{}, false, nil
	}
	b.Version++
	b.UpdatedAt = op.At
	d.Version, d.Status, d.Done, d.At = b.Version, b.Status, b.Done, op.At
	return b, d, true, nil
}

// applyUpdate applies update op to b with maxBytes as the text's bound and
// returns the new box and the change of its text (Apply completes the
// delta). A refused update returns b unchanged with ErrEnded, ErrVersion
// or ErrTooLong.
func applyUpdate(b Box, op Op, maxBytes int) (Box, Delta, error) {
	if b.Ended {
		return b, Delta{}, ErrEnded
	}
	if op.Base != b.Version {
		return b, Delta{}, ErrVersion
	}
	text := b.Text
	if op.Replace != nil {
		text = *op.Replace
	}
	if len(text)+len(op.Append) > maxBytes {
		return b, Delta{}, ErrTooLong
	}
	b.Text = text + op.Append
	if op.Status != nil {
		b.Status = *op.Status
	}
	b.Done = op.Done
	return b, Delta{Append: op.Append, Replace: op.Replace}, nil
}

// Replay returns the deltas a reader that holds version after needs to
// reach version current, from history (the deltas a replica kept, oldest
// first, consecutive versions). ok is false when history does not reach
// back to after+1: the reader needs the whole box instead.
func Replay(history []Delta, after, current int) (out []Delta, ok bool) {
	if after >= current {
		return nil, true
	}
	for i, d := range history {
		if d.Version == after+1 {
			out = history[i:]
			if out[len(out)-1].Version != current {
				return nil, false
			}
			return out, true
		}
	}
	return nil, false
}
