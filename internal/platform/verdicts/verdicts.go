// Package verdicts holds the one shape of Bothy's verdict caches: a
// verdict is used while the database stands at the generation it was taken
// in, and at most a time to live of the injected clock, because expiries
// (of tokens, grants, approvals) pass by the clock without a commit that
// would start a new generation (docs/design/rights.md#live-rights). The
// live tokens (identity.LiveTokens), the fan-out's verdicts and shared
// reads (feed), and the live boxes' verdicts (graph.LiveVerdicts) keep
// their verdicts in Windows.
package verdicts

import (
	"time"

	"bothy.example.com/bothy/internal/platform/clock"
)

// TTL is the longest a verdict is used within one generation.
const TTL = time.Second

// Window is when verdicts were taken: a generation (a hub generation's
// channel, a count of commits that changed rights) and the clock's time.
// The zero Window holds nothing. It is not safe for concurrent use: its
// owner's lock guards it with the verdicts.
type Window[G comparable] struct {
	gen  G
	at   time.Time
	open bool
}

// Fresh reports whether verdicts taken in w still hold at generation gen
// and now: the same generation, and now within [taken, taken+TTL). A clock
// that went back counts as stale, so no verdict outlives its bound by a
// step back of the clock.
func (w *Window[G]) Fresh(gen G, now time.Time) bool {
	return w.open && w.gen == gen && !now.Before(w.at) && now.Sub(w.at) < TTL
}

// Hold answers whether w is fresh at gen on c; when it is not, w starts
// again at gen and now, and the caller drops the verdicts it kept.
func (w *Window[G]) Hold(gen G, c clock.Clock) bool {
	now := c.Now()
	if w.Fresh(gen, now) {
		return true
	}
	*w = Window[G]{gen: gen, at: now, open: true}
	return false
}

// Gen is the generation w was taken in (the zero value before the first
// Hold).
func (w *Window[G]) Gen() G { return w.gen }

// Taken returns a Window taken now at gen, for a verdict kept on its own
// (one Window per entry).
func Taken[G comparable](gen G, c clock.Clock) Window[G] {
	return Window[G]{gen: gen, at: c.Now(), open: true}
}
